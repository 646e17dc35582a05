"""Checks for notebook 03's exercises: scaled dot-product `attention` and
`MultiHeadSelfAttention` (`vitcourse.attention`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from vitcourse import attention
from vitcourse.checks.harness import (
    call,
    compare,
    fail,
    randomized,
    run_with_reference_weights,
    seeded,
)
from vitcourse.checks.registry import exercise


@exercise("attention", "03_attention", attention.scaled_dot_product_attention)
def check_attention(fn: Callable) -> None:
    """Check `fn(q, k, v) -> (out, weights)` on (B, h, T, d) inputs."""
    q, k, v = (
        seeded(2, 3, 5, 8, seed=1) * 2,
        seeded(2, 3, 5, 8, seed=2) * 2,
        seeded(2, 3, 5, 8, seed=3),
    )
    result = call(fn, q.clone(), k.clone(), v.clone())
    if not (isinstance(result, tuple) and len(result) == 2):
        fail(
            f"it should return a pair (out, weights), got {type(result).__name__}",
            "end with: return weights @ v, weights",
        )
    out, weights = result
    expected_out, expected_weights = attention.scaled_dot_product_attention(q, k, v)
    scores = q @ k.transpose(-2, -1)
    weight_mistakes = [
        (
            "the scores are not scaled: divide q @ k^T by sqrt(d), d the width of q, before the softmax.",
            lambda: scores.softmax(-1),
        ),
        (
            "divide by sqrt(d), not by d: the scores' spread grows like sqrt(d).",
            lambda: (scores / 8).softmax(-1),
        ),
        (
            "softmax over the wrong axis: each query's weights over the keys must sum to 1, so take "
            "the softmax over the last axis (dim=-1).",
            lambda: (scores / math.sqrt(8)).softmax(-2),
        ),
        (
            "the scores are transposed: row i should be query i's scores, so compute q @ k^T, "
            "not k @ q^T.",
            lambda: (scores.transpose(-2, -1) / math.sqrt(8)).softmax(-1),
        ),
        (
            "the weights are transposed: row i should be query i's weights over the keys.",
            lambda: (scores / math.sqrt(8)).softmax(-1).transpose(-2, -1),
        ),
    ]
    compare(
        weights,
        expected_weights,
        weight_mistakes,
        generic="weights = softmax(q @ k.transpose(-2, -1) / sqrt(d), dim=-1).",
        what="the weights",
    )
    compare(
        out,
        expected_out,
        [
            (
                "the output mixes the values with the transposed weights: out = weights @ v.",
                lambda: expected_weights.transpose(-2, -1) @ v,
            )
        ],
        generic="out = weights @ v.",
        what="the output",
    )


@exercise("MultiHeadSelfAttention", "03_attention", attention.MultiHeadSelfAttention)
def check_multi_head_attention(cls: type) -> None:
    """Check a multi-head self-attention class: `cls(dim, num_heads)` with `qkv` and `proj`, (B, T, D) -> (B, T, D)."""
    B, T, D, h = 2, 5, 12, 3
    d = D // h
    reference = randomized(attention.MultiHeadSelfAttention(D, h))
    x = seeded(B, T, D)
    got = run_with_reference_weights(lambda: cls(D, h), reference, x)
    with torch.no_grad():
        qkv = reference.qkv(x)  # (B, T, 3D)
        right = qkv.reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)  # (3, B, h, T, d)
        naive = (
            qkv.reshape(B, T, 3, D).permute(2, 0, 1, 3).reshape(3, B, h, T, d)
        )  # no head axis move

        def attend(q, k, v, scale=None):
            scale = math.sqrt(d) if scale is None else scale
            return ((q @ k.transpose(-2, -1)) / scale).softmax(-1) @ v  # (B, h, T, d)

        def merge(out):
            return out.transpose(1, 2).reshape(B, T, D)

        mistakes = [
            (
                "the heads are split without moving the head axis: reshape (B, T, D) to (B, T, h, d) "
                "first, then transpose to (B, h, T, d).",
                lambda: reference.proj(merge(attend(*naive))),
            ),
            (
                "the heads are split without moving the head axis (and merged the same way): reshape "
                "to (B, T, h, d), then transpose to (B, h, T, d); undo both when merging.",
                lambda: reference.proj(attend(*naive).reshape(B, T, D)),
            ),
            (
                "the heads are merged without moving the head axis back: out.transpose(1, 2) to "
                "(B, T, h, d) before reshaping to (B, T, D).",
                lambda: reference.proj(attend(*right).reshape(B, T, D)),
            ),
            (
                "the output projection is missing: finish with self.proj(out).",
                lambda: merge(attend(*right)),
            ),
            (
                "scale by sqrt(d) with d = D / h, the width of one head, not by sqrt(D).",
                lambda: reference.proj(merge(attend(*right, scale=math.sqrt(D)))),
            ),
            (
                "the scores are not scaled by sqrt(d).",
                lambda: reference.proj(merge(attend(*right, scale=1.0))),
            ),
        ]
        compare(got, reference(x), mistakes)
