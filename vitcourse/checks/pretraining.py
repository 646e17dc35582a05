"""Checks for notebook 09's masked-patch pre-training exercises: `random_masking` and
`masked_patch_loss` (`vitcourse.pretraining`)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from vitcourse import pretraining
from vitcourse.checks.harness import call, compare, fail, seeded
from vitcourse.checks.registry import exercise


@exercise("random_masking", "09_when_vits_win", pretraining.random_masking)
def check_random_masking(fn: Callable) -> None:
    """Check `fn(batch_size, num_patches, mask_ratio, generator) -> (visible (B, V), mask (B, N))`:
    each image hides its own random `round(N * mask_ratio)` patches; `visible` lists the others in
    increasing order; `mask` is True where hidden. Its randomness is not compared with the
    reference's (any good random choice passes), only its properties."""
    B, N, ratio = 256, 16, 0.75
    hidden = pretraining.hidden_count(N, ratio)
    got = call(fn, B, N, ratio, torch.Generator().manual_seed(0))
    if not (isinstance(got, tuple) and len(got) == 2):
        fail("it should return two tensors, (visible, mask)")
    visible, mask = got
    if not isinstance(visible, torch.Tensor) or not isinstance(mask, torch.Tensor):
        fail("it should return two tensors, (visible, mask)")
    if mask.shape != (B, N) or mask.dtype != torch.bool:
        fail(
            f"mask should be a bool tensor (B, N) = {(B, N)}, got {mask.dtype} {tuple(mask.shape)}",
            "mask = torch.ones(B, N, dtype=torch.bool), then set the visible places to False.",
        )
    if visible.shape != (B, N - hidden):
        hint = (
            "mask_ratio is the share of patches hidden: V = N - round(N * mask_ratio) stay visible."
        )
        if visible.shape == (B, hidden):
            fail(f"visible holds {hidden} patches per image, expected {N - hidden}", hint)
        fail(f"visible should be (B, V) = {(B, N - hidden)}, got {tuple(visible.shape)}", hint)
    if visible.dtype != torch.long:
        fail(f"visible should hold indices (torch.long), got {visible.dtype}")
    counts = mask.sum(dim=1)
    if (counts == N - hidden).all():
        fail("mask is True on the visible patches", "mask is True where a patch is HIDDEN.")
    if not (counts == hidden).all():
        fail(
            f"each image should hide exactly {hidden} of {N} patches; counts go from "
            f"{counts.min().item()} to {counts.max().item()}",
            "pick the visible patches from a random permutation (argsort of random noise), "
            "rather than hiding each patch with probability mask_ratio.",
        )
    if (visible.diff(dim=1) <= 0).any():
        fail(
            "each row of visible should be in increasing order, without repeats",
            "sort the chosen indices: .sort(dim=1).values",
        )
    if mask.gather(1, visible).any():
        fail("some patches listed as visible are marked hidden in mask")
    if len({tuple(row) for row in visible.tolist()}) < B // 2:
        fail(
            "the images share the same visible patches",
            "draw one random permutation per image: torch.rand(B, N).argsort(dim=1).",
        )
    share = mask.float().mean(dim=0)  # how often each position is hidden: about mask_ratio each
    if share.min() < ratio - 0.15 or share.max() > ratio + 0.15:
        fail(
            f"some positions are hidden far more often than others ({share.min():.2f} to "
            f"{share.max():.2f}, expected about {ratio})",
            "every patch should be as likely to be hidden as any other.",
        )
    again = call(fn, B, N, ratio, torch.Generator().manual_seed(0))
    if not torch.equal(again[0], visible):
        fail(
            "the same generator seed gave other patches",
            "draw the noise with the generator: torch.rand(B, N, generator=generator).",
        )


@exercise("masked_patch_loss", "09_when_vits_win", pretraining.masked_patch_loss)
def check_masked_patch_loss(fn: Callable) -> None:
    """Check `fn(predicted (B, N, K), target (B, N, K), mask (B, N)) -> scalar`: the mean squared
    error over the hidden patches only."""
    predicted, target = seeded(3, 8, 12, seed=1), seeded(3, 8, 12, seed=2)
    mask = seeded(3, 8, seed=3) > 0.4  # hidden where True, a different count per image
    got = call(fn, predicted.clone(), target.clone(), mask.clone())
    if isinstance(got, torch.Tensor) and got.numel() == 1:
        got = got.reshape(())
    error = (predicted - target).pow(2)  # (B, N, K)
    m = mask.float()
    mistakes = [
        (
            "that averages over every patch: count only the hidden ones, where mask is True (the "
            "encoder was shown the visible ones; MAE found a loss on them too slightly worse).",
            lambda: error.mean(),
        ),
        (
            "that averages over the visible patches: mask is True where a patch is HIDDEN.",
            lambda: (error.mean(-1) * (1 - m)).sum() / (1 - m).sum(),
        ),
        (
            "that sums each patch's squared errors: take their mean over the K numbers of a patch.",
            lambda: (error.sum(-1) * m).sum() / m.sum(),
        ),
        (
            "divide by the number of hidden patches (mask.sum()), not by every patch (B * N).",
            lambda: (error.mean(-1) * m).sum() / m.numel(),
        ),
        (
            "that is the mean of each image's own mean: average over all hidden patches together "
            "(images may hide different numbers of them).",
            lambda: ((error.mean(-1) * m).sum(1) / m.sum(1)).mean(),
        ),
        (
            "square the difference: (predicted - target) ** 2, not its absolute value.",
            lambda: ((predicted - target).abs().mean(-1) * m).sum() / m.sum(),
        ),
    ]
    compare(
        got,
        pretraining.masked_patch_loss(predicted, target, mask),
        mistakes,
        generic="per patch the mean of (predicted - target) ** 2 over its numbers, then the mean "
        "over the hidden patches (where mask is True).",
        shape_hints={
            (3, 8): "that is one error per patch: average the hidden ones into one number.",
            (3, 8, 12): "that is the error of every number: reduce it to one number.",
        },
    )
