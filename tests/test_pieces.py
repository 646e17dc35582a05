"""The model's pieces, one module each: patching, embedding, attention, block."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vitcourse.attention import MultiHeadSelfAttention, scaled_dot_product_attention
from vitcourse.block import MLP, DropPath, TransformerBlock, layer_norm
from vitcourse.embedding import (
    PatchEmbedding,
    conv_bn_relu,
    embed_tokens,
    resize_pos_embed,
    sincos_2d_position_embedding,
)
from vitcourse.patching import draw_patch_grid, patchify, unpatchify

# --- patching ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "C, H, W, P", [(1, 28, 28, 4), (3, 32, 32, 8), (3, 12, 20, 4), (2, 6, 6, 6)]
)
def test_patchify_shapes_and_round_trip(C, H, W, P):
    images = torch.randn(2, C, H, W)
    patches = patchify(images, P)
    assert patches.shape == (2, (H // P) * (W // P), P * P * C)
    assert torch.equal(unpatchify(patches, P, (H, W)), images)


def test_patches_are_walked_row_by_row_and_hold_their_pixels():
    images = torch.arange(2 * 3 * 8 * 12, dtype=torch.float32).reshape(2, 3, 8, 12)
    patches = patchify(images, 4)  # a 2 x 3 grid of patches
    for n in range(6):
        row, col = divmod(n, 3)  # reading order: left to right, then the next row
        block = images[:, :, 4 * row : 4 * row + 4, 4 * col : 4 * col + 4]  # (B, C, P, P)
        assert torch.equal(patches[:, n], block.permute(0, 2, 3, 1).reshape(2, -1))


def test_patchify_rejects_sizes_that_do_not_divide():
    with pytest.raises(ValueError, match="image height 30 is not a multiple of patch size 4"):
        patchify(torch.zeros(1, 1, 30, 28), 4)
    with pytest.raises(ValueError, match="image width 30 is not a multiple of patch size 4"):
        patchify(torch.zeros(1, 1, 28, 30), 4)
    with pytest.raises(
        ValueError, match=r"expected a batch of images \(B, C, H, W\), got shape \(28, 28\)"
    ):
        patchify(torch.zeros(28, 28), 4)


def test_unpatchify_square_default_and_errors():
    images = torch.randn(1, 3, 16, 16)
    assert torch.equal(unpatchify(patchify(images, 4), 4), images)
    with pytest.raises(ValueError, match="do not make a square grid"):
        unpatchify(torch.zeros(1, 6, 48), 4)
    with pytest.raises(ValueError, match="do not tile a 16x16 image"):
        unpatchify(torch.zeros(1, 9, 48), 4, 16)


def test_draw_patch_grid_draws_every_line_and_number():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    draw_patch_grid(torch.rand(1, 28, 28), 7, ax=ax)
    assert len(ax.lines) == 5 + 5  # 4 patches a side: 5 vertical and 5 horizontal lines
    assert [t.get_text() for t in ax.texts] == [str(n) for n in range(16)]
    plt.close(fig)


# --- embedding -----------------------------------------------------------------------------


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


# --- attention -----------------------------------------------------------------------------


def test_scaled_dot_product_attention_equals_pytorch():
    torch.manual_seed(0)
    q, k, v = torch.randn(3, 2, 4, 10, 8).unbind(0)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (2, 4, 10, 8) and weights.shape == (2, 4, 10, 10)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, 4, 10))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=1e-5, atol=1e-5)


def test_attention_on_a_case_worked_by_hand():
    # One query that matches the second key perfectly and the first not at all.
    q = torch.tensor([[[0.0, 4.0]]])
    k = torch.tensor([[[4.0, 0.0], [0.0, 4.0]]])
    v = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    out, weights = scaled_dot_product_attention(q, k, v)
    scores = torch.tensor([0.0, 16.0]) / math.sqrt(2)
    torch.testing.assert_close(weights[0, 0], scores.softmax(0))
    torch.testing.assert_close(out[0, 0], scores.softmax(0))


@pytest.mark.parametrize("qkv_bias", [True, False])
def test_multi_head_attention_paths_agree(qkv_bias):
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(dim=32, num_heads=4, qkv_bias=qkv_bias).eval()
    x = torch.randn(3, 17, 32)
    fast = attn(x)
    slow, weights = attn(x, return_weights=True)
    assert fast.shape == (3, 17, 32) and weights.shape == (3, 4, 17, 17)
    torch.testing.assert_close(fast, slow, rtol=1e-5, atol=1e-5)


def test_multi_head_attention_equals_nn_multihead_attention():
    torch.manual_seed(0)
    ours = MultiHeadSelfAttention(dim=24, num_heads=3).eval()
    theirs = nn.MultiheadAttention(24, 3, batch_first=True).eval()
    with torch.no_grad():
        theirs.in_proj_weight.copy_(ours.qkv.weight)
        theirs.in_proj_bias.copy_(ours.qkv.bias)
        theirs.out_proj.weight.copy_(ours.proj.weight)
        theirs.out_proj.bias.copy_(ours.proj.bias)
    x = torch.randn(2, 9, 24)
    expected, expected_weights = theirs(x, x, x, need_weights=True, average_attn_weights=False)
    out, weights = ours(x, return_weights=True)
    torch.testing.assert_close(ours(x), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(weights, expected_weights, rtol=1e-5, atol=1e-5)


def test_multi_head_attention_heads_must_divide_dim():
    with pytest.raises(ValueError, match="dim 30 is not divisible by num_heads 4"):
        MultiHeadSelfAttention(dim=30, num_heads=4)


def test_attention_dropout_acts_only_in_training():
    torch.manual_seed(0)
    attn = MultiHeadSelfAttention(dim=16, num_heads=2, attn_dropout=0.5)
    x = torch.randn(2, 5, 16)
    attn.eval()
    torch.testing.assert_close(attn(x), attn(x))
    attn.train()
    assert not torch.allclose(attn(x), attn(x))


# --- block ---------------------------------------------------------------------------------


def test_mlp_and_block_shapes_and_names():
    assert MLP(16, 64)(torch.randn(2, 5, 16)).shape == (2, 5, 16)
    block = TransformerBlock(dim=16, num_heads=2, mlp_dim=64)
    assert [n for n, _ in block.named_children()][:4] == ["norm1", "attn", "norm2", "mlp"]
    x = torch.randn(2, 5, 16)
    y, weights = block(x, return_weights=True)
    assert y.shape == (2, 5, 16) and weights.shape == (2, 2, 5, 5)
    torch.testing.assert_close(block(x), y, rtol=1e-5, atol=1e-5)


def test_block_is_pre_norm_with_two_residuals():
    torch.manual_seed(0)
    block = TransformerBlock(dim=16, num_heads=2, mlp_dim=32).eval()
    x = torch.randn(2, 5, 16)
    h = x + block.attn(block.norm1(x))
    expected = h + block.mlp(block.norm2(h))
    torch.testing.assert_close(block(x), expected)


def test_drop_path_skips_whole_samples_and_keeps_the_mean():
    torch.manual_seed(0)
    drop = DropPath(0.25)
    x = torch.ones(4000, 3, 2)
    y = drop(x)
    per_sample = y.flatten(1)
    assert ((per_sample == 0).all(1) | (per_sample == 1 / 0.75).all(1)).all()
    assert abs((per_sample[:, 0] == 0).float().mean().item() - 0.25) < 0.03
    assert abs(y.mean().item() - 1) < 0.05
    drop.eval()
    assert torch.equal(drop(x), x)
    with pytest.raises(ValueError, match=r"drop-path rate must be in \[0, 1\), got 1.0"):
        DropPath(1.0)


def test_embed_tokens_puts_cls_first_and_adds_positions():
    tokens, cls, pos = torch.randn(3, 4, 6), torch.randn(1, 1, 6), torch.randn(1, 5, 6)
    out = embed_tokens(tokens, cls, pos)
    assert out.shape == (3, 5, 6)
    torch.testing.assert_close(out[:, 0], (cls + pos[:, :1]).expand(3, 1, 6)[:, 0])
    torch.testing.assert_close(out[:, 1:], tokens + pos[:, 1:])


def test_layer_norm_written_out_equals_pytorchs():
    x, weight, bias = torch.randn(2, 5, 8) * 3 + 1, torch.randn(8), torch.randn(8)
    torch.testing.assert_close(
        layer_norm(x, weight, bias, 1e-6), F.layer_norm(x, (8,), weight, bias, 1e-6)
    )


@pytest.mark.parametrize("stride, size, out", [(1, 5, 5), (2, 28, 14), (2, 7, 4)])
def test_conv_bn_relu_keeps_or_halves_the_size(stride, size, out):
    step = conv_bn_relu(3, 4, stride=stride)
    y = step(torch.randn(2, 3, size, size))
    assert y.shape == (2, 4, out, out) and (y >= 0).all()  # ReLU last
    assert step[0].bias is None  # the batch norm adds the bias
