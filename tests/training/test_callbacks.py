"""vitcourse.training.callbacks: the timeline of notebook 08's race and the progress bar."""

import io

import pytest
import torch

from tests.conftest import new_trainer
from vitcourse.cnn import SmallCNN
from vitcourse.training.callbacks import ProgressCallback, Timeline
from vitcourse.training.evaluation import evaluate
from vitcourse.training.loop import TrainConfig, Trainer


def test_timeline_measures_accuracy_over_training_time(monkeypatch, tiny_cnn, toy_loaders):
    """A stand-in clock moves 10 ms per reading; evaluations are paused time."""
    from vitcourse.training import clock

    ticks = iter(range(10**6))
    monkeypatch.setattr(clock, "now", lambda: next(ticks) * 0.01)
    torch.manual_seed(0)
    loaders = toy_loaders()
    timeline = Timeline(loaders.val, every_seconds=0.2)
    trainer = Trainer(
        SmallCNN(tiny_cnn), loaders, TrainConfig(minutes=1 / 60, lr=3e-3), [timeline], "cpu"
    )
    trainer.fit()
    seconds = [s for s, _ in timeline.points]
    assert seconds[0] == 0 and seconds == sorted(seconds) and len(seconds) >= 5
    gaps = [b - a for a, b in zip(seconds[:-2], seconds[1:-1], strict=True)][1:]
    assert all(0.2 <= g < 0.3 for g in gaps)  # one evaluation every 0.2 s of training
    # Evaluating reads the clock too; paused, it takes nothing from the one-second budget.
    assert 1.0 <= trainer.elapsed < 1.1 and seconds[-1] == trainer.elapsed
    first, last = timeline.points[0][1], timeline.points[-1][1]
    assert last > first and last == evaluate(trainer.model, loaders.val)["acc"]


def test_progress_prints_a_line_every_few_epochs(capsys):
    """Under pytest the output is not a terminal: tqdm's bar stays silent, the epoch lines come."""
    trainer = new_trainer(TrainConfig(epochs=5, lr=3e-3), [ProgressCallback(every_epochs=2)])
    trainer.fit()
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if line.startswith("epoch")]
    # Epochs 2 and 4, and the last one, 5, whatever the interval.
    assert [int(line.split()[1]) for line in lines] == [2, 4, 5]
    assert "val acc" in lines[-1] and "%|" not in captured.err  # no bar drawn in a log
    last = trainer.history.epochs[-1]
    assert f"train acc {100 * last['train_acc']:.2f}%" in lines[-1]
    assert f"val acc {100 * last['val_acc']:.2f}%" in lines[-1]
    with pytest.raises(ValueError, match="every_epochs and every_steps must be at least 1"):
        ProgressCallback(every_epochs=0)


def test_progress_bar_counts_steps_or_budget_seconds(monkeypatch):
    from vitcourse.training import callbacks, clock

    # Draw the bar into a string even though pytest's output is not a terminal.
    class Drawn(callbacks.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "disable": False, "file": io.StringIO()})

    monkeypatch.setattr(callbacks, "tqdm", Drawn)
    bar = ProgressCallback()
    trainer = new_trainer(TrainConfig(epochs=2), [bar])
    trainer.fit()
    assert bar.bar.total == bar.bar.n == trainer.steps_done == 2 * trainer.steps_per_epoch
    # A budget: the bar counts its seconds (a stand-in clock: every step takes 0.1 s).
    monkeypatch.setattr(clock, "now", lambda: trainer.steps_done * 0.1)
    bar = ProgressCallback()
    trainer = new_trainer(TrainConfig(minutes=3 / 60), [bar])
    trainer.fit()
    assert bar.bar.total == bar.bar.n == 3 and trainer.steps_done == 30


def test_a_callback_can_stop_training_cleanly(tmp_path, toy_loaders):
    """A callback that raises StopTraining after 5 steps ends fit there: the model, its history
    and a checkpoint are kept, as after Ctrl-C, and the trainer says why it stopped."""
    from vitcourse.checkpoints import load_checkpoint
    from vitcourse.training.callbacks import Callback, CheckpointCallback, StopTraining

    class FiveSteps(Callback):
        def on_step_end(self, trainer, loss):
            if trainer.steps_done == 5:
                raise StopTraining("five steps are enough")

    path = tmp_path / "checkpoint.pt"
    trainer = new_trainer(callbacks=[FiveSteps(), CheckpointCallback(path)])
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    history = trainer.fit()
    assert trainer.steps_done == 5 and len(history.step_losses) == 5
    assert trainer.stopped == "five steps are enough" and not trainer.interrupted
    assert any(not torch.equal(v, before[k]) for k, v in trainer.model.state_dict().items())
    assert load_checkpoint(path)["schedule"]["step"] == 5
    trainer.callbacks = []  # fit again: no stop left, so it trains to the end
    trainer.fit()
    assert trainer.stopped is None and trainer.steps_done > 5


def test_the_trainers_lines_and_errors_are_in_the_translation_template():
    """The epoch lines, the interrupted and saved messages and the trainer's errors go through
    `_`, so the catalog extraction finds them (vitcourse.language)."""
    from vitcourse.translation.catalogs import package_template

    catalog = package_template()
    for message in (
        "epoch {epoch:>3}  train loss {loss:.3f}  ",
        "val acc {percent:.2f}%  ",
        "{seconds:.0f}s trained",
        "interrupted at step {steps}; the model and history are kept",
        "saved {path}; resume with {method} or {option}",
        "{path} holds a model but not a training run to resume (no {missing}): use "
        "{function} for it",
        "the student has {student} classes and the teacher {teacher}: train the teacher on the "
        "same dataset",
        "Masked-patch pre-training: the hidden patches painted back",
    ):
        assert catalog.get(message) is not None, message
