"""The course's training recipe in PyTorch Lightning: `ViTModule` and `CourseDataModule`.

A bridge for learners who go on to Lightning (UvA's deep learning tutorial 15 trains its ViT
this way): the same model, data and recipe as notebook 06's `vitcourse.training.loop.Trainer`, in
Lightning's shape. Needs the extras: `pip install -r requirements-extras.txt`. Nothing else in
the package imports this module, so the course itself never needs Lightning.

    ViTModule(model, config)   a LightningModule: `training_step` is the course's loss, and
                               `configure_optimizers` its AdamW (`make_optimizer`) and schedule
                               (`learning_rate`, as a per-step LambdaLR); validation and test
                               measure loss and accuracy with torchmetrics
    CourseDataModule(...)      a LightningDataModule over `make_loaders`: the same train,
                               validation and test batches

How it maps to the course's Trainer. Lightning's automatic optimization does the steps of
`train_step` in the same order (forward, zero_grad, backward, clipping, step); the clipping is
`train_step`'s own call, the gradient norm of the model's parameters clipped to `config.grad_clip`
(`configure_gradient_clipping`). The learning rate of step k is `learning_rate(k / total,
config)`, set before the step, with `total` the Lightning trainer's `estimated_stepping_batches`.
Like `Trainer.fit`, a fresh run seeds torch's generator with `config.seed` (plus the process's
rank), so random crops and flips draw the same numbers. From the same initial weights and
batches, N Lightning steps on a CPU give the course's weights to the last bit
(tests/bridges/test_lightning.py). What differs:

- The length of training is the Lightning trainer's (`max_epochs` or `max_steps`), and must
  agree with `config.epochs`. There is no time budget: `TrainConfig(minutes=...)` is refused
  (`lightning.Trainer(max_time=...)` stops on the clock, but the schedule does not shrink).
- Checkpoints are Lightning's own (`ModelCheckpoint`, `ckpt_path=`), not
  `vitcourse.training.resuming`: no replay of the rest of an interrupted epoch, and no random
  states saved.
- From the second epoch on, the training images come in another order. torch's
  RandomSampler draws a spare permutation when its iterator is run to the end: the course's
  `for` loop runs it to the end, Lightning stops after `len(loader)` batches. The same
  recipe and data, shuffled differently.
- Under several processes Lightning's own DistributedSampler shares out the training images
  (not the course's `ShardSampler`), so the batches differ from `python -m vitcourse.train`'s.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import lightning
import torch
import torch.nn.functional as F
import torchmetrics
from torch import nn

from vitcourse.data.datasets import DatasetInfo
from vitcourse.data.loading import Loaders, load_dataset, make_loaders
from vitcourse.language import _
from vitcourse.training.loop import TrainConfig, learning_rate, make_optimizer, seed_everything


class ViTModule(lightning.LightningModule):
    """Trains `model` (any model the course's Trainer trains) as `config` says (default: the
    course's recipe, `TrainConfig()`). `config` may also be a dict of its fields, as Lightning's
    checkpoints keep it: `ViTModule.load_from_checkpoint(path, model=VisionTransformer(...))`."""

    def __init__(self, model: nn.Module, config: TrainConfig | dict | None = None):
        super().__init__()
        config = TrainConfig(**config) if isinstance(config, dict) else config or TrainConfig()
        if config.minutes is not None:
            raise ValueError(
                _(
                    "ViTModule has no time budget (TrainConfig(minutes={minutes})): its schedule "
                    "runs over steps. Give TrainConfig(epochs=...) and the same max_epochs to "
                    "lightning.Trainer; to stop on the clock as well, add lightning.Trainer("
                    "max_time={{'minutes': {minutes}}}) (the learning rate then stops before it has "
                    "decayed)"
                ).format(minutes=config.minutes)
            )
        # Lightning's checkpoints keep the config as a dict: plain types, which torch.load reads
        # safely (weights_only), as vitcourse.checkpoints keeps it.
        self.save_hyperparameters({"config": asdict(config)})
        self.model, self.config = model, config
        classes = model.config.num_classes
        # Validation and test each keep their own running sums, reset after every epoch.
        self.val_metrics, self.test_metrics = (
            nn.ModuleDict(
                {
                    "loss": torchmetrics.MeanMetric(),  # over images, as `evaluate` averages
                    "acc": torchmetrics.Accuracy(task="multiclass", num_classes=classes),
                }
            )
            for _copy in range(2)
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.model(images)  # (B, C, H, W) -> (B, classes)

    def on_train_start(self) -> None:
        if self.global_step == 0:  # as Trainer.fit: a fresh run seeds crops and flips
            seed_everything(self.config.seed + self.global_rank)

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        """The loss of `train_step`; Lightning then does zero_grad, backward, clipping, step."""
        images, labels = batch
        loss = F.cross_entropy(self(images), labels, label_smoothing=self.config.label_smoothing)
        self.log("train_loss", loss, prog_bar=True)
        self.log("lr", self.optimizers().param_groups[0]["lr"])  # this step's learning rate
        return loss

    def validation_step(self, batch, batch_idx: int) -> None:
        self._measure(batch, "val")

    def test_step(self, batch, batch_idx: int) -> None:
        self._measure(batch, "test")

    def _measure(self, batch, split: str) -> None:
        """Add a batch to the split's loss (no label smoothing, as `evaluate`) and accuracy;
        Lightning logs the averages over the whole split at the end of the epoch."""
        images, labels = batch
        logits = self(images)
        metrics = self.val_metrics if split == "val" else self.test_metrics
        metrics["loss"].update(F.cross_entropy(logits, labels, reduction="none"))
        metrics["acc"].update(logits, labels)
        self.log_dict({f"{split}_{name}": m for name, m in metrics.items()}, prog_bar=True)

    def configure_optimizers(self):
        """The course's AdamW, and its warm-up and cosine as a learning rate set every step."""
        optimizer = make_optimizer(self.model, self.config)
        total = self._total_steps()

        def factor(step: int) -> float:  # LambdaLR multiplies the peak rate, config.lr, by this
            return learning_rate(min(step / total, 1.0), self.config) / self.config.lr

        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def configure_gradient_clipping(
        self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None
    ) -> None:
        """Clip the gradient norm to `config.grad_clip` (0: no clipping), as `train_step`."""
        if gradient_clip_val is not None and gradient_clip_val != self.config.grad_clip:
            raise ValueError(
                _(
                    "lightning.Trainer(gradient_clip_val={given}) but TrainConfig(grad_clip="
                    "{clip}): ViTModule clips as its TrainConfig says, so leave gradient_clip_val "
                    "out"
                ).format(given=gradient_clip_val, clip=self.config.grad_clip)
            )
        # The call of `train_step`, over the parameters in the model's order. (Lightning's own
        # `self.clip_gradients` goes over the optimizer's groups, decayed weights first: it sums the
        # squares in another order, and a rounding apart, AdamW's steps drift a little apart.
        # Under FSDP or DeepSpeed, which split the parameters, use it instead.)
        if self.config.grad_clip:
            nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)

    def _total_steps(self) -> int:
        """The schedule's length: the Lightning trainer's steps, which must agree with the
        config's epochs unless `max_steps` sets them."""
        trainer, epochs = self.trainer, self.config.epochs
        if trainer.max_steps == -1 and trainer.max_epochs != epochs:
            raise ValueError(
                _(
                    "TrainConfig(epochs={epochs}) but lightning.Trainer(max_epochs={given}): the "
                    "schedule runs over the Lightning trainer's steps, so give it max_epochs="
                    "{epochs} (or max_steps=...)"
                ).format(epochs=epochs, given=trainer.max_epochs)
            )
        return int(trainer.estimated_stepping_batches)


