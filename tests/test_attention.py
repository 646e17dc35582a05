"""vitcourse.attention: scaled dot-product attention and multi-head self-attention, equal to
PyTorch's own."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vitcourse.attention import MultiHeadSelfAttention, scaled_dot_product_attention

# --- patching ------------------------------------------------------------------------------


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
