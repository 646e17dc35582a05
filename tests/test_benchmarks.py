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
