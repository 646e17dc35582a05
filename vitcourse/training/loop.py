"""Training: a short loop a notebook can show, and rooms named for everything else.

Introduced in notebook 06. `Trainer.fit` runs AdamW (weight decay on weight matrices only), a
learning rate that warms up and then decays along a cosine, label smoothing and gradient clipping,
and evaluates on the held-out validation split after every epoch. Training can be given a number
of epochs or a time budget (`minutes`): with a budget, the schedule runs over elapsed time, so "train
for 10 minutes" gets a full warm-up and decay (validation is measured outside the budget). Ctrl-C
(KeyboardInterrupt, or the Stop button in a notebook) stops cleanly: the model and history stay,
and a checkpoint callback saves them. The trainer trains any model with a `config` and an
`architecture` name: the course's ViT, or notebook 08's CNN (`vitcourse.cnn`).

The loop (`Trainer.train_epoch`) is what notebook 06 prints. What it leaves out lives in the
other rooms of `vitcourse.training`, each named for it (its package docstring is the map).
"""

from __future__ import annotations

import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from vitcourse.checkpoints import atomic_save
from vitcourse.environment import pick_device
from vitcourse.language import _
from vitcourse.training.callbacks import (
    Callback,
    StopTraining,
)
from vitcourse.training.clock import Clock
from vitcourse.training.evaluation import accuracy, evaluate
from vitcourse.training.resuming import EpochReplay, restore_training, training_state
from vitcourse.training.scaling import (
    mean_over_processes,
    mixed_precision,
    prepare_network,
    rank_and_world_size,
    share_buffers,
    to_device,
)

__all__ = [
    "History",
    "TrainConfig",
    "Trainer",
    "learning_rate",
    "make_optimizer",
    "returning_logits",
    "seed_everything",
    "train_step",
]


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
            message = _("{argument} must be at least 1, got {value}")
            raise ValueError(message.format(argument="epochs", value=self.epochs))
        if self.minutes is not None and self.minutes <= 0:
            message = _("{argument} must be positive, got {value}")
            raise ValueError(message.format(argument="minutes", value=self.minutes))
        if not 0 <= self.warmup < 1:
            message = _("{argument} is a fraction of training in [0, 1), got {value}")
            raise ValueError(message.format(argument="warmup", value=self.warmup))


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
    return_logits: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor | None]:
    """One step of training on a batch (notebook 06's exercise): forward, loss, gradients,
    clipping, update. Returns the batch's loss; with `return_logits`, the loss and the logits
    the loss was computed from (None when `loss_fn` computes the loss), which the trainer turns
    into the training accuracy.

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
            logits, loss = None, loss_fn(images, labels)
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
    if return_logits:
        return loss.detach(), None if logits is None else logits.detach()
    return loss.detach()


def returning_logits(step: Callable | None) -> Callable:
    """The step a trainer takes: the package's `train_step` (`step` None), or `step` written as
    notebook 06's exercise asks (it returns the loss) made to return the logits the model gave
    too, caught on their way out. It runs as written: in float32 on a GPU, cross entropy only."""
    if step is None or step is train_step:
        return train_step

    def trainer_step(model, optimizer, images, labels, label_smoothing, grad_clip, **options):
        if options.get("loss_fn") is not None:
            raise ValueError(_("a trainer with its own loss_fn takes the package's train_step"))
        caught = []
        hook = model.register_forward_hook(lambda module, inputs, out: caught.append(out))
        try:
            loss = step(model, optimizer, images, labels, label_smoothing, grad_clip)
        finally:
            hook.remove()
        return torch.as_tensor(loss).detach(), caught[-1].detach() if caught else None

    return trainer_step


@dataclass
class History:
    """What happened: one record per epoch, and every step's training loss and accuracy."""

    # Each epoch's record: epoch, train_loss, train_acc, val_loss, val_acc, seconds, steps.
    epochs: list[dict] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)
    # Each step's share of right answers on its training batch (augmented, and before the step's
    # update); empty for a model trained with another loss (notebook 09's).
    step_accuracies: list[float] = field(default_factory=list)


