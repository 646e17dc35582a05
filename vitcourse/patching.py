"""Patches: an image as a sequence of P x P squares, the "16x16 words" of the ViT paper (section 3.1).

Introduced in notebook 01. A transformer reads a sequence of vectors; the ViT's idea is to cut an
image (C, H, W) into N = (H/P)(W/P) patches and flatten each into a vector of P*P*C numbers.
Patches are walked row by row, left to right, like reading a page: patch n sits at grid row
n // (W/P), column n % (W/P). Inside a patch the numbers are ordered (row, column, channel).
"""

from __future__ import annotations

import torch

from vitcourse.language import _


def check_patchable(height: int, width: int, patch_size: int) -> None:
    """Raise a ValueError unless both image sides are whole multiples of the patch size."""
    if patch_size < 1:
        message = _("patch size must be a positive number of pixels, got {patch_size}")
        raise ValueError(message.format(patch_size=patch_size))
    if height % patch_size:
        message = _("image height {size} is not a multiple of patch size {patch_size}")
        raise ValueError(message.format(size=height, patch_size=patch_size))
    if width % patch_size:
        message = _("image width {size} is not a multiple of patch size {patch_size}")
        raise ValueError(message.format(size=width, patch_size=patch_size))


def patchify(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """(B, C, H, W) images -> (B, N, P*P*C) flattened patches, row by row, left to right."""
    if images.ndim != 4:
        message = _("expected a batch of images (B, C, H, W), got shape {shape}")
        raise ValueError(message.format(shape=tuple(images.shape)))
    B, C, H, W = images.shape
    check_patchable(H, W, patch_size)
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P)  # split each side into (grid, pixel in patch)
    x = x.permute(0, 2, 4, 3, 5, 1)  # (B, C, H/P, P, W/P, P) -> (B, H/P, W/P, P, P, C)
    return x.reshape(B, (H // P) * (W // P), P * P * C)  # -> (B, N, P*P*C)


def unpatchify(
    patches: torch.Tensor, patch_size: int, image_size: int | tuple[int, int] | None = None
) -> torch.Tensor:
    """(B, N, P*P*C) patches -> (B, C, H, W) images: the inverse of `patchify`.

    `image_size` is (H, W) or a single side for square images; left out, the grid is square.
    """
    if patches.ndim != 3:
        message = _("expected patches (B, N, P*P*C), got shape {shape}")
        raise ValueError(message.format(shape=tuple(patches.shape)))
    B, N, K = patches.shape
    P = patch_size
    if image_size is None:
        side = round(N**0.5)
        if side * side != N:
            message = _("{count} patches do not make a square grid: pass image_size=(H, W)")
            raise ValueError(message.format(count=N))
        image_size = side * P
    H, W = (image_size, image_size) if isinstance(image_size, int) else image_size
    check_patchable(H, W, P)
    if N != (H // P) * (W // P) or K % (P * P):
        message = _(
            "patches of shape {shape} do not tile a {height}x{width} image "
            "with patch size {patch_size}: expected {count} patches of P*P*C numbers"
        )
        shape, count = tuple(patches.shape), (H // P) * (W // P)
        raise ValueError(message.format(shape=shape, height=H, width=W, patch_size=P, count=count))
    C = K // (P * P)
    x = patches.reshape(B, H // P, W // P, P, P, C)
    x = x.permute(0, 5, 1, 3, 2, 4)  # (B, H/P, W/P, P, P, C) -> (B, C, H/P, P, W/P, P)
    return x.reshape(B, C, H, W)


def draw_patch_grid(image: torch.Tensor, patch_size: int, ax=None, numbers: bool = True):
    """Draw one (C, H, W) image with its patch grid on top, each patch numbered in reading order.

    Expects pixels in [0, 1] (use `vitcourse.data.loading.denormalize` first). Returns the
    matplotlib axes.
    """
    import matplotlib.pyplot as plt  # here, so the model's modules import only torch

    C, H, W = image.shape
    check_patchable(H, W, patch_size)
    ax = ax or plt.gca()
    picture = image.detach().cpu().permute(1, 2, 0).numpy()  # (C, H, W) -> (H, W, C) for imshow
    ax.imshow(picture[..., 0] if C == 1 else picture, cmap="gray", extent=(0, W, H, 0))
    for x in range(0, W + 1, patch_size):
        ax.axvline(x, color="tab:orange", linewidth=1)
    for y in range(0, H + 1, patch_size):
        ax.axhline(y, color="tab:orange", linewidth=1)
    if numbers:
        columns = W // patch_size
        for n in range((H // patch_size) * columns):
            row, col = divmod(n, columns)
            ax.text(
                (col + 0.5) * patch_size,
                (row + 0.5) * patch_size,
                str(n),
                color="white",  # on a dark label, readable on bright and dark patches alike
                ha="center",
                va="center",
                fontsize=7,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "black", "alpha": 0.6, "lw": 0},
            )
    ax.set_xticks([])
    ax.set_yticks([])
    return ax
