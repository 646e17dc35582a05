"""Diagrams of the model, drawn from a config so their shapes are always the model's own.

- `model_map_figure` (notebooks 00 and 01, the README): the map of the course, after the ViT
  paper's Figure 1, each step labelled with its notebook.
- `architecture_figure` (notebook 05): the whole ViT, image to class
  scores, with the shape of what flows between the stages (the ViT paper's Figure 1, with numbers).
- `attention_shapes_figure` (notebook 03): the shapes inside multi-head self-attention.
- `norm_placement_figure` (notebook 04): pre-norm (the ViT's block) next to post-norm.

Each returns a matplotlib figure; the tests read its text back, so a shape drawn is a shape checked.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from vitcourse.language import _
from vitcourse.patching import draw_patch_grid
from vitcourse.vit import ViTConfig

_COLOURS = {
    "data": "#e8eef7",  # what flows: images, patches, tokens
    "layer": "#fde9d9",  # what learns: projections, blocks, the head
    "op": "#eeeeee",  # fixed operations: cutting, reshaping, softmax
}


def _box(
    ax, x: float, y: float, w: float, h: float, lines: list[str], kind: str, size: float = 8.5
) -> None:
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
    bold = {"ha": "center", "va": "center", "fontsize": size, "fontweight": "bold"}
    _fit(ax, ax.text(x, y + (0.28 * h if rest else 0), first, **bold), w)
    if rest:
        below = "\n".join(rest)
        text = ax.text(
            x, y - 0.1 * h, below, ha="center", va="center", fontsize=size - 1, linespacing=1.3
        )
        _fit(ax, text, w)


def _fit(ax, text, width: float, margin: float = 3.0) -> None:
    """Shrink `text` until it fits a box `width` wide (in data units) with `margin` pixels each
    side: the boxes are sized for the English, and another language's words may run longer."""
    get_renderer = getattr(ax.figure.canvas, "get_renderer", None)
    if get_renderer is None:  # a canvas that does not measure text (not Agg's): leave the size
        return
    ax.apply_aspect()  # the axes' final place, which an equal aspect moves
    renderer = get_renderer()
    room = ax.transData.transform((width, 0))[0] - ax.transData.transform((0, 0))[0] - 2 * margin
    while text.get_window_extent(renderer).width > room and text.get_fontsize() > 6:
        text.set_fontsize(text.get_fontsize() - 0.5)


def _arrow(ax, start: tuple[float, float], end: tuple[float, float]) -> None:
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color="#333333"))


def _chain(
    ax,
    steps: list[tuple[list[str], str]],
    y: float,
    width: float,
    gap: float,
    height: float = 1.1,
    size: float = 8.5,
) -> None:
    """Boxes left to right, each (lines, kind), joined by arrows."""
    for i, (lines, kind) in enumerate(steps):
        x = i * (width + gap) + width / 2
        _box(ax, x, y, width, height, lines, kind, size)
        if i:
            _arrow(ax, (x - width / 2 - gap, y), (x - width / 2, y))


