"""Embeddings: patches to vectors, and where each patch sits (ViT paper, section 3.1, eq. 1).

Introduced in notebook 02. Each flattened patch is multiplied by one learned matrix E, giving a
D-dimensional token; that is exactly a convolution with a P x P kernel and stride P, which is how
`PatchEmbedding` computes it (the same numbers, with the weights kept in image shape, as timm
and torchvision store them). Attention itself
ignores order, so every token also gets a position embedding: learned (the paper's default) or a
fixed 2-D sine-cosine pattern; `embed_tokens` puts the cls token in front and adds the positions.
A hybrid ViT (section 3.1, notebook 08) first runs a few convolutions (`conv_bn_relu`) and cuts its
patches from their output instead of the image. `resize_pos_embed` stretches a grid of position embeddings to
another size, so a model trained on one resolution can run on another (paper, section 3.2).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vitcourse.language import _
from vitcourse.patching import check_patchable


def check_images(images: torch.Tensor, channels: int) -> None:
    """A clear error unless `images` are a batch (B, C, H, W) with `channels` channels."""
    if images.ndim != 4:
        message = _("expected images (B, C, H, W), got shape {shape}")
        raise ValueError(message.format(shape=tuple(images.shape)))
    if images.shape[1] != channels:
        message = _("expected {expected} image channels, got {channels}")
        raise ValueError(message.format(expected=channels, channels=images.shape[1]))


class PatchEmbedding(nn.Module):
    """(B, C, H, W) images -> (B, N, D) patch tokens, by a strided convolution named `proj`."""

    def __init__(self, image_size: int, patch_size: int, in_channels: int, dim: int):
        super().__init__()
        check_patchable(image_size, image_size, patch_size)
        self.image_size = image_size
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.grid_size = image_size // patch_size
        self.num_patches = self.grid_size**2
        # One P x P kernel per output channel, moved P pixels at a time: each patch is seen once.
        self.proj = nn.Conv2d(in_channels, dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        check_images(images, self.in_channels)
        check_patchable(images.shape[2], images.shape[3], self.patch_size)
        x = self.proj(images)  # (B, C, H, W) -> (B, D, H/P, W/P)
        return x.flatten(2).transpose(1, 2)  # -> (B, D, N) -> (B, N, D), patches in reading order

    def as_linear(self) -> nn.Linear:
        """The same projection as an `nn.Linear` acting on `patchify`'s output (B, N, P*P*C)."""
        D, C, P, _P = self.proj.weight.shape  # (D, C, P, P)
        linear = nn.Linear(P * P * C, D)
        with torch.no_grad():
            # patchify orders a patch's numbers (row, column, channel); the kernel is (D, C, P, P).
            linear.weight.copy_(self.proj.weight.permute(0, 2, 3, 1).reshape(D, P * P * C))
            linear.bias.copy_(self.proj.bias)
        return linear


def embed_tokens(
    patch_tokens: torch.Tensor, cls_token: torch.Tensor, pos_embed: torch.Tensor
) -> torch.Tensor:
    """(B, N, D) patch tokens -> (B, T, D): the cls token in front, position embeddings added.

    The paper's equation 1, z0 = [x_class; x_p E] + E_pos (notebook 02's exercise);
    `VisionTransformer.embed` calls it.
    """
    cls = cls_token.expand(patch_tokens.shape[0], -1, -1)  # (1, 1, D) -> (B, 1, D)
    return torch.cat([cls, patch_tokens], dim=1) + pos_embed  # (B, N, D) -> (B, T, D)


def conv_bn_relu(in_channels: int, out_channels: int, stride: int = 1) -> nn.Sequential:
    """A 3 x 3 convolution, batch normalisation, ReLU: one step of a hybrid ViT's stem (and of
    notebook 08's CNN).

    Stride 1 keeps the size; stride 2 halves it, rounding up (28 -> 14 -> 7 -> 4).
    No bias on the convolution: the batch norm right after it adds one.
    """
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(inplace=True),
    )


def sincos_2d_position_embedding(grid_size: int, dim: int) -> torch.Tensor:
    """Fixed 2-D sine-cosine position embeddings, (N, D) for a grid_size x grid_size grid.

    Half the channels encode the row and half the column; each half is sines and cosines of the
    position at frequencies from 1 down towards 1/10000, as in "Attention Is All You Need" (MAE's recipe).
    """
    if dim % 4:
        message = _("sin-cos position embeddings need dim divisible by 4, got {dim}")
        raise ValueError(message.format(dim=dim))
    rows, cols = torch.meshgrid(
        torch.arange(grid_size, dtype=torch.float64),
        torch.arange(grid_size, dtype=torch.float64),
        indexing="ij",
    )
    frequencies = 1.0 / 10000 ** (torch.arange(dim // 4, dtype=torch.float64) / (dim // 4))

    def encode(positions: torch.Tensor) -> torch.Tensor:  # (N,) -> (N, D/2)
        angles = positions.flatten()[:, None] * frequencies[None, :]
        return torch.cat([angles.sin(), angles.cos()], dim=1)

    return torch.cat([encode(rows), encode(cols)], dim=1).float()  # (N, D), reading order


def resize_pos_embed(
    pos_embed: torch.Tensor, new_grid_size: int, num_prefix_tokens: int = 1
) -> torch.Tensor:
    """Resize (1, prefix + N, D) position embeddings to a new square grid by bicubic interpolation.

    The cls token's embedding (the prefix) has no place on the grid and is kept as it is.
    """
    prefix, grid = pos_embed[:, :num_prefix_tokens], pos_embed[:, num_prefix_tokens:]
    _one, N, D = grid.shape
    old = round(N**0.5)
    if old * old != N:
        raise ValueError(_("{count} position embeddings do not make a square grid").format(count=N))
    if old == new_grid_size:
        return pos_embed
    grid = grid.reshape(1, old, old, D).permute(0, 3, 1, 2)  # (1, N, D) -> (1, D, g, g)
    grid = F.interpolate(
        grid, size=(new_grid_size, new_grid_size), mode="bicubic", align_corners=False
    )
    grid = grid.permute(0, 2, 3, 1).reshape(1, new_grid_size**2, D)  # -> (1, N', D)
    return torch.cat([prefix, grid], dim=1)


def position_similarity(pos_embed: torch.Tensor, num_prefix_tokens: int = 1) -> torch.Tensor:
    """Cosine similarity of every patch's position embedding with every other's, on the grid.

    `pos_embed` is (1, prefix + N, D) as stored in the model (or (N, D) with no prefix). Returns
    (g, g, g, g): entry [r, c] is a g x g map of how alike patch (r, c)'s embedding is to each
    patch's (the ViT paper's Figure 7, centre).
    """
    grid = pos_embed[0, num_prefix_tokens:] if pos_embed.ndim == 3 else pos_embed  # (N, D)
    N = grid.shape[0]
    g = round(N**0.5)
    if g * g != N:
        message = _(
            "{count} position embeddings (after {prefix} prefix token(s)) do not make a "
            "square grid; is num_prefix_tokens right for this model?"
        )
        raise ValueError(message.format(count=N, prefix=num_prefix_tokens))
    unit = F.normalize(grid.detach().float(), dim=-1)
    return (unit @ unit.T).reshape(g, g, g, g)  # (N, N) -> (g, g, g, g)
