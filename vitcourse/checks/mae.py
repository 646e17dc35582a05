"""Checks for notebook 09's masked-patch pre-training exercises: `random_masking` and
`masked_patch_loss` (`vitcourse.mae`)."""

from __future__ import annotations

import math

import torch

from vitcourse import mae
from vitcourse.checks.harness import Hint, compare, fail, judge_gradient, seeded, with_gradient
from vitcourse.checks.registry import exercise
from vitcourse.language import N_, _

_B = 256  # random_masking's check: images per call
# (patches per image, share hidden) of its four calls: the notebook's, one where round() and
# int() differ (7.5 patches: 8 hidden), another ratio, and one where round() and math.ceil()
# differ (2.5 patches: 2 hidden, as Python rounds a half to the even number).
_CASES = ((16, 0.75), (10, 0.75), (12, 0.4), (10, 0.25))


def _wrong_count(visible, N: int, ratio: float) -> None:
    """Fail for a `visible` of the wrong shape, naming the likely reason: the hidden patches
    counted instead, int() for round(), or the ratio ignored."""
    B, hidden = _B, mae.hidden_count(N, ratio)
    hint = N_(
        "mask_ratio is the share of patches hidden: V = N - round(N * mask_ratio) stay visible."
    )
    if visible.shape == (B, hidden):
        said = _("visible holds {hidden} patches per image, expected {visible}")
        fail(said.format(hidden=hidden, visible=N - hidden), hint)
    if int(N * ratio) != hidden and visible.shape == (B, N - int(N * ratio)):
        said = _(
            "with num_patches {count} and mask_ratio {ratio}, visible holds {got} patches per "
            "image, expected {visible}"
        )
        fail(
            said.format(count=N, ratio=ratio, got=N - int(N * ratio), visible=N - hidden),
            Hint(
                N_(
                    "the number hidden is round(N · mask_ratio), not int(N · mask_ratio): int() "
                    "cuts 7.5 down to 7 where round() gives 8."
                ),
                more=N_(
                    "round() takes a number to the nearest whole one; int() drops the fraction."
                ),
            ),
        )
    if math.ceil(N * ratio) != hidden and visible.shape == (B, N - math.ceil(N * ratio)):
        said = _(
            "with num_patches {count} and mask_ratio {ratio}, visible holds {got} patches per "
            "image, expected {visible}"
        )
        fail(
            said.format(count=N, ratio=ratio, got=N - math.ceil(N * ratio), visible=N - hidden),
            Hint(
                N_(
                    "the number hidden is round(N · mask_ratio), rounded as Python's round() "
                    "does: 2.5 patches give 2 (a half goes to the even number), where "
                    "math.ceil() or adding 0.5 give 3."
                ),
                more=N_("use round() itself, as the statement writes it."),
            ),
        )
    if visible.shape[1] == N - round(N * 0.75) and ratio != 0.75:
        said = _("with mask_ratio {ratio}, visible should be (B, V) = {shape}, got {got}")
        fail(
            said.format(ratio=ratio, shape=(B, N - hidden), got=tuple(visible.shape)),
            N_(
                "the mask_ratio argument is ignored: the number hidden depends on it (the "
                "check tries 0.75 and 0.4)."
            ),
        )
    said = _("visible should be (B, V) = {shape}, got {got}")
    fail(said.format(shape=(B, N - hidden), got=tuple(visible.shape)), hint)


