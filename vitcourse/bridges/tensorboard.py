"""A training run in TensorBoard: its curves and attention maps, in TensorBoard's own app.

A bridge to where learners go next: TensorBoard is the dashboard much PyTorch code logs to.
`TensorBoardCallback` is a training callback (notebook 06's `Callback`, beside the live plot of
`vitcourse.live`) that writes a run into event files through `torch.utils.tensorboard`. Open them
with

    tensorboard --logdir runs/

and TensorBoard lists each folder under runs/ as a run, all on one axis of optimizer steps:

- SCALARS: `train/loss` (the mean of the last `every_steps` steps' losses) and
  `train/learning_rate` (the warm-up and cosine of `vitcourse.training.loop.learning_rate`), every
  `every_steps` steps; `epoch/train_loss`, `epoch/val_loss` and `epoch/val_acc` after each epoch
  (no accuracy for a model that does not classify, such as notebook 09's masked autoencoder).
- IMAGES: `attention`, where the cls token looks in a few fixed validation images (the rollout,
  the last layer's heads and some layers' means, as `vitcourse.live` draws them; ViT paper,
  section 4.5), before training and after every epoch, with a slider over the steps. A model
  without attention maps (notebook 08's CNN) writes the scalars only.

A resumed run goes on along the same step axis; what the interrupted run wrote after its
checkpoint is hidden by TensorBoard and written anew (`SummaryWriter`'s `purge_step`).
TensorBoard is an optional extra (pip install -r requirements-extras.txt): this module imports
without it, and the callback says how to install it.
"""

from __future__ import annotations

from pathlib import Path

import torch
from matplotlib.figure import Figure

from vitcourse.language import _
from vitcourse.live import cls_attention, overlay, shown_layers
from vitcourse.training.callbacks import Callback
from vitcourse.training.loop import Trainer

INSTALL = "pip install -r requirements-extras.txt"


class TensorBoardCallback(Callback):
    """Write a run's curves and attention maps as TensorBoard event files into `log_dir`.

    `images` are a few normalised images (B, C, H, W) whose attention maps are drawn (default:
    the first four of the validation split); `pictures` the same in [0, 1] for drawing (default:
    min-max scaled). The step scalars are written every `every_steps` steps: the default gives a
    few hundred points for the command line's CPU run (Fashion-MNIST: 430 steps an epoch, 10
    epochs), and the epoch scalars and maps after every epoch.
    """

    def __init__(
        self,
        log_dir: str | Path,
        images: torch.Tensor | None = None,
        pictures: torch.Tensor | None = None,
        every_steps: int = 10,
    ):
        try:  # the optional extra: asked for here, not when the module is imported
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as e:
            raise ImportError(
                _(
                    "TensorBoardCallback writes through torch.utils.tensorboard, which needs the "
                    "tensorboard package: {install}"
                ).format(install=INSTALL)
            ) from e
        if every_steps < 1:
            raise ValueError(
                _("{argument} must be at least 1, got {value}").format(
                    argument="every_steps", value=every_steps
                )
            )
        self.summary_writer = SummaryWriter
        self.log_dir = Path(log_dir)
        self.images, self.pictures = images, pictures
        self.every_steps = every_steps
        self.writer = None  # open from the start of `fit` to its end

    def on_fit_start(self, trainer: Trainer) -> None:
        # A run resumed from a checkpoint goes on from the step after it. Whatever an earlier
        # run wrote in this folder from that step on (it went on past its last checkpoint, or it
        # was another run) TensorBoard hides, so each step appears once, in order.
        self.writer = self.summary_writer(
            str(self.log_dir), purge_step=trainer.steps_done + 1, flush_secs=30
        )
        if self.images is None:
            self.images = first_images(trainer.loaders.val)
        if trainer.steps_done == 0:
            self._draw(trainer)  # the untrained model's maps, to compare with the trained ones

    def on_step_end(self, trainer: Trainer, loss: float) -> None:
        if trainer.steps_done % self.every_steps:
            return
        # The mean of the steps since the last point: no step's loss is left out of the curve.
        # The history holds every step, a resumed run's too, so a resumed curve goes on the same.
        recent = trainer.history.step_losses[-self.every_steps :]
        self.writer.add_scalar("train/loss", sum(recent) / len(recent), trainer.steps_done)
        lr = trainer.optimizer.param_groups[0]["lr"]  # the rate this step was taken with
        self.writer.add_scalar("train/learning_rate", lr, trainer.steps_done)

    def on_epoch_end(self, trainer: Trainer, record: dict) -> None:
        for name in ("train_loss", "val_loss", "val_acc"):
            if record.get(name) is not None:  # no val_acc for a model that does not classify
                self.writer.add_scalar(f"epoch/{name}", record[name], trainer.steps_done)
        self._draw(trainer)
        self.writer.flush()  # a TensorBoard open during training shows each epoch as it ends

    def on_fit_end(self, trainer: Trainer) -> None:
        # Also after Ctrl-C: the trainer calls on_fit_end when interrupted, and this writes what
        # is still queued, so the event files end with the last step taken.
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def _draw(self, trainer: Trainer) -> None:
        if hasattr(trainer.model, "attention_maps"):  # a ViT or DeiT student; not the CNN
            figure = attention_figure(trainer.model, self.images, self.pictures)
            self.writer.add_figure("attention", figure, trainer.steps_done)


