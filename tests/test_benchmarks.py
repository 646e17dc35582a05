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
    assert result["parameters"] == result["against_parameters"] == 805_130
    assert result["vitcourse_img_s"] > 0 and result["against_img_s"] > 0
    assert result["ratio"] == result["vitcourse_img_s"] / result["against_img_s"]


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
    assert all(s > 0 for s in result["seconds_per_epoch"].values())
    assert len(result["per_round_ratios"]) == 2
    assert (
        result["ratio"]
        == result["seconds_per_epoch"]["pil"] / result["seconds_per_epoch"]["in_memory"]
    )
    assert out.exists()
