"""vitcourse.widgets: the figure functions behind the explorers, the explorers' controls, and the
JupyterLab widget manager that makes them render."""

import re
import subprocess
import sys

import matplotlib
import pytest
import torch

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from vitcourse import widgets  # noqa: E402
from vitcourse.embedding import position_similarity, sincos_2d_position_embedding  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_valid_patch_sizes():
    assert widgets.valid_patch_sizes(28) == [2, 4, 7, 14]
    assert widgets.valid_patch_sizes(32) == [2, 4, 8, 16]


@pytest.mark.parametrize("patch_size", widgets.valid_patch_sizes(28))
def test_patch_grid_figure_shows_the_sequence(patch_size):
    image = torch.rand(1, 28, 28)
    fig = widgets.patch_grid_figure(image, patch_size)
    left, right = fig.axes
    N = (28 // patch_size) ** 2
    assert f"N = {N} tokens" in right.get_title() and f"{N * N:,} scores" in right.get_title()
    strip = right.images[0].get_array()
    P = patch_size
    torch.testing.assert_close(torch.as_tensor(strip[:P, :P]), image[0, :P, :P])  # first patch
    torch.testing.assert_close(
        torch.as_tensor(strip[:P, P + 1 : 2 * P + 1]), image[0, :P, P : 2 * P]
    )


def test_position_similarity_known_answers():
    orthogonal = torch.eye(9)[None]  # (1, N, D), no cls token: every position unlike the others
    sim = position_similarity(orthogonal, num_prefix_tokens=0)
    assert sim.shape == (3, 3, 3, 3)
    torch.testing.assert_close(sim.reshape(9, 9), torch.eye(9))
    pos = sincos_2d_position_embedding(6, 32)
    sim = position_similarity(torch.cat([torch.zeros(1, 32), pos])[None])
    assert torch.allclose(sim[2, 3, 2, 3], torch.tensor(1.0))
    assert sim[2, 3, 2, 4] > sim[2, 3, 2, 5] > sim[2, 3, 5, 0]  # nearer patches are more alike
    with pytest.raises(ValueError, match="do not make a square grid"):
        position_similarity(torch.zeros(1, 8, 4))


def test_position_similarity_figure():
    pos = torch.randn(1, 17, 8)
    fig = widgets.position_similarity_figure(pos, 1, 2)
    shown = torch.as_tensor(fig.axes[0].images[0].get_array())
    torch.testing.assert_close(shown, position_similarity(pos)[1, 2])
    # the colours span this embedding's own range, the same for every patch the slider picks
    low, high = fig.axes[0].images[0].get_clim()
    assert low == pytest.approx(position_similarity(pos).min().item()) and high == 1
    with pytest.raises(ValueError, match=r"patch \(4, 0\) is outside the 4x4 grid"):
        widgets.position_similarity_figure(pos, 4, 0)


def test_attention_figure_overlays_the_query_row():
    weights = torch.rand(2, 17, 17).softmax(-1)
    fig = widgets.attention_figure(weights, query=5, head=1, image=torch.rand(3, 16, 16))
    left, right = fig.axes[:2]
    torch.testing.assert_close(torch.as_tensor(left.images[0].get_array()), weights[1])
    overlay = torch.as_tensor(right.images[1].get_array())
    torch.testing.assert_close(overlay, weights[1, 5, 1:].reshape(4, 4))
    bars = widgets.attention_figure(weights, query=0, head=0).axes[1].patches
    assert [b.get_height() for b in bars] == pytest.approx(weights[0, 0].tolist())
    with pytest.raises(ValueError, match="head 2 / query 0 out of range: 2 heads, 17 tokens"):
        widgets.attention_figure(weights, query=0, head=2)


def test_heat_overlay_keeps_the_picture_and_scales_the_map():
    fig, ax = plt.subplots()
    picture = torch.rand(3, 8, 8)  # colour: shown as its luminance, in gray
    heat = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
    shown = widgets.heat_overlay(ax, picture, heat)
    gray, overlay = ax.images
    assert shown is overlay
    luminance = 0.299 * picture[0] + 0.587 * picture[1] + 0.114 * picture[2]
    torch.testing.assert_close(torch.as_tensor(gray.get_array()), luminance)
    assert gray.get_cmap().name == "gray"
    torch.testing.assert_close(torch.as_tensor(overlay.get_array()), heat)
    rgba = torch.as_tensor(overlay.to_rgba(heat.numpy()))  # what the map's colours come to
    assert torch.allclose(rgba[..., :3], rgba[0, 0, :3])  # one hue
    alpha = rgba[..., 3]  # see-through up to the even share (0.25), opaque at 4x it (1.0)
    assert alpha[0, 0] == 0 and alpha[0, 1] == 0
    assert alpha[1, 1] == pytest.approx(0.85 * (0.4 - 0.25) / (1.0 - 0.25), abs=0.01)
    stretched = widgets.heat_overlay(ax, picture[:1], heat, stretch=True)
    assert stretched.norm.vmin == pytest.approx(0.1) and stretched.norm.vmax == pytest.approx(0.4)
    assert stretched.to_rgba(heat.numpy())[0, 0, 3] == 0  # see-through at the smallest value


def test_heat_overlay_lets_the_picture_show_through_flat_attention_and_colours_a_peak():
    """An untrained head spreads its weight nearly evenly: its map must not cover the picture in
    orange; a trained head's few chosen patches must stand out."""
    fig, ax = plt.subplots()
    picture = torch.rand(1, 16, 16)
    flat = torch.full((4, 4), 1 / 16) * (
        1 + 0.2 * torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    )
    shown = widgets.heat_overlay(ax, picture, flat / flat.sum())
    assert shown.to_rgba(shown.get_array())[..., 3].max() < 0.15  # the picture shows everywhere
    peaked = torch.full((4, 4), 0.1 / 15)
    peaked[1, 2] = 0.9
    shown = widgets.heat_overlay(ax, picture, peaked)
    alpha = shown.to_rgba(shown.get_array())[..., 3]
    assert alpha[1, 2] == pytest.approx(0.85, abs=0.01)  # the chosen patch: most opaque
    assert (alpha.sum() - alpha[1, 2]) == 0  # the rest: see-through
    even = widgets.heat_overlay(ax, picture, torch.full((4, 4), 1 / 16))
    assert even.to_rgba(even.get_array())[..., 3].max() == 0  # an even map colours nothing
    plt.close(fig)


def test_cls_attention_figure_draws_the_matrix_on_a_log_scale_and_the_cls_row():
    weights = torch.rand(3, 17, 17).softmax(-1)
    fig = widgets.cls_attention_figure(weights, head=2, image=torch.rand(1, 16, 16), layer=4)
    left, right = fig.axes[:2]
    matrix = left.images[0]
    torch.testing.assert_close(torch.as_tensor(matrix.get_array()), weights[2])
    assert isinstance(matrix.norm, matplotlib.colors.LogNorm)
    assert (matrix.norm.vmin, matrix.norm.vmax) == (1e-3, 1)
    assert left.get_title().startswith("layer 5, head 2") and "log colour scale" in left.get_title()
    overlay = right.images[1]
    torch.testing.assert_close(
        torch.as_tensor(overlay.get_array()), weights[2, 0, 1:].reshape(4, 4)
    )
    row = weights[2, 0, 1:]  # the cls row: see-through up to its even share, not stretched
    assert overlay.norm.vmin == pytest.approx(row.mean().item())
    with pytest.raises(ValueError, match="head 3 out of range: 3 heads"):
        widgets.cls_attention_figure(weights, head=3, image=torch.rand(1, 16, 16))
    with pytest.raises(ValueError, match="16 tokens are not a cls token plus a square grid"):
        widgets.cls_attention_figure(weights[:, :16, :16], head=0, image=torch.rand(1, 16, 16))


def test_explorers_offer_the_right_controls():
    patch = widgets.patch_size_explorer(torch.rand(1, 28, 28))
    assert list(patch.children[0].options) == [2, 4, 7, 14] and patch.children[0].value == 4
    position = widgets.position_similarity_explorer(torch.randn(1, 50, 16))
    assert [(c.min, c.max) for c in position.children[:2]] == [(0, 6), (0, 6)]
    attention = widgets.attention_explorer(torch.rand(4, 50, 50))
    assert [(c.min, c.max) for c in attention.children[:2]] == [(0, 49), (0, 3)]
    trained = widgets.cls_attention_explorer(torch.rand(6, 5, 4, 17, 17), torch.rand(5, 1, 28, 28))
    assert [(c.min, c.max, c.value) for c in trained.children[:3]] == [
        (0, 4, 0),
        (0, 5, 5),
        (0, 3, 0),
    ]


@pytest.mark.slow  # runs jupyter in a subprocess
def test_jupyterlab_renders_widgets():
    """The widget manager extension that ipywidgets 8 needs is installed and enabled."""
    result = subprocess.run(
        [sys.executable, "-m", "jupyter", "labextension", "list"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    listing = re.sub(r"\x1b\[[0-9;]*m", "", result.stdout + result.stderr)  # drop colours
    line = next((e for e in listing.splitlines() if "@jupyter-widgets/jupyterlab-manager" in e), "")
    assert "enabled" in line and "OK" in line, listing


def test_the_explorers_words_are_in_the_translation_template():
    """The explorers' slider descriptions, titles and labels go through `_` (vitcourse.language)."""
    from vitcourse.translation.catalogs import package_template

    catalog = package_template()
    for message in (
        "patch size",
        "query token",
        "the sequence: N = {tokens} tokens of {numbers} numbers\n"
        "attention compares every pair: {tokens}² = {scores} scores per head",
        "layer {layer}, head {head}: every token's weights\n(log colour scale; rows sum to 1)",
        "cosine similarity ({low:.2f}: the least alike pair of patches)",
    ):
        assert catalog.get(message) is not None, message
