"""vitcourse.cli.train_run: the frozen run `python -m vitcourse.train` settles before it starts."""

import dataclasses
import json

import pytest
import torch

from vitcourse.checkpoints import save_model
from vitcourse.cli import train, train_run
from vitcourse.cli.runs import RunFolder
from vitcourse.cnn import CNNConfig, SmallCNN, cnn_preset_for
from vitcourse.data.loading import dataset_info
from vitcourse.presets import PRESETS, preset
from vitcourse.training.loop import TrainConfig
from vitcourse.vit import VisionTransformer

# run.json as `python -m vitcourse.train --model cnn --fraction 0.25` wrote it before the run was
# a frozen `TrainRun`: the file's text, key order included, so runs written then stay readable.
OLD_TRAIN_RUN_JSON = """{
  "dataset": "fashion-mnist",
  "model": "cnn",
  "fraction": 0.25,
  "val_size": 5000,
  "batch_size": 128,
  "no_augment": false,
  "init": null,
  "freeze": false,
  "teacher": null,
  "distillation": "hard",
  "alpha": null,
  "tau": null
}"""


def _cnn_checkpoint(folder: RunFolder, **train_config) -> None:
    """A checkpoint of the dataset's CNN, as far as a resume's plan reads it."""
    model = SmallCNN(cnn_preset_for("fashion-mnist"))
    config = dataclasses.asdict(TrainConfig(**train_config))
    save_model(model, folder.checkpoint, train_config=config)


@pytest.mark.parametrize("world_size", [1, 2])
def test_a_train_run_resolves_its_defaults_once_and_is_frozen(tmp_path, world_size):
    args = train.parse_args(["--out", str(tmp_path / "run"), "--device", "cpu"])
    before = dict(vars(args))
    run = train_run.plan(args, rank=world_size - 1, world_size=world_size)
    assert vars(args) == before  # the namespace is read, never changed
    assert run.batch_size == train_run.CPU_BATCH * world_size  # each process takes the CPU's batch
    assert run.train_config.lr == pytest.approx(train_run.scaled_lr(128 * world_size))
    assert run.model_config == PRESETS[dataset_info("fashion-mnist").train_preset]
    assert run.device == torch.device("cpu") and run.lead == (world_size == 1)
    assert run.architecture == "vit" and run.folder.path == tmp_path / "run"
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.batch_size = 64
    assert not (tmp_path / "run").exists()  # settling the run writes nothing


def test_a_train_run_takes_the_datasets_cnn_and_refuses_what_does_not_fit(tmp_path):
    out = ["--out", str(tmp_path / "run"), "--device", "cpu"]
    run = train_run.plan(train.parse_args(["--model", "cnn", "--batch-size", "64", *out]))
    assert run.model_config == cnn_preset_for("fashion-mnist") and run.batch_size == 64
    assert run.train_config.lr == pytest.approx(train_run.scaled_lr(64))
    given = train_run.plan(train.parse_args(["--lr", "1e-3", "--minutes", "2", *out]))
    assert (given.train_config.lr, given.train_config.minutes) == (1e-3, 2.0)
    with pytest.raises(SystemExit, match="--batch-size 101 is the batch of all 2 processes"):
        train_run.plan(train.parse_args(["--batch-size", "101", *out]), world_size=2)
    assert not (tmp_path / "run").exists()  # refused before anything was written
    with pytest.raises(SystemExit, match="--dim set the ViT; --model cnn does not use them"):
        train_run.plan(train.parse_args(["--model", "cnn", "--dim", "64", *out]))


def test_run_json_keeps_the_key_names_and_order_old_runs_have(tmp_path):
    args = ["--model", "cnn", "--fraction", "0.25", "--out", str(tmp_path), "--device", "cpu"]
    run = train_run.plan(train.parse_args(args))
    run.folder.write_settings(run.settings())
    assert (tmp_path / "run.json").read_text() == OLD_TRAIN_RUN_JSON


def test_a_resume_reads_run_json_and_the_checkpoint_over_the_command_line(tmp_path):
    folder = RunFolder(tmp_path)
    (tmp_path / "run.json").write_text(
        OLD_TRAIN_RUN_JSON.replace('"batch_size": 128', '"batch_size": 64')
    )
    _cnn_checkpoint(folder, epochs=1, lr=1e-3)
    args = ["--out", str(tmp_path), "--resume", "--fraction", "0.5", "--batch-size", "32"]
    run = train_run.plan(train.parse_args([*args, "--epochs", "3", "--device", "cpu"]))
    # The model kind comes from the checkpoint, the data and the batch from run.json.
    assert (run.model, run.fraction, run.batch_size, run.resume) == ("cnn", 0.25, 64, True)
    assert isinstance(run.model_config, CNNConfig)
    assert run.train_config == TrainConfig(epochs=3, lr=1e-3)  # the recipe's, trained longer
    budget = train_run.plan(train.parse_args([*args, "--minutes", "2", "--device", "cpu"]))
    assert (budget.train_config.epochs, budget.train_config.minutes) == (1, 2.0)
    # Without run.json (a folder from before it existed) the command line's settings stand.
    (tmp_path / "run.json").unlink()
    bare = train_run.plan(train.parse_args([*args, "--device", "cpu"]))
    assert (bare.model, bare.fraction, bare.batch_size) == ("cnn", 0.5, 32)
    assert bare.train_config == TrainConfig(epochs=1, lr=1e-3)


def test_a_resumed_run_gives_back_its_paths_as_paths(tmp_path):
    teacher = tmp_path / "teacher.pt"
    (tmp_path / "run.json").write_text(
        json.dumps({"model": "vit", "teacher": str(teacher), "distillation": "soft"})
    )
    vit = VisionTransformer(preset("course-28/7"))
    save_model(vit, RunFolder(tmp_path).checkpoint, train_config=dataclasses.asdict(TrainConfig()))
    run = train_run.plan(train.parse_args(["--out", str(tmp_path), "--resume", "--device", "cpu"]))
    assert run.teacher == teacher and run.architecture == "deit" and run.distillation == "soft"
    assert run.model_config == preset("course-28/7")