def first_images(loader, count: int = 4) -> torch.Tensor:
    """The first `count` images of a loader's dataset, (B, C, H, W): the same ones every epoch
    and every run, however the loader shuffles."""
    dataset = loader.dataset
    return torch.stack([dataset[i][0] for i in range(min(count, len(dataset)))])


def attention_figure(model, images: torch.Tensor, pictures: torch.Tensor | None = None) -> Figure:
    """Where the cls token looks in each of `images` (normalised, B, C, H, W): one row per image
    with the picture, the rollout through all layers, each head of the last layer and the mean
    over heads of up to four layers, laid over the picture as in `vitcourse.live`.

    `pictures` are the images in [0, 1] for drawing (default: min-max scaled). The figure is a
    bare matplotlib `Figure`, not pyplot's: it draws on Agg in a notebook or on a headless
    machine alike, and leaves pyplot's backend and list of open figures alone.
    """
    panels = cls_attention(model, images)
    B, h = panels["heads"].shape[:2]
    layers = shown_layers(panels["layers"].shape[1])
    titles = [_("image"), _("rollout")] + [_("last, head {head}").format(head=i) for i in range(h)]
    titles += [_("layer {layer}").format(layer=i + 1) for i in layers]
    if pictures is None:
        pictures = unit_range(images)
    fig = Figure(figsize=(1.6 * len(titles), 0.3 + 1.6 * B), layout="tight")
    axes = fig.subplots(B, len(titles), squeeze=False)
    extent = (0, 1, 1, 0)  # every map fills the same square, whatever the grid size
    for b in range(B):
        picture = pictures[b].detach().float().cpu().permute(1, 2, 0).numpy()  # (H, W, C)
        some_layers = [panels["layers"][b, i] for i in layers]
        maps = [panels["rollout"][b], *panels["heads"][b], *some_layers]  # a column each
        for c, ax in enumerate(axes[b]):
            ax.axis("off")
            if b == 0:
                ax.set_title(titles[c], fontsize=8)
            gray = picture.shape[-1] == 1
            ax.imshow(picture[..., 0] if gray else picture, cmap="gray", extent=extent)
            if c > 0:  # the attention in one warm colour, opaque where the model looks
                ax.imshow(overlay(maps[c - 1]), extent=extent, interpolation="nearest")
    return fig


def unit_range(images: torch.Tensor) -> torch.Tensor:
    """Each image (B, C, H, W) scaled to [0, 1] by its own minimum and maximum, for drawing."""
    low = images.amin(dim=(1, 2, 3), keepdim=True)
    high = images.amax(dim=(1, 2, 3), keepdim=True)
    return (images - low) / (high - low).clamp(min=1e-6)
