"""vitcourse.checks.block: layer_norm and TransformerBlock accept right answers and name each
mistake.
The wrong answers are written the way a learner would write them, not copied from the
checks' own simulations."""

import pytest
import torch
import torch.nn.functional as F

from tests.learner_attempts import _block  # a learner's block around a forward
from vitcourse import checks
from vitcourse.block import TransformerBlock

# --- the block --------------------------------------------------------------------------------


def test_layer_norm():
    def good(x, weight, bias, eps=1e-6):
        mu = x.mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps) * weight + bias

    assert checks.check_layer_norm(good) is good
    with pytest.raises(AssertionError, match="population variance"):
        checks.check_layer_norm(
            lambda x, w, b, eps=1e-6: (
                (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + eps).sqrt() * w + b
            )
        )
    with pytest.raises(AssertionError, match="over its D features"):
        checks.check_layer_norm(
            lambda x, w, b, eps=1e-6: (
                (x - x.mean(1, keepdim=True))
                / (x.var(1, keepdim=True, unbiased=False) + eps).sqrt()
                * w
                + b
            )
        )
    with pytest.raises(AssertionError, match="scale by weight and shift by bias"):
        checks.check_layer_norm(lambda x, w, b, eps=1e-6: F.layer_norm(x, x.shape[-1:]))


def _pre_norm(s, x):
    x = x + s.attn(s.norm1(x))
    return x + s.mlp(s.norm2(x))


def _post_norm(s, x):
    x = s.norm1(x + s.attn(x))
    return s.norm2(x + s.mlp(x))


def _no_attn_residual(s, x):
    x = s.attn(s.norm1(x))
    return x + s.mlp(s.norm2(x))


def _normed_residual(s, x):
    x = s.norm1(x)
    x = x + s.attn(x)
    x = s.norm2(x)
    return x + s.mlp(x)


def _parallel(s, x):
    return x + s.attn(s.norm1(x)) + s.mlp(s.norm2(x))


def test_transformer_block():
    good = _block(_pre_norm)
    assert checks.check_transformer_block(good) is good
    assert checks.check_transformer_block(TransformerBlock) is TransformerBlock


@pytest.mark.parametrize(
    "forward, hint",
    [
        (_post_norm, "post-norm"),
        (_no_attn_residual, "attention branch's residual is missing"),
        (lambda s, x: s.mlp(s.norm2(x + s.attn(s.norm1(x)))), "MLP branch's residual is missing"),
        (_normed_residual, "un-normalised tokens"),
        (_parallel, "MLP branch should read what the attention step left"),
    ],
)
def test_transformer_block_mistakes(forward, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_transformer_block(_block(forward))


def test_the_verdicts_hold_for_another_seed():
    good = _block(_pre_norm)
    assert checks.EXERCISES["TransformerBlock"].check(good, seed=12345) is good
    with pytest.raises(AssertionError, match="post-norm"):
        checks.EXERCISES["TransformerBlock"].check(_block(_post_norm), seed=12345)

    def good_norm(x, weight, bias, eps=1e-6):
        return F.layer_norm(x, x.shape[-1:], weight, bias, eps)

    assert checks.EXERCISES["layer_norm"].check(good_norm, seed=12345) is good_norm
    with pytest.raises(AssertionError, match="population variance"):
        checks.EXERCISES["layer_norm"].check(
            lambda x, w, b, eps=1e-6: (
                (x - x.mean(-1, keepdim=True)) / (x.var(-1, keepdim=True) + eps).sqrt() * w + b
            ),
            seed=12345,
        )
