"""vitcourse.block: LayerNorm written out, the MLP, drop path and the pre-norm block."""

import pytest
import torch
import torch.nn.functional as F

from vitcourse.block import MLP, DropPath, TransformerBlock, layer_norm

# --- patching ------------------------------------------------------------------------------


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


def test_layer_norm_written_out_equals_pytorchs():
    x, weight, bias = torch.randn(2, 5, 8) * 3 + 1, torch.randn(8), torch.randn(8)
    torch.testing.assert_close(
        layer_norm(x, weight, bias, 1e-6), F.layer_norm(x, (8,), weight, bias, 1e-6)
    )
