"""vitcourse.checks.vit: the ViT and count_parameters accept right answers and name each mistake.
The wrong answers are written the way a learner would write them, not copied from the
checks' own simulations."""

import dataclasses
import re

import pytest
import torch

from vitcourse import checks
from vitcourse.vit import VisionTransformer, count_parameters

# --- the whole model --------------------------------------------------------------------------


def _vit(forward):
    class Learner(VisionTransformer):  # the skeleton's __init__ is the reference's
        def forward(self, images):
            return forward(self, images)

    return Learner


def _good_forward(m, images, pool=lambda t: t[:, 0], front=True, pos=True, norm=True):
    x = m.patch_embed(images)
    cls = m.cls_token.expand(x.shape[0], -1, -1)
    x = torch.cat([cls, x] if front else [x, cls], dim=1)
    if pos:
        x = x + m.pos_embed
    for blk in m.blocks:
        x = blk(x)
    if norm:
        x = m.norm(x)
    return m.head(pool(x))


def test_vision_transformer():
    good = _vit(_good_forward)
    assert checks.check_vision_transformer(good) is good


@pytest.mark.parametrize(
    "kwargs, hint",
    [
        ({"pos": False}, "position embeddings are not added"),
        ({"front": False}, "cls token goes in front"),
        ({"pool": lambda t: t[:, -1]}, "not the last token"),
        ({"pool": lambda t: t.mean(1)}, "not a mean"),
        ({"norm": False}, "final LayerNorm is missing"),
        ({"pool": lambda t: t}, "pool to one vector per image"),
    ],
)
def test_vision_transformer_mistakes(kwargs, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_vision_transformer(_vit(lambda m, x: _good_forward(m, x, **kwargs)))


def test_parameter_count_check():
    assert checks.check_parameter_count(count_parameters) is count_parameters
    with pytest.raises(AssertionError, match="did you leave out the cls token"):
        checks.check_parameter_count(lambda c: count_parameters(c) - c.dim)
    with pytest.raises(AssertionError, match="did you leave out the LayerNorms"):
        checks.check_parameter_count(lambda c: count_parameters(c) - (2 * c.depth + 1) * 2 * c.dim)
    with pytest.raises(AssertionError, match="piece by piece"):
        checks.check_parameter_count(lambda c: 12345)


def _ignoring(config, **fields):
    """count_parameters as if the config's switch were at its default: the mistake to catch."""
    return count_parameters(dataclasses.replace(config, **fields))


@pytest.mark.parametrize(
    "count, said",
    [
        (lambda c: _ignoring(c, qkv_bias=True), r"(?s)more than the model has.*qkv_bias=False"),
        (lambda c: _ignoring(c, pos_embed="learned"), r"(?s)more than the model has.*sin-cos"),
    ],
    ids=["qkv_bias ignored", "pos_embed ignored"],
)
def test_a_count_that_ignores_a_switch_is_caught_and_named(count, said):
    # The instructions mention both switches; a count that always adds them is wrong for a
    # config without them, and the check says which one and that the count is too high.
    with pytest.raises(AssertionError, match=said):
        checks.check_parameter_count(count)


def test_the_distance_reads_as_too_few_or_too_many_without_the_right_count():
    """Neither the right count nor the gap (the answer and the gap give it) is printed: a count
    that printed them could be fixed by copying, not by finding the piece."""
    for gap, said in ((24, "fewer"), (-24, "more")):
        with pytest.raises(AssertionError) as failed:
            checks.check_parameter_count(lambda c, gap=gap: count_parameters(c) - gap)
        first = str(failed.value).splitlines()[0]
        assert re.search(rf"gives [\d,]+: {said} than the model has$", first), first


def test_the_verdicts_hold_for_another_seed():
    good = _vit(_good_forward)
    assert checks.EXERCISES["ViT"].check(good, seed=12345) is good
    with pytest.raises(AssertionError, match="final LayerNorm is missing"):
        checks.EXERCISES["ViT"].check(
            _vit(lambda m, x: _good_forward(m, x, norm=False)), seed=12345
        )

    def count(config):
        return count_parameters(config)

    assert checks.EXERCISES["count_parameters"].check(count, seed=12345) is count
    with pytest.raises(AssertionError, match="did you leave out the cls token"):
        checks.EXERCISES["count_parameters"].check(
            lambda c: count_parameters(c) - c.dim, seed=12345
        )


def test_a_parameter_count_that_is_no_number_fails_clearly():
    with pytest.raises(AssertionError, match="an int, but returned str"):
        checks.check_parameter_count(lambda c: f"{count_parameters(c):,}")
