"""Checks for notebook 04's exercises: `layer_norm` and the pre-norm `TransformerBlock`
(`vitcourse.block`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vitcourse import block
from vitcourse.block import layer_norm
from vitcourse.checks.harness import (
    Mistakes,
    compare,
    randomized,
    run_with_reference_weights,
    seeded,
)
from vitcourse.checks.hints import Hint
from vitcourse.checks.registry import exercise
from vitcourse.language import N_

_LN_MORE = N_(
    "LN(x) = (x - μ) / √(σ² + ε) · w + b, with μ and σ² the mean and the population variance "
    "of each token's D numbers (the last axis); ε goes inside the square root."
)


@exercise("layer_norm", "04_transformer_block", layer_norm)
class check_layer_norm:
    """Check `fn(x, weight, bias, eps=1e-6)`: LayerNorm over the last axis, as F.layer_norm."""

    called = N_("x (2, 4, 6), weight (6,), bias (6,), eps 1e-6")
    raised = [
        (
            "must match the size",
            Hint(
                N_(
                    "the mean (or the variance) over the last axis lost that axis: it is (2, 4) "
                    "for x of (2, 4, 6), and shapes line up from the right, so (2, 4, 6) and (2, "
                    "4) do not fit together."
                ),
                more=N_(
                    "mean and var can keep the reduced axis with size 1, (2, 4, 1), which then "
                    "stretches over each token's D numbers: look at their `keepdim` argument."
                ),
            ),
        )
    ]
    more = _LN_MORE

    @staticmethod
    def inputs(seed: int) -> dict:
        return {
            "x": seeded(2, 4, 6, seed=seed) * 3 + 1,
            "weight": seeded(6, seed=seed + 1),
            "bias": seeded(6, seed=seed + 2),
        }

    @staticmethod
    def run(layer_norm, x, weight, bias):
        return layer_norm(x, weight, bias, 1e-6)

    @staticmethod
    def judge(got, x, weight, bias) -> None:
        mean = x.mean(-1, keepdim=True)
        mistakes = [
            (
                Hint(
                    N_(
                        "use the population variance, which divides by D, not by D - 1 (the sample "
                        "variance)."
                    ),
                    more=N_(
                        "torch's var divides by D - 1 unless told otherwise: look at its "
                        "`unbiased` (or `correction`) argument, or compute the mean of the squared "
                        "deviations yourself."
                    ),
                ),
                lambda: (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + 1e-6) * weight + bias,
            ),
            (
                Hint(
                    N_(
                        "normalise each token on its own, over its D features (the last axis), not "
                        "across tokens."
                    ),
                    more=N_("x is (B, T, D): μ and σ² should have one value per token, (B, T, 1)."),
                ),
                lambda: (
                    (x - x.mean(1, keepdim=True))
                    / torch.sqrt(x.var(1, keepdim=True, unbiased=False) + 1e-6)
                    * weight
                    + bias
                ),
            ),
            (
                Hint(
                    N_(
                        "after normalising, scale by weight and shift by bias (LayerNorm's learned "
                        "gain and offset, w and b in the formula)."
                    ),
                    more=N_("weight and bias are (D,): they broadcast over every token."),
                ),
                lambda: F.layer_norm(x, (6,), eps=1e-6),
            ),
        ]
        compare(
            got,
            F.layer_norm(x, (6,), weight, bias, 1e-6),
            mistakes,
            generic=Hint(
                N_("compare your steps with the formula above the exercise, one symbol at a time."),
                more=_LN_MORE,
            ),
        )


_BLOCK_MORE = N_(
    "in pre-norm the residual path is never normalised: each branch reads a LayerNorm of the "
    "tokens, and its output is added to the tokens themselves; the MLP branch reads the tokens "
    "the attention step left."
)
# The hints for the two slips about where the LayerNorms go (in `_block_mistakes`).
_POST_NORM = Hint(
    N_(
        "that is post-norm, normalising after adding. The ViT normalises *before* "
        "each branch: the paper's section 3.1, equations 2 and 3 (written out below "
        "the check)."
    ),
    more=_BLOCK_MORE,
)
_NORMALISED_RESIDUAL = Hint(
    N_("add each branch to the un-normalised tokens: the residual path skips the LayerNorm too."),
    more=N_(
        "keep the normalised tokens apart from x (or normalise inside the "
        "branch): only the branch reads them."
    ),
)


def _block_mistakes(r, x) -> Mistakes:
    """The classic slips in a block's forward, each as what it would output."""

    def two_steps(first, second):
        h = first(x)
        return second(h)

    mistakes = [
        (
            _POST_NORM,
            lambda: two_steps(lambda x: r.norm1(x + r.attn(x)), lambda h: r.norm2(h + r.mlp(h))),
        ),
        (
            Hint(
                N_(
                    "the attention branch's residual is missing: its output is added to the "
                    "tokens that went into it (equation 2)."
                ),
                more=N_(
                    "the sum of the attention's output and the tokens is what the MLP "
                    "branch then reads."
                ),
            ),
            lambda: two_steps(lambda x: r.attn(r.norm1(x)), lambda h: h + r.mlp(r.norm2(h))),
        ),
        (
            Hint(
                N_(
                    "the MLP branch's residual is missing: its output is added to the tokens "
                    "that went into it (equation 3)."
                ),
                more=_BLOCK_MORE,
            ),
            lambda: two_steps(lambda x: x + r.attn(r.norm1(x)), lambda h: r.mlp(r.norm2(h))),
        ),
        (
            _NORMALISED_RESIDUAL,
            lambda: two_steps(
                lambda x: r.norm1(x) + r.attn(r.norm1(x)),
                lambda h: r.norm2(h) + r.mlp(r.norm2(h)),
            ),
        ),
        (
            N_("norm1 belongs to the attention branch and norm2 to the MLP branch."),
            lambda: two_steps(lambda x: x + r.attn(r.norm2(x)), lambda h: h + r.mlp(r.norm1(h))),
        ),
        (
            Hint(
                N_(
                    "both branches read the block's input; the MLP branch should read what the "
                    "attention step left (equation 3 reads z′ from equation 2)."
                ),
                more=N_("the two steps run one after the other, not side by side."),
            ),
            lambda: x + r.attn(r.norm1(x)) + r.mlp(r.norm2(x)),
        ),
    ]
    return mistakes


@exercise("TransformerBlock", "04_transformer_block", block.TransformerBlock)
class check_transformer_block:
    """Check a pre-norm block: `cls(dim, num_heads, mlp_dim)` with norm1, attn, norm2, mlp."""

    called = N_("x (2, 5, 12), in a TransformerBlock(12, 3, 24) with the reference's weights")
    more = _BLOCK_MORE

    @staticmethod
    def inputs(seed: int) -> dict:
        reference = randomized(block.TransformerBlock(12, 3, 24), seed)
        return {"weights": reference.state_dict(), "x": seeded(2, 5, 12, seed=seed)}

    @staticmethod
    def run(cls, weights, x):
        return run_with_reference_weights(lambda: cls(12, 3, 24), weights, x)

    @staticmethod
    def judge(got, weights, x) -> None:
        r = block.TransformerBlock(12, 3, 24).eval()
        r.load_state_dict(weights)
        with torch.no_grad():
            mistakes = _block_mistakes(r, x)
            generic = Hint(
                N_(
                    "compare your forward with the paper's section 3.1, equations 2 and 3 "
                    "(written out below the check)."
                ),
                more=_BLOCK_MORE,
            )
            compare(got, r(x), mistakes, generic=generic)
