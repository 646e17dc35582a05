"""Checks for notebook 03's exercises: scaled dot-product `attention` and
`MultiHeadSelfAttention` (`vitcourse.attention`)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from vitcourse import attention
from vitcourse.checks.answers import type_name
from vitcourse.checks.harness import (
    Mistakes,
    compare,
    fail,
    randomized,
    references_in_place,
    run_with_reference_weights,
    seeded,
)
from vitcourse.checks.hints import Hint
from vitcourse.checks.registry import exercise
from vitcourse.language import N_, _

# Each hint is one whole message for its translator: Vaswani et al.'s equation 1 is written out in
# each one that quotes it.
_ATTENTION_MORE = N_(
    "Vaswani et al. (2017), equation 1: softmax(q·kᵀ / √d) over the keys, times v: the (…, T, T) "
    "scores come from one matrix product over the last two axes, then each row is normalised, "
    "then the values are averaged with those weights."
)


def _weight_mistakes(scores) -> Mistakes:
    """The classic slips in attention's weights, from the unscaled scores q @ kᵀ (d = 8)."""
    weight_mistakes = [
        (
            Hint(
                N_(
                    "the scores are not scaled: Vaswani et al. (2017), equation 1: softmax(q·kᵀ / "
                    "√d) over the keys, times v. d is the width of q and k."
                ),
                more=N_(
                    "without the division the softmax saturates as d grows (section 2 of "
                    "this notebook measured it); d is the size of q's last axis."
                ),
            ),
            lambda: scores.softmax(-1),
        ),
        (
            Hint(
                N_("divide by √d, not by d: the scores' spread grows like √d."),
                more=N_(
                    "section 2 of this notebook: the spread of q·k is √d for q and k of "
                    "spread 1; dividing by √d brings it back to 1."
                ),
            ),
            lambda: (scores / 8).softmax(-1),
        ),
        (
            Hint(
                N_(
                    "the softmax is over the wrong axis: each query's weights over the keys must "
                    "sum to 1."
                ),
                more=N_(
                    "in the (…, T, T) scores, rows are queries and columns keys: normalise "
                    "along the keys' axis, the last one."
                ),
            ),
            lambda: (scores / math.sqrt(8)).softmax(-2),
        ),
        (
            Hint(
                N_("the scores are transposed: row i should be query i against every key."),
                more=N_(
                    "the first factor of the product gives the rows: the queries, then the "
                    "keys transposed."
                ),
            ),
            lambda: (scores.transpose(-2, -1) / math.sqrt(8)).softmax(-1),
        ),
        (
            Hint(
                N_("the weights are transposed: row i should be query i's weights over the keys."),
                more=N_("return the weights as the softmax produced them, rows for queries."),
            ),
            lambda: (scores / math.sqrt(8)).softmax(-1).transpose(-2, -1),
        ),
    ]
    return weight_mistakes


_PRODUCT = Hint(
    N_(
        "a matrix product's shapes do not fit. For the scores, q (…, T, d) must meet the keys as "
        "(…, d, T): only k's last two axes swap, and `.T` reverses *all* of them."
    ),
    more=N_(
        "transpose takes the two axes to swap; counting them from the end (-2, -1) works for any "
        "number of leading axes (batch, heads)."
    ),
)


@exercise("attention", "03_attention", attention.scaled_dot_product_attention)
class check_attention:
    """Check `fn(q, k, v) -> (out, weights)` on (B, h, T, d) inputs."""

    called = N_("q, k and v each (2, 3, 5, 8), that is (B, h, T, d)")
    raised = [
        (text, _PRODUCT)
        for text in ("must match the size", "Expected size", "cannot be multiplied", "mismatch")
    ]
    more = _ATTENTION_MORE

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
                _("it should return a pair (out, weights), got {type}").format(
                    type=type_name(result)
                ),
                N_(
                    "return both the output and the weights, in that order: the notebook draws the "
                    "weights later."
                ),
            )
        out, weights = result
        expected_out, expected_weights = attention.scaled_dot_product_attention(q, k, v)
        scores = q @ k.transpose(-2, -1)
        weight_mistakes = _weight_mistakes(scores)
        compare(
            weights,
            expected_weights,
            weight_mistakes,
            generic=Hint(
                N_(
                    "the weights do not follow Vaswani et al. (2017), equation 1: softmax(q·kᵀ / "
                    "√d) over the keys, times v. Check each step, from the scores to the softmax."
                ),
                more=_ATTENTION_MORE,
            ),
            what=_("the weights"),
        )
        compare(
            out,
            expected_out,
            [
                (
                    Hint(
                        N_(
                            "the output mixes the values with the transposed weights: token i's "
                            "output is the average of the values weighted by row i of the weights."
                        ),
                        more=N_(
                            "(…, T, T) weights times (…, T, d) values gives (…, T, d), one row "
                            "per query."
                        ),
                    ),
                    lambda: expected_weights.transpose(-2, -1) @ v,
                )
            ],
            generic=Hint(
                N_("the output is the average of the values weighted by each query's weights."),
                more=N_("one matrix product of the weights and v, (…, T, T) by (…, T, d)."),
            ),
            what=_("the output"),
        )


