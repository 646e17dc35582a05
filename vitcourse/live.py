"""A live training figure: loss and accuracy curves, and where the model looks, updated in place.

Introduced in notebook 06. `LivePlot` is a training callback. It draws one figure: the loss of
every training step and of each validation, each epoch's training and validation accuracy in
percent, and attention maps. It shows the figure once through an IPython display handle, and then
changes its artists in place and updates that one display, throttled to every few seconds: the
notebook keeps a single image however long the run, instead of one per update. The attention
panels follow a fixed set of validation images: the rollout through all layers
(`vitcourse.analysis.attention_rollout`), the cls token's attention over the patch grid for each
head of the last layer, and the mean over heads of up to four layers (the first, the last and
evenly between). Each map is laid over its image in one warm colour whose opacity follows the
attention, so the image stays visible where the model does not look, and every
map fills the same square whatever the grid size.
"""

from __future__ import annotations

import time
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from vitcourse.analysis import attention_rollout
from vitcourse.language import _
from vitcourse.training.callbacks import Callback
from vitcourse.training.loop import Trainer

# The figure's scale: inches per column of maps, and the size of its smallest words (points).
INCHES = 0.95
SMALL = 10


@torch.no_grad()
def cls_attention(model, images: torch.Tensor) -> dict[str, torch.Tensor]:
    """The cls token's attention over the patch grid, for drawing. Each map is (g, g):

    "heads": (B, h, g, g), last layer; "layers": (B, L, g, g), mean over heads; "rollout": (B, g, g).
    """
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    maps = model.attention_maps(images.to(device)).float().cpu()  # (L, B, h, T, T)
    model.train(was_training)
    L, B, h, T, _keys = maps.shape
    first = getattr(
        model, "num_prefix_tokens", 1
    )  # the patches come after the cls (and dist) token
    g = round((T - first) ** 0.5)
    cls_row = maps[..., 0, first:]  # what the cls token reads on each patch: (L, B, h, N)
    return {
        "heads": cls_row[-1].reshape(B, h, g, g),
        "layers": cls_row.mean(dim=2).transpose(0, 1).reshape(B, L, g, g),
        "rollout": attention_rollout(maps)[:, 0, first:].reshape(B, g, g),
    }


