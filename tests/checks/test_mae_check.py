"""vitcourse.checks.mae: random_masking and masked_patch_loss accept right answers and name
each mistake.
The wrong answers are written the way a learner would write them, not copied from the
checks' own simulations."""

import pytest
import torch

from vitcourse import checks

# --- notebook 09 ------------------------------------------------------------------------------


def _masking(mode="good"):
    """random_masking as a learner might write it; `mode` names the mistake."""

    def random_masking(batch_size, num_patches, mask_ratio, generator=None):
        B, N = batch_size, num_patches
        keep = N - round(N * mask_ratio)
        if mode == "keeps the ratio":
            keep = round(N * mask_ratio)
        noise = torch.rand(B, N, generator=None if mode == "no generator" else generator)
        if mode == "one for all":
            noise = torch.rand(1, N, generator=generator).expand(B, N)
        visible = noise.argsort(dim=1)[:, :keep]
        if mode != "unsorted":
            visible = visible.sort(dim=1).values
        mask = torch.ones(B, N, dtype=torch.bool)
        mask.scatter_(1, visible, False)
        if mode == "inverted":
            mask = ~mask
        if mode == "coin flips":
            mask = torch.rand(B, N, generator=generator) < mask_ratio
        return visible, mask

    return random_masking


def test_random_masking_check_accepts_the_reference_and_another_good_answer():
    from vitcourse.mae import random_masking

    assert checks.check_random_masking(random_masking) is random_masking
    good = _masking()
    assert checks.check_random_masking(good) is good


@pytest.mark.parametrize(
    "mode, hint",
    [
        ("keeps the ratio", "mask_ratio is the share of patches hidden"),
        ("inverted", "mask is True where a patch is HIDDEN"),
        ("coin flips", "hiding each patch with probability mask_ratio hides a different number"),
        ("unsorted", "sort each row"),
        ("one for all", "its own random choice of patches"),
        ("no generator", "randomness from the `generator` argument"),
    ],
)
def test_random_masking_mistakes(mode, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_random_masking(_masking(mode))


def _patch_loss(mode="good"):
    def masked_patch_loss(predicted, target, mask):
        error = ((predicted - target) ** 2).mean(dim=-1)  # (B, N)
        if mode == "all patches":
            return error.mean()
        if mode == "visible":
            return error[~mask].mean()
        if mode == "sum per patch":
            return ((predicted - target) ** 2).sum(-1)[mask].mean()
        if mode == "per image":
            return torch.stack([e[m].mean() for e, m in zip(error, mask, strict=True)]).mean()
        if mode == "no reduction":
            return error * mask
        return error[mask].mean()

    return masked_patch_loss


def test_masked_patch_loss_check_accepts_good_answers():
    from vitcourse.mae import masked_patch_loss

    assert checks.check_masked_patch_loss(masked_patch_loss) is masked_patch_loss
    good = _patch_loss()
    assert checks.check_masked_patch_loss(good) is good


@pytest.mark.parametrize(
    "mode, hint",
    [
        ("all patches", "averages over every patch"),
        ("visible", "averages over the visible patches"),
        ("sum per patch", "sums each patch's squared errors"),
        ("per image", "mean of each image's own mean"),
        ("no reduction", "one error per patch"),
    ],
)
def test_masked_patch_loss_mistakes(mode, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_masked_patch_loss(_patch_loss(mode))


def test_the_verdicts_hold_for_another_seed():
    good = _masking()
    assert checks.EXERCISES["random_masking"].check(good, seed=12345) is good
    with pytest.raises(AssertionError, match="randomness from the `generator` argument"):
        checks.EXERCISES["random_masking"].check(_masking("no generator"), seed=12345)
    good = _patch_loss()
    assert checks.EXERCISES["masked_patch_loss"].check(good, seed=12345) is good
    with pytest.raises(AssertionError, match="averages over the visible patches"):
        checks.EXERCISES["masked_patch_loss"].check(_patch_loss("visible"), seed=12345)