_B, _T, _D, _H = 2, 5, 12, 3  # the multi-head check's sizes: batch, tokens, width, heads
_SPLIT = N_(
    "split the last axis into (h, d) first, so that each token keeps its own numbers, then move "
    "the head axis in front of the token axis."
)
# The hints for heads split (and merged) by a reshape alone: the first two of `_mhsa_mistakes`.
_SPLIT_NAIVELY = Hint(
    N_(
        "the heads are split without moving the head axis: a reshape straight to "
        "(B, h, T, d) gives each head numbers from several tokens."
    ),
    more=_SPLIT,
)
_MERGED_NAIVELY = Hint(
    N_(
        "the heads are split (and merged) without moving the head axis: a reshape "
        "straight to (B, h, T, d) gives each head numbers from several tokens."
    ),
    more=N_(
        "split the last axis into (h, d) first, so that each token keeps its own "
        "numbers, then move the head axis in front of the token axis. Undo both steps "
        "when merging."
    ),
)


def _mhsa_mistakes(reference, x) -> Mistakes:
    """The classic multi-head slips, each as what it would output (`reference` holds the weights)."""
    B, T, D, h = _B, _T, _D, _H
    d = D // h
    qkv = reference.qkv(x)  # (B, T, 3D)
    right = qkv.reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)  # (3, B, h, T, d)
    naive = qkv.reshape(B, T, 3, D).permute(2, 0, 1, 3).reshape(3, B, h, T, d)  # no head axis move

    def attend(q, k, v, scale=None):
        scale = math.sqrt(d) if scale is None else scale
        return ((q @ k.transpose(-2, -1)) / scale).softmax(-1) @ v  # (B, h, T, d)

    def merge(out):
        return out.transpose(1, 2).reshape(B, T, D)

    mistakes = [
        (_SPLIT_NAIVELY, lambda: reference.proj(merge(attend(*naive)))),
        (_MERGED_NAIVELY, lambda: reference.proj(attend(*naive).reshape(B, T, D))),
        (
            Hint(
                N_(
                    "the heads are merged without moving the head axis back: (B, h, T, d) must "
                    "become (B, T, h, d) before the heads join into D numbers per token."
                ),
                more=N_("swap the head and token axes back, then merge the last two."),
            ),
            lambda: reference.proj(attend(*right).reshape(B, T, D)),
        ),
        (
            Hint(
                N_(
                    "the output projection is missing: proj mixes the heads' results, the "
                    "last of the four steps."
                ),
                more=N_("proj is a Linear(D, D) applied to the merged (B, T, D) tokens."),
            ),
            lambda: merge(attend(*right)),
        ),
        (
            Hint(
                N_("scale by √d with d = D / h, the width of one head, not by √D."),
                more=N_(
                    "each head's queries and keys are d numbers wide: that is the width "
                    "equation 1 divides by."
                ),
            ),
            lambda: reference.proj(merge(attend(*right, scale=math.sqrt(D)))),
        ),
        (
            N_("the scores are not scaled by √d (Vaswani et al., equation 1)."),
            lambda: reference.proj(merge(attend(*right, scale=1.0))),
        ),
    ]
    return mistakes


_MHSA_MORE = N_(
    "the shapes, step by step: qkv (B, T, 3D), laid out (3, h, d) per token; q, k and v each "
    "(B, h, T, d); attention's output (B, h, T, d); back to (B, T, h, d), then (B, T, D); proj."
)


def _fused_attention(q, k, v):
    """PyTorch's fused attention in place of the learner's `attention` while their
    MultiHeadSelfAttention runs: a right `attention` in every kernel, including the grader's
    sandbox, where the course's own is replaced by a stub. It hands back no weights (None), which
    a MultiHeadSelfAttention does not need."""
    return F.scaled_dot_product_attention(q, k, v), None


@exercise("MultiHeadSelfAttention", "03_attention", attention.MultiHeadSelfAttention)
class check_multi_head_attention:
    """Check a multi-head self-attention class: `cls(dim, num_heads)` with `qkv` and `proj`,
    (B, T, D) -> (B, T, D). Judged on its own: a right attention (PyTorch's
    fused one) runs inside it."""

    called = N_("x (2, 5, 12), in a MultiHeadSelfAttention(12, 3) with the reference's weights")
    raised = [
        (
            "is invalid for input of size",
            Hint(
                N_(
                    "a reshape asked for sizes whose product is not the tensor's number of "
                    "elements. qkv gives (B, T, 3D), and its 3D numbers per token are laid out (3, "
                    "h, d)."
                ),
                more=N_(
                    "split (B, T, 3D) into (B, T, 3, h, d), then move the axes to get (3, B, h, "
                    "T, d): q, k and v, each (B, h, T, d)."
                ),
            ),
        )
    ]
    more = _MHSA_MORE

    @staticmethod
    def inputs(seed: int) -> dict:
        reference = randomized(attention.MultiHeadSelfAttention(_D, _H), seed)
        return {"weights": reference.state_dict(), "x": seeded(_B, _T, _D, seed=seed)}

    @staticmethod
    def run(cls, weights, x):
        with references_in_place(cls, attention=_fused_attention):
            return run_with_reference_weights(lambda: cls(_D, _H), weights, x)

    @staticmethod
    def judge(got, weights, x) -> None:
        reference = attention.MultiHeadSelfAttention(_D, _H).eval()
        reference.load_state_dict(weights)
        with torch.no_grad():
            mistakes = _mhsa_mistakes(reference, x)
            generic = Hint(
                N_("follow the four steps above the exercise, with the shape after each."),
                more=_MHSA_MORE,
            )
            compare(got, reference(x), mistakes, generic=generic)
