"""Checks for notebook 03's exercises: scaled dot-product `attention` and
`MultiHeadSelfAttention` (`vitcourse.attention`)."""

from __future__ import annotations

import math

import torch

from vitcourse import attention
from vitcourse.checks.answers import type_name
from vitcourse.checks.harness import compare, fail, randomized, run_with_reference_weights, seeded
from vitcourse.checks.registry import exercise


@exercise("attention", "03_attention", attention.scaled_dot_product_attention)
class check_attention:
    """Check `fn(q, k, v) -> (out, weights)` on (B, h, T, d) inputs."""

    @staticmethod
    def inputs(seed: int) -> dict:
        return {
            "q": seeded(2, 3, 5, 8, seed=seed + 1) * 2,
            "k": seeded(2, 3, 5, 8, seed=seed + 2) * 2,
            "v": seeded(2, 3, 5, 8, seed=seed + 3),
        }

    @staticmethod
    def run(attention, q, k, v):
        return attention(q, k, v)

    @staticmethod
    def judge(result, q, k, v) -> None:
        if not (isinstance(result, tuple) and len(result) == 2):
            fail(
                f"it should return a pair (out, weights), got {type_name(result)}",
                "end with: return weights @ v, weights",
            )
        out, weights = result
        expected_out, expected_weights = attention.scaled_dot_product_attention(q, k, v)
        scores = q @ k.transpose(-2, -1)
        weight_mistakes = [
            (
                "the scores are not scaled: divide q @ k^T by sqrt(d), d the width of q, before "
                "the softmax.",
                lambda: scores.softmax(-1),
            ),
            (
                "divide by sqrt(d), not by d: the scores' spread grows like sqrt(d).",
                lambda: (scores / 8).softmax(-1),
            ),
            (
                "softmax over the wrong axis: each query's weights over the keys must sum to 1, so "
                "take the softmax over the last axis (dim=-1).",
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


_B, _T, _D, _H = 2, 5, 12, 3  # the multi-head check's sizes: batch, tokens, width, heads


@exercise("MultiHeadSelfAttention", "03_attention", attention.MultiHeadSelfAttention)
class check_multi_head_attention:
    """Check a multi-head self-attention class: `cls(dim, num_heads)` with `qkv` and `proj`,
    (B, T, D) -> (B, T, D)."""

    @staticmethod
    def inputs(seed: int) -> dict:
        reference = randomized(attention.MultiHeadSelfAttention(_D, _H), seed)
        return {"weights": reference.state_dict(), "x": seeded(_B, _T, _D, seed=seed)}

    @staticmethod
    def run(cls, weights, x):
        return run_with_reference_weights(lambda: cls(_D, _H), weights, x)

    @staticmethod
    def judge(got, weights, x) -> None:
        B, T, D, h = _B, _T, _D, _H
        d = D // h
        reference = attention.MultiHeadSelfAttention(D, h).eval()
        reference.load_state_dict(weights)
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
                    "the heads are split without moving the head axis: reshape (B, T, D) to "
                    "(B, T, h, d) first, then transpose to (B, h, T, d).",
                    lambda: reference.proj(merge(attend(*naive))),
                ),
                (
                    "the heads are split without moving the head axis (and merged the same way): "
                    "reshape to (B, T, h, d), then transpose to (B, h, T, d); undo both when "
                    "merging.",
                    lambda: reference.proj(attend(*naive).reshape(B, T, D)),
                ),
                (
                    "the heads are merged without moving the head axis back: out.transpose(1, 2) "
                    "to (B, T, h, d) before reshaping to (B, T, D).",
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
