"""Training: a short loop a notebook can show, and callbacks for everything else.

Introduced in notebook 06. `Trainer.fit` runs AdamW (weight decay on weight matrices only), a
learning rate that warms up and then decays along a cosine, label smoothing and gradient clipping,
and evaluates on the held-out validation split after every epoch. Training can be given a number
of epochs or a time budget (`minutes`): with a budget, the schedule runs over elapsed time, so "train
for 10 minutes" gets a full warm-up and decay (validation is measured outside the budget). Progress
bars (tqdm), live plots and checkpoints are callbacks. Ctrl-C (KeyboardInterrupt) stops cleanly:
the model and history stay, and a checkpoint callback saves them. `Trainer.resume` continues from
a checkpoint where it stopped (files: `vitcourse.checkpoints`). The trainer trains any model with
a `config` and an `architecture` name: the course's ViT, or notebook 08's CNN (`vitcourse.cnn`).

Beyond one laptop (the README's "Scaling up"): on a CUDA GPU the trainer computes in bfloat16
(float16 with a gradient scaler where the GPU lacks bfloat16) with `torch.autocast`; `compile=True`
asks `torch.compile` for a faster model; and under `torchrun` (`init_distributed`) every process
trains a copy wrapped in `DistributedDataParallel` on its share of the data, with the metrics
summed over all of them. On a CPU nothing changes: float32, one process.
"""

from __future__ import annotations

import math
import os
import random
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from vitcourse.checkpoints import CheckpointError, atomic_save, load_checkpoint, model_state
from vitcourse.data import ShardSampler
from vitcourse.environment import pick_device


@dataclass(frozen=True)
class TrainConfig:
    """How to train. Defaults: the course's recipe for Fashion-MNIST on a laptop CPU."""

    epochs: int = 10  # passes over the training split (ignored when minutes is set)
    minutes: float | None = None  # a time budget instead of epochs: the schedule runs over it
    lr: float = 2e-3  # peak learning rate, reached at the end of the warm-up
    weight_decay: float = 0.05  # AdamW decay, applied to weight matrices only
    warmup: float = 0.05  # fraction of the schedule spent warming up from 0 to lr
    min_lr_ratio: float = 0.01  # the cosine decays to lr * min_lr_ratio
    # The true class's target is 1 - s + s/K, every other class's s/K (K classes): with s = 0.1
    # and 10 classes, 0.91 and 0.01.
    label_smoothing: float = 0.1
    grad_clip: float = 1.0  # clip the gradient norm to this (0: no clipping)
    seed: int = 0

    def __post_init__(self):
        if self.minutes is None and self.epochs < 1:
            raise ValueError(f"epochs must be at least 1, got {self.epochs}")
        if self.minutes is not None and self.minutes <= 0:
            raise ValueError(f"minutes must be positive, got {self.minutes}")
        if not 0 <= self.warmup < 1:
            raise ValueError(f"warmup is a fraction of training in [0, 1), got {self.warmup}")


