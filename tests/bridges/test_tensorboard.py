"""vitcourse.bridges.tensorboard: a run's curves and attention maps, read back by TensorBoard's
reader."""

import importlib
import io
import re
import sys
import time

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

import vitcourse
import vitcourse.bridges
from tests.conftest import TINY_CNN, TINY_VIT, StopAt, make_toy_loaders, need, new_trainer
from vitcourse.bridges.tensorboard import TensorBoardCallback, attention_figure
from vitcourse.cnn import SmallCNN
from vitcourse.live import cls_attention, overlay
from vitcourse.training.callbacks import Callback, CheckpointCallback
from vitcourse.training.loop import TrainConfig, Trainer, learning_rate
from vitcourse.vit import VisionTransformer

EVERY = 3  # steps between points: 20 steps (2 epochs of 10) make 6 points, at 3, 6, ..., 18
CONFIG = TrainConfig(epochs=2, lr=3e-3, warmup=0.1)
SCALARS = {"train/loss", "train/learning_rate", "epoch/train_loss", "epoch/val_loss"}


@pytest.fixture
def read_events():
    """TensorBoard's own reader of a folder's event files, keeping every point and image."""
    need("tensorboard")
    from tensorboard.backend.event_processing import event_accumulator

    def read(log_dir):
        everything = {kind: 0 for kind in event_accumulator.DEFAULT_SIZE_GUIDANCE}  # 0: keep all
        return event_accumulator.EventAccumulator(str(log_dir), size_guidance=everything).Reload()

    return read


def one_image() -> torch.Tensor:
    """A validation image to draw (one, so the figures draw fast), (1, 1, 8, 8)."""
    return make_toy_loaders().val.dataset[:1][0]


def assert_step_curves(run, trainer: Trainer) -> None:
    """train/loss is the mean of the steps since the last point, train/learning_rate the rate
    the schedule set for the step, every EVERY steps."""
    steps = list(range(EVERY, trainer.steps_done + 1, EVERY))
    losses, rates = run.Scalars("train/loss"), run.Scalars("train/learning_rate")
    assert len(losses) == trainer.steps_done // EVERY
    assert [e.step for e in losses] == steps == [e.step for e in rates]  # each once, in order
    history = trainer.history.step_losses
    means = [sum(history[s - EVERY : s]) / EVERY for s in steps]
    assert [e.value for e in losses] == pytest.approx(means, rel=1e-6)
    total = CONFIG.epochs * trainer.steps_per_epoch
    schedule = [learning_rate((s - 1) / total, CONFIG) for s in steps]  # set before step s
    assert [e.value for e in rates] == pytest.approx(schedule, rel=1e-6)


def assert_epoch_curves(run, epochs: list[dict], names=("train_loss", "val_loss", "val_acc")):
    """Each epoch/NAME point is the history's record, at the step the epoch ended."""
    for name in names:
        points = run.Scalars(f"epoch/{name}")
        assert [e.step for e in points] == [r["steps"] for r in epochs]
        assert [e.value for e in points] == pytest.approx([r[name] for r in epochs], rel=1e-6)


def test_a_vit_run_writes_its_curves_and_attention_maps(tmp_path, read_events):
    plt.close("all")
    trainer = new_trainer(CONFIG, [TensorBoardCallback(tmp_path, every_steps=EVERY)])
    trainer.fit()
    run = read_events(tmp_path)
    assert set(run.Tags()["scalars"]) == SCALARS | {"epoch/val_acc"}
    assert_step_curves(run, trainer)
    assert_epoch_curves(run, trainer.history.epochs)

    # The maps of the first four validation images: untrained at step 0, then after each epoch.
    maps = run.Images("attention")
    assert [m.step for m in maps] == [0, 10, 20]
    pictures = [PIL_image(m.encoded_image_string) for m in maps]
    for m, picture in zip(maps, pictures, strict=True):
        assert picture.format == "PNG" and picture.size == (m.width, m.height)
        assert 300 <= m.width <= 3000 and 300 <= m.height <= 3000
        assert len(np.unique(np.asarray(picture).reshape(-1, 3), axis=0)) > 20  # not blank
    assert not np.array_equal(np.asarray(pictures[0]), np.asarray(pictures[-1]))  # redrawn
    assert plt.get_fignums() == []  # drawn on bare figures: pyplot holds none of them


def PIL_image(png: bytes):
    from PIL import Image

    picture = Image.open(io.BytesIO(png))
    picture.load()  # decode it all: a truncated PNG fails here
    return picture


def test_a_cnn_run_writes_the_scalars_and_no_images(tmp_path, read_events):
    torch.manual_seed(0)
    callback = TensorBoardCallback(tmp_path, images=one_image(), every_steps=EVERY)
    trainer = Trainer(SmallCNN(TINY_CNN), make_toy_loaders(), CONFIG, [callback], "cpu")
    trainer.fit()
    run = read_events(tmp_path)
    assert set(run.Tags()["scalars"]) == SCALARS | {"epoch/val_acc"}
    assert run.Tags()["images"] == []  # a CNN has no attention maps
    assert_step_curves(run, trainer)
    assert_epoch_curves(run, trainer.history.epochs)


