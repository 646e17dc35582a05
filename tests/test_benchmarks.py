"""The benchmark scripts still run (their numbers are measured by running them, not here)."""

import importlib.util
from pathlib import Path

import torch

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def load(name):
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_throughput_compares_same_sized_models():
    throughput = load("throughput")
    result = throughput.compare(
        "course-28/4", rounds=1, steps=1, batch_size=4, device=torch.device("cpu")
    )
    assert result["parameters"] == 805_130
    assert result["vitcourse_img_s"] > 0 and result["timm_img_s"] > 0
    assert result["ratio"] == result["vitcourse_img_s"] / result["timm_img_s"]


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
