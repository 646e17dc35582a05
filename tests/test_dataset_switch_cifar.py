"""The `DATASET` switch with CIFAR-10 and CIFAR-100: tests/test_dataset_switch.py's test, in a file
of its own so that CI's two processes (pytest-xdist, `--dist loadfile`: a file to a process) run
these beside the MNIST and folder runs rather than after them.
"""

import pytest

from tests.test_dataset_switch import LOADS_DATA, data_root, run_with  # noqa: F401 (a fixture)


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["cifar10", "cifar100"])
@pytest.mark.parametrize("path", LOADS_DATA, ids=lambda p: p.name)
def test_notebook_runs_with_cifar(path, dataset, data_root, tmp_path, monkeypatch):  # noqa: F811
    run_with(path, dataset, data_root, tmp_path, monkeypatch)