class LossOnly(Trainer):
    """A model that does not classify, as in notebook 09's pre-training: validation has no
    accuracy, and its records say val_acc None."""

    def validate(self) -> dict:
        return {"loss": super().validate()["loss"]}


def test_a_model_that_does_not_classify_writes_no_accuracy(tmp_path, read_events):
    torch.manual_seed(0)
    callback = TensorBoardCallback(tmp_path, images=one_image(), every_steps=EVERY)
    trainer = LossOnly(VisionTransformer(TINY_VIT), make_toy_loaders(), CONFIG, [callback], "cpu")
    trainer.fit()
    assert [r["val_acc"] for r in trainer.history.epochs] == [None, None]
    run = read_events(tmp_path)
    assert set(run.Tags()["scalars"]) == SCALARS
    assert_epoch_curves(run, trainer.history.epochs, names=("train_loss", "val_loss"))
    assert [m.step for m in run.Images("attention")] == [0, 10, 20]


class SaveEachEpoch(Callback):
    """Checkpoints at the epochs' ends only: a run that then stops (a crash, a lost session) has
    gone on past its checkpoint, and its resumed run takes those steps again."""

    def __init__(self, path):
        self.path = path

    def on_epoch_end(self, trainer, record):
        trainer.save(self.path)


@pytest.mark.parametrize("saved", ["at the stop", "at the last epoch's end"])
def test_a_resumed_run_goes_on_along_the_same_steps(tmp_path, read_events, saved):
    logs, path = tmp_path / "logs", tmp_path / "checkpoint.pt"
    save = CheckpointCallback(path) if saved == "at the stop" else SaveEachEpoch(path)
    board = TensorBoardCallback(logs, images=one_image(), every_steps=EVERY)
    first = new_trainer(CONFIG, [save, board, StopAt(13)])
    first.fit()
    assert first.interrupted and first.steps_done == 13  # closed cleanly on Ctrl-C: read back below
    assert [e.step for e in read_events(logs).Scalars("train/loss")] == [3, 6, 9, 12]

    # TensorBoard reads a folder's files in name order: whole seconds, then a counter that is not
    # zero-padded (10 sorts before 9). Runs apart by a second always sort in order.
    started = int(time.time())
    while int(time.time()) == started:
        time.sleep(0.05)
    resumed = new_trainer(CONFIG, [TensorBoardCallback(logs, one_image(), every_steps=EVERY)])
    resumed.resume(path)
    assert resumed.steps_done == (13 if saved == "at the stop" else 10)
    resumed.fit()
    run = read_events(logs)
    # Every step once, in order; the interrupted run's point at step 12, after its last
    # checkpoint, is replaced by the resumed run's.
    assert_step_curves(run, resumed)
    assert_epoch_curves(run, resumed.history.epochs)
    assert [m.step for m in run.Images("attention")] == [0, 10, 20]


@pytest.mark.parametrize("count", [1, 3])
def test_the_attention_figure_draws_each_images_maps_over_it(count):
    torch.manual_seed(0)
    model = VisionTransformer(TINY_VIT)
    images = make_toy_loaders().val.dataset[:count][0]
    figure = attention_figure(model, images)
    assert isinstance(figure, Figure) and plt.get_fignums() == []
    columns = 2 + TINY_VIT.num_heads + TINY_VIT.depth  # image, rollout, heads, layers (2 <= 4)
    assert len(figure.axes) == count * columns
    panels = cls_attention(model, images)
    for b in range(count):
        row = figure.axes[b * columns : (b + 1) * columns]
        maps = [panels["rollout"][b], *panels["heads"][b], *panels["layers"][b]]
        for ax, m in zip(row[1:], maps, strict=True):
            picture, attention = ax.get_images()
            assert np.allclose(attention.get_array(), overlay(m))
        assert len(row[0].get_images()) == 1  # the image alone


def test_every_steps_must_be_positive(tmp_path):
    need("tensorboard")
    with pytest.raises(ValueError, match="every_steps must be at least 1, got 0"):
        TensorBoardCallback(tmp_path, every_steps=0)


def test_without_tensorboard_the_module_imports_and_the_callback_says_how_to_install(
    tmp_path, monkeypatch
):
    for name in ("tensorboard", "torch.utils.tensorboard"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed: importing it fails
    monkeypatch.delitem(sys.modules, "vitcourse.bridges.tensorboard")
    monkeypatch.delattr(vitcourse.bridges, "tensorboard", raising=False)  # restored afterwards
    module = importlib.import_module("vitcourse.bridges.tensorboard")  # needs no tensorboard
    install = re.escape("pip install -r requirements-extras.txt")
    with pytest.raises(ImportError, match=f"needs the tensorboard package: {install}"):
        module.TensorBoardCallback(tmp_path)
