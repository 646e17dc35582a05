"""vitcourse.diagrams: the shapes the figures print are the model's own."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from vitcourse.diagrams import (  # noqa: E402
    architecture_figure,
    attention_shapes_figure,
    norm_placement_figure,
)
from vitcourse.presets import PRESETS, preset_for  # noqa: E402
from vitcourse.vit import VisionTransformer  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts] + [ax.get_title() for ax in fig.axes]


@pytest.mark.parametrize("dataset", ["fashion-mnist", "cifar100"])
def test_architecture_figure_shows_the_models_shapes(dataset):
    config = preset_for(dataset)
    model = VisionTransformer(config).eval()
    images = torch.zeros(1, config.in_channels, config.image_size, config.image_size)
    with torch.no_grad():
        tokens = model.embed(images)  # (1, T, D)
        patches = model.patch_embed(images)  # (1, N, D)
        logits = model(images)
    drawn = "\n".join(texts(architecture_figure(config)))
    P, C = config.patch_size, config.in_channels
    assert f"{patches.shape[1]} × {P * P * C}" in drawn  # the patches
    assert f"{patches.shape[1]} × {patches.shape[2]}" in drawn  # the patch embedding
    assert f"{tokens.shape[1]} × {tokens.shape[2]}" in drawn  # + cls + positions, and the blocks
    assert f"{config.depth} × block" in drawn
    assert f"\n{logits.shape[1]}\n" in f"\n{drawn}\n"  # the head's class scores
    assert "conv stem" not in drawn


def test_architecture_figure_of_a_hybrid_and_with_an_image():
    config = PRESETS["course-28/conv"]
    drawn = "\n".join(texts(architecture_figure(config)))
    assert "conv stem" in drawn and "→ 64 × 4 × 4" in drawn and "16 × 64" in drawn
    fig = architecture_figure(preset_for("fashion-mnist"), torch.rand(1, 28, 28))
    insets = [child for ax in fig.axes for child in ax.child_axes]
    assert any(inset.images for inset in insets)  # the image is drawn, with its patch grid


def test_attention_shapes_figure():
    drawn = "\n".join(texts(attention_shapes_figure(17, 128, 4)))
    for shape in ("17 × 128", "17 × 384", "3 × 4 × 17 × 32", "each 4 × 17 × 32", "4 × 17 × 17"):
        assert shape in drawn, shape
    assert "d = 32" in drawn
    with pytest.raises(ValueError, match="dim 10 is not divisible by heads 4"):
        attention_shapes_figure(5, 10, 4)


def test_norm_placement_figure_puts_the_norms_where_they_belong():
    fig = norm_placement_figure()
    pre, post = (
        [t.get_text() for t in ax.texts if t.get_text() in {"LayerNorm", "attention", "MLP", "+"}]
        for ax in fig.axes
    )
    assert pre == ["LayerNorm", "attention", "+", "LayerNorm", "MLP", "+"]  # norm before each
    assert post == ["attention", "+", "LayerNorm", "MLP", "+", "LayerNorm"]  # norm after each
    assert all(len(ax.lines) == 2 for ax in fig.axes)  # two residual paths in each block


@pytest.mark.parametrize("dataset", ["fashion-mnist", "cifar10"])
def test_the_map_shows_the_models_own_sizes_and_the_notebooks(dataset):
    from vitcourse.diagrams import model_map_figure

    config = preset_for(dataset)
    model = VisionTransformer(config).eval()
    image = torch.rand(config.in_channels, config.image_size, config.image_size)
    with torch.no_grad():
        tokens = model.embed(image[None])  # (1, T, D)
    fig = model_map_figure(config, image, "a label")
    drawn = "\n".join(texts(fig))
    T, D = tokens.shape[1], tokens.shape[2]
    assert f"{T} tokens × {D}" in drawn and f"{T} × {D} in, {T} × {D} out" in drawn
    assert f"N = {config.num_patches} patches" in drawn
    assert f"{config.depth} blocks" in drawn and f"{config.num_heads} heads" in drawn
    assert "→ a label" in drawn
    for step in ("01 ·", "02 ·", "03-04 ·", "05 ·", "06 ·"):  # every notebook's step is on it
        assert step in drawn, step
    shown_patches = len(fig.axes[0].images) - 1  # the image, then one picture per patch drawn
    # 16 patches or fewer are all drawn; 64 as 12, "…", the last two
    assert shown_patches == (config.num_patches if config.num_patches <= 16 else 14)


def test_the_map_refuses_what_it_cannot_draw():
    from vitcourse.diagrams import model_map_figure

    with pytest.raises(ValueError, match=r"expected an image of shape \(1, 28, 28\)"):
        model_map_figure(preset_for("fashion-mnist"), torch.rand(3, 32, 32))
    with pytest.raises(ValueError, match="conv stem"):
        model_map_figure(PRESETS["course-28/conv"], torch.rand(1, 28, 28))


def spilled_texts(fig) -> list[str]:
    """The texts written in a box (their anchor inside it) that run past its edges, or come
    within 3 pixels of them (at 100 dpi), as drawn."""
    from matplotlib.patches import FancyBboxPatch

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    spilled = []
    for ax in fig.axes:
        boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
        for text in ax.texts:
            anchor = ax.transData.transform(text.get_position())
            extent = text.get_window_extent(renderer)
            for box in boxes:
                frame = box.get_window_extent(renderer)
                # a text inside a box; the dashed frame round the block holds boxes, not words
                if frame.contains(*anchor) and box.get_linestyle() != "--":
                    if extent.x0 < frame.x0 + 3 or extent.x1 > frame.x1 - 3:
                        spilled.append(text.get_text())
    return spilled


@pytest.mark.parametrize("dataset", ["fashion-mnist", "cifar100"])
def test_the_maps_words_stay_inside_their_boxes(dataset):
    config = preset_for(dataset)
    image = torch.rand(config.in_channels, config.image_size, config.image_size)
    from vitcourse.diagrams import model_map_figure

    assert spilled_texts(model_map_figure(config, image, "Ankle boot")) == []


@pytest.mark.parametrize("dataset", ["fashion-mnist", "cifar100"])
def test_the_diagrams_speak_spanish_and_its_longer_words_still_fit(dataset):
    """The boxes are sized for the English; a longer word is shrunk to fit its box (`_fit`)."""
    from vitcourse.diagrams import model_map_figure
    from vitcourse.language import speaking

    config = preset_for(dataset)
    image = torch.rand(config.in_channels, config.image_size, config.image_size)
    with speaking("es"):
        figures = [
            model_map_figure(config, image, "Botín"),
            architecture_figure(config),
            architecture_figure(PRESETS["course-28/conv"]),
            attention_shapes_figure(config.num_tokens, config.dim, config.num_heads),
            norm_placement_figure(),
        ]
    words = " ".join(" ".join(texts(fig)) for fig in figures)
    for spanish in ("encoder transformer", "embedding de patches", "cabezas", "camino residual"):
        assert spanish in words
    assert [spilled_texts(fig) for fig in figures] == [[]] * len(figures)
