"""Resuming a training run where it stopped: what a checkpoint holds, and the rest of an epoch.

`Trainer.save` writes `training_state(trainer)` (model, optimizer, schedule, history, configs,
random states) atomically; `Trainer.resume` hands the file to `restore_training`, which checks it
fits before loading anything. A run stopped in the middle of an epoch (Ctrl-C, or the Stop button
in a notebook) goes on with the batches of that epoch it had not trained on, in the same order:
`EpochReplay` remembers the shuffling's random state as each epoch begins. Files are read and
written by `vitcourse.checkpoints`; the loop that uses all this is `vitcourse.training.loop`.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import torch

from vitcourse.checkpoints import CheckpointError, load_checkpoint, model_state
from vitcourse.language import _


class EpochReplay:
    """The batches of an epoch, replayed in the same order after a mid-epoch resume.

    The training loader shuffles with its own generator. Its state as the epoch began is kept
    (and saved in checkpoints), so that resuming rewinds the generator, draws the same order, and
    skips the batches trained on before the stop.
    """

    def __init__(self, loader):
        self.loader = loader
        self.generator = getattr(loader, "generator", None)
        self.epoch_start = None  # the shuffling RNG's state as the current epoch began

    def batches(self, skip: int = 0):
        """This epoch's batches, without the first `skip` (trained on before a stop)."""
        if self.generator is not None:
            if skip and self.epoch_start is not None:
                self.generator.set_state(self.epoch_start)
            self.epoch_start = self.generator.get_state()
        for index, batch in enumerate(self.loader):
            if index >= skip:
                yield batch

    def state(self, mid_epoch: bool) -> torch.Tensor | None:
        """What to checkpoint: mid-epoch, the state as the epoch began, so resuming replays it."""
        if mid_epoch and self.epoch_start is not None:
            return self.epoch_start
        return self.generator.get_state() if self.generator is not None else None

    def restore(self, state: torch.Tensor | None) -> None:
        if self.generator is not None and state is not None:
            self.generator.set_state(state)
            self.epoch_start = state


def training_state(trainer) -> dict:
    """Everything needed to continue: model, optimizer, schedule, history, configs, RNGs."""
    return {
        **model_state(trainer.model),
        "optimizer": trainer.optimizer.state_dict(),
        "schedule": {
            "epoch": trainer.epoch,
            "step": trainer.steps_done,
            "batch": trainer.epoch_batches_done,
            "elapsed": trainer.elapsed,
            "world_size": trainer.world_size,
        },
        "train_config": asdict(trainer.config),
        "history": {
            "epochs": trainer.history.epochs,
            "step_losses": trainer.history.step_losses,
            "step_accuracies": trainer.history.step_accuracies,
        },
        "rng": {
            "torch": torch.get_rng_state(),
            "loader": trainer.replay.state(trainer.epoch_batches_done > 0),
        },
        # float16's gradient scale, learned over the steps (None without one)
        "scaler": trainer.scaler.state_dict() if trainer.scaler is not None else None,
    }


def _check_fits(state: dict, path: str | Path, trainer) -> None:
    """Refuse, before loading anything, a file that is not a run this trainer can continue."""
    missing = {"optimizer", "schedule", "history", "rng"} - set(state)
    if missing:
        raise CheckpointError(
            _(
                "{path} holds a model but not a training run to resume (no {missing}): use "
                "{function} for it"
            ).format(
                path=path,
                missing=", ".join(sorted(missing)),
                function="vitcourse.checkpoints.load_model",
            )
        )
    architecture = state.get("architecture", "vit")
    if architecture != trainer.model.architecture:
        raise CheckpointError(
            _("{path} holds a {architecture} training run; this trainer trains a {own}").format(
                path=path, architecture=architecture, own=trainer.model.architecture
            )
        )
    schedule = state["schedule"]
    if schedule["batch"] and schedule.get("world_size", 1) != trainer.world_size:
        raise CheckpointError(
            _(
                "{path} stopped in the middle of an epoch with {processes} processes; resume it "
                "with as many (this run has {own}), or from a checkpoint written at the end of an "
                "epoch"
            ).format(path=path, processes=schedule.get("world_size", 1), own=trainer.world_size)
        )


def restore_training(trainer, path: str | Path) -> dict:
    """Load a checkpoint written by `Trainer.save` into `trainer`; returns its history (a dict),
    which the trainer keeps. The next `fit` continues where the run stopped."""
    state = load_checkpoint(path)
    _check_fits(state, path, trainer)
    try:
        trainer.model.load_state_dict(state["model"])
        trainer.optimizer.load_state_dict(state["optimizer"])
    except (ValueError, RuntimeError, KeyError) as e:
        raise CheckpointError(
            _("{path} does not fit this model or optimizer: {error}").format(path=path, error=e)
        ) from e
    schedule = state["schedule"]
    trainer.epoch, trainer.steps_done = schedule["epoch"], schedule["step"]
    trainer.epoch_batches_done, trainer.elapsed = schedule["batch"], schedule["elapsed"]
    if trainer.scaler is not None and state.get("scaler"):
        trainer.scaler.load_state_dict(state["scaler"])
    torch.set_rng_state(state["rng"]["torch"])
    if trainer.rank:  # the checkpoint holds the first process's random state: draw afresh
        torch.manual_seed(
            trainer.config.seed + trainer.rank + trainer.world_size * trainer.steps_done
        )
    trainer.replay.restore(state["rng"]["loader"])
    return state["history"]
