"""Diagrams of the model, drawn from a config so their shapes are always the model's own.

- `architecture_figure` (notebook 05; referred to from 01-04): the whole ViT, image to class
  scores, with the shape of what flows between the stages (the ViT paper's Figure 1, with numbers).
- `attention_shapes_figure` (notebook 03): the shapes inside multi-head self-attention.
- `norm_placement_figure` (notebook 04): pre-norm (the ViT's block) next to post-norm.

Each returns a matplotlib figure; the tests read its text back, so a shape drawn is a shape checked.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from vitcourse.patching import draw_patch_grid
from vitcourse.vit import ViTConfig

_COLOURS = {
    "data": "#e8eef7",  # what flows: images, patches, tokens
    "layer": "#fde9d9",  # what learns: projections, blocks, the head
    "op": "#eeeeee",  # fixed operations: cutting, reshaping, softmax
}


def _box(ax, x: float, y: float, w: float, h: float, lines: list[str], kind: str) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=_COLOURS[kind],
            edgecolor="#555555",
            linewidth=1,
        )
    )
    first, *rest = lines
    bold = {"ha": "center", "va": "center", "fontsize": 8.5, "fontweight": "bold"}
    ax.text(x, y + (0.28 * h if rest else 0), first, **bold)
    if rest:
        below = "\n".join(rest)
        ax.text(x, y - 0.1 * h, below, ha="center", va="center", fontsize=7.5, linespacing=1.3)


def _arrow(ax, start: tuple[float, float], end: tuple[float, float]) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#333333"))


def _chain(
    ax, steps: list[tuple[list[str], str]], y: float, width: float, gap: float, height: float = 1.1
) -> None:
    """Boxes left to right, each (lines, kind), joined by arrows."""
    for i, (lines, kind) in enumerate(steps):
        x = i * (width + gap) + width / 2
        _box(ax, x, y, width, height, lines, kind)
        if i:
            _arrow(ax, (x - width / 2 - gap, y), (x - width / 2, y))


def _canvas(width: float, height: float, figsize: tuple[float, float]):
    fig, ax = plt.subplots(figsize=figsize)
    ax.set_xlim(-0.2, width + 0.2)
    ax.set_ylim(-height / 2, height / 2)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def architecture_figure(config: ViTConfig, image: torch.Tensor | None = None) -> plt.Figure:
    """The whole ViT for `config`, stage by stage, with the shape of one image's data between
    stages (a batch adds B in front). With `image` (C, H, W, pixels in [0, 1]), it is drawn
    with its patch grid first."""
    c = config
    C, S, P, N, T, D = c.in_channels, c.image_size, c.patch_size, c.num_patches, c.num_tokens, c.dim
    steps = [(["image", f"{C} × {S} × {S}", "C × H × W"], "data")]
    if c.stem_channels:
        steps.append(
            (
                [
                    "conv stem",
                    f"{len(c.stem_channels)} convolutions",
                    f"→ {c.stem_channels[-1]} × {c.stem_size} × {c.stem_size}",
                    "(hybrid, nb 08)",
                ],
                "layer",
            )
        )
        C, S = c.stem_channels[-1], c.stem_size
    pooled = "cls token" if c.pool == "cls" else "mean of patches"
    steps += [
        (["patches", f"{N} × {P * P * C}", "N × P·P·C", f"({P}×{P} pixels; nb 01)"], "op"),
        (["patch embedding", f"{N} × {D}", "N × D", "(linear = conv; nb 02)"], "layer"),
        (["+ cls + positions", f"{T} × {D}", "T × D, T = N + 1", "(nb 02)"], "data"),
        (
            [
                f"{c.depth} × block",
                f"{T} × {D}",
                f"{c.num_heads} heads, MLP {c.mlp_dim}",
                "(nb 03-04)",
            ],
            "layer",
        ),
        (["LayerNorm, pool", f"{D}", pooled, "(nb 05)"], "op"),
        (["head", f"{c.num_classes}", "class scores", "(linear)"], "layer"),
    ]
    width, gap, height = 1.75, 0.35, 1.6
    total = len(steps) * (width + gap) - gap
    height_units = 3.0 if image is None else 4.8
    fig, ax = _canvas(total, height_units, figsize=(0.95 * total, 0.95 * height_units))
    _chain(ax, steps, -0.7 if image is not None else 0.0, width, gap, height)
    ax.set_title(
        f"the ViT, image to class scores: {c.num_patches} patches of {c.patch_size}×"
        f"{c.patch_size}, width {c.dim}, {c.depth} blocks (shapes for one image)",
        fontsize=10,
    )
    if image is not None:  # the image itself, with its patch grid, above the first box
        inset = ax.inset_axes([0.2, 0.25, 1.35, 1.35], transform=ax.transData)
        grid = c.patch_size if not c.stem_channels else image.shape[-1]  # a stem makes its own
        draw_patch_grid(image, grid, ax=inset, numbers=False)
        inset.axis("off")
    return fig


def attention_shapes_figure(tokens: int, dim: int, heads: int) -> plt.Figure:
    """Multi-head self-attention for T = `tokens` tokens of width D = `dim` split into h = `heads`
    heads of width d = D / h: every shape on the way (notebook 03)."""
    if dim % heads:
        raise ValueError(f"dim {dim} is not divisible by heads {heads}")
    T, D, h, d = tokens, dim, heads, dim // heads
    top = [
        (["x", f"{T} × {D}", "T × D"], "data"),
        (["qkv (linear)", f"{T} × {3 * D}", "T × 3D"], "layer"),
        (["split heads", f"3 × {h} × {T} × {d}", "3 × h × T × d"], "op"),
        (["q, k, v", f"each {h} × {T} × {d}", "h × T × d"], "data"),
    ]
    bottom = [
        (["scores q·kᵀ/√d", f"{h} × {T} × {T}", "h × T × T"], "op"),
        (["softmax (keys)", f"{h} × {T} × {T}", "rows sum to 1"], "op"),
        (["weights · v", f"{h} × {T} × {d}", "h × T × d"], "op"),
        (["merge heads", f"{T} × {D}", "T × D"], "op"),
        (["proj (linear)", f"{T} × {D}", "T × D"], "layer"),
    ]
    width, gap = 1.7, 0.35
    total = len(bottom) * (width + gap) - gap
    fig, ax = _canvas(total, 3.4, figsize=(10, 3.6))
    _chain(ax, top, 0.85, width, gap)
    _chain(ax, bottom, -0.85, width, gap)
    last_top = (len(top) - 1) * (width + gap) + width / 2
    _arrow(ax, (last_top, 0.3), (width / 2, -0.3))
    ax.set_title(
        f"multi-head self-attention: T = {T} tokens, D = {D}, h = {h} heads of d = {d}", fontsize=10
    )
    return fig


def norm_placement_figure() -> plt.Figure:
    """Pre-norm (the ViT's block) and post-norm (the original Transformer's), side by side."""
    fig, axes = plt.subplots(2, 1, figsize=(9, 4.2))
    layouts = {  # title: (boxes, residual spans from a branch's input to its "+")
        "pre-norm (ViT): x = x + attn(norm1(x)); x = x + mlp(norm2(x))": (
            ["x", "LayerNorm", "attention", "+", "LayerNorm", "MLP", "+"],
            [(0, 3), (3, 6)],
        ),
        "post-norm (original Transformer): x = norm1(x + attn(x)); x = norm2(x + mlp(x))": (
            ["x", "attention", "+", "LayerNorm", "MLP", "+", "LayerNorm"],
            [(0, 2), (3, 5)],
        ),
    }
    width, gap = 1.35, 0.3
    kinds = {"x": "data", "+": "op", "LayerNorm": "op"}
    for ax, (title, (names, spans)) in zip(axes, layouts.items(), strict=True):
        total = len(names) * (width + gap) - gap
        ax.set_xlim(-0.2, total + 0.2)
        ax.set_ylim(-0.9, 1.4)
        ax.set_aspect("equal")
        ax.axis("off")
        _chain(ax, [([n], kinds.get(n, "layer")) for n in names], 0.0, width, gap)
        for start, add in spans:  # the residual path, round the branch, unchanged
            x0 = start * (width + gap) + width / 2
            x1 = add * (width + gap) + width / 2
            ax.plot([x0, x0, x1, x1], [0.55, 1.05, 1.05, 0.55], color="tab:blue", linewidth=1.5)
        ax.set_title(title, fontsize=9)
    fig.text(
        0.5,
        0.01,
        "blue: the residual path. Pre-norm keeps it free of normalisation; "
        "post-norm normalises it after every branch.",
        ha="center",
        fontsize=8,
    )
    return fig