def learning_rate(progress: float, config: TrainConfig) -> float:
    """The learning rate at `progress` in [0, 1] through training: linear warm-up, cosine decay."""
    if progress < config.warmup:
        return config.lr * progress / config.warmup
    decay = (progress - config.warmup) / (1 - config.warmup)
    cosine = 0.5 * (1 + math.cos(math.pi * min(decay, 1.0)))
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * cosine)


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on the weight matrices of Linear and Conv layers only.

    Biases, LayerNorm gains, the cls token and position embeddings are not pulled towards zero:
    decaying them only hurts (they are few and set offsets or scales, not feature detectors).
    """
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (decay if name.endswith("weight") and p.ndim >= 2 else no_decay).append(p)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr)


PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def autocast_dtype(device: torch.device, precision: str = "auto") -> torch.dtype | None:
    """The lower precision to compute in with `torch.autocast`, or None for plain float32.

    "auto": on a CUDA GPU, bfloat16 where it has it natively (Ampere and later), else float16
    (Colab's T4, a V100), which needs a gradient scaler: its small range would round tiny
    gradients to zero. Elsewhere float32: on a CPU without native bfloat16, autocast was measured
    18 times slower than float32 in bfloat16 and 21 times in float16 (benchmarks/precision.py).
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "auto":
        if device.type != "cuda":
            return None
        # Native bfloat16 only: a T4 or V100 would emulate it, slowly (torch answers True there
        # unless asked to leave emulation out).
        native = torch.cuda.is_bf16_supported(including_emulation=False)
        return torch.bfloat16 if native else torch.float16
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    images: torch.Tensor,
    labels: torch.Tensor,
    label_smoothing: float = 0.0,
    grad_clip: float = 0.0,
    loss_fn=None,
    amp_dtype: torch.dtype | None = None,
    scaler: torch.amp.GradScaler | None = None,
) -> torch.Tensor:
    """One step of training on a batch (notebook 06's exercise): forward, loss, gradients,
    clipping, update. Returns the batch's loss.

    The loss is cross entropy on the model's logits, unless `loss_fn(images, labels)` computes
    another (masked-patch pre-training and distillation, notebook 09, bring their own).
    On a GPU the Trainer adds mixed precision: the forward pass and the loss under
    `torch.autocast` in `amp_dtype`, and, for float16, a `scaler` that multiplies the loss before
    `backward` (so small gradients do not round to zero) and divides the gradients back before
    clipping and the update. Without them this is the plain float32 step of notebook 06.
    """
    with torch.autocast(images.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        if loss_fn is None:
            logits = model(images)  # (B, C, H, W) -> (B, classes)
            loss = F.cross_entropy(logits, labels, label_smoothing=label_smoothing)
        else:
            loss = loss_fn(images, labels)
    optimizer.zero_grad(set_to_none=True)  # forget the last step's gradients first
    if scaler is None:
        loss.backward()
        if grad_clip:
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
    else:
        scaler.scale(loss).backward()
        if grad_clip:
            scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
            nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)  # skipped if a gradient overflowed; the scale then shrinks
        scaler.update()
    return loss.detach()


@torch.no_grad()
def evaluate(
    model: nn.Module, loader, device: torch.device | None = None, num_classes: int | None = None
) -> dict:
    """Loss, accuracy, confusion matrix and per-class precision, recall and F1 on a loader.

    Under torchrun, a loader that holds one process's share (`ShardSampler`) is measured by every
    process on its share and the sums are added up across them: every process gets the result
    over the whole split.
    """
    device = device or next(model.parameters()).device
    num_classes = num_classes or model.config.num_classes
    was_training = model.training
    model.eval()
    confusion = torch.zeros(num_classes, num_classes, dtype=torch.long)  # rows: truth, cols: guess
    total_loss, count = 0.0, 0
    for images, labels in loader:
        images, labels = to_device(images, device), to_device(labels, device)
        logits = model(images)
        total_loss += F.cross_entropy(logits, labels, reduction="sum").item()
        count += labels.numel()
        pairs = labels.cpu() * num_classes + logits.argmax(-1).cpu()
        confusion += torch.bincount(pairs, minlength=num_classes**2).reshape(num_classes, -1)
    model.train(was_training)
    if isinstance(getattr(loader, "sampler", None), ShardSampler) and distributed():
        sums = all_reduce_sum(torch.tensor([total_loss, count], dtype=torch.float64), device)
        total_loss, count = sums[0].item(), int(sums[1].item())
        confusion = all_reduce_sum(confusion, device)
    if count == 0:
        raise ValueError("cannot evaluate on an empty loader")
    correct = confusion.diag().float()
    precision = correct / confusion.sum(0).clamp(min=1)
    recall = correct / confusion.sum(1).clamp(min=1)
    f1 = 2 * precision * recall / (precision + recall).clamp(min=1e-12)
    return {
        "loss": total_loss / max(count, 1),
        "acc": correct.sum().item() / count,
        "confusion": confusion,
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }


class Callback:
    """Override any of these to act during training (progress, plots, checkpoints)."""

    def on_fit_start(self, trainer: Trainer) -> None: ...

    def on_step_end(self, trainer: Trainer, loss: float) -> None: ...

    def on_epoch_end(self, trainer: Trainer, record: dict) -> None: ...

    def on_fit_end(self, trainer: Trainer) -> None: ...


