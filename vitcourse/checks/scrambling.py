"""Check for notebook 09's scrambling exercise: `scramble` (`vitcourse.scrambling`)."""

from __future__ import annotations

import torch

from vitcourse import scrambling
from vitcourse.checks.harness import Hint, Mistakes, compare, seeded
from vitcourse.checks.registry import exercise
from vitcourse.language import N_

# (B, C, H, W, P) of the check's two calls: a 3 x 3 grid of 4 x 4 colour patches (N = 9, K = 48),
# then a 4 x 6 grid of 2 x 2 ones on images that are not square (N = 24, K = 12).
_CASES = ((2, 3, 12, 12, 4), (2, 3, 8, 12, 2))

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

    called = N_(
        "images (2, 3, 12, 12) with patch_size 4, patch_order (9,) and pixel_order (48,); images "
        "(2, 3, 8, 12) with patch_size 2, patch_order (24,) and pixel_order (12,)"
    )
    raised = [
        (
            "out of bounds",
            Hint(
                N_(
                    "an index is larger than the axis it picks from: each order goes with its own "
                    "axis, and the patches must be cut with the patch_size given (the check tries "
                    "4, then 2)."
                ),
                more=N_(
                    "patch_order picks among the N patches (axis 1 of the patches, (B, N, K)), "
                    "pixel_order among the K numbers inside a patch (axis 2)."
                ),
            ),
        ),
        *[
            (
                text,
                Hint(
                    N_(
                        "putting the patches back needs the image's height and width: the check's "
                        "second images are 8 × 12, not square. Give unpatchify both sides, (H, W)."
                    ),
                    more=N_("the images' last two sizes are their height and width."),
                ),
            )
            for text in ("do not tile", "do not make a square grid")
        ],
    ]
    more = _MORE

    worked = N_(
        "a 1 × 1 × 4 × 4 image holding 0 to 15 row by row, patch_size 2, patch_order [1, 0, 2, 3] "
        "and pixel_order [1, 0, 2, 3]. Its patches are [0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, "
        "13], [10, 11, 14, 15]; picked in patch_order, then each one's numbers in pixel_order: "
        "[3, 2, 6, 7], [1, 0, 4, 5], [9, 8, 12, 13], [11, 10, 14, 15]; back as an image, its first "
        "row reads 3 2 1 0. Run yours on it and compare."
    )
    shown = {
        "more_images": "`images`",
        "more_patch_order": "`patch_order`",
        "more_pixel_order": "`pixel_order`",
    }

    @staticmethod
    def inputs(seed: int) -> dict:
        generator = torch.Generator().manual_seed(seed)
        given = {}
        for prefix, (B, C, H, W, P) in zip(("", "more_"), _CASES, strict=True):
            given[prefix + "images"] = seeded(B, C, H, W, seed=seed + len(given))
            given[prefix + "patch_order"] = _order((H // P) * (W // P), generator)
            given[prefix + "pixel_order"] = _order(P * P * C, generator)
        return given

    @staticmethod
    def run(
        scramble, images, patch_order, pixel_order, more_images, more_patch_order, more_pixel_order
    ):
        return [
            scramble(images, _CASES[0][-1], patch_order, pixel_order),
            scramble(more_images, _CASES[1][-1], more_patch_order, more_pixel_order),
        ]

    @staticmethod
    def judge(
        got, images, patch_order, pixel_order, more_images, more_patch_order, more_pixel_order
    ) -> None:
        if not (isinstance(got, list) and len(got) == 2):
            raise ValueError("an answer that pack did not write")
        calls = (
            (images, patch_order, pixel_order),
            (more_images, more_patch_order, more_pixel_order),
        )
        for answer, (x, patches_by, numbers_by), (B, C, H, W, P) in zip(
            got, calls, _CASES, strict=True
        ):
            N, K = (H // P) * (W // P), P * P * C
            compare(
                answer,
                scrambling.scramble(x, P, patches_by, numbers_by),
                _mistakes(x, P, patches_by, numbers_by),
                generic=Hint(N_("some numbers are not where the two orders put them."), more=_MORE),
                shape_hints={
                    (B, N, K): N_(
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


def _mistakes(images, P: int, patch_order, pixel_order) -> Mistakes:
    """The classic slips, each with what it would return for these inputs."""
    B = images.shape[0]
    N, K = len(patch_order), len(pixel_order)

    def scrambled(patches_by, numbers_by):
        return scrambling.scramble(images, P, patches_by, numbers_by)

    identity = (torch.arange(N), torch.arange(K))
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
            lambda: images.reshape(B, N, K)[:, patch_order][:, :, pixel_order].reshape(
                images.shape
            ),
        ),
    ]
