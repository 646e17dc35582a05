"""The benchmark scripts still run and report what they claim (their numbers are measured by
running them, not here)."""

import importlib.util
import json
import re
import statistics
from pathlib import Path

import pytest
import torch

from tests.conftest import need
from vitcourse.data.loading import QUICK_SIZES, make_loaders

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
    quick = QUICK_SIZES[0]  # quick mode's training images
    assert [r["steps"] for r in rows] == [quick // 64, quick // 256]
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


@pytest.mark.slow  # trains three models twice, for a few seconds each
def test_vit_wins_races_every_model_per_seed_and_ends_with_its_line(tmp_path, capsys):
    vit_wins = load("vit_wins")
    out = tmp_path / "race.json"
    results = vit_wins.main(["--seed", "3", "4", "--minutes", "0.02", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["results"] == json.loads(json.dumps(results))  # what it measured, as JSON
    assert saved["dataset"] == "fashion-mnist-scrambled"
    assert (saved["minutes"], saved["epochs"]) == (0.02, None)
    assert re.fullmatch(r"\d+ CPUs, (1 thread|([02-9]|\d\d+) threads), \w+", saved["machine"])
    assert [(r["model"], r["seed"]) for r in results] == [
        (kind, seed) for seed in (3, 4) for kind in ("vit", "cnn", "mlp")
    ]
    parameters = [r["parameters"] for r in results[:3]]
    assert parameters == [424_970, 796_266, 453_130]  # course-28/14, notebook 08's CNN, the MLP
    flops = [r["flops"] for r in results[:3]]
    assert flops[2] < flops[0] < flops[1]  # the MLP is cheapest, the CNN dearest, per image
    assert flops[2] == 2 * (784 * 384 + 384 * 384 + 384 * 10)  # a multiply-add is 2
    layouts = [r["memory_format"] for r in results[:3]]
    assert layouts == ["contiguous_format", "channels_last", "contiguous_format"]  # the CNN's
    for r in results:
        assert r["steps"] > 0 and 0 <= r["test_acc"] <= 1 and r["curve"][0][0] == 0
        assert r["steps_per_pass"] == results[0]["steps_per_pass"] > 0  # the same images
    out_lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(
        r"vit \d+\.\d% cnn \d+\.\d% mlp \d+\.\d% \(fashion-mnist-scrambled, 0.02 minutes, seed 3\)",
        out_lines[0],
    )
    assert re.match(
        r"  cnn: 796,266 parameters, 47\.\d MFLOPs an image, [\d,]+ steps", out_lines[2]
    )
    assert out_lines[-6].startswith("vit: mean ") and "5 seeds" not in out_lines[-6]
    assert out_lines[-3].startswith("vit minus cnn: mean ")


@pytest.mark.slow  # two models, one pass over a few images each
def test_vit_wins_gives_every_model_the_same_passes(tmp_path, monkeypatch, capsys):
    """--epochs N: every model trains N passes over the same images, whatever a step costs."""
    vit_wins = load("vit_wins")
    monkeypatch.setattr(vit_wins, "make_loaders", few_images(vit_wins.make_loaders, 256))
    out = tmp_path / "race.json"
    args = ["--epochs", "2", "--models", "mlp", "vit", "--dataset", "fashion-mnist"]
    results = vit_wins.main([*args, "--out", str(out)])
    saved = json.loads(out.read_text())
    assert (saved["dataset"], saved["minutes"], saved["epochs"]) == ("fashion-mnist", None, 2)
    assert [r["model"] for r in results] == ["mlp", "vit"]
    for r in results:
        assert r["steps"] == 2 * r["steps_per_pass"] == 4  # 256 images in batches of 128: 2
        assert [p[0] for p in r["passes"]] == [1, 2] and r["passes"][-1][1] == 4
    assert capsys.readouterr().out.splitlines()[0].endswith("(fashion-mnist, 2 passes, seed 0)")
    name = vit_wins.race_file("fashion-mnist-scrambled", epochs=10)
    assert name == "vit_wins_fashion-mnist-scrambled_10-passes.json"
    assert (
        vit_wins.race_file("fashion-mnist", minutes=3.0) == "vit_wins_fashion-mnist_3-minutes.json"
    )
    with pytest.raises(SystemExit):  # one budget or the other, not both
        vit_wins.main(["--epochs", "2", "--minutes", "1"])


def test_vit_wins_merges_races_run_seed_by_seed_into_the_shipped_file(tmp_path, capsys):
    """--merge: the shipped 5-pass race cut into one file a seed, joined again, is the shipped race
    (its runs in the same order), and files of another budget or a seed twice are refused."""
    vit_wins = load("vit_wins")
    shipped = BENCHMARKS.parent / "data" / "trained" / vit_wins.race_file("fashion-mnist", epochs=5)
    race = json.loads(shipped.read_text())
    pieces = []
    for seed in sorted({r["seed"] for r in race["results"]}, reverse=True):
        piece = tmp_path / f"seed{seed}.json"
        runs = [r for r in race["results"] if r["seed"] == seed]
        piece.write_text(json.dumps({**race, "results": runs}))
        pieces.append(piece)
    out = tmp_path / "merged.json"
    vit_wins.main(["--merge", *map(str, pieces), "--out", str(out)])
    assert json.loads(out.read_text()) == race
    assert "5 seeds" in capsys.readouterr().out
    other = tmp_path / "minutes.json"
    other.write_text(json.dumps({**race, "epochs": None, "minutes": 3.0, "results": []}))
    with pytest.raises(
        ValueError, match="3 minutes on fashion-mnist, .* 5 passes on fashion-mnist"
    ):
        vit_wins.merge([pieces[0], other])
    with pytest.raises(ValueError, match="seed 4 is in"):
        vit_wins.merge([pieces[0], pieces[0]])
    with pytest.raises(SystemExit):  # where to write it is needed
        vit_wins.main(["--merge", str(pieces[0])])


def few_images(make_loaders, n):
    """make_loaders, with only the first `n` training images."""

    def fewer(*args, **kwargs):
        loaders = make_loaders(*args, **kwargs)
        train = loaders.train
        subset = torch.utils.data.Subset(train.dataset, range(n))
        loader = torch.utils.data.DataLoader(subset, batch_size=train.batch_size, shuffle=True)
        return loaders._replace(train=loader)

    return fewer


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


def test_similarity_pass_reads_the_long_notebook_and_groups_the_colluders(capsys):
    """The similarity pass's benchmark, on a small version of the attack: the last cell's answer
    read (in the child and here alike), and the two padded colluders grouped."""
    need("copydetect", "pip install -r requirements-teachers.txt")
    found = load("similarity_pass").main(["--cells", "30", "--pad", "2000", "--rounds", "1"])
    assert found["grouped"] == ["patchify: ann, ben (identical)"]
    assert found["read apart (s)"] > 0 and "notebook MB" in capsys.readouterr().out
