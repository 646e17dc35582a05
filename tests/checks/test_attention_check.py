"""vitcourse.checks.attention: attention and MultiHeadSelfAttention accept right answers and name
each mistake.
The wrong answers are written the way a learner would write them, not copied from the
checks' own simulations (`vitcourse.checks.attention_slips`)."""

import math

import pytest
import torch
from torch import nn

from vitcourse import checks
from vitcourse.attention import MultiHeadSelfAttention, scaled_dot_product_attention

# --- attention --------------------------------------------------------------------------------


def test_attention_accepts_both_good_forms():
    def by_hand(q, k, v):
        w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)
        return w @ v, w

    assert checks.check_attention(by_hand) is by_hand
    assert checks.check_attention(scaled_dot_product_attention) is scaled_dot_product_attention


def _attention(scale, dim, transpose_scores=False):
    def fn(q, k, v):
        scores = (k @ q.transpose(-2, -1)) if transpose_scores else (q @ k.transpose(-2, -1))
        w = torch.softmax(scores / scale(q.shape[-1]), dim=dim)
        return w @ v, w

    return fn


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_attention(lambda d: 1.0, -1), "not scaled: Vaswani et al. \\(2017\\), equation 1"),
        (_attention(lambda d: d, -1), "divide by √d, not by d"),
        (_attention(math.sqrt, 1 + 1), "softmax is over the wrong axis"),  # dim=2 on (B, h, T, T)
        (_attention(math.sqrt, -1, transpose_scores=True), "scores are transposed"),
        (lambda q, k, v: scaled_dot_product_attention(q, k, v)[0], "should return a pair"),
        (
            lambda q, k, v: (
                scaled_dot_product_attention(q, k, v)[1].transpose(-2, -1) @ v,
                scaled_dot_product_attention(q, k, v)[1],
            ),
            "transposed weights: token i's output",
        ),
    ],
)
def test_attention_mistakes(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_attention(fn)


class _MHSA(nn.Module):
    """A learner's multi-head attention with the skeleton's __init__ and a configurable forward."""

    def __init__(self, dim, num_heads, split="right", merge="right", proj=True, scale="d"):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, dim // num_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.split, self.merge, self.use_proj, self.scale = split, merge, proj, scale

    def forward(self, x):
        B, T, D = x.shape
        h, d = self.num_heads, self.head_dim
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # each (B, T, D)
        if self.split == "right":
            q, k, v = (t.reshape(B, T, h, d).transpose(1, 2) for t in (q, k, v))
        else:  # the classic slip: reshape straight to (B, h, T, d)
            q, k, v = (t.reshape(B, h, T, d) for t in (q, k, v))
        scale = {"d": math.sqrt(d), "D": math.sqrt(D), "none": 1.0}[self.scale]
        out = torch.softmax(q @ k.transpose(-2, -1) / scale, dim=-1) @ v
        out = (
            out.transpose(1, 2).reshape(B, T, D) if self.merge == "right" else out.reshape(B, T, D)
        )
        return self.proj(out) if self.use_proj else out


def _mhsa(**kwargs):
    return lambda dim, num_heads: _MHSA(dim, num_heads, **kwargs)


def test_multi_head_attention_accepts_good_answers():
    good = _mhsa()
    assert checks.check_multi_head_attention(good) is good
    assert checks.check_multi_head_attention(MultiHeadSelfAttention) is MultiHeadSelfAttention


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"split": "naive"}, "split without moving the head axis"),
        ({"split": "naive", "merge": "naive"}, "split \\(and merged\\) without moving"),
        ({"merge": "naive"}, "merged without moving the head axis back"),
        ({"proj": False}, "output projection is missing"),
        ({"scale": "D"}, "not by √D"),
        ({"scale": "none"}, "not scaled"),
    ],
)
def test_multi_head_attention_mistakes(kwargs, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_multi_head_attention(_mhsa(**kwargs))
