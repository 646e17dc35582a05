"""Checks for notebook 03's exercises: scaled dot-product `attention` and
`MultiHeadSelfAttention` (`vitcourse.attention`). The classic slips each is matched against are in
`checks.attention_slips`."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vitcourse import attention
from vitcourse.checks.answers import type_name
from vitcourse.checks.attention_slips import mhsa_mistakes, weight_mistakes
from vitcourse.checks.harness import (
    Hint,
    compare,
    fail,
    randomized,
    references_in_place,
    run_with_reference_weights,
    seeded,
)
from vitcourse.checks.registry import exercise
from vitcourse.language import N_, _

_ATTENTION_MORE = N_(
    "Vaswani et al. (2017), equation 1: softmax(q·kᵀ / √d) over the keys, times v: the (…, T, T) "
    "scores come from one matrix product over the last two axes, then each row is normalised, "
    "then the values are averaged with those weights."
)


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


# The shapes of the attention check's two calls: (B, h, T, d), then (B, T, d) with no head axis
# (the statement's "(..., T, d)": any leading axes).
_QKV = ((2, 3, 5, 8), (2, 6, 4))


@exercise("attention", "03_attention", attention.scaled_dot_product_attention)
class check_attention:
    """Check `fn(q, k, v) -> (out, weights)` on (B, h, T, d) inputs and on (B, T, d) ones."""

    called = N_("q, k and v each (2, 3, 5, 8), that is (B, h, T, d), and each (2, 6, 4), (B, T, d)")
    raised = [
        (text, _PRODUCT)
        for text in ("must match the size", "Expected size", "cannot be multiplied", "mismatch")
    ] + [
        (
            "Dimension out of range",
            Hint(
                N_(
                    "an axis counted from the front does not exist: the check also calls "
                    "attention on (B, T, d) inputs, with no head axis. Count the axes from the end "
                    "(-1 the last, -2 the one before), so that any number of leading axes works."
                ),
                more=N_("q's width is its last axis, whatever comes before it."),
            ),
        )
    ]
    more = _ATTENTION_MORE
    worked = N_(
        "one query and two keys, d = 4: q = [[1, 1, 1, 1]], k = [[1, 1, 1, 1], [0, 0, 0, 0]], v = "
        "[[1, 0], [0, 1]]. The scores q·kᵀ are [[4, 0]]; divided by √4 = 2, [[2, 0]]; their "
        "softmax over the keys, [[0.881, 0.119]]: those are the weights; the output is 0.881 · [1, "
        "0] + 0.119 · [0, 1] = [[0.881, 0.119]]. Run yours on these tensors and compare each step."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        first, second = _QKV
        return {
            "q": seeded(*first, seed=seed + 1) * 2,
            "k": seeded(*first, seed=seed + 2) * 2,
            "v": seeded(*first, seed=seed + 3),
            "q2": seeded(*second, seed=seed + 4) * 2,
            "k2": seeded(*second, seed=seed + 5) * 2,
            "v2": seeded(*second, seed=seed + 6),
        }

    shown = {"q2": "`q`", "k2": "`k`", "v2": "`v`"}

    @staticmethod
    def run(attention, q, k, v, q2, k2, v2):
        return [attention(q, k, v), attention(q2, k2, v2)]

    @staticmethod
    def judge(got, q, k, v, q2, k2, v2) -> None:
        if not (isinstance(got, list) and len(got) == 2):
            raise ValueError("an answer that pack did not write")
        for result, inputs in zip(got, ((q, k, v), (q2, k2, v2)), strict=True):
            _judge_attention(result, *inputs)


def _judge_attention(result, q, k, v) -> None:
    """One call's verdict: the weights first (the likelier slips), then the output."""
    if not (isinstance(result, tuple) and len(result) == 2):
        fail(
            _("it should return a pair (out, weights), got {type}").format(type=type_name(result)),
            N_(
                "return both the output and the weights, in that order: the notebook draws the "
                "weights later."
            ),
        )
    out, weights = result
    expected_out, expected_weights = attention.scaled_dot_product_attention(q, k, v)
    swapped = (
        isinstance(out, torch.Tensor)
        and isinstance(weights, torch.Tensor)
        and out.shape == expected_weights.shape
        and weights.shape == expected_out.shape
        and torch.allclose(out, expected_weights, rtol=1e-4, atol=1e-5)
        and torch.allclose(weights, expected_out, rtol=1e-4, atol=1e-5)
    )
    if swapped:
        fail(
            _("it returned (weights, out): both are right, in the wrong order"),
            N_("return the output first, then the weights: (out, weights)."),
        )
    scores = q @ k.transpose(-2, -1)
    compare(
        weights,
        expected_weights,
        weight_mistakes(scores, q.shape[-1]),
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


# The multi-head check's two modules: (batch, tokens, width, heads); d = 4, then 6.
_MHSA_CASES = ((2, 5, 12, 3), (2, 4, 12, 2))
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
    (B, T, D) -> (B, T, D), with 3 heads and with 2. Judged on its own: a right attention
    (PyTorch's fused one) runs inside it."""

    called = N_(
        "x (2, 5, 12), in a MultiHeadSelfAttention(12, 3), and x (2, 4, 12), in a "
        "MultiHeadSelfAttention(12, 2), each with the reference's weights"
    )
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
    worked = N_(
        "the shapes for x (2, 5, 12) with 3 heads (d = 4): qkv (2, 5, 36); as (B, T, 3, h, d) = "
        "(2, 5, 3, 3, 4); moved to (3, B, h, T, d) = (3, 2, 3, 5, 4); q, k and v (2, 3, 5, 4) "
        "each; attention's output (2, 3, 5, 4); back to (2, 5, 3, 4), then (2, 5, 12); proj (2, "
        "5, 12). Print yours after each step and compare; with 2 heads, d is 6."
    )
    shown = {"more_x": "`x`"}

    @staticmethod
    def inputs(seed: int) -> dict:
        (B, T, D, h), (b, t, d, g) = _MHSA_CASES
        return {
            "weights": randomized(attention.MultiHeadSelfAttention(D, h), seed).state_dict(),
            "x": seeded(B, T, D, seed=seed),
            "more_weights": randomized(
                attention.MultiHeadSelfAttention(d, g), seed + 1
            ).state_dict(),
            "more_x": seeded(b, t, d, seed=seed + 1),
        }

    @staticmethod
    def run(cls, weights, x, more_weights, more_x):
        (D, h), (d, g) = (case[2:] for case in _MHSA_CASES)
        with references_in_place(cls, attention=_fused_attention):
            return [
                run_with_reference_weights(lambda: cls(D, h), weights, x),
                run_with_reference_weights(lambda: cls(d, g), more_weights, more_x),
            ]

    @staticmethod
    def judge(got, weights, x, more_weights, more_x) -> None:
        if not (isinstance(got, list) and len(got) == 2):
            raise ValueError("an answer that pack did not write")
        cases = zip(got, _MHSA_CASES, ((weights, x), (more_weights, more_x)), strict=True)
        for answer, sizes, (state, tokens) in cases:
            reference = attention.MultiHeadSelfAttention(sizes[2], sizes[3]).eval()
            reference.load_state_dict(state)
            with torch.no_grad():
                mistakes = mhsa_mistakes(reference, tokens)
                generic = Hint(
                    N_("follow the four steps above the exercise, with the shape after each."),
                    more=_MHSA_MORE,
                )
                compare(answer, reference(tokens), mistakes, generic=generic)
