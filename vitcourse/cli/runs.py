"""The run folder, written the same way by `python -m vitcourse.train` and `.pretrain`.

    OUT/run.json        the run's settings (the data, the batch, the model kind): --resume reuses them
    OUT/checkpoint.pt   the model and the training state, after every epoch and on Ctrl-C
    OUT/metrics.json    what the run measured
    OUT/model.pt        the trained model alone, for `vitcourse.checkpoints.load_model`
    OUT/events.out.*    with --tensorboard: the run for TensorBoard (`tensorboard --logdir runs/`)
    OUT/transformers/   with --export transformers: the model for Hugging Face's from_pretrained

Each command line settles its run once, before training, in a frozen description
(`vitcourse.cli.train_run.TrainRun`, `vitcourse.cli.pretrain.PretrainRun`) made from its arguments
and, on --resume, from what `RunFolder.resume` reads here: the checkpoint to continue, and
run.json's settings over the command line's, so an interrupted run goes on with the same data. The
loop that writes the checkpoint is `vitcourse.training.loop` (notebook 06); the files are read and
written by `vitcourse.checkpoints`.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from vitcourse.checkpoints import CheckpointError, load_checkpoint, save_model
from vitcourse.data.loading import denormalize
from vitcourse.environment import quick_mode
from vitcourse.language import _
from vitcourse.training.callbacks import CheckpointCallback, ProgressCallback
from vitcourse.training.loop import TrainConfig


@dataclass(frozen=True)
class RunFolder:
    """The folder of one run, OUT: where its files are, and how a resume reads them back."""

    path: Path  # the folder itself (created when the run writes its first file)

    @property
    def settings_file(self) -> Path:
        return self.path / "run.json"

    @property
    def checkpoint(self) -> Path:
        return self.path / "checkpoint.pt"

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.json"

    @property
    def model_file(self) -> Path:
        return self.path / "model.pt"

    def resume(self, given: dict) -> tuple[dict, dict]:
        """The checkpoint of the run stopped here, and the run's settings: run.json's where it
        has them, the command line's (`given`) elsewhere. A folder without a checkpoint is a clear
        error; one without run.json keeps the command line's settings."""
        try:
            state = load_checkpoint(self.checkpoint)
        except CheckpointError as e:
            raise SystemExit(_("error: cannot resume: {error}").format(error=e)) from None
        stored = json.loads(self.settings_file.read_text()) if self.settings_file.exists() else {}
        return state, {**given, **{name: stored[name] for name in given if name in stored}}

    def write_settings(self, settings: dict) -> None:
        """Write run.json (paths as text, so JSON can hold them)."""
        self.path.mkdir(parents=True, exist_ok=True)
        plain = {name: str(v) if isinstance(v, Path) else v for name, v in settings.items()}
        self.settings_file.write_text(json.dumps(plain, indent=2))

    def callbacks(self) -> list:
        """A progress bar, and a checkpoint after every epoch and on Ctrl-C."""
        return [ProgressCallback(), CheckpointCallback(self.checkpoint)]

    def restore(self, trainer) -> str:
        """Load the checkpoint into `trainer`, which goes on where it stopped; returns the line
        that says so."""
        trainer.resume(self.checkpoint)
        return _("resuming {checkpoint} after epoch {epoch} ({seconds:.0f}s trained)").format(
            checkpoint=self.checkpoint, epoch=trainer.epoch, seconds=trainer.elapsed
        )

    def stopped_early(self, program: str) -> str:
        """What to type to go on after Ctrl-C."""
        return _("stopped early; resume with: {command}").format(
            command=f"{program} --out {self.path} --resume"
        )

    def write_results(self, metrics: dict, model: nn.Module, **info) -> None:
        """Write metrics.json and model.pt (the model alone, with the plain facts in `info`)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.metrics_file.write_text(json.dumps(metrics, indent=2))
        save_model(model, self.model_file, **info)

    def tensorboard(self, loaders):
        """A callback writing TensorBoard event files into the folder (needs the extras)."""
        from vitcourse.bridges.tensorboard import TensorBoardCallback, first_images

        samples = first_images(loaders.val)
        # A point every 10 steps, or a few an epoch on a small set.
        every = max(1, min(10, len(loaders.train) // 4))
        try:
            return TensorBoardCallback(
                self.path, samples, denormalize(samples, loaders.info), every_steps=every
            )
        except ImportError as e:
            raise SystemExit(f"error: --tensorboard: {e}") from None

    def export_transformers(self, model: nn.Module) -> Path:
        """Write `model` as a Hugging Face ViTForImageClassification into OUT/transformers/."""
        from vitcourse.bridges.transformers import to_transformers

        try:
            exported = to_transformers(model)
        except (ImportError, ValueError) as e:
            raise SystemExit(f"error: --export transformers: {e}") from None
        exported.save_pretrained(self.path / "transformers")
        return self.path / "transformers"


def run_length(epochs: int | None, minutes: float | None, default_epochs: int) -> dict:
    """The length asked for, as `TrainConfig` fields: a time budget, else a number of epochs.
    Quick mode shrinks the default to one epoch; a length asked for stands."""
    if minutes:
        return {"minutes": minutes}
    return {"epochs": epochs or (1 if quick_mode() else default_epochs)}


def resumed_train_config(state: dict, epochs: int | None, minutes: float | None) -> TrainConfig:
    """The checkpoint's recipe; a length given with --resume asks to train longer than first
    planned (--epochs drops a time budget, --minutes replaces it)."""
    stored = dict(state["train_config"])
    if epochs or minutes:
        stored.update(epochs=epochs or stored["epochs"], minutes=minutes)
    return TrainConfig(**stored)


def command_line(program: str, argv: list[str] | None) -> str:
    """The command that started the run, as model.pt records it."""
    return " ".join([program, *(sys.argv[1:] if argv is None else argv)])


# --- what every command's run does ------------------------------------------------------------


def begin(run, say=print) -> None:
    """What a run does first, whichever command: write run.json (not on --resume: it is there;
    under torchrun, the first process alone), say quick mode, and seed."""
    if run.lead and not run.resume:
        run.folder.write_settings(run.settings())
    if quick_mode():
        say(_("quick mode: a small subset of the data"))
    torch.manual_seed(run.train_config.seed)


def fit(run, trainer, describe, say=print) -> float:
    """Train: from the run folder's checkpoint on --resume, after saying what trains
    (`describe()`, once the trainer holds what it resumed). Returns the seconds it took."""
    if run.resume:
        say(run.folder.restore(trainer))
    say(describe())
    start = time.perf_counter()
    trainer.fit()
    return time.perf_counter() - start
