"""Checks for notebook 09's masked-patch pre-training exercises: `random_masking` and
`masked_patch_loss` (`vitcourse.mae`)."""

from __future__ import annotations

import torch

from vitcourse import mae
from vitcourse.checks.harness import compare, fail, seeded
from vitcourse.checks.hints import Hint
from vitcourse.checks.registry import exercise
from vitcourse.language import N_, _

_B, _N, _RATIO = 256, 16, 0.75  # random_masking's check: images, patches per image, share hidden


def _judge_masks(visible, mask) -> None:
    """Fail unless (visible, mask) are the right shapes and types and agree with each other."""
    B, N, ratio = _B, _N, _RATIO
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
        hint = N_(
            "mask_ratio is the share of patches hidden: V = N - round(N * mask_ratio) stay visible."
        )
        if visible.shape == (B, hidden):
            said = _("visible holds {hidden} patches per image, expected {visible}")
            fail(said.format(hidden=hidden, visible=N - hidden), hint)
        said = _("visible should be (B, V) = {shape}, got {got}")
        fail(said.format(shape=(B, N - hidden), got=tuple(visible.shape)), hint)
    if visible.dtype != torch.long:
        fail(_("visible should hold indices (torch.long), got {dtype}").format(dtype=visible.dtype))
    counts = mask.sum(dim=1)
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

    called = N_("batch_size 256, num_patches 16, mask_ratio 0.75, a seeded generator")
    more = N_(
        "per image: a random order of its N patches (from noise drawn with the generator), the "
        "first V = N - round(N · mask_ratio) of that order visible and sorted, the rest hidden; "
        "mask True at the hidden ones."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        return {"seed": seed}  # the generator's, for both calls

    @staticmethod
    def run(random_masking, seed):
        first = random_masking(_B, _N, _RATIO, torch.Generator().manual_seed(seed))
        again = random_masking(_B, _N, _RATIO, torch.Generator().manual_seed(seed))
        return first, again

    @staticmethod
    def judge(got, seed) -> None:
        first, again = got
        if not (isinstance(first, tuple) and len(first) == 2):
            fail(_("it should return two tensors, (visible, mask)"))
        visible, mask = first
        if not isinstance(visible, torch.Tensor) or not isinstance(mask, torch.Tensor):
            fail(_("it should return two tensors, (visible, mask)"))
        _judge_masks(visible, mask)
        if len({tuple(row) for row in visible.tolist()}) < _B // 2:
            fail(
                _("the images share the same visible patches"),
                Hint(
                    N_("each image needs its own random choice of patches."),
                    more=N_("draw one row of noise per image, (B, N), not one row for the batch."),
                ),
            )
        share = mask.float().mean(dim=0)  # how often each position is hidden: about mask_ratio
        if share.min() < _RATIO - 0.15 or share.max() > _RATIO + 0.15:
            fail(
                _(
                    "some positions are hidden far more often than others ({least} to {most}, "
                    "expected about {ratio})"
                ).format(least=f"{share.min():.2f}", most=f"{share.max():.2f}", ratio=_RATIO),
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

    @staticmethod
    def inputs(seed: int) -> dict:
        return {
            "predicted": seeded(3, 8, 12, seed=seed + 1),
            "target": seeded(3, 8, 12, seed=seed + 2),
            "mask": seeded(3, 8, seed=seed + 3) > 0.4,  # hidden where True, a different count each
        }

    @staticmethod
    def run(masked_patch_loss, predicted, target, mask):
        return masked_patch_loss(predicted, target, mask)

    @staticmethod
    def judge(got, predicted, target, mask) -> None:
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
