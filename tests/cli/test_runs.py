"""vitcourse.cli.runs: the run folder train and pretrain share; pretrain's frozen run, which resumes
from it."""

import dataclasses
import json
from pathlib import Path

import pytest

from vitcourse.checkpoints import load_checkpoint, load_model, save_model
from vitcourse.cli import pretrain, train
from vitcourse.cli.runs import RunFolder, command_line, resumed_train_config, run_length
from vitcourse.cnn import SmallCNN, cnn_preset_for
from vitcourse.mae import MaskedAutoencoder
from vitcourse.presets import preset_for
from vitcourse.training.loop import TrainConfig

# run.json as `python -m vitcourse.pretrain` wrote it before the run was a frozen `PretrainRun`:
# the file's text, key order included, so runs written then stay readable.
OLD_PRETRAIN_RUN_JSON = """{
  "dataset": "fashion-mnist",
  "batch_size": 256,
  "no_augment": false
}"""


def test_pretrain_writes_run_json_as_old_runs_have_it(tmp_path):
    run = pretrain.plan(pretrain.parse_args(["--out", str(tmp_path), "--device", "cpu"]))
    run.folder.write_settings(run.settings())
    assert (tmp_path / "run.json").read_text() == OLD_PRETRAIN_RUN_JSON


def test_a_resume_reads_the_checkpoint_and_run_json_over_the_command_line(tmp_path):
    with pytest.raises(SystemExit, match="cannot resume: no checkpoint at"):
        RunFolder(tmp_path / "nothing").resume({"dataset": "mnist"})
    folder = RunFolder(tmp_path)
    save_model(SmallCNN(cnn_preset_for("fashion-mnist")), folder.checkpoint)
    given = {"dataset": "mnist", "batch_size": 32}
    state, settings = folder.resume(given)  # no run.json: the command line's settings stand
    assert state["architecture"] == "cnn" and settings == given
    folder.write_settings({"dataset": "fashion-mnist", "not_a_setting": 1})
    state, settings = folder.resume(given)
    assert (
        settings == {"dataset": "fashion-mnist", "batch_size": 32} and given["dataset"] == "mnist"
    )
    # pretrain continues only its own kind of run
    with pytest.raises(SystemExit, match="cannot resume: .* is not a pre-training run"):
        pretrain.plan(pretrain.parse_args(["--out", str(tmp_path), "--resume"]))


def test_a_pretrain_run_is_frozen_and_resumes_its_masked_autoencoder(tmp_path, monkeypatch):
    monkeypatch.setenv("VITCOURSE_QUICK", "0")
    args = pretrain.parse_args(["--out", str(tmp_path), "--mask-ratio", "0.5", "--device", "cpu"])
    run = pretrain.plan(args)
    assert run.model_config.encoder == preset_for("fashion-mnist") and run.batch_size == 256
    assert run.model_config.mask_ratio == 0.5 and run.train_config.epochs == 10
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.dataset = "mnist"
    (tmp_path / "run.json").write_text(OLD_PRETRAIN_RUN_JSON.replace("256", "32"))
    model = MaskedAutoencoder(run.model_config)
    train_config = dataclasses.asdict(run.train_config)
    save_model(model, run.folder.checkpoint, train_config=train_config)
    again = pretrain.plan(
        pretrain.parse_args(["--out", str(tmp_path), "--resume", "--epochs", "12"])
    )
    assert again.model_config == run.model_config and again.batch_size == 32
    assert again.train_config == dataclasses.replace(run.train_config, epochs=12)


@pytest.mark.parametrize("quick", ["1", "0"])
def test_run_length_shrinks_only_the_default_in_quick_mode(monkeypatch, quick):
    monkeypatch.setenv("VITCOURSE_QUICK", quick)
    assert run_length(None, None, default_epochs=10) == {"epochs": 1 if quick == "1" else 10}
    assert run_length(4, None, default_epochs=10) == {"epochs": 4}
    assert run_length(None, 2.5, default_epochs=10) == {"minutes": 2.5}


def test_a_resumed_recipe_trains_as_long_as_asked():
    state = {"train_config": dataclasses.asdict(TrainConfig(epochs=5, minutes=None, lr=1e-3))}
    assert resumed_train_config(state, None, None) == TrainConfig(epochs=5, lr=1e-3)
    assert resumed_train_config(state, 8, None) == TrainConfig(epochs=8, lr=1e-3)
    assert resumed_train_config(state, None, 3.0) == TrainConfig(epochs=5, minutes=3.0, lr=1e-3)
    state["train_config"]["minutes"] = 3.0  # a budgeted run given epochs drops its budget
    assert resumed_train_config(state, 8, None) == TrainConfig(epochs=8, lr=1e-3)
    assert state["train_config"]["minutes"] == 3.0  # the checkpoint's state is left as it was


def test_the_folder_writes_settings_results_and_the_lines_it_prints(tmp_path):
    folder = RunFolder(tmp_path / "deep" / "run")
    folder.write_settings({"init": tmp_path / "a.pt", "fraction": 0.5})
    assert json.loads(folder.settings_file.read_text()) == {
        "init": str(tmp_path / "a.pt"),
        "fraction": 0.5,
    }
    model = SmallCNN(cnn_preset_for("mnist"))
    folder.write_results({"test_acc": 0.5}, model, test_acc=0.5, command="python -m x --y")
    assert json.loads(folder.metrics_file.read_text()) == {"test_acc": 0.5}
    assert load_checkpoint(folder.model_file)["command"] == "python -m x --y"
    assert isinstance(load_model(folder.model_file), SmallCNN)
    assert folder.stopped_early("python -m x").endswith(f"--out {folder.path} --resume")
    assert command_line("python -m x", ["--a", "1"]) == "python -m x --a 1"


@pytest.mark.slow  # both command lines train through the real data pipeline
def test_train_and_pretrain_write_the_same_run_folder(tmp_path):
    commands = {
        pretrain: ["--out", str(tmp_path / "mae"), "--device", "cpu"],
        train: ["--model", "cnn", "--out", str(tmp_path / "cnn"), "--device", "cpu"],
    }
    for cli, argv in commands.items():
        cli.main(argv)
        folder = RunFolder(Path(argv[argv.index("--out") + 1]))
        files = {p.name for p in folder.path.iterdir()}
        assert {"run.json", "checkpoint.pt", "metrics.json", "model.pt"} <= files, cli.__name__
        documented = cli.__name__.replace(
            ".cli.", "."
        )  # python -m vitcourse.train, its command file
        assert load_checkpoint(folder.model_file)["command"] == " ".join(
            [f"python -m {documented}", *argv]
        )
        # The folder resumes into the run that wrote it: the same settings, the same model.
        run = cli.plan(cli.parse_args(["--out", str(folder.path), "--resume", "--device", "cpu"]))
        assert json.loads(folder.settings_file.read_text()) == run.settings()
        saved = load_checkpoint(folder.checkpoint)["model_config"]
        assert dataclasses.asdict(run.model_config) == saved
