"""The benchmark scripts still run and report what they claim (their numbers are measured by
running them, not here)."""

import importlib.util
import json
import statistics
from pathlib import Path

import pytest
import torch

from vitcourse.data import make_loaders

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_throughput_compares_same_sized_models():
    """timm's twin has exactly the course model's parameters, and the figures are medians."""
    throughput = load("throughput")
    result = throughput.compare(
        "course-28/4", rounds=3, steps=1, batch_size=4, device=torch.device("cpu")
    )
    assert result["parameters"] == result["against_parameters"] == 805_130
    assert len(result["vitcourse_all"]) == len(result["against_all"]) == 3
    assert result["vitcourse_img_s"] == statistics.median(result["vitcourse_all"])
    assert result["against_img_s"] == statistics.median(result["against_all"])


def test_throughput_times_one_preset_against_another():
    """What the hybrid's stem costs per step: course-28/conv against the pure course-28/7."""
    throughput = load("throughput")
    result = throughput.compare(
        "course-28/conv",
        rounds=1,
        steps=1,
        batch_size=4,
        device=torch.device("cpu"),
        against="course-28/7",
    )
    assert (result["parameters"], result["against_parameters"]) == (433_018, 407_690)
    assert len(result["vitcourse_all"]) == len(result["against_all"]) == 1


@pytest.mark.slow  # starts a Jupyter kernel
def test_notebook_times_executes_a_notebook(tmp_path, monkeypatch):
    import nbformat

    notebook_times = load("notebook_times")
    path = tmp_path / "tiny.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import os, time; assert os.environ['VITCOURSE_QUICK'] == '1'; time.sleep(0.5)"
        )
    ]
    nbformat.write(nb, path)
    monkeypatch.setenv("VITCOURSE_QUICK", "1")
    assert notebook_times.run(path, quick=True) >= 0.5


def test_data_loading_compares_pil_with_in_memory_batches(tmp_path):
    data_loading = load("data_loading")
    out = tmp_path / "loading.json"
    result = data_loading.main(
        ["--rounds", "2", "--batches", "2", "--batch-size", "16", "--json", str(out)]
    )
    assert set(result["seconds_per_epoch"]) == {"pil", "in_memory"}
    assert len(result["per_round_ratios"]) == 2
    # A pass is over the training split make_loaders gives (quick mode: its small subset).
    assert result["images_per_epoch"] == len(make_loaders("fashion-mnist").train.dataset)
    assert json.loads(out.read_text()) == result