@dataclass
class History:
    """What happened: one record per epoch, and every step's training loss."""

    # Each epoch's record: epoch, train_loss, val_loss, val_acc, seconds, steps.
    epochs: list[dict] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)


class Trainer:
    """Trains `model` on `loaders` (train, val[, test]) as `config` says."""

    def __init__(
        self,
        model: nn.Module,
        loaders,
        config: TrainConfig = TrainConfig(),
        callbacks: list[Callback] = (),
        device: str | torch.device | None = None,
        precision: str = "auto",
        compile: bool = False,
    ):
        self.device = pick_device(device)
        self.model = model.to(self.device)  # the model itself: saved, analysed, plotted
        # What the training steps call: the model, wrapped for several processes and compiled
        # when asked. It shares the model's weights.
        self.network = self.model
        if distributed():
            self.network = nn.parallel.DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
        if compile:
            self.network = torch.compile(self.network)
        self.amp_dtype = autocast_dtype(self.device, precision)
        # float16 needs its gradients scaled; bfloat16 has float32's range and does not.
        self.scaler = (
            torch.amp.GradScaler(self.device.type) if self.amp_dtype == torch.float16 else None
        )
        self.world_size = dist.get_world_size() if distributed() else 1
        self.rank = dist.get_rank() if distributed() else 0
        self.loaders = loaders
        self.config = config
        self.callbacks = list(callbacks)
        self.optimizer = make_optimizer(model, config)
        self.history = History()
        self.epoch = 0  # epochs completed
        self.step = 0  # optimizer steps taken
        self.batch = 0  # batches done in the current epoch (non-zero only when interrupted)
        self._epoch_loader_state = None  # the shuffling RNG as the current epoch began
        self.elapsed = 0.0  # seconds of training so far, over every run of fit (resume included)
        self.interrupted = False
        self.steps_per_epoch = len(loaders.train)

    def progress(self) -> float:
        """How far through training we are, in [0, 1]: by time with a budget, else by steps."""
        if self.config.minutes is not None:
            return min(self.elapsed / (60 * self.config.minutes), 1.0)
        return min(self.step / (self.config.epochs * self.steps_per_epoch), 1.0)

    def done(self) -> bool:
        if self.config.minutes is not None:
            return self.elapsed >= 60 * self.config.minutes
        return self.epoch >= self.config.epochs

    def fit(self) -> History:
        """Train until the epochs or the time budget are used up (or Ctrl-C). Returns the history."""
        if self.step == 0:
            # Under torchrun each process draws its own random crops and flips (the shuffling
            # has a generator of its own, the same in every process).
            seed_everything(self.config.seed + self.rank)
        self.interrupted = False
        self._tick = _now()
        self._call("on_fit_start")
        try:
            while not (self._time_is_up() if self.config.minutes is not None else self.done()):
                record = self.train_epoch()
                self.history.epochs.append(record)
                self._call("on_epoch_end", record)
        except KeyboardInterrupt:
            self.interrupted = True  # stop cleanly: model and history stay; callbacks save them
            print(
                f"\ninterrupted after {self.step} steps; the model and history are kept",
                file=sys.stderr,
            )
        self._call("on_fit_end")
        return self.history

    def train_epoch(self) -> dict:
        """One pass over the training split (cut short by a time budget), then validation."""
        self.model.train()
        start, first_step = _now(), self.step - self.batch
        self._tick = start
        self._replay_shuffle()
        for index, (images, labels) in enumerate(self.loaders.train):
            if index < self.batch:
                continue  # resuming mid-epoch: these batches were trained on before the stop
            for group in self.optimizer.param_groups:
                group["lr"] = learning_rate(self.progress(), self.config)
            images = to_device(images, self.device)
            labels = to_device(labels, self.device)
            c = self.config
            loss = train_step(
                self.network,
                self.optimizer,
                images,
                labels,
                c.label_smoothing,
                c.grad_clip,
                loss_fn=self.loss,
                amp_dtype=self.amp_dtype,
                scaler=self.scaler,
            )
            self.step, self.batch = self.step + 1, self.batch + 1
            self.history.step_losses.append(loss.item())
            self._count_time()  # callbacks see `elapsed` up to date, this step included
            self._call("on_step_end", self.history.step_losses[-1])
            self._count_time()  # ... and their own time counts too, unless they pause the clock
            if self.config.minutes is not None and self._time_is_up():
                break
        self._share_buffers()
        # Measuring is not training: validation takes nothing from a time budget, so a model with
        # a small training split (many short epochs) gets as much training time as any other.
        with self.paused():
            val = self.validate()
        self.epoch, self.batch = self.epoch + 1, 0
        losses = self.history.step_losses[first_step:]
        return {
            "epoch": self.epoch,
            "train_loss": self._mean_over_processes(sum(losses) / max(len(losses), 1)),
            "val_loss": val["loss"],
            "val_acc": val.get("acc"),  # None when the model does not classify (pre-training)
            "seconds": _now() - start,
            "steps": self.step,
        }

    # What a trainer for another task changes (`vitcourse.pretraining`, `vitcourse.distillation`):

    loss = None  # a method (images, labels) -> loss; None: cross entropy on the model's logits

    def validate(self) -> dict:
        """Measure the model on the validation split: a dict with "loss" (and "acc" if it
        classifies). Runs after every epoch, outside the time budget."""
        return evaluate(self.model, self.loaders.val, self.device)

    def _time_is_up(self) -> bool:
        """Is the time budget spent? Under torchrun the processes agree, on the slowest one's
        clock, so that they all stop after the same step and set the same learning rates."""
        if self.world_size > 1:
            self._count_time()
            self.elapsed = all_reduce_max(self.elapsed, self.device)
            self._tick = _now()  # the wait for the others counts for none of them
        return self.done()

    def _share_buffers(self) -> None:
        """Under torchrun, give every process the first one's buffers (a BatchNorm's running
        statistics, which each process updates from its own batches), so that all of them measure,
        and save, the same model."""
        if self.world_size > 1:
            for buffer in self.model.buffers():
                dist.broadcast(buffer, src=0)

    def _mean_over_processes(self, value: float) -> float:
        """Under torchrun, the mean of each process's `value` (each saw its share of the data)."""
        if self.world_size == 1:
            return value
        total = all_reduce_sum(torch.tensor([value], dtype=torch.float64), self.device)
        return total.item() / self.world_size

    @contextmanager
    def paused(self):
        """Time spent inside `with trainer.paused():` does not count as training time (say, extra
        evaluations to draw a curve), so it takes nothing from a time budget."""
        self._count_time()
        try:
            yield
        finally:
            self._tick = _now()

    def _count_time(self) -> None:
        """Add the wall time since the last call to `elapsed`: loading data, computing, callbacks
        (but not the per-epoch validation, nor anything else `paused`)."""
        now = _now()
        self.elapsed += now - self._tick
        self._tick = now

    def _replay_shuffle(self) -> None:
        """Remember the shuffling RNG as this epoch begins; after a mid-epoch resume, rewind it so
        the epoch's batches come in the same order as before the stop."""
        generator = getattr(self.loaders.train, "generator", None)
        if generator is None:
            return
        if self.batch and self._epoch_loader_state is not None:
            generator.set_state(self._epoch_loader_state)
        self._epoch_loader_state = generator.get_state()

    def _call(self, hook: str, *args) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(self, *args)

    # --- checkpoints ------------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Everything needed to continue: model, optimizer, schedule, history, configs, RNGs."""
        generator = getattr(self.loaders.train, "generator", None)
        # Mid-epoch, keep the shuffling RNG as the epoch began, so resuming replays its order.
        loader_state = self._epoch_loader_state if self.batch else None
        if loader_state is None and generator is not None:
            loader_state = generator.get_state()
        return {
            **model_state(self.model),
            "optimizer": self.optimizer.state_dict(),
            "schedule": {
                "epoch": self.epoch,
                "step": self.step,
                "batch": self.batch,
                "elapsed": self.elapsed,
                "world_size": self.world_size,
            },
            "train_config": asdict(self.config),
            "history": {"epochs": self.history.epochs, "step_losses": self.history.step_losses},
            "rng": {
                "torch": torch.get_rng_state(),
                "loader": loader_state,
            },
            # float16's gradient scale, learned over the steps (None without one)
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
        }

    def save(self, path: str | Path) -> Path:
        """Write a checkpoint atomically: a crash mid-write never leaves a half-written file."""
        return atomic_save(self.state_dict(), path)

    def resume(self, path: str | Path) -> None:
        """Load a checkpoint written by `save`; the next `fit` continues where it stopped."""
        state = load_checkpoint(path)
        missing = {"optimizer", "schedule", "history", "rng"} - set(state)
        if missing:
            raise CheckpointError(
                f"{path} holds a model but not a training run to resume "
                f"(no {', '.join(sorted(missing))}): use vitcourse.checkpoints.load_model for it"
            )
        architecture = state.get("architecture", "vit")
        if architecture != self.model.architecture:
            raise CheckpointError(
                f"{path} holds a {architecture} training run; this trainer trains a "
                f"{self.model.architecture}"
            )
        try:
            self.model.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (ValueError, RuntimeError, KeyError) as e:
            raise CheckpointError(f"{path} does not fit this model or optimizer: {e}") from e
        schedule = state["schedule"]
        if schedule["batch"] and schedule.get("world_size", 1) != self.world_size:
            raise CheckpointError(
                f"{path} stopped in the middle of an epoch with {schedule.get('world_size', 1)} "
                f"processes; resume it with as many (this run has {self.world_size}), or from a "
                "checkpoint written at the end of an epoch"
            )
        self.epoch, self.step, self.batch = schedule["epoch"], schedule["step"], schedule["batch"]
        self.elapsed = schedule["elapsed"]
        self.history = History(**state["history"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        torch.set_rng_state(state["rng"]["torch"])
        if self.rank:  # the checkpoint holds the first process's random state: draw afresh
            torch.manual_seed(self.config.seed + self.rank + self.world_size * self.step)
        generator = getattr(self.loaders.train, "generator", None)
        if generator is not None and state["rng"]["loader"] is not None:
            generator.set_state(state["rng"]["loader"])
            self._epoch_loader_state = state["rng"]["loader"]


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

    def on_fit_start(self, trainer: Trainer) -> None:
        if not self.points:  # the untrained model (outside the timed loop, so nothing to pause)
            self._measure(trainer)

    def on_step_end(self, trainer: Trainer, loss: float) -> None:
        if trainer.elapsed - self.points[-1][0] >= self.every_seconds:
            with trainer.paused():
                self._measure(trainer)

    def on_fit_end(self, trainer: Trainer) -> None:
        if trainer.elapsed > self.points[-1][0]:
            self._measure(trainer)

    def _measure(self, trainer: Trainer) -> None:
        accuracy = evaluate(trainer.model, self.loader, trainer.device)["acc"]
        self.points.append((trainer.elapsed, accuracy))


class CheckpointCallback(Callback):
    """Save a checkpoint after every epoch, and when training is interrupted."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def on_epoch_end(self, trainer: Trainer, record: dict) -> None:
        trainer.save(self.path)

    def on_fit_end(self, trainer: Trainer) -> None:
        if trainer.interrupted:
            trainer.save(self.path)
            print(f"saved {self.path}; resume with Trainer.resume or --resume", file=sys.stderr)


class ProgressCallback(Callback):
    """A progress bar over the whole run, and a line of results every `every_epochs` epochs.

    The bar is tqdm's: a widget in JupyterLab, a text bar in a terminal, and nothing at all when
    the output is not a terminal (a log file, CI), where only the epoch lines are printed. It counts
    steps, or seconds of a time budget.
    """

    def __init__(self, every_epochs: int = 1, every_steps: int = 20, stream=None):
        if every_epochs < 1 or every_steps < 1:
            raise ValueError(
                f"every_epochs and every_steps must be at least 1, got {every_epochs} and "
                f"{every_steps}"
            )
        self.every_epochs = every_epochs
        self.every_steps = every_steps  # how often the bar's loss is refreshed
        self.stream = stream  # where the epoch lines go (None: stdout)
        self.bar = None

    def on_fit_start(self, trainer: Trainer) -> None:
        budget = trainer.config.minutes
        total = round(60 * budget) if budget else trainer.config.epochs * trainer.steps_per_epoch
        self.bar = tqdm(
            total=total,
            initial=self._done(trainer),
            unit="s" if budget else "step",
            desc="training",
            disable=None,  # silent when the output is not a terminal (tqdm.auto shows widgets)
            dynamic_ncols=True,
        )

    def on_step_end(self, trainer: Trainer, loss: float) -> None:
        if trainer.step % self.every_steps == 0:
            self.bar.set_postfix(epoch=trainer.epoch + 1, loss=f"{loss:.3f}", refresh=False)
            self.bar.update(self._done(trainer) - self.bar.n)

    def on_epoch_end(self, trainer: Trainer, record: dict) -> None:
        self.bar.update(self._done(trainer) - self.bar.n)
        if record["epoch"] % self.every_epochs == 0 or trainer.done():
            accuracy = record["val_acc"]
            tqdm.write(
                f"epoch {record['epoch']:>3}  train loss {record['train_loss']:.3f}  "
                f"val loss {record['val_loss']:.3f}  "
                + (f"val acc {100 * accuracy:.2f}%  " if accuracy is not None else "")
                + f"{trainer.elapsed:.0f}s trained",
                file=self.stream or sys.stdout,
            )

    def on_fit_end(self, trainer: Trainer) -> None:
        self.bar.close()

    @staticmethod
    def _done(trainer: Trainer) -> int:
        """Steps taken, or whole seconds of the budget spent."""
        if trainer.config.minutes:
            return min(int(trainer.elapsed), round(60 * trainer.config.minutes))
        return trainer.step


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Copy a batch to the device. From pinned (page-locked) memory the copy to a GPU runs in the
    background (`non_blocking`) while the GPU still computes; elsewhere it is a plain copy."""
    return tensor.to(device, non_blocking=tensor.is_pinned())


# --- several processes (torchrun) ----------------------------------------------------------------


def distributed() -> bool:
    """True inside a process group: under torchrun, after `init_distributed`."""
    return dist.is_available() and dist.is_initialized()


def init_distributed(device: str | None = None) -> tuple[int, int, str | None]:
    """Join the process group torchrun set up; returns (rank, world size, device).

    Under `torchrun --nproc_per_node=N`, N processes run the same command and each finds its
    place in the environment torchrun sets (`RANK`, `LOCAL_RANK`, `WORLD_SIZE`). Each process takes
    one GPU (`cuda:LOCAL_RANK`, NCCL between them) or, without GPUs, the CPU (gloo). Run without
    torchrun, it returns (0, 1, device) and starts nothing.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size == 1 or distributed():
        return (dist.get_rank(), dist.get_world_size(), device) if distributed() else (0, 1, device)
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if device in (None, "cuda") and torch.cuda.is_available():
        device = f"cuda:{local_rank}"
        torch.cuda.set_device(device)
        backend = "nccl"
    elif device in (None, "cpu"):
        device, backend = "cpu", "gloo"
    else:
        raise ValueError(f"several processes train on CUDA GPUs or on the CPU, not on {device!r}")
    dist.init_process_group(backend)
    return dist.get_rank(), world_size, device


def all_reduce_sum(tensor: torch.Tensor, device: torch.device, op=None) -> torch.Tensor:
    """The sum of `tensor` over every process (each process passes its own); `op` another
    reduction, such as `dist.ReduceOp.MAX`."""
    # NCCL reduces tensors on the GPU; gloo on the CPU.
    on = device if dist.get_backend() == "nccl" else torch.device("cpu")
    total = tensor.to(on).clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM if op is None else op)
    return total.to(tensor.device)


def all_reduce_max(value: float, device: torch.device) -> float:
    """The largest of every process's `value`."""
    return all_reduce_sum(
        torch.tensor([value], dtype=torch.float64), device, dist.ReduceOp.MAX
    ).item()


def _now() -> float:
    """The clock a time budget is measured with (a function, so tests can stand in for it)."""
    return time.perf_counter()


def seed_everything(seed: int) -> None:
    """Seed Python's and PyTorch's random number generators."""
    random.seed(seed)
    torch.manual_seed(seed)