def _judge_masks(visible, mask, N: int, ratio: float) -> None:
    """Fail unless (visible, mask) are the right shapes and types and agree with each other."""
    B = _B
    hidden = mae.hidden_count(N, ratio)
    if mask.shape != (B, N) or mask.dtype != torch.bool:
        fail(
            _("mask should be a bool tensor (B, N) = {shape}, got {dtype} {got}").format(
                shape=(B, N), dtype=mask.dtype, got=tuple(mask.shape)
            ),
            Hint(
                N_(
                    "mask is one True or False per patch of each image: True where the patch is "
                    "hidden."
                ),
                more=N_("a bool tensor of shape (B, N), filled at the hidden places' indices."),
            ),
        )
    if visible.shape != (B, N - hidden):
        _wrong_count(visible, N, ratio)
    if visible.dtype != torch.long:
        fail(_("visible should hold indices (torch.long), got {dtype}").format(dtype=visible.dtype))
    counts = mask.sum(dim=1)
    if (counts == 0).all():
        fail(
            _("mask hides no patch at all"),
            Hint(
                N_(
                    "mask is all False: the hidden places were never marked, or every place was "
                    "cleared. Indexing mask[:, visible] with a (B, V) index takes all B rows "
                    "for each index; mark each image's own places along dim 1 instead."
                ),
                more=N_("a (B, N) tensor's scatter (or gather) works along dim 1, row by row."),
            ),
        )
    if (counts == N - hidden).all():
        fail(_("mask is True on the visible patches"), N_("mask is True where a patch is HIDDEN."))
    if not (counts == hidden).all():
        fail(
            _(
                "each image should hide exactly {hidden} of {patches} patches; counts go from "
                "{least} to {most}"
            ).format(hidden=hidden, patches=N, least=counts.min().item(), most=counts.max().item()),
            Hint(
                N_(
                    "hiding each patch with probability mask_ratio hides a different number in "
                    "each image; choose exactly that many instead."
                ),
                more=N_(
                    "a random permutation of each image's N patches (the tip: argsort of random "
                    "noise) puts the patches in random order: keep the first V as the visible ones."
                ),
            ),
        )
    if (visible.diff(dim=1) <= 0).any():
        fail(
            _("each row of visible should be in increasing order, without repeats"),
            N_("sort each row of the chosen indices."),
        )
    if (visible < 0).any() or (visible >= N).any():
        fail(_("visible should hold patch indices from 0 to {last}").format(last=N - 1))
    if mask.gather(1, visible).any():
        fail(_("some patches listed as visible are marked hidden in mask"))


