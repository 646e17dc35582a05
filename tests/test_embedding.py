"""vitcourse.embedding: the patch embedding (a strided convolution = a linear map on patches), the
cls token and the position embeddings."""

import math

import pytest
import torch

from vitcourse.embedding import (
    PatchEmbedding,
    embed_tokens,
    resize_pos_embed,
    sincos_2d_position_embedding,
)
from vitcourse.patching import patchify

# --- patching ------------------------------------------------------------------------------


def test_patch_embedding_shape():
    embed = PatchEmbedding(image_size=32, patch_size=4, in_channels=3, dim=24)
    assert embed(torch.randn(5, 3, 32, 32)).shape == (5, 64, 24)
    assert embed.num_patches == 64 and embed.grid_size == 8


@pytest.mark.parametrize("C, P", [(1, 4), (3, 8)])
def test_patch_embedding_conv_equals_linear_on_patches(C, P):
    torch.manual_seed(0)
    embed = PatchEmbedding(image_size=32, patch_size=P, in_channels=C, dim=16)
    images = torch.randn(2, C, 32, 32)
    linear = embed.as_linear()
    torch.testing.assert_close(embed(images), linear(patchify(images, P)), rtol=1e-5, atol=1e-5)


def test_patch_embedding_guards():
    embed = PatchEmbedding(image_size=28, patch_size=4, in_channels=1, dim=8)
    with pytest.raises(ValueError, match="expected 1 image channels, got 3"):
        embed(torch.zeros(1, 3, 28, 28))
    with pytest.raises(ValueError, match="image width 30 is not a multiple of patch size 4"):
        embed(torch.zeros(1, 1, 28, 30))
    with pytest.raises(ValueError, match="image height 30 is not a multiple of patch size 4"):
        PatchEmbedding(image_size=30, patch_size=4, in_channels=1, dim=8)


def test_sincos_position_embedding():
    pos = sincos_2d_position_embedding(grid_size=4, dim=16)
    assert pos.shape == (16, 16)
    # sin^2 + cos^2 = 1 for each frequency: every row has the same norm, sqrt(D/2).
    torch.testing.assert_close(pos.norm(dim=1), torch.full((16,), math.sqrt(8.0)))
    assert len({tuple(row.tolist()) for row in pos}) == 16, "every position is distinct"
    # The first half encodes the row: patches in the same row share it.
    assert torch.equal(pos[0, :8], pos[3, :8]) and not torch.equal(pos[0, :8], pos[4, :8])
    assert torch.equal(pos[0, 8:], pos[4, 8:])  # ... and the second half the column
    with pytest.raises(ValueError, match="divisible by 4, got 10"):
        sincos_2d_position_embedding(4, 10)


def test_resize_pos_embed():
    pos = torch.randn(1, 1 + 16, 8)
    assert resize_pos_embed(pos, 4) is pos
    bigger = resize_pos_embed(pos, 8)
    assert bigger.shape == (1, 1 + 64, 8)
    assert torch.equal(bigger[:, 0], pos[:, 0]), "the cls token's embedding is kept"
    # A smooth ramp across the grid stays a ramp, just sampled more finely.
    ramp = torch.linspace(0, 1, 4).repeat(4, 1).reshape(1, 16, 1)
    resized = resize_pos_embed(torch.cat([torch.zeros(1, 1, 1), ramp], 1), 8)[0, 1:, 0]
    rows = resized.reshape(8, 8)
    assert torch.allclose(rows, rows[:1].expand(8, 8), atol=1e-6)  # constant down each column
    assert (rows[0, 1:] > rows[0, :-1]).all()  # increasing along the row
    with pytest.raises(ValueError, match="do not make a square grid"):
        resize_pos_embed(torch.zeros(1, 1 + 12, 8), 4)


def test_embed_tokens_puts_cls_first_and_adds_positions():
    tokens, cls, pos = torch.randn(3, 4, 6), torch.randn(1, 1, 6), torch.randn(1, 5, 6)
    out = embed_tokens(tokens, cls, pos)
    assert out.shape == (3, 5, 6)
    torch.testing.assert_close(out[:, 0], (cls + pos[:, :1]).expand(3, 1, 6)[:, 0])
    torch.testing.assert_close(out[:, 1:], tokens + pos[:, 1:])
