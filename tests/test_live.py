"""vitcourse.live: the live figure of curves and attention maps, in a notebook and as a PNG."""

from pathlib import Path

import pytest
import torch

from vitcourse.analysis import attention_rollout
from vitcourse.training.loop import TrainConfig, Trainer
from vitcourse.vit import VisionTransformer

LIVE_NOTEBOOK = """
import torch
from tests.conftest import TINY_VIT, make_toy_loaders
from vitcourse.live import LivePlot
from vitcourse.training.loop import TrainConfig, Trainer
from vitcourse.vit import VisionTransformer

torch.manual_seed(0)
loaders = make_toy_loaders()
live = LivePlot(next(iter(loaders.val))[0][:3], every_steps=1, every_seconds=1e9)
trainer = Trainer(VisionTransformer(TINY_VIT), loaders, TrainConfig(epochs=3), [live], device="cpu")
trainer.fit()
print("updates", live.updates)
print("display handle:", live.handle is not None)
"""


@pytest.mark.slow  # starts a Jupyter kernel
def test_live_plot_updates_one_display_when_executed_headless(tmp_path, toy_loaders):
    """Executed as a notebook (nbclient, as nbmake does): one image output however many updates."""
    import nbformat
    from nbclient import NotebookClient

    root = Path(__file__).resolve().parent.parent
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(f"import sys; sys.path.insert(0, {str(root)!r})"),
        nbformat.v4.new_code_cell(LIVE_NOTEBOOK),
    ]
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = nb.cells[1].outputs
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    updates = int(printed.split("updates")[1].split()[0])
    assert updates >= 3 * len(toy_loaders().train)  # refreshed after every step...
    assert len(images) == 1  # ...into one display, not one image per update
    assert "display handle: True" in printed  # updated in place through one display handle


def test_live_plot_draws_attention_and_saves_png(tmp_path, tiny_vit, toy_loaders):
    from vitcourse.live import LivePlot, cls_attention

    torch.manual_seed(0)
    loaders = toy_loaders()
    images = next(iter(loaders.val))[0][:2]
    model = VisionTransformer(tiny_vit)
    panels = cls_attention(model, images)
    assert panels["heads"].shape == (2, 2, 2, 2)  # (B, h, g, g) for a 2x2 patch grid
    assert panels["layers"].shape == (2, 2, 2, 2)  # (B, L, g, g)
    maps = model.eval().attention_maps(images)
    torch.testing.assert_close(panels["heads"][:, 1], maps[-1, :, 1, 0, 1:].reshape(2, 2, 2))
    torch.testing.assert_close(
        panels["rollout"], attention_rollout(maps)[:, 0, 1:].reshape(2, 2, 2)
    )
    live = LivePlot(images, png=tmp_path / "attention.png", show=False)
    trainer = Trainer(model, loaders, TrainConfig(epochs=1), [live], device="cpu")
    trainer.fit()
    assert (tmp_path / "attention.png").stat().st_size > 10_000
    # Accuracy in percent on the axis, as in the title: each epoch's training and validation.
    last = trainer.history.epochs[-1]
    assert live.val_acc_line.get_ydata()[-1] == pytest.approx(100 * last["val_acc"])
    assert live.train_acc_line.get_ydata()[-1] == pytest.approx(100 * last["train_acc"])
    assert live.acc_ax.get_title() == f"accuracy (validation: {100 * last['val_acc']:.1f}%)"
    assert live.acc_ax.get_ylabel() == "%" and live.acc_ax.get_ylim()[1] > 5  # not fractions
    # Validation at the end of the epoch, the training mean at its middle, in passes over the data.
    assert live.val_acc_line.get_xdata()[-1] == 1.0 and live.train_acc_line.get_xdata()[-1] == 0.5


def test_percent_leaves_a_gap_for_a_model_without_accuracy():
    import math

    from vitcourse.live import percent

    assert percent(0.875) == 87.5 and math.isnan(percent(None))


def test_layer_columns_and_overlay():
    from vitcourse.live import overlay, shown_layers

    assert shown_layers(3) == [0, 1, 2]
    assert shown_layers(6) == [0, 2, 3, 5]  # first, last, evenly between
    assert shown_layers(12) == [0, 4, 7, 11]
    m = torch.tensor([[0.0, 0.1], [0.2, 0.4]])
    rgba = overlay(m)
    assert rgba.shape == (2, 2, 4)
    assert rgba[1, 1, 3] == pytest.approx(0.85) and rgba[0, 0, 3] == 0.0  # opacity follows it
    assert rgba[0, 1, 3] == pytest.approx(0.85 / 4)
    assert (rgba[..., :3] == rgba[0, 0, :3]).all()  # one colour everywhere


def test_the_course_models_live_figure_is_readable_in_the_books_column():
    """The book shows a figure at most as wide as its column (book/_static/course.css: 768
    pixels at a 1280-pixel window) and notebooks at 100 dpi: every word of the course model's live
    figure must still be at least 12 pixels tall there (it was about 7: 8-point titles on a figure
    1,151 pixels wide)."""
    import matplotlib

    from vitcourse.live import LivePlot
    from vitcourse.presets import preset

    column, dpi = 768, 100  # measured in Chromium: the article less its padding
    model = VisionTransformer(preset("course-28/7"))
    live = LivePlot(torch.randn(4, 1, 28, 28), show=False)
    live._build(model)
    fig = live.fig
    assert len(fig.axes) == 2 + 4 * 9  # the curves, then 4 images x 9 columns of maps
    width = fig.get_figwidth() * dpi
    scale = min(1.0, column / width)
    assert scale > 0.85  # shown near its own size
    words = [t for ax in fig.axes for t in (ax.title, *ax.texts) if t.get_text()]
    words += [t for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
    smallest = min(t.get_fontsize() for t in words) * dpi / 72 * scale
    assert smallest >= 12, f"the smallest words are {smallest:.1f} pixels tall in the book"
    matplotlib.pyplot.close(fig)


def test_the_live_figures_words_are_in_the_translation_template():
    """The live figure's titles and legends go through `_` (vitcourse.language)."""
    from vitcourse.translation.catalogs import package_template

    catalog = package_template()
    for message in ("train (steps)", "train (epoch mean)", "accuracy (validation: {percent:.1f}%)",
                    "last, head {head}", "layer {layer}"):  # fmt: skip
        assert catalog.get(message) is not None, message
