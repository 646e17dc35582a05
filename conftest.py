"""Test-suite settings, at the top of the repository so they hold for `pytest notebooks/...` too.

Quick mode is set here, before nbmake starts any kernel: the kernels inherit this process's
environment, so every notebook runs with small data and few steps. Run
`VITCOURSE_QUICK=0 pytest notebooks/` to execute the notebooks in full mode instead.

Every notebook nbmake executes is marked `slow`, so `pytest -m "not slow"` is the quick loop."""

import os

import pytest

os.environ.setdefault("VITCOURSE_QUICK", "1")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
