"""Callbacks: what happens around the training loop, kept out of it (notebook 06).

A `Callback` overrides any of four events, `on_fit_start`, `on_step_end`, `on_epoch_end` and
`on_fit_end`, and the `Trainer` calls it there with itself; one that raises `StopTraining` after
a step or an epoch ends the training there. The course's callbacks: a progress bar
(`ProgressCallback`), checkpoints after every epoch and on Ctrl-C (`CheckpointCallback`),
accuracy against training time (`Timeline`, notebook 08's race), and the live plot of
`vitcourse.live`. Each one reads the trainer (`trainer.steps_done`, `trainer.history`,
`trainer.elapsed`, ...), so the loop itself stays short.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tqdm.auto import tqdm

from vitcourse.language import _
from vitcourse.training.evaluation import evaluate


class StopTraining(Exception):
    """Raise it in a callback's `on_step_end` or `on_epoch_end` to end `Trainer.fit` there,
    cleanly: the model and the history are kept, as after Ctrl-C, and `trainer.stopped` says why
    (the message you gave). An early stop on a plateau, or a budget of your own, is a callback
    that raises it (fastai's `CancelFitException` does the same)."""


class Callback:
    """Override any of these to act during training (progress, plots, checkpoints). Raising
    `StopTraining` in `on_step_end` or `on_epoch_end` ends training there (each callback's
    `on_fit_end` still runs). `trainer` is the `Trainer` calling it (`vitcourse.training.loop`,
    which imports the callbacks: they do not import it back)."""

    def on_fit_start(self, trainer) -> None: ...

    def on_step_end(self, trainer, loss: float) -> None: ...

    def on_epoch_end(self, trainer, record: dict) -> None: ...

    def on_fit_end(self, trainer) -> None: ...


class Timeline(Callback):
    """Accuracy against training time: evaluates on `loader` every `every_seconds` of training.

    `points` holds (seconds of training, accuracy) pairs, from the start (0 s) to the end. The
    evaluations are paused time: they take nothing from a time budget, so two models compared
    over the same budget train for the same seconds however slow their evaluation is.
    """

    def __init__(self, loader, every_seconds: float = 15.0):
        self.loader = loader
        self.every_seconds = every_seconds
        self.points: list[tuple[float, float]] = []

    def on_fit_start(self, trainer) -> None:
        if not self.points:  # the untrained model (outside the timed loop, so nothing to pause)
            self._measure(trainer)

    def on_step_end(self, trainer, loss: float) -> None:
        if trainer.elapsed - self.points[-1][0] >= self.every_seconds:
            with trainer.paused():
                self._measure(trainer)

    def on_fit_end(self, trainer) -> None:
        if trainer.elapsed > self.points[-1][0]:
            self._measure(trainer)

    def _measure(self, trainer) -> None:
        accuracy = evaluate(trainer.model, self.loader, trainer.device)["acc"]
        self.points.append((trainer.elapsed, accuracy))


class CheckpointCallback(Callback):
    """Save a checkpoint after every epoch, and when training is interrupted."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def on_epoch_end(self, trainer, record: dict) -> None:
        trainer.save(self.path)

    def on_fit_end(self, trainer) -> None:
        if trainer.interrupted or trainer.stopped:
            trainer.save(self.path)
            print(
                _("saved {path}; resume with {method} or {option}").format(
                    path=self.path, method="Trainer.resume", option="--resume"
                ),
                file=sys.stderr,
            )


class ProgressCallback(Callback):
    """A progress bar over the whole run, and a line of results every `every_epochs` epochs.

    The bar is tqdm's: a widget in JupyterLab, a text bar in a terminal, and nothing at all when
    the output is not a terminal (a log file, CI), where only the epoch lines are printed. It counts
    steps, or seconds of a time budget.
    """

    def __init__(self, every_epochs: int = 1, every_steps: int = 20, stream=None):
        if every_epochs < 1 or every_steps < 1:
            raise ValueError(
                _("{first} and {second} must be at least 1, got {a} and {b}").format(
                    first="every_epochs", second="every_steps", a=every_epochs, b=every_steps
                )
            )
        self.every_epochs = every_epochs
        self.every_steps = every_steps  # how often the bar's loss is refreshed
        self.stream = stream  # where the epoch lines go (None: stdout)
        self.bar = None

    def on_fit_start(self, trainer) -> None:
        budget = trainer.config.minutes
        total = round(60 * budget) if budget else trainer.config.epochs * trainer.steps_per_epoch
        self.bar = tqdm(
            total=total,
            initial=self._done(trainer),
            unit="s" if budget else "step",
            desc=_("training"),
            # silent when the output is not a terminal (tqdm.auto shows widgets), or where tqdm's
            # own switch TQDM_DISABLE is set (the book sets it: a frozen widget is no use there)
            disable=True if os.environ.get("TQDM_DISABLE") else None,
            dynamic_ncols=True,
        )

    def on_step_end(self, trainer, loss: float) -> None:
        if trainer.steps_done % self.every_steps == 0:
            self.bar.set_postfix(epoch=trainer.epoch + 1, loss=f"{loss:.3f}", refresh=False)
            self.bar.update(self._done(trainer) - self.bar.n)

    def on_epoch_end(self, trainer, record: dict) -> None:
        self.bar.update(self._done(trainer) - self.bar.n)
        if record["epoch"] % self.every_epochs == 0 or trainer.finished():
            tqdm.write(_epoch_line(record, trainer.elapsed), file=self.stream or sys.stdout)

    def on_fit_end(self, trainer) -> None:
        self.bar.close()

    @staticmethod
    def _done(trainer) -> int:
        """Steps taken, or whole seconds of the budget spent."""
        if trainer.config.minutes:
            return min(int(trainer.elapsed), round(60 * trainer.config.minutes))
        return trainer.steps_done


def _epoch_line(record: dict, seconds: float) -> str:
    """An epoch's line of results: "epoch   1  train loss 0.912  train acc 68.10%  ..."; the
    accuracies only for a model that classifies."""
    train_acc, val_acc = record.get("train_acc"), record["val_acc"]
    line = _("epoch {epoch:>3}  train loss {loss:.3f}  ").format(
        epoch=record["epoch"], loss=record["train_loss"]
    )
    if train_acc is not None:
        line += _("train acc {percent:.2f}%  ").format(percent=100 * train_acc)
    line += _("val loss {loss:.3f}  ").format(loss=record["val_loss"])
    if val_acc is not None:
        line += _("val acc {percent:.2f}%  ").format(percent=100 * val_acc)
    return line + _("{seconds:.0f}s trained").format(seconds=seconds)
