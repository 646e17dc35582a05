"""Checks for notebook 04's exercises: `layer_norm` and the pre-norm `TransformerBlock`
(`vitcourse.block`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vitcourse import block
from vitcourse.block import layer_norm
from vitcourse.checks.harness import (
    Hint,
    Mistakes,
    compare,
    randomized,
    run_with_reference_weights,
    seeded,
)
from vitcourse.checks.registry import exercise
from vitcourse.language import N_, _

_LN_MORE = N_(
    "LN(x) = (x - μ) / √(σ² + ε) · w + b, with μ and σ² the mean and the population variance "
    "of each token's D numbers (the last axis); ε goes inside the square root."
)


# The eps values the check tries: two where ε's place shows clearly (first, so that the slip named
# is the one made), then the notebook's.
_EPS = (0.1, 1.0, 1e-6)


def _ln(x, weight, bias, eps, var=None, root=True):
    """LayerNorm over the last axis, written out; `var` and `root` make two of its slips."""
    mean = x.mean(-1, keepdim=True)
    var = x.var(-1, keepdim=True, unbiased=False) if var is None else var
    scale = torch.sqrt(var + eps) if root else torch.sqrt(var) + eps
    return (x - mean) / scale * weight + bias


_SAMPLE_VARIANCE = Hint(
    N_("use the population variance, which divides by D, not by D - 1 (the sample variance)."),
    more=N_(
        "torch's var divides by D - 1 unless told otherwise: look at its "
        "`unbiased` (or `correction`) argument, or compute the mean of the squared "
        "deviations yourself."
    ),
)

_ACROSS_TOKENS = Hint(
    N_("normalise each token on its own, over its D features (the last axis), not across tokens."),
    more=N_("x is (B, T, D): μ and σ² should have one value per token, (B, T, 1)."),
)

_EPS_OUTSIDE = Hint(
    N_(
        "ε goes inside the square root, √(σ² + ε): added to the standard deviation "
        "instead, it changes the result wherever σ² is small (the check's inputs have "
        "a nearly constant token)."
    ),
    more=_LN_MORE,
)

_EPS_IGNORED = Hint(
    N_(
        "the eps argument is ignored: your output is the one for another ε, "
        "whatever eps is given. Use the argument (the check tries 1e-6, 0.1 "
        "and 1)."
    ),
    more=N_("nn.LayerNorm's default ε is 1e-5 and the ViT's 1e-6; the function takes its own."),
)


_NO_GAIN = Hint(
    N_(
        "after normalising, scale by weight and shift by bias (LayerNorm's learned "
        "gain and offset, w and b in the formula)."
    ),
    more=N_("weight and bias are (D,): they broadcast over every token."),
)


def _ln_mistakes(x, weight, bias, eps) -> Mistakes:
    """layer_norm's classic slips for one eps, each with what it would return."""
    D = x.shape[-1]
    mistakes = [
        (_NO_GAIN, lambda: F.layer_norm(x, (D,))),  # nn.LayerNorm's own ε, and no gain either
        (
            _SAMPLE_VARIANCE,
            lambda: _ln(x, weight, bias, eps, var=x.var(-1, keepdim=True)),
        ),
        (
            _ACROSS_TOKENS,
            lambda: (
                (x - x.mean(1, keepdim=True))
                / torch.sqrt(x.var(1, keepdim=True, unbiased=False) + eps)
                * weight
                + bias
            ),
        ),
        (_NO_GAIN, lambda: F.layer_norm(x, (D,), eps=eps)),
        (
            _EPS_OUTSIDE,
            lambda: _ln(x, weight, bias, eps, root=False),
        ),
    ]
    for fixed in (1e-5, 1e-6, 1e-12, 0.0):  # an eps written in: nn.LayerNorm's, the notebook's...
        if fixed != eps:
            mistakes.append(
                (
                    _EPS_IGNORED,
                    lambda fixed=fixed: F.layer_norm(x, (D,), weight, bias, fixed),
                )
            )
    return mistakes


@exercise("layer_norm", "04_transformer_block", layer_norm)
class check_layer_norm:
    """Check `fn(x, weight, bias, eps=1e-6)`: LayerNorm over the last axis, as F.layer_norm, for
    three values of eps, on tokens one of which is nearly constant (where ε matters)."""

    called = N_("x (2, 4, 6), weight (6,), bias (6,), with eps 1e-6, 0.1 and 1")
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
    worked = N_(
        "one token x = [1, 2, 3, 4], weight 1, bias 0: μ = 2.5; σ² = the mean of [2.25, 0.25, "
        "0.25, 2.25] = 1.25. With eps 0, √1.25 ≈ 1.118 and LN(x) ≈ [-1.342, -0.447, 0.447, "
        "1.342]; with eps 1, √(1.25 + 1) = 1.5 and LN(x) = [-1, -0.333, 0.333, 1]. Run yours on "
        "torch.tensor([[1., 2., 3., 4.]]) with both and compare."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        x = seeded(2, 4, 6, seed=seed) * 3 + 1
        x[0, 1] = 2 + seeded(6, seed=seed + 3) * 0.01  # a nearly constant token: σ² about 1e-4
        return {"x": x, "weight": seeded(6, seed=seed + 1), "bias": seeded(6, seed=seed + 2)}

    @staticmethod
    def run(layer_norm, x, weight, bias):
        return [layer_norm(x, weight, bias, eps) for eps in _EPS]

    @staticmethod
    def judge(got, x, weight, bias) -> None:
        if not (isinstance(got, list) and len(got) == len(_EPS)):
            raise ValueError("an answer that pack did not write")
        for answer, eps in zip(got, _EPS, strict=True):
            compare(
                answer,
                F.layer_norm(x, x.shape[-1:], weight, bias, eps),
                _ln_mistakes(x, weight, bias, eps),
                generic=Hint(
                    N_(
                        "compare your steps with the formula above the exercise, one symbol at a "
                        "time."
                    ),
                    more=_LN_MORE,
                ),
                what=_("the output for eps={eps}").format(eps=eps),
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
    worked = N_(
        "a smaller test of your own: in a TransformerBlock(12, 3, 24), replace block.attn and "
        "block.mlp by modules that return zeros (torch.zeros_like of their input). Your forward "
        "must then give x back unchanged: both residual paths carry the tokens through untouched. "
        "Then put the real attn back and compare your output with the paper's equation 2 worked "
        "by hand, step by step, before the mlp; then equation 3 (section 3.1)."
    )

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