class Trainer:
    """Trains `model` on `loaders` (train, val[, test]) as `config` says.

    On a CUDA GPU it computes in a lower precision (`precision`: "auto", "fp32", "bf16", "fp16")
    and `compile=True` asks torch.compile for a faster model; under torchrun every process trains
    a copy on its share of the data (`vitcourse.training.scaling`). On a CPU: float32, one process.
    """

    def __init__(
        self,
        model: nn.Module,
        loaders,
        config: TrainConfig = TrainConfig(),
        callbacks: list[Callback] = (),
        device: str | torch.device | None = None,
        precision: str = "auto",
        compile: bool = False,
        train_step: Callable | None = None,
    ):
        self.device = pick_device(device)
        self.model = model.to(self.device)  # the model itself: saved, analysed, plotted
        self.network = prepare_network(self.model, self.device, compile)  # what the steps call
        self.amp_dtype, self.scaler = mixed_precision(self.device, precision)
        self.rank, self.world_size = rank_and_world_size()
        self.loaders = loaders
        self.config = config
        self.callbacks = list(callbacks)
        self.optimizer = make_optimizer(model, config)
        self.history = History()
        self.epoch = 0  # epochs completed
        self.steps_done = 0  # optimizer steps taken, over every epoch
        self.epoch_batches_done = 0  # of the epoch under way (non-zero only when interrupted)
        self.clock = Clock()  # seconds of training, over every run of fit (resume included)
        self.replay = EpochReplay(loaders.train)  # an interrupted epoch goes on in its order
        self.interrupted = False  # Ctrl-C (or the notebook's Stop button) ended the last fit
        self.stopped: str | None = None  # why a callback ended the last fit (`StopTraining`)
        self.steps_per_epoch = len(loaders.train)
        self.train_step = returning_logits(train_step)  # notebook 06 gives it the learner's

    def fit(self) -> History:
        """Train until the epochs or the time budget are used up, Ctrl-C, or a callback's
        `StopTraining`. Returns the history."""
        if self.steps_done == 0:
            # Under torchrun each process draws its own random crops and flips (the shuffling
            # has a generator of its own, the same in every process).
            seed_everything(self.config.seed + self.rank)
        self.interrupted, self.stopped = False, None
        self.clock.start()
        self._call("on_fit_start")
        try:
            while not self.finished_everywhere():
                record = self.train_epoch()
                self.history.epochs.append(record)
                self._call("on_epoch_end", record)
        except KeyboardInterrupt:
            self.interrupted = True  # stop cleanly: model and history stay; callbacks save them
            message = _("interrupted at step {steps}; the model and history are kept")
            print("\n" + message.format(steps=self.steps_done), file=sys.stderr)
        except StopTraining as stop:  # a callback's decision: the same clean stop
            self.stopped = str(stop) or _("a callback stopped training")
        self._call("on_fit_end")
        return self.history

    def train_epoch(self) -> dict:
        """One pass over the training split (cut short by a time budget), then validation."""
        self.model.train()
        start = self.clock.start()  # count training time from here
        first_step = self.steps_done - self.epoch_batches_done  # resumed mid-epoch: not 0
        for images, labels in self.replay.batches(skip=self.epoch_batches_done):
            self.set_learning_rate(learning_rate(self.progress(), self.config))
            images, labels = to_device(images, self.device), to_device(labels, self.device)
            # self.network: the model (wrapped for torchrun or torch.compile when asked)
            loss, logits = self.train_step(
                self.network, self.optimizer, images, labels, **self.step_options
            )
            loss = loss.item()
            self.steps_done += 1
            self.epoch_batches_done += 1
            self.history.step_losses.append(loss)
            if logits is not None:  # a classifier: its accuracy on this training batch
                self.history.step_accuracies.append(accuracy(logits, labels))
            self.call_step_callbacks(loss)  # progress bars, live plots, ...
            if self.config.minutes is not None and self.finished_everywhere():
                break
        share_buffers(self.model)  # under torchrun: every process measures the same model
        with self.clock.paused():  # validation takes nothing from a time budget
            val = self.validate()
        self.epoch, self.epoch_batches_done = self.epoch + 1, 0
        return self.epoch_record(val, start, first_step)

    # What a trainer for another task changes (notebook 09's `PretrainTrainer` and
    # `DistillationTrainer`): a method `loss_fn(images, labels) -> loss`, which `train_step`
    # calls instead of taking cross entropy on the model's logits, and `validate`.

    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None

    def validate(self) -> dict:
        """Measure the model on the validation split: a dict with "loss" (and "acc" if it
        classifies). Runs after every epoch, outside the time budget."""
        return evaluate(self.model, self.loaders.val, self.device)

    # --- the loop's parts -------------------------------------------------------------------

    def progress(self) -> float:
        """How far through training we are, in [0, 1]: by time with a budget, else by steps."""
        if self.config.minutes is not None:
            return min(self.elapsed / (60 * self.config.minutes), 1.0)
        return min(self.steps_done / (self.config.epochs * self.steps_per_epoch), 1.0)

    def finished(self) -> bool:
        """Are the epochs, or the time budget, used up (on this process's clock)?"""
        if self.config.minutes is not None:
            return self.elapsed >= 60 * self.config.minutes
        return self.epoch >= self.config.epochs

    def finished_everywhere(self) -> bool:
        """`finished`, agreed by every process under torchrun: with a time budget they take the
        slowest one's clock, so that they all stop after the same step. One process: `finished`."""
        if self.config.minutes is not None and self.world_size > 1:
            self.clock.agree(self.device)
        return self.finished()

    def set_learning_rate(self, lr: float) -> None:
        for group in self.optimizer.param_groups:
            group["lr"] = lr

    def call_step_callbacks(self, loss: float) -> None:
        """Call the callbacks after a step. They see `elapsed` up to date, this step included,
        and their own time counts too, unless they pause the clock."""
        self.clock.count()
        self._call("on_step_end", loss)
        self.clock.count()

    def epoch_record(self, val: dict, start: float, first_step: int) -> dict:
        """The epoch's line in the history: the means of the training loss and accuracy over the
        epoch's steps, validation, time, steps."""
        losses = self.history.step_losses[first_step:]
        # The epoch's accuracies are the last ones (a run resumed from a checkpoint written before
        # they were recorded has fewer of them than losses).
        steps = self.steps_done - first_step
        accuracies = self.history.step_accuracies[-steps:] if steps else []
        return {
            "epoch": self.epoch,
            "train_loss": mean_over_processes(sum(losses) / max(len(losses), 1), self.device),
            # None when the model does not classify (pre-training)
            "train_acc": (
                mean_over_processes(sum(accuracies) / len(accuracies), self.device)
                if accuracies
                else None
            ),
            "val_loss": val["loss"],
            "val_acc": val.get("acc"),  # None when the model does not classify (pre-training)
            "seconds": self.clock.since(start),  # wall time, validation included
            "steps": self.steps_done,
        }

    @property
    def step_options(self) -> dict:
        """What `train_step` gets besides the batch: the recipe's smoothing and clipping, the loss
        of a trainer for another task (`loss_fn`), and on a GPU mixed precision (`scaling`)."""
        return dict(
            label_smoothing=self.config.label_smoothing,
            grad_clip=self.config.grad_clip,
            loss_fn=self.loss_fn,
            amp_dtype=self.amp_dtype,
            scaler=self.scaler,
            return_logits=True,  # to count each batch's right answers
        )

    @property
    def elapsed(self) -> float:
        """Seconds of training so far (the clock's), over every run of fit."""
        return self.clock.elapsed

    @elapsed.setter
    def elapsed(self, seconds: float) -> None:
        self.clock.elapsed = seconds

    def paused(self):
        """Time spent inside `with trainer.paused():` does not count as training time (say, extra
        evaluations to draw a curve), so it takes nothing from a time budget."""
        return self.clock.paused()

    def _call(self, hook: str, *args) -> None:
        for callback in self.callbacks:
            getattr(callback, hook)(self, *args)

    # --- checkpoints (`vitcourse.training.resuming`) -----------------------------------------

    def state_dict(self) -> dict:
        """Everything needed to continue: model, optimizer, schedule, history, configs, RNGs."""
        return training_state(self)

    def save(self, path: str | Path) -> Path:
        """Write a checkpoint atomically: a crash mid-write never leaves a half-written file."""
        return atomic_save(self.state_dict(), path)

    def resume(self, path: str | Path) -> None:
        """Load a checkpoint written by `save`; the next `fit` continues where it stopped."""
        self.history = History(**restore_training(self, path))


def seed_everything(seed: int) -> None:
    """Seed Python's and PyTorch's random number generators."""
    random.seed(seed)
    torch.manual_seed(seed)