@exercise("random_masking", "09_when_vits_win", mae.random_masking)
class check_random_masking:
    """Check `fn(batch_size, num_patches, mask_ratio, generator) -> (visible (B, V), mask (B, N))`:
    each image hides its own random `round(N * mask_ratio)` patches; `visible` lists the others in
    increasing order; `mask` is True where hidden. Its randomness is not compared with the
    reference's (any good random choice passes), only its properties."""

    called = N_(
        "batch_size 256 with (num_patches, mask_ratio) (16, 0.75), (10, 0.75), (12, 0.4) and (10, "
        "0.25), a seeded generator"
    )
    more = N_(
        "per image: a random order of its N patches (from noise drawn with the generator), the "
        "first V = N - round(N · mask_ratio) of that order visible and sorted, the rest hidden; "
        "mask True at the hidden ones."
    )
    worked = N_(
        "num_patches 10 with mask_ratio 0.75 hides round(7.5) = 8 patches and keeps 2 visible; 16 "
        "with 0.75 hides 12 and keeps 4. For one image of 4 patches with noise [0.3, 0.9, 0.1, "
        "0.5], the order by noise (argsort) is [2, 0, 3, 1]; with mask_ratio 0.5 the first 2 of "
        "it stay visible: [2, 0], sorted [0, 2]; mask is [False, True, False, True]. Run your "
        "steps on that noise and compare."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        return {"seed": seed}  # the generator's, for both calls

    @staticmethod
    def run(random_masking, seed):
        answers = []
        for N, ratio in _CASES:
            first = random_masking(_B, N, ratio, torch.Generator().manual_seed(seed))
            again = random_masking(_B, N, ratio, torch.Generator().manual_seed(seed))
            answers.append((first, again))
        return answers

    @staticmethod
    def judge(got, seed) -> None:
        if not (isinstance(got, list) and len(got) == len(_CASES)):
            raise ValueError("an answer that pack did not write")
        for answer, (N, ratio) in zip(got, _CASES, strict=True):
            _judge_masking(answer, N, ratio)


def _judge_masking(got, N: int, ratio: float) -> None:
    """One call's verdict (made twice with the same seed): the masks, then their randomness."""
    first, again = got
    if not (isinstance(first, tuple) and len(first) == 2):
        fail(_("it should return two tensors, (visible, mask)"))
    visible, mask = first
    if not isinstance(visible, torch.Tensor) or not isinstance(mask, torch.Tensor):
        fail(_("it should return two tensors, (visible, mask)"))
    _judge_masks(visible, mask, N, ratio)
    choices = math.comb(N, N - mae.hidden_count(N, ratio))  # the different visible sets there are
    if len({tuple(row) for row in visible.tolist()}) < min(_B, choices) // 2:
        fail(
            _("the images share the same visible patches"),
            Hint(
                N_("each image needs its own random choice of patches."),
                more=N_("draw one row of noise per image, (B, N), not one row for the batch."),
            ),
        )
    share = mask.float().mean(dim=0)  # how often each position is hidden: about mask_ratio
    expected_share = mae.hidden_count(N, ratio) / N
    if share.min() < expected_share - 0.15 or share.max() > expected_share + 0.15:
        fail(
            _(
                "some positions are hidden far more often than others ({least} to {most}, "
                "expected about {ratio})"
            ).format(
                least=f"{share.min():.2f}",
                most=f"{share.max():.2f}",
                ratio=f"{expected_share:.2f}",
            ),
            N_("every patch should be as likely to be hidden as any other."),
        )
    same = (
        isinstance(again, tuple)
        and len(again) == 2
        and isinstance(again[0], torch.Tensor)
        and torch.equal(again[0], visible)
    )
    if not same:
        fail(
            _("the same generator seed gave other patches"),
            Hint(
                N_(
                    "draw all the randomness from the `generator` argument, so that the same "
                    "seed gives the same patches."
                ),
                more=N_(
                    "torch's random functions (rand, randn, randperm...) take a generator as "
                    "a keyword argument."
                ),
            ),
        )


_LOSS_MORE = N_(
    "two means: first over each patch's K numbers, giving (B, N) errors; then over the hidden "
    "patches only (mask True), all images together."
)


@exercise("masked_patch_loss", "09_when_vits_win", mae.masked_patch_loss)
class check_masked_patch_loss:
    """Check `fn(predicted (B, N, K), target (B, N, K), mask (B, N)) -> scalar`: the mean squared
    error over the hidden patches only."""

    called = N_("predicted (3, 8, 12), target (3, 8, 12), mask (3, 8)")
    more = _LOSS_MORE
    worked = N_(
        "one image, two patches of two numbers: predicted [[[1, 1], [0, 0]]], target [[[0, 0], "
        "[0, 0]]], mask [[True, False]]. Per patch the mean squared error is [[1, 0]]; over the "
        "hidden patch only (the first) the loss is 1. With mask [[True, True]] it is 0.5. Run "
        "yours on these tensors and compare."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        return {
            "predicted": seeded(3, 8, 12, seed=seed + 1),
            "target": seeded(3, 8, 12, seed=seed + 2),
            "mask": seeded(3, 8, seed=seed + 3) > 0.4,  # hidden where True, a different count each
        }

    @staticmethod
    def run(masked_patch_loss, predicted, target, mask):
        predicted.requires_grad_(True)  # the decoder's output, as in training
        return with_gradient(masked_patch_loss(predicted, target, mask))

    @staticmethod
    def judge(got, predicted, target, mask) -> None:
        got = judge_gradient(got)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.reshape(())
        error = (predicted - target).pow(2)  # (B, N, K)
        m = mask.float()
        mistakes = [
            (
                N_(
                    "that averages over every patch: count only the hidden ones, where mask is "
                    "True (the encoder was shown the visible ones; MAE found a loss on them too "
                    "slightly worse)."
                ),
                lambda: error.mean(),
            ),
            (
                N_("that averages over the visible patches: mask is True where a patch is HIDDEN."),
                lambda: (error.mean(-1) * (1 - m)).sum() / (1 - m).sum(),
            ),
            (
                N_(
                    "that sums each patch's squared errors: take their mean over the K numbers of "
                    "a patch."
                ),
                lambda: (error.sum(-1) * m).sum() / m.sum(),
            ),
            (
                N_("divide by the number of hidden patches, not by every patch (B · N)."),
                lambda: (error.mean(-1) * m).sum() / m.numel(),
            ),
            (
                N_(
                    "that is the mean of each image's own mean: average over all hidden patches "
                    "together (images may hide different numbers of them)."
                ),
                lambda: ((error.mean(-1) * m).sum(1) / m.sum(1)).mean(),
            ),
            (
                N_(
                    "square the error instead of taking its absolute value: a mean *squared* error."
                ),
                lambda: ((predicted - target).abs().mean(-1) * m).sum() / m.sum(),
            ),
        ]
        compare(
            got,
            mae.masked_patch_loss(predicted, target, mask),
            mistakes,
            generic=Hint(
                N_(
                    "per patch the mean of the squared error over its K numbers, then the mean "
                    "over the hidden patches (where mask is True)."
                ),
                more=_LOSS_MORE,
            ),
            shape_hints={
                (3, 8): N_("that is one error per patch: average the hidden ones into one number."),
                (3, 8, 12): N_("that is the error of every number: reduce it to one number."),
            },
        )
