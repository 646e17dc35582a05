"""Checks for notebook 04's exercises: `layer_norm` and the pre-norm `TransformerBlock`
(`vitcourse.block`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vitcourse import block
from vitcourse.block import layer_norm
from vitcourse.checks.harness import compare, randomized, run_with_reference_weights, seeded
from vitcourse.checks.registry import exercise


@exercise("layer_norm", "04_transformer_block", layer_norm)
class check_layer_norm:
    """Check `fn(x, weight, bias, eps=1e-6)`: LayerNorm over the last axis, as F.layer_norm."""

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
                "use the population variance (divide by D, not D - 1): x.var(dim=-1, "
                "unbiased=False).",
                lambda: (x - mean) / torch.sqrt(x.var(-1, keepdim=True) + 1e-6) * weight + bias,
            ),
            (
                "normalise each token on its own, over its D features (the last axis), not across "
                "tokens.",
                lambda: (
                    (x - x.mean(1, keepdim=True))
                    / torch.sqrt(x.var(1, keepdim=True, unbiased=False) + 1e-6)
                    * weight
                    + bias
                ),
            ),
            (
                "after normalising, scale by weight and shift by bias (LayerNorm's learned gain "
                "and offset).",
                lambda: F.layer_norm(x, (6,), eps=1e-6),
            ),
        ]
        compare(
            got,
            F.layer_norm(x, (6,), weight, bias, 1e-6),
            mistakes,
            generic="(x - mean) / sqrt(var + eps) * weight + bias, mean and var over the last axis.",
        )


@exercise("TransformerBlock", "04_transformer_block", block.TransformerBlock)
class check_transformer_block:
    """Check a pre-norm block: `cls(dim, num_heads, mlp_dim)` with norm1, attn, norm2, mlp."""

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

            def two_steps(first, second):
                h = first(x)
                return second(h)

            mistakes = [
                (
                    "that is post-norm (normalise after adding). The ViT normalises *before* each "
                    "branch: x = x + self.attn(self.norm1(x)).",
                    lambda: two_steps(
                        lambda x: r.norm1(x + r.attn(x)), lambda h: r.norm2(h + r.mlp(h))
                    ),
                ),
                (
                    "the attention branch's residual is missing: x = x + self.attn(self.norm1(x)).",
                    lambda: two_steps(
                        lambda x: r.attn(r.norm1(x)), lambda h: h + r.mlp(r.norm2(h))
                    ),
                ),
                (
                    "the MLP branch's residual is missing: x = x + self.mlp(self.norm2(x)).",
                    lambda: two_steps(
                        lambda x: x + r.attn(r.norm1(x)), lambda h: r.mlp(r.norm2(h))
                    ),
                ),
                (
                    "add each branch to the un-normalised x: x = x + self.attn(self.norm1(x)), "
                    "not x = norm1(x); x = x + attn(x).",
                    lambda: two_steps(
                        lambda x: r.norm1(x) + r.attn(r.norm1(x)),
                        lambda h: r.norm2(h) + r.mlp(r.norm2(h)),
                    ),
                ),
                (
                    "norm1 belongs to the attention branch and norm2 to the MLP branch.",
                    lambda: two_steps(
                        lambda x: x + r.attn(r.norm2(x)), lambda h: h + r.mlp(r.norm1(h))
                    ),
                ),
                (
                    "both branches read the block's input; the MLP should read the output of the "
                    "attention step: first x = x + attn(...), then x = x + mlp(norm2(x)).",
                    lambda: x + r.attn(r.norm1(x)) + r.mlp(r.norm2(x)),
                ),
            ]
            compare(got, r(x), mistakes)
