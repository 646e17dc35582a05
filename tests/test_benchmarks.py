"""The benchmark scripts still run and report what they claim (their numbers are measured by
running them, not here)."""

import importlib.util
import json
import statistics
from pathlib import Path

import pytest
import torch

from vitcourse.data.loading import make_loaders

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


@pytest.mark.slow  # pre-trains and trains four times through the real pipeline (quick mode)
def test_pretraining_benchmark_runs_both_starts_on_the_same_labels(tmp_path, monkeypatch, capsys):
    pretraining = load("pretraining")
    out = tmp_path / "bench"
    argv = ["pretraining.py", "--out", str(out), "--seeds", "0", "1", "--fractions", "0.1"]
    argv += ["--pretrain-minutes", "0.01", "--minutes", "0.01"]
    monkeypatch.setattr("sys.argv", argv)
    pretraining.main()
    saved = json.loads((out / "pretraining.json").read_text())
    runs = {(r["seed"], r["start"]): r for r in saved["runs"]}
    assert set(runs) == {(s, start) for s in (0, 1) for start in ("scratch", "pre-trained")}
    summary = saved["summary"]["0.1"]
    gains = [runs[s, "pre-trained"]["test_acc"] - runs[s, "scratch"]["test_acc"] for s in (0, 1)]
    assert summary["gain_mean"] == pytest.approx(statistics.mean(gains))
    assert (summary["gain_min"], summary["gain_max"]) == (min(gains), max(gains))
    # The fine-tuned run started from that seed's encoder; the scratch run did not.
    ft = json.loads((out / "pre-trained-f0.1-s1" / "metrics.json").read_text())
    scratch = json.loads((out / "scratch-f0.1-s1" / "metrics.json").read_text())
    assert ft["init"] == str(out / "pretrain-s1" / "model.pt") and scratch["init"] is None
    assert ft["model_config"] == scratch["model_config"]  # the same ViT both ways
    assert ft["train_images"] == scratch["train_images"]
    assert "| 10% |" in capsys.readouterr().out


@pytest.mark.slow  # trains four models through the real pipeline (quick mode)
def test_distillation_benchmark_states_the_teachers_minutes(tmp_path, monkeypatch):
    distillation = load("distillation")
    out = tmp_path / "bench"
    monkeypatch.setattr("sys.argv", ["distillation.py", "--out", str(out), "--minutes", "0.01"])
    distillation.main()
    rows = json.loads((out / "distillation.json").read_text())["rows"]
    assert list(rows) == [
        "CNN (the teacher)",
        "ViT",
        "ViT, hard distillation",
        "ViT, soft distillation",
    ]
    teacher_seconds = rows["CNN (the teacher)"]["train_seconds"]
    assert rows["ViT, hard distillation"]["teacher_seconds"] == pytest.approx(teacher_seconds)
    assert rows["ViT"]["teacher_seconds"] is None


@pytest.mark.slow  # trains two models through the real pipeline (quick mode)
def test_batch_scaling_trains_each_batch_and_rate_for_the_same_passes(tmp_path, monkeypatch):
    batch_scaling = load("batch_scaling")
    out = tmp_path / "bench"
    argv = ["batch_scaling.py", "--out", str(out), "--epochs", "1"]
    monkeypatch.setattr("sys.argv", [*argv, "--settings", "64:2e-3", "256:4e-3"])
    batch_scaling.main()
    rows = json.loads((out / "batch_scaling.json").read_text())
    assert [(r["batch_size"], r["lr"]) for r in rows] == [(64, 2e-3), (256, 4e-3)]
    assert [r["steps"] for r in rows] == [1024 // 64, 1024 // 256]  # quick mode: 1,024 images
    metrics = json.loads((out / "b256-lr0.004" / "metrics.json").read_text())
    assert metrics["batch_size"] == 256 and metrics["train_config"]["lr"] == 4e-3


def test_precision_times_every_kind_against_float32(tmp_path, monkeypatch, capsys):
    precision = load("precision")
    out = tmp_path / "precision.json"
    argv = ["precision.py", "--kinds", "fp32", "bf16", "fp16", "--rounds", "1", "--steps", "1"]
    monkeypatch.setattr("sys.argv", [*argv, "--batch-size", "4", "--json", str(out)])
    precision.main()
    results = json.loads(out.read_text())
    assert set(results["images_per_second"]) == {"fp32", "bf16", "fp16"}
    assert all(speed > 0 for speed in results["images_per_second"].values())
    assert "1.00x float32" in capsys.readouterr().out


@pytest.mark.slow  # trains two models twice, for a few seconds each
def test_vit_wins_races_both_models_per_seed_and_ends_with_its_line(tmp_path, capsys):
    vit_wins = load("vit_wins")
    out = tmp_path / "race.json"
    results = vit_wins.main(["--seed", "3", "4", "--minutes", "0.02", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["results"] == json.loads(json.dumps(results))  # what it measured, as JSON
    assert saved["dataset"] == "fashion-mnist-scrambled" and saved["minutes"] == 0.02
    assert [(r["model"], r["seed"]) for r in results] == [
        ("ViT", 3), ("CNN", 3), ("ViT", 4), ("CNN", 4)
    ]  # fmt: skip
    assert results[0]["parameters"] == 424_970  # course-28/7's sizes, 14 x 14 patches
    assert results[1]["parameters"] == 796_266  # notebook 08's CNN
    for r in results:
        assert r["steps"] > 0 and 0 <= r["test_acc"] <= 1 and r["curve"][0][0] == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("vit ") and lines[0].endswith(
        "(fashion-mnist-scrambled, 0.02 minutes, seed 3)"
    )
    assert lines[-1].startswith("CNN: mean ")


def test_check_attempts_counts_every_attempt_once_per_exercise():
    """The table of realistic wrong attempts: every attempt counted under its exercise, and each
    counted once, as caught or as what it got instead."""
    from tests.learner_attempts import ATTEMPTS

    table, misses = load("check_attempts").run()
    assert sum(row["tried"] for row in table.values()) == len(ATTEMPTS)
    for row in table.values():
        assert row["caught"] + row["passed"] + row["not attempted"] == row["tried"]
        assert row["named"] <= row["caught"]
    assert misses == [] and all(row["caught"] == row["tried"] for row in table.values())
