"""Interactive explorers for notebooks 01-03, built with ipywidgets.

Each explorer is a thin slider panel around a figure function that does the work. The figure
functions are tested and the notebooks call each one once directly: ipywidgets shows and then
swallows exceptions raised inside its callbacks, so a widget alone would hide a failure from CI.
"""

from __future__ import annotations

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import display
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.ticker import MaxNLocator

from vitcourse.embedding import position_similarity
from vitcourse.language import _, number
from vitcourse.patching import draw_patch_grid, patchify

# Weights over a picture: orange, from see-through (an even share) to mostly opaque (the largest
# weight); the same orange as the live training figure's (`vitcourse.live.overlay`).
_OVERLAY = LinearSegmentedColormap.from_list(
    "overlay", [(1.0, 0.35, 0.0, 0.0), (1.0, 0.35, 0.0, 0.85)]
)
# A cell of a map is drawn fully orange when its weight is this many times its even share (or
# the map's largest weight, if larger): 4x is a head that clearly picks a few patches.
PEAK = 4.0

# --- notebook 01: patch size -----------------------------------------------------------------


def valid_patch_sizes(side: int) -> list[int]:
    """Patch sizes that tile an image side exactly, from 2 pixels up to half the side."""
    return [p for p in range(2, side // 2 + 1) if side % p == 0]


def patch_grid_figure(image: torch.Tensor, patch_size: int) -> plt.Figure:
    """One (C, H, W) image in [0, 1] cut into patches: the grid, the token sequence, the cost.

    Left, the image with its numbered patch grid; right, the patches laid out in sequence order,
    as the transformer reads them. The title gives the sequence length N and the size of the
    N x N attention matrix, which grows with the square of N.
    """
    C, H, W = image.shape
    patches = patchify(image[None].detach().cpu(), patch_size)[0]  # (N, P*P*C)
    N = patches.shape[0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4), gridspec_kw={"width_ratios": [1, 1.4]})
    draw_patch_grid(image, patch_size, ax=left, numbers=N <= 64)
    left.set_title(
        _("{height}x{width} image, {patch}x{patch} patches").format(
            height=H, width=W, patch=patch_size
        )
    )
    columns = min(N, 14)
    rows = -(-N // columns)  # ceiling division
    strip = torch.ones(rows * (patch_size + 1), columns * (patch_size + 1), C)
    for n in range(N):
        r, c = divmod(n, columns)
        square = patches[n].reshape(patch_size, patch_size, C)  # (P*P*C) -> (P, P, C)
        strip[
            r * (patch_size + 1) : r * (patch_size + 1) + patch_size,
            c * (patch_size + 1) : c * (patch_size + 1) + patch_size,
        ] = square
    strip = strip.numpy()
    right.imshow(strip[..., 0] if C == 1 else strip, cmap="gray", vmin=0, vmax=1)
    right.set_title(
        _(
            "the sequence: N = {tokens} tokens of {numbers} numbers\n"
            "attention compares every pair: {tokens}² = {scores} scores per head"
        ).format(tokens=N, numbers=patch_size * patch_size * C, scores=number(N * N))
    )
    right.axis("off")
    fig.tight_layout()
    return fig


def patch_size_explorer(image: torch.Tensor):
    """A slider over the patch sizes that tile `image` (C, H, W in [0, 1])."""

    sizes = valid_patch_sizes(image.shape[-1])
    start = 4 if 4 in sizes else sizes[0]
    slider = widgets.SelectionSlider(options=sizes, value=start, description=_("patch size"))
    return widgets.interactive(
        lambda patch_size: _show(patch_grid_figure(image, patch_size)), patch_size=slider
    )


# --- notebook 02: position embeddings ----------------------------------------------------------


def position_similarity_figure(pos_embed: torch.Tensor, row: int, col: int) -> plt.Figure:
    """How alike patch (row, col)'s position embedding is to every other patch's, as a heatmap."""
    similarity = position_similarity(pos_embed)  # (g, g, g, g)
    g = similarity.shape[0]
    if not (0 <= row < g and 0 <= col < g):
        raise ValueError(
            _("patch ({row}, {col}) is outside the {side}x{side} grid").format(
                row=row, col=col, side=g
            )
        )
    fig, ax = plt.subplots(figsize=(4.6, 4))
    # One colour scale for every patch: from the least alike pair of this embedding to 1 (a patch
    # with itself). A fixed -1..1 scale would show sin-cos positions, all 0.75 to 1 alike, as flat.
    low = similarity.min().item()
    image = ax.imshow(similarity[row, col].numpy(), cmap="viridis", vmin=low, vmax=1)
    ax.scatter([col], [row], marker="x", color="red")
    ax.set_title(_("cosine similarity with patch ({row}, {col})").format(row=row, col=col))
    ax.set_xticks(range(g))
    ax.set_yticks(range(g))
    ax.set_xlabel(_("column"))
    ax.set_ylabel(_("row"))
    bar = fig.colorbar(image, ax=ax, fraction=0.046)
    bar.set_label(
        _("cosine similarity ({low:.2f}: the least alike pair of patches)").format(low=low)
    )
    return fig


def position_similarity_explorer(pos_embed: torch.Tensor):
    """Sliders for a patch's row and column; shows its position embedding's similarities."""

    g = position_similarity(pos_embed).shape[0]
    return widgets.interactive(
        lambda row, col: _show(position_similarity_figure(pos_embed, row, col)),
        row=widgets.IntSlider(value=g // 2, min=0, max=g - 1, description=_("row")),
        col=widgets.IntSlider(value=g // 2, min=0, max=g - 1, description=_("column")),
    )


# --- notebook 03: attention --------------------------------------------------------------------


def attention_figure(
    weights: torch.Tensor, query: int, head: int, image: torch.Tensor | None = None
) -> plt.Figure:
    """One head's attention, and one query token's row of it.

    `weights` is (h, T, T) for one image. Left: the head's whole T x T matrix, the query's row
    marked. Right: that row; with the (C, H, W) `image` (pixels in [0, 1]) and a cls token plus a
    square grid of patches, the weights on the patches are laid over the image.
    """
    h, T, _keys = weights.shape
    if not (0 <= head < h and 0 <= query < T):
        raise ValueError(
            _("head {head} / query {query} out of range: {heads} heads, {tokens} tokens").format(
                head=head, query=query, heads=h, tokens=T
            )
        )
    matrix = weights[head].detach().float()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    shown = left.imshow(matrix.numpy(), cmap="magma", vmin=0)
    fig.colorbar(shown, ax=left, fraction=0.046, label=_("weight"))
    left.axhline(query, color="cyan", linewidth=1)
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.yaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_xlabel(_("key token (0: cls)"))
    left.set_ylabel(_("query token"))
    left.set_title(
        _("head {head}: every query's weights (rows sum to 1)").format(head=head), fontsize=10
    )
    row = matrix[query]
    g = round((T - 1) ** 0.5)
    if image is not None and g * g == T - 1:
        weights_map = heat_overlay(right, image, row[1:].reshape(g, g))
        fig.colorbar(weights_map, ax=right, fraction=0.046, label=_("weight on the patch"))
        right.set_title(
            _("query {query}'s weights on the patches (cls: {cls:.2f})").format(
                query=query, cls=row[0]
            ),
            fontsize=10,
        )
    else:
        right.bar(range(T), row.numpy())
        right.set_xlabel(_("key token"))
        right.set_title(_("query {query}'s weights").format(query=query))
    return fig


def attention_explorer(weights: torch.Tensor, image: torch.Tensor | None = None):
    """Pick a query token and a head; see where that token looks."""

    h, T, _keys = weights.shape
    return widgets.interactive(
        lambda query, head: _show(attention_figure(weights, query, head, image)),
        query=widgets.IntSlider(value=0, min=0, max=T - 1, description=_("query token")),
        head=widgets.IntSlider(value=0, min=0, max=h - 1, description=_("head")),
    )


def _show(fig: plt.Figure) -> None:
    """Display a figure once (inside a widget's output area) and free it."""

    display(fig)
    plt.close(fig)


# --- notebook 07: a trained model's attention ---------------------------------------------------


def heat_overlay(ax: plt.Axes, picture: torch.Tensor, heat: torch.Tensor, stretch: bool = False):
    """Draw a (C, H, W) picture in [0, 1] in grayscale, and a (g, g) map over it in orange
    (notebook 03's attention figure and notebook 07's).

    The map is drawn in `_OVERLAY`'s one hue. See-through up to the map's even share (its mean:
    what every cell would get if the weight were spread evenly), most opaque at the larger of
    the map's largest value and `PEAK` times that share: so the picture shows through where
    attention is flat or low (an untrained head's nearly even map is almost invisible), and only
    cells that stand out are coloured. With `stretch`, the map's smallest value is the
    see-through end and its largest the opaque one: that shows small differences in a nearly
    even map, so say so where it is used. A colour picture is shown as its luminance, so that the
    hue stands out. Returns the map's image, for a colour bar.
    """
    picture = picture.detach().float().cpu()
    if picture.shape[0] == 3:  # (3, H, W) RGB -> (1, H, W) luminance, ITU-R BT.601 weights
        luminance = torch.tensor([0.299, 0.587, 0.114])[:, None, None]
        picture = (luminance * picture).sum(dim=0, keepdim=True)
    H, W = picture.shape[-2:]
    ax.imshow(picture[0].numpy(), cmap="gray", vmin=0, vmax=1, extent=(0, W, H, 0))
    m = heat.detach().float().cpu()
    ax.axis("off")
    if stretch:
        low, top = m.min().item(), m.max().item()
    else:
        low = m.mean().item()
        top = max(m.max().item(), PEAK * low)
    if top <= low:  # one value everywhere: nothing stands out, nothing coloured
        top = low + 1e-12
    return ax.imshow(m.numpy(), cmap=_OVERLAY, vmin=low, vmax=top, extent=(0, W, H, 0))


def cls_attention_figure(
    weights: torch.Tensor, head: int, image: torch.Tensor, layer: int | None = None
) -> plt.Figure:
    """One head of a trained model, for one image: its whole attention matrix, and the cls row.

    `weights` is (h, T, T) for the (C, H, W) `image` (pixels in [0, 1]), T = a cls token plus a
    square grid of patches. Left: the head's T x T weights on a log colour scale (from 0.001 to 1,
    with 1/T, an even spread, marked on the colour bar): a trained head puts most of each row on a
    few tokens, which a linear scale would show as one bright dot on black. Right: the cls token's
    row, its weights on the patches laid over the image with `heat_overlay`.
    """
    h, T, _keys = weights.shape
    g = round((T - 1) ** 0.5)
    if not 0 <= head < h:
        raise ValueError(_("head {head} out of range: {heads} heads").format(head=head, heads=h))
    if g * g != T - 1:
        raise ValueError(
            _("{tokens} tokens are not a cls token plus a square grid of patches").format(tokens=T)
        )
    matrix = weights[head].detach().float().cpu()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2), layout="constrained")
    magma = plt.colormaps["magma"]
    shown = left.imshow(
        matrix.numpy(), cmap=magma.with_extremes(bad=magma(0.0)), norm="log", vmin=1e-3, vmax=1
    )
    left.add_patch(  # a frame round row 0: the cls token's weights
        plt.Rectangle((-0.5, -0.5), T, 1, fill=False, edgecolor="cyan", linewidth=1.5)
    )
    left.set_xlabel(_("key token (0 = cls)"))
    left.set_ylabel(_("query token (0 = cls, framed)"))
    if layer is not None:
        title = _(
            "layer {layer}, head {head}: every token's weights\n(log colour scale; rows sum to 1)"
        )
    else:
        title = _("head {head}: every token's weights\n(log colour scale; rows sum to 1)")
    left.set_title(title.format(layer=None if layer is None else layer + 1, head=head))
    bar = fig.colorbar(shown, ax=left, fraction=0.046)
    bar.ax.axhline(1 / T, color="cyan", linewidth=2)
    bar.set_label(_("attention weight (cyan: 1/{tokens}, even)").format(tokens=T))
    row = matrix[0]
    overlay = heat_overlay(right, image, row[1:].reshape(g, g))
    fig.colorbar(overlay, ax=right, fraction=0.046, label=_("weight on the patch"))
    right.set_title(
        _(
            "the cls token's weights on the patches\n(largest {largest:.2f}, on itself "
            "{itself:.2f})"
        ).format(largest=row[1:].max(), itself=row[0])
    )
    return fig


def cls_attention_explorer(maps: torch.Tensor, pictures: torch.Tensor):
    """Pick an image, a layer and a head; see where the cls token looks.

    `maps` are a model's attention maps (layers, B, h, T, T), `pictures` the B images (C, H, W) in
    [0, 1]. Each view is `cls_attention_figure`.
    """

    L, B, h, _queries, _keys = maps.shape
    return widgets.interactive(
        lambda image, layer, head: _show(
            cls_attention_figure(maps[layer, image], head, pictures[image], layer)
        ),
        image=widgets.IntSlider(value=0, min=0, max=B - 1, description=_("image")),
        layer=widgets.IntSlider(value=L - 1, min=0, max=L - 1, description=_("layer")),
        head=widgets.IntSlider(value=0, min=0, max=h - 1, description=_("head")),
    )
