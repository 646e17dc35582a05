"""Check for notebook 09's scrambling exercise: `scramble` (`vitcourse.scrambling`)."""

from __future__ import annotations

import torch

from vitcourse import scrambling
from vitcourse.checks.harness import Mistakes, compare, seeded
from vitcourse.checks.hints import Hint
from vitcourse.checks.registry import exercise
from vitcourse.language import N_

_B, _C, _SIDE, _P = 2, 3, 12, 4  # a 3 x 3 grid of 4 x 4 colour patches: N = 9, K = 48
_N, _K = (_SIDE // _P) ** 2, _P * _P * _C

_MORE = N_(
    "three steps: the images as patches, (B, N, K); the patches picked in patch_order, then each "
    "patch's numbers in pixel_order; the patches back into images."
)


def _order(size: int, generator: torch.Generator) -> torch.Tensor:
    """A random permutation that is not its own inverse, so that an order used backwards shows."""
    while True:
        order = torch.randperm(size, generator=generator)
        if not torch.equal(order.argsort(), order):
            return order


@exercise("scramble", "09_when_vits_win", scrambling.scramble)
class check_scramble:
    """Check `fn(images, patch_size, patch_order, pixel_order) -> (B, C, H, W)`: patch n of the
    result is patch `patch_order[n]` of the image, and number k inside each patch is its number
    `pixel_order[k]`."""

    called = N_("images (2, 3, 12, 12), patch_size 4, patch_order (9,), pixel_order (48,)")
    raised = [
        (
            "out of bounds",
            Hint(
                N_(
                    "an index is larger than the axis it picks from: each order goes with its own "
                    "axis."
                ),
                more=N_(
                    "patch_order picks among the N patches (axis 1 of the patches, (B, N, K)), "
                    "pixel_order among the K numbers inside a patch (axis 2)."
                ),
            ),
        ),
    ]
    more = _MORE

    @staticmethod
    def inputs(seed: int) -> dict:
        generator = torch.Generator().manual_seed(seed)
        return {
            "images": seeded(_B, _C, _SIDE, _SIDE, seed=seed),
            "patch_order": _order(_N, generator),
            "pixel_order": _order(_K, generator),
        }

    @staticmethod
    def run(scramble, images, patch_order, pixel_order):
        return scramble(images, _P, patch_order, pixel_order)

    @staticmethod
    def judge(got, images, patch_order, pixel_order) -> None:
        compare(
            got,
            scrambling.scramble(images, _P, patch_order, pixel_order),
            _mistakes(images, patch_order, pixel_order),
            generic=Hint(N_("some numbers are not where the two orders put them."), more=_MORE),
            shape_hints={
                (_B, _N, _K): N_(
                    "that is the scrambled patches, (B, N, K): give them back as "
                    "images, (B, C, H, W), with unpatchify."
                )
            },
        )


# The hints for an order used backwards (the first two of `_mistakes`).
_PATCHES_BACKWARDS = Hint(
    N_(
        "the patches moved the other way: patch n of the result should be patch "
        "patch_order[n] of the image, not the other way round."
    ),
    more=N_(
        "index the patches' axis with the order to pick them; writing the "
        "patches into the places the order names moves each one backwards."
    ),
)
_NUMBERS_BACKWARDS = Hint(
    N_(
        "the numbers inside each patch moved the other way: number k of a patch "
        "should be its number pixel_order[k]."
    ),
    more=N_(
        "index the numbers' axis (axis 2) with the order to pick them, as for "
        "the patches on axis 1."
    ),
)


def _mistakes(images, patch_order, pixel_order) -> Mistakes:
    """The classic slips, each with what it would return for these inputs."""

    def scrambled(patches_by, numbers_by):
        return scrambling.scramble(images, _P, patches_by, numbers_by)

    identity = (torch.arange(_N), torch.arange(_K))
    back = (patch_order.argsort(), pixel_order.argsort())  # each order undone
    return [
        (_PATCHES_BACKWARDS, lambda: scrambled(back[0], pixel_order)),
        (_NUMBERS_BACKWARDS, lambda: scrambled(patch_order, back[1])),
        (
            N_(
                "both orders are used backwards: pick with each order as an index instead of "
                "writing into it."
            ),
            lambda: scrambled(back[0], back[1]),
        ),
        (
            Hint(
                N_(
                    "the patches changed places but the numbers inside them did not: apply "
                    "pixel_order too."
                ),
                more=N_("pixel_order reorders the K numbers of every patch, all patches alike."),
            ),
            lambda: scrambled(patch_order, identity[1]),
        ),
        (
            Hint(
                N_(
                    "the numbers inside each patch moved but the patches stayed in place: apply "
                    "patch_order too."
                ),
                more=N_("patch_order reorders the N patches of every image, all images alike."),
            ),
            lambda: scrambled(identity[0], pixel_order),
        ),
        (
            Hint(
                N_(
                    "the right numbers are in the wrong places: a plain reshape of the images "
                    "does not cut out patches."
                ),
                more=N_(
                    "cut the patches with patchify and put them back with unpatchify, from "
                    "notebook 01."
                ),
            ),
            lambda: images.reshape(_B, _N, _K)[:, patch_order][:, :, pixel_order].reshape(
                images.shape
            ),
        ),
    ]