class CourseDataModule(lightning.LightningDataModule):
    """The course's train, validation and test loaders (`make_loaders`, the same arguments)."""

    def __init__(
        self,
        name: str = "fashion-mnist",
        batch_size: int = 128,
        val_size: int = 5000,
        augment: bool = True,
        root: str | Path | None = None,
        seed: int = 0,
        limit: int | None = None,
        fraction: float = 1.0,
    ):
        super().__init__()
        root = str(root) if root is not None else None  # plain types in Lightning's checkpoints
        self.save_hyperparameters()
        self.loaders: Loaders | None = None  # made by `setup`

    def prepare_data(self) -> None:
        """Download the dataset if needed: Lightning runs this in one process only."""
        for train in (True, False):
            load_dataset(self.hparams.name, train=train, root=self.hparams.root)

    def setup(self, stage: str | None = None) -> None:
        if self.loaders is None:
            # On a GPU, make_loaders adds worker processes and pinned memory.
            device = self.trainer.strategy.root_device if self.trainer is not None else None
            self.loaders = make_loaders(**self.hparams, device=device)

    @property
    def info(self) -> DatasetInfo:
        """The dataset's `DatasetInfo` (classes, image size, ...), once set up."""
        return self._made().info

    def train_dataloader(self):
        return self._made().train

    def val_dataloader(self):
        return self._made().val

    def test_dataloader(self):
        return self._made().test

    def _made(self) -> Loaders:
        if self.loaders is None:
            raise RuntimeError(_("call setup() first (a lightning.Trainer calls it for you)"))
        return self.loaders