def _canvas(width: float, height: float, figsize: tuple[float, float]):
    fig, ax = plt.subplots(figsize=figsize)
    fig.subplots_adjust(left=0.01, right=0.99, bottom=0.02, top=0.88)  # the drawing fills it
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
    steps = [([_("image"), f"{C} × {S} × {S}", "C × H × W"], "data")]
    if c.stem_channels:
        steps.append(
            (
                [
                    _("conv stem"),
                    _("{count} convolutions").format(count=len(c.stem_channels)),
                    f"→ {c.stem_channels[-1]} × {c.stem_size} × {c.stem_size}",
                    _("(hybrid, nb 08)"),
                ],
                "layer",
            )
        )
        C, S = c.stem_channels[-1], c.stem_size
    pooled = _("cls token") if c.pool == "cls" else _("mean of patches")
    pixels = _("({size}×{size} pixels; nb 01)").format(size=P)
    steps += [
        ([_("patches"), f"{N} × {P * P * C}", "N × P·P·C", pixels], "op"),
        ([_("patch embedding"), f"{N} × {D}", "N × D", _("(linear = conv; nb 02)")], "layer"),
        ([_("+ cls + positions"), f"{T} × {D}", "T × D, T = N + 1", _("(nb 02)")], "data"),
        (
            [
                _("{depth} × block").format(depth=c.depth),
                f"{T} × {D}",
                _("{heads} heads, MLP {width}").format(heads=c.num_heads, width=c.mlp_dim),
                _("(nb 03-04)"),
            ],
            "layer",
        ),
        ([_("LayerNorm, pool"), f"{D}", pooled, _("(nb 05)")], "op"),
        ([_("head"), f"{c.num_classes}", _("class scores"), _("(linear)")], "layer"),
    ]
    width, gap, height = 2.3, 0.3, 1.6
    total = len(steps) * (width + gap) - gap
    height_units = 3.0 if image is None else 4.8
    fig, ax = _canvas(total, height_units, figsize=(0.8 * total, 0.8 * height_units))
    _chain(ax, steps, -0.7 if image is not None else 0.0, width, gap, height, size=10.5)
    ax.set_title(
        _(
            "the ViT, image to class scores: {patches} patches of {size}×{size}, width {dim}, "
            "{depth} blocks (shapes for one image)"
        ).format(patches=c.num_patches, size=c.patch_size, dim=c.dim, depth=c.depth),
        fontsize=12,
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
        raise ValueError(
            _("dim {dim} is not divisible by heads {heads}").format(dim=dim, heads=heads)
        )
    T, D, h, d = tokens, dim, heads, dim // heads
    top = [
        (["x", f"{T} × {D}", "T × D"], "data"),
        ([_("qkv (linear)"), f"{T} × {3 * D}", "T × 3D"], "layer"),
        ([_("split heads"), f"3 × {h} × {T} × {d}", "3 × h × T × d"], "op"),
        (["q, k, v", _("each {shape}").format(shape=f"{h} × {T} × {d}"), "h × T × d"], "data"),
    ]
    bottom = [
        ([_("scores q·kᵀ/√d"), f"{h} × {T} × {T}", "h × T × T"], "op"),
        ([_("softmax (keys)"), f"{h} × {T} × {T}", _("rows sum to 1")], "op"),
        ([_("weights · v"), f"{h} × {T} × {d}", "h × T × d"], "op"),
        ([_("merge heads"), f"{T} × {D}", "T × D"], "op"),
        ([_("proj (linear)"), f"{T} × {D}", "T × D"], "layer"),
    ]
    width, gap = 1.7, 0.35
    total = len(bottom) * (width + gap) - gap
    fig, ax = _canvas(total, 3.4, figsize=(10, 3.6))
    _chain(ax, top, 0.85, width, gap, size=11)
    _chain(ax, bottom, -0.85, width, gap, size=11)
    last_top = (len(top) - 1) * (width + gap) + width / 2
    _arrow(ax, (last_top, 0.3), (width / 2, -0.3))
    ax.set_title(
        _("multi-head self-attention: T = {T} tokens, D = {D}, h = {h} heads of d = {d}").format(
            T=T, D=D, h=h, d=d
        ),
        fontsize=10,
    )
    return fig


def norm_placement_figure() -> plt.Figure:
    """Pre-norm (the ViT's block) and post-norm (the original Transformer's), side by side."""
    fig, axes = plt.subplots(2, 1, figsize=(9, 4.2))
    attention = _("attention")
    layouts = {  # title: (boxes, residual spans from a branch's input to its "+")
        _("pre-norm (ViT): x = x + attn(norm1(x)); x = x + mlp(norm2(x))"): (
            ["x", "LayerNorm", attention, "+", "LayerNorm", "MLP", "+"],
            [(0, 3), (3, 6)],
        ),
        _("post-norm (original Transformer): x = norm1(x + attn(x)); x = norm2(x + mlp(x))"): (
            ["x", attention, "+", "LayerNorm", "MLP", "+", "LayerNorm"],
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
        _(
            "blue: the residual path. Pre-norm keeps it free of normalisation; "
            "post-norm normalises it after every branch."
        ),
        ha="center",
        fontsize=8,
    )
    return fig


_NOTE = {"va": "center", "fontsize": 12, "color": "#222222", "linespacing": 1.4}


def model_map_figure(config: ViTConfig, image: torch.Tensor, label: str = "") -> plt.Figure:
    """The course's map: one image through the whole ViT for `config`, drawn as the ViT paper's
    Figure 1 draws it (patches, their embedding with the cls token and the positions, the encoder,
    the head), with the notebook that builds each step and the sizes between the steps. `image` is
    (C, H, W) with pixels in [0, 1]; `label`, if given, is written as the class it shows."""
    c = config
    if c.stem_channels:
        raise ValueError(
            _("model_map_figure draws a pure ViT (patches); this config has a conv stem")
        )
    C, S, N = c.in_channels, c.image_size, c.num_patches
    if tuple(image.shape) != (C, S, S):
        raise ValueError(
            _("expected an image of shape {expected} for this config, got {got}").format(
                expected=(C, S, S), got=tuple(image.shape)
            )
        )
    shown = list(range(N)) if N <= 16 else [*range(12), None, N - 2, N - 1]  # None: "…"
    x0 = 5.0  # the cls token's column, after the image; the patches' columns follow
    xs = [x0 + (i + 1) * 0.95 for i in range(len(shown))]
    bx = xs[-1] + 3.6  # the opened block's centre
    fig, ax = plt.subplots(figsize=(14, 6.2))
    ax.set_xlim(-0.3, bx + 3.0)
    ax.set_ylim(-0.8, 10.2)
    ax.set_aspect("equal")
    ax.axis("off")
    picture = image.detach().cpu().permute(1, 2, 0).numpy()
    _map_patches(ax, c, picture[..., 0] if C == 1 else picture, xs, shown)  # 01
    _map_tokens(ax, c, x0, xs, shown)  # 02
    _map_encoder_and_head(ax, c, x0, xs, label)  # 03-05
    _map_block(ax, c, bx)  # 03-04, opened
    _arrow(ax, (xs[-1] + 0.55, 6.35), (bx - 2.45, 6.35))
    ax.set_title(
        _(
            "The Vision Transformer, one notebook a step (after the ViT paper's Figure 1): "
            "{patches} patches of {size}×{size}, width {dim}, {depth} blocks of {heads} heads"
        ).format(patches=N, size=c.patch_size, dim=c.dim, depth=c.depth, heads=c.num_heads),
        fontsize=13,
    )
    return fig


def _map_patches(ax, c: ViTConfig, picture, xs: list[float], shown: list) -> None:
    """Notebook 01's row: the image with its patch grid, and its patches in reading order."""
    S, P, C, N = c.image_size, c.patch_size, c.in_channels, c.num_patches
    side, low, grid = 2.8, 0.1, S // P
    ax.imshow(picture, cmap="gray", extent=(1.0, 1.0 + side, low, low + side), vmin=0, vmax=1)
    for k in range(grid + 1):
        ax.plot([1.0 + k * side / grid] * 2, [low, low + side], color="tab:orange", linewidth=1.2)
        ax.plot([1.0, 1.0 + side], [low + k * side / grid] * 2, color="tab:orange", linewidth=1.2)
    image = _("{shape} image").format(shape=f"{C} × {S} × {S}")
    ax.text(1.0 + side / 2, -0.3, image, ha="center", va="center", fontsize=12)
    _arrow(ax, (1.15 + side, 1.2), (xs[0] - 0.5, 1.2))
    for x, n in zip(xs, shown, strict=True):
        if n is None:
            ax.text(x, 1.2, "…", ha="center", va="center", fontsize=14)
            continue
        row, col = divmod(n, grid)
        patch = picture[row * P : (row + 1) * P, col * P : (col + 1) * P]
        ax.imshow(patch, cmap="gray", vmin=0, vmax=1, extent=(x - 0.4, x + 0.4, 0.8, 1.6))
        ax.text(x, 0.5, str(n), fontsize=10, ha="center", va="center")
    cut = _("01 · cut into N = {N} patches of {shape} = {numbers} numbers").format(
        N=N, shape=f"{P}×{P}×{C}", numbers=P * P * C
    )
    ax.text(xs[0] - 0.45, -0.3, cut, ha="left", **_NOTE)


def _map_tokens(ax, c: ViTConfig, x0: float, xs: list[float], shown: list) -> None:
    """Notebook 02's rows: the projection of each patch, the cls token, the positions (circles)."""
    P, C, D = c.patch_size, c.in_channels, c.dim
    projection = _("02 · linear projection of each patch: {numbers} → {D} numbers").format(
        numbers=P * P * C, D=D
    )
    _box(ax, (xs[0] + xs[-1]) / 2, 2.6, xs[-1] - xs[0] + 0.9, 0.7, [projection], "layer", 12)
    for i, x in enumerate([x0, *xs]):
        if i and shown[i - 1] is None:
            ax.text(x, 3.9, "…", ha="center", va="center", fontsize=14)
            continue
        if i:
            _arrow(ax, (x, 1.65), (x, 2.23))
            _arrow(ax, (x, 2.97), (x, 3.6))
        token = FancyBboxPatch(
            (x - 0.32, 3.62),
            0.64,
            0.56,
            boxstyle="round,pad=0.02",
            facecolor="#f4b6c2" if i == 0 else _COLOURS["data"],
            edgecolor="#555555",
        )
        ax.add_patch(token)
        if i == 0:
            ax.text(x, 3.9, "cls", fontsize=10, ha="center", va="center")
        ax.add_patch(plt.Circle((x + 0.3, 4.3), 0.22, facecolor="#c9b6e4", edgecolor="#555555"))
        position = 0 if i == 0 else shown[i - 1] + 1
        ax.text(x + 0.3, 4.3, str(position), fontsize=9, ha="center", va="center")
    tokens = _("02 · + a cls token\n+ positions (circles):\n{T} tokens × {D}").format(
        T=c.num_tokens, D=D
    )
    ax.text(x0 - 0.8, 4.1, tokens, ha="right", **_NOTE)


def _map_encoder_and_head(ax, c: ViTConfig, x0: float, xs: list[float], label: str) -> None:
    """Notebooks 03-05: the encoder of L blocks, then the head on the cls token."""
    T, D = c.num_tokens, c.dim
    encoder = [
        _("transformer encoder: {depth} blocks").format(depth=c.depth),
        _("{shape} in, {shape} out").format(shape=f"{T} × {D}"),
    ]
    _box(ax, (x0 + xs[-1]) / 2, 6.35, xs[-1] - x0 + 1.0, 1.2, encoder, "layer", 13)
    for x in [x0, *xs]:
        _arrow(ax, (x, 4.55), (x, 5.73))
    looks = _("03-04 · each token\nlooks at every other\n(attention), then\ngoes through an MLP")
    ax.text(x0 - 0.8, 6.4, looks, ha="right", **_NOTE)
    _arrow(ax, (x0, 6.97), (x0, 8.23))
    head = [
        _("05 · head (LayerNorm, linear)"),
        _("cls token: {D} → {classes} scores").format(D=D, classes=c.num_classes),
    ]
    _box(ax, x0 + 3.5, 8.75, 7.0, 1.0, head, "layer", 11.5)
    answer = f"→ {label}" if label else _("→ one of {count} classes").format(count=c.num_classes)
    ax.text(x0 + 7.2, 8.95, answer, ha="left", va="center", fontsize=14, fontweight="bold")
    ax.text(x0 + 7.2, 8.4, _("06 · train it;  07 · look inside"), ha="left", **_NOTE)


def _map_block(ax, c: ViTConfig, bx: float) -> None:
    """One block, opened: pre-norm, with its two residual lines. Its boxes are wide enough for
    their words at the widest sizes the presets give (tests/test_diagrams.py measures them)."""
    D = c.dim
    mid, wide = bx + 0.35, 4.3  # the boxes' centre and width; the residual path runs left of them
    names = [
        ("LayerNorm", "op"),
        (_("attention, {heads} heads").format(heads=c.num_heads), "layer"),
        ("+", "op"),
        ("LayerNorm", "op"),
        (f"MLP {D}→{c.mlp_dim}→{D}", "layer"),
        ("+", "op"),
    ]
    ys = [4.0 + 0.98 * i for i in range(len(names))]
    frame = FancyBboxPatch(
        (bx - 2.4, 3.4),
        5.2,
        5.95,
        boxstyle="round,pad=0.05",
        facecolor="none",
        edgecolor="#999999",
        linestyle="--",
    )
    ax.add_patch(frame)
    title = _("03-04 · one block (× {depth})").format(depth=c.depth)
    ax.text(bx + 0.2, 9.7, title, ha="center", va="center", fontsize=13, weight="bold")
    for i, ((name, kind), y) in enumerate(zip(names, ys, strict=True)):
        _box(ax, mid, y, 0.55 if name == "+" else wide, 0.56, [name], kind, 10.5)
        if i:
            _arrow(ax, (mid, ys[i - 1] + 0.3), (mid, y - 0.3))
    for start, add in ((0, 2), (3, 5)):  # the residual path round each branch
        y0, y1 = ys[start] - 0.48, ys[add]
        left = mid - wide / 2 - 0.3
        path = [mid, left, left, mid - 0.28], [y0, y0, y1, y1]
        ax.plot(*path, color="tab:blue", lw=2)
    blue = {"ha": "center", "va": "center", "fontsize": 11, "color": "tab:blue"}
    ax.text(bx + 0.2, 3.0, _("blue: the residual path"), **blue)