class LivePlot(Callback):
    """Curves and attention maps during training, updated in one display.

    `images` are a few normalised validation images (B, C, H, W); `pictures` the same in [0, 1]
    for drawing (default: min-max scaled). Refreshes at most every `every_seconds` seconds, or every
    `every_steps` steps if given, and at each epoch's end. `png` saves the final figure.
    """

    def __init__(
        self,
        images: torch.Tensor,
        pictures: torch.Tensor | None = None,
        every_seconds: float = 10.0,
        every_steps: int | None = None,
        png: str | Path | None = None,
        show: bool = True,
    ):
        self.images = images
        if pictures is None:
            low, high = (
                images.amin(dim=(1, 2, 3), keepdim=True),
                images.amax(dim=(1, 2, 3), keepdim=True),
            )
            pictures = (images - low) / (high - low).clamp(min=1e-6)
        self.pictures = pictures
        self.every_seconds, self.every_steps = every_seconds, every_steps
        self.png, self.show = png, show
        self.handle, self.fig = None, None
        self.updates = 0

    def on_fit_start(self, trainer: Trainer) -> None:
        self._build(trainer.model)
        self.refresh(trainer)
        if self.show and _in_notebook():
            from IPython.display import display

            self.handle = display(self.fig, display_id=True)

    def on_step_end(self, trainer: Trainer, loss: float) -> None:
        due_time = time.monotonic() - self.last >= self.every_seconds
        due_steps = (
            self.every_steps is not None and trainer.steps_done - self.last_step >= self.every_steps
        )
        if due_time or due_steps:
            self.refresh(trainer)

    def on_epoch_end(self, trainer: Trainer, record: dict) -> None:
        self.refresh(trainer)

    def on_fit_end(self, trainer: Trainer) -> None:
        self.refresh(trainer)
        if self.png:
            self.save(self.png)

    def save(self, path: str | Path) -> Path:
        """Write the figure as it is now to a PNG file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fig.savefig(path, dpi=100)
        return path

    # --- drawing ------------------------------------------------------------------------------

    def _build(self, model) -> None:
        """Create the figure once; `refresh` only changes its artists' data."""
        panels = cls_attention(model, self.images)
        B, h = panels["heads"].shape[:2]
        L = panels["layers"].shape[1]
        self.layers = shown_layers(L)
        columns = 2 + h + len(self.layers)  # picture, rollout, last layer's heads, some layers
        # Each map row as tall as a column is wide, so the maps fill their cells: no white bands.
        # About 0.95 inch a column and words of 10-12 points: the course's model (9 columns) is
        # 8.6 inches wide, shown near its own size in a notebook or the book's column, where its
        # smallest words are still about 12 pixels tall (tests/test_live.py measures it).
        fig = plt.figure(figsize=(INCHES * columns, 3.3 + INCHES * B))
        grid = fig.add_gridspec(
            B + 2,
            columns,
            height_ratios=[2.2, 0.6] + [1] * B,
            hspace=0.25,
            wspace=0.06,
            left=0.05,
            right=0.99,
            top=0.95,
            bottom=0.01,
        )
        self._curves(fig, grid, columns)
        titles = (
            [_("image"), _("rollout")]
            + [_("last, head {head}").format(head=i) for i in range(h)]
            + [_("layer {layer}").format(layer=i + 1) for i in self.layers]
        )
        self.maps = []
        extent = (0, 1, 1, 0)
        for b in range(B):
            row = []
            picture = self.pictures[b].permute(1, 2, 0).cpu().numpy()
            for c in range(columns):
                ax = fig.add_subplot(grid[b + 2, c])
                ax.axis("off")
                if b == 0:
                    ax.set_title(titles[c], fontsize=SMALL)
                ax.imshow(
                    picture[..., 0] if picture.shape[-1] == 1 else picture,
                    cmap="gray",
                    extent=extent,
                )
                if c > 0:
                    blank = overlay(torch.zeros(2, 2))
                    row.append(ax.imshow(blank, extent=extent, interpolation="nearest"))
            self.maps.append(row)
        plt.close(fig)  # shown through the display handle only, never again by the inline backend
        self.fig = fig

    def _curves(self, fig, grid, columns: int) -> None:
        """The loss and accuracy plots at the top, empty until `refresh` fills them."""
        # The two plots side by side, a column apart for the accuracy's axis labels.
        self.loss_ax = fig.add_subplot(grid[0, : (columns - 1) // 2])
        self.acc_ax = fig.add_subplot(grid[0, (columns + 1) // 2 :])
        (self.step_line,) = self.loss_ax.plot(
            [], [], color="tab:blue", alpha=0.6, label=_("train (steps)")
        )
        (self.val_loss_line,) = self.loss_ax.plot(
            [], [], "o-", color="tab:orange", label=_("validation")
        )
        # Accuracy in percent, each epoch's: the mean over its training batches, and validation.
        (self.train_acc_line,) = self.acc_ax.plot(
            [], [], "o-", color="tab:blue", alpha=0.6, label=_("train (epoch mean)")
        )
        (self.val_acc_line,) = self.acc_ax.plot(
            [], [], "o-", color="tab:orange", label=_("validation")
        )
        self.loss_ax.set_xlabel(_("epoch"))
        self.loss_ax.set_title(_("loss"))
        self.loss_ax.legend(loc="upper right", fontsize=SMALL)
        self.acc_ax.set_xlabel(_("epoch"))
        self.acc_ax.set_ylabel("%")
        self.acc_ax.set_title(_("accuracy"))
        self.acc_ax.legend(loc="lower right", fontsize=SMALL)

    def refresh(self, trainer: Trainer) -> None:
        """Put the latest curves and attention maps into the figure, and update the display."""
        self.last, self.last_step = time.monotonic(), trainer.steps_done
        history = trainer.history
        per_epoch = max(trainer.steps_per_epoch, 1)
        steps = torch.arange(1, len(history.step_losses) + 1) / per_epoch
        self.step_line.set_data(steps.numpy(), history.step_losses)
        # An epoch's validation is measured at its end; its training accuracy is a mean over all
        # of it, so it is drawn at its middle. In passes over the data, like the steps: a last
        # epoch cut short by a time budget ends before a whole pass.
        ends = [r["steps"] / per_epoch for r in history.epochs]
        starts = [0.0, *ends][: len(ends)]
        middles = [(start + end) / 2 for start, end in zip(starts, ends, strict=True)]
        self.val_loss_line.set_data(ends, [r["val_loss"] for r in history.epochs])
        self.train_acc_line.set_data(middles, [percent(r.get("train_acc")) for r in history.epochs])
        self.val_acc_line.set_data(ends, [percent(r["val_acc"]) for r in history.epochs])
        if history.epochs and history.epochs[-1]["val_acc"] is not None:
            latest = percent(history.epochs[-1]["val_acc"])
            self.acc_ax.set_title(_("accuracy (validation: {percent:.1f}%)").format(percent=latest))
        for ax in (self.loss_ax, self.acc_ax):
            ax.relim()
            ax.autoscale_view()
        panels = cls_attention(trainer.model, self.images)
        for b, row in enumerate(self.maps):
            layers = [panels["layers"][b, i] for i in self.layers]
            maps = [panels["rollout"][b], *panels["heads"][b], *layers]
            for artist, m in zip(row, maps, strict=True):
                artist.set_data(overlay(m))
        self.updates += 1
        if self.handle is not None:
            self.handle.update(self.fig)


def percent(fraction: float | None) -> float:
    """A fraction as a percentage for the accuracy axis (nan, drawn as a gap, for None)."""
    return float("nan") if fraction is None else 100 * fraction


def shown_layers(depth: int, most: int = 4) -> list[int]:
    """Which layers get a column: all of them up to `most`, else the first, the last and evenly
    spaced ones between (0-based)."""
    if depth <= most:
        return list(range(depth))
    return sorted({round(i * (depth - 1) / (most - 1)) for i in range(most)})


def overlay(attention: torch.Tensor, colour=(1.0, 0.35, 0.0)) -> np.ndarray:
    """A (g, g) attention map as an RGBA image (g, g, 4): one warm colour, opaque where the map
    is at its largest and transparent where it is zero, each map scaled to its own maximum."""
    m = attention.detach().float().cpu()
    m = (m / m.max().clamp(min=1e-12)).numpy()
    rgba = np.empty((*m.shape, 4))
    rgba[..., :3] = colour
    rgba[..., 3] = 0.85 * m
    return rgba


def _in_notebook() -> bool:
    # IPython is there in Jupyter; the command-line trainer runs without it.
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and shell.__class__.__name__ != "TerminalInteractiveShell"
