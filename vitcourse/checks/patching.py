"""Checks for notebook 01's exercises: `patchify` and `unpatchify` (`vitcourse.patching`)."""

from __future__ import annotations

from vitcourse import patching
from vitcourse.checks.harness import compare, seeded
from vitcourse.checks.hints import Hint
from vitcourse.checks.registry import exercise
from vitcourse.language import N_

_RESHAPE = (
    "is invalid for input of size",
    Hint(
        N_(
            "a reshape asked for sizes whose product is not the tensor's number of elements. Is "
            "the grid square in your code? This check's images are 8 × 12 pixels: a 2 × 3 grid of "
            "4 × 4 patches."
        ),
        more=N_(
            "take the grid's sides from the image's height and width, H / P rows and W / P "
            "columns, each on its own."
        ),
    ),
)
_PERMUTE = (
    "number of dims",
    Hint(
        N_(
            "permute needs one index per axis of the tensor it is given: count the axes after your "
            "reshape."
        ),
        more=N_("after splitting both sides into (grid, pixel), a batch of images has six axes."),
    ),
)

_PATCHIFY_MORE = N_(
    "write down the shape after each step: (B, C, H, W); each side split into (grid, pixel); "
    "the axes moved so the grid comes first and the channels last; flattened to (B, N, P·P·C)."
)


# patchify's hints for an answer that matches none of its mistakes, and for one (B, P·P·C, N).
_PATCHIFY_GENERIC = Hint(
    N_(
        "some patches, or some numbers inside them, are not where the instructions put "
        "them: patches in reading order, and (row, column, channel) inside each."
    ),
    more=_PATCHIFY_MORE,
)
_SWAPPED = N_("the last two axes are swapped: one row per patch, (B, N, P·P·C), is wanted.")


@exercise("patchify", "01_patches", patching.patchify)
class check_patchify:
    """Check `fn(images, patch_size) -> (B, N, P*P*C)`."""

    called = N_("images (2, 3, 8, 12), patch_size 4")
    raised = [_RESHAPE, _PERMUTE]
    more = _PATCHIFY_MORE

    @staticmethod
    def inputs(seed: int) -> dict:
        return {"images": seeded(2, 3, 8, 12, seed=seed)}  # a 2 x 3 grid of 4 x 4 patches

    @staticmethod
    def run(patchify, images):
        return patchify(images, 4)

    @staticmethod
    def judge(got, images) -> None:
        B, C, H, W, P = 2, 3, 8, 12, 4
        grid = images.reshape(B, C, H // P, P, W // P, P)
        mistakes = [
            (
                Hint(
                    N_(
                        "the patches come out column by column. Number them like reading a page: "
                        "along the first row of the grid, left to right, then the next row."
                    ),
                    more=N_(
                        "when the N patches are flattened into one axis, the grid-row axis must "
                        "come before the grid-column axis."
                    ),
                ),
                lambda: grid.permute(0, 4, 2, 3, 5, 1).reshape(B, 6, P * P * C),
            ),
            (
                Hint(
                    N_(
                        "each patch has the right pixels, in the wrong order: inside a patch the "
                        "numbers go (row, column, channel), channel last, as the instructions ask."
                    ),
                    more=N_(
                        "before the last reshape the axes should read (B, grid rows, grid "
                        "columns, pixel rows, pixel columns, channels)."
                    ),
                ),
                lambda: grid.permute(0, 2, 4, 1, 3, 5).reshape(B, 6, P * P * C),
            ),
            (
                Hint(
                    N_(
                        "inside each patch the pixels are read column by column; read them row by "
                        "row."
                    ),
                    more=N_(
                        "within a patch, the pixel-row axis must come before the pixel-column axis."
                    ),
                ),
                lambda: grid.permute(0, 2, 4, 5, 3, 1).reshape(B, 6, P * P * C),
            ),
            (
                Hint(
                    N_(
                        "a plain reshape does not cut out squares: it takes the numbers in memory "
                        "order, whole rows of pixels at a time."
                    ),
                    more=N_(
                        "split the height into (grid rows, pixel rows) and the width into (grid "
                        "columns, pixel columns) first, move the axes into the order you want, and "
                        "only then flatten."
                    ),
                ),
                lambda: images.reshape(B, 6, P * P * C),
            ),
        ]
        compare(
            got,
            patching.patchify(images, P),
            mistakes,
            generic=_PATCHIFY_GENERIC,
            shape_hints={(B, P * P * C, 6): _SWAPPED},
        )


_UNDO_MORE = N_(
    "from (B, N, P·P·C): give the patches back their grid and pixel axes, (B, H/P, W/P, P, P, "
    "C); move the axes so that the channels come second and each grid axis sits just before "
    "its pixel axis; then merge each pair into one side."
)


@exercise("unpatchify", "01_patches", patching.unpatchify)
class check_unpatchify:
    """Check `fn(patches, patch_size, image_size=(H, W)) -> (B, C, H, W)`, patchify's inverse."""

    called = N_("patches (2, 6, 48), patch_size 4, image_size (8, 12)")
    raised = [_RESHAPE, _PERMUTE]
    more = _UNDO_MORE

    @staticmethod
    def inputs(seed: int) -> dict:
        images = seeded(2, 3, 8, 12, seed=seed)
        return {"images": images, "patches": patching.patchify(images, 4)}

    @staticmethod
    def run(unpatchify, images, patches):
        return unpatchify(patches, 4, (8, 12))

    @staticmethod
    def judge(got, images, patches) -> None:
        mistakes = [
            (
                Hint(
                    N_(
                        "a plain reshape does not put the squares back: undo patchify's steps in "
                        "reverse order."
                    ),
                    more=_UNDO_MORE,
                ),
                lambda: patches.reshape(2, 3, 8, 12),
            )
        ]
        generic = Hint(
            N_(
                "unpatchify(patchify(x)) should give x back: undo patchify's steps in reverse order."
            ),
            more=_UNDO_MORE,
        )
        compare(got, images, mistakes, generic=generic)
