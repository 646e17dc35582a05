"""Checks for notebook 01's exercises: `patchify` and `unpatchify` (`vitcourse.patching`)."""

from __future__ import annotations

from vitcourse import patching
from vitcourse.checks.harness import Hint, compare, seeded
from vitcourse.checks.registry import exercise
from vitcourse.language import N_

_RESHAPE = (
    "is invalid for input of size",
    Hint(
        N_(
            "a reshape asked for sizes whose product is not the tensor's number of elements. Take "
            "every size from the arguments: the channels C and the grid's H / P rows and W / P "
            "columns from the images' shape, each on its own (the check's first images are 8 × 12 "
            "pixels, not square: a 2 × 3 grid of 4 × 4 patches), and P from patch_size (the check "
            "tries 4, then 2)."
        ),
        more=N_(
            "print the shape of the tensor you reshape and the sizes you ask for: their products "
            "must be equal."
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


_CASES = ((2, 3, 8, 12, 4), (2, 3, 8, 8, 2))  # (B, C, H, W, P): a 2 x 3 grid, then a 4 x 4 one
_PATCH_SIZE = Hint(
    N_(
        "your patches do not change with patch_size: use the argument for P (the check tries 4, "
        "then 2)."
    ),
    more=N_("every size in your code should come from images.shape or from patch_size."),
)


def _patchify_mistakes(images, P) -> list:
    """patchify's classic slips for these images, each with what it would return."""
    B, C, H, W = images.shape
    N = (H // P) * (W // P)
    grid = images.reshape(B, C, H // P, P, W // P, P)
    return [
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
            lambda: grid.permute(0, 4, 2, 3, 5, 1).reshape(B, N, P * P * C),
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
            lambda: grid.permute(0, 2, 4, 1, 3, 5).reshape(B, N, P * P * C),
        ),
        (
            Hint(
                N_("inside each patch the pixels are read column by column; read them row by row."),
                more=N_(
                    "within a patch, the pixel-row axis must come before the pixel-column axis."
                ),
            ),
            lambda: grid.permute(0, 2, 4, 5, 3, 1).reshape(B, N, P * P * C),
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
            lambda: images.reshape(B, N, P * P * C),
        ),
    ]


@exercise("patchify", "01_patches", patching.patchify)
class check_patchify:
    """Check `fn(images, patch_size) -> (B, N, P*P*C)`, on a 2 x 3 grid of 4 x 4 patches and a
    4 x 4 grid of 2 x 2 patches."""

    called = N_("images (2, 3, 8, 12) with patch_size 4, and images (2, 3, 8, 8) with patch_size 2")
    raised = [_RESHAPE, _PERMUTE]
    more = _PATCHIFY_MORE
    worked = N_(
        "a 1 × 1 × 4 × 4 image holding the numbers 0 to 15 row by row (torch.arange(16.).reshape(1, "
        "1, 4, 4)), cut into 2 × 2 patches, gives (1, 4, 4): the patches [0, 1, 4, 5], [2, 3, 6, "
        "7], [8, 9, 12, 13] and [10, 11, 14, 15], in that order. Run yours on that image and "
        "compare; then print the shape after each of your steps."
    )
    shown = {"more_images": "`images`"}

    @staticmethod
    def inputs(seed: int) -> dict:
        (B, C, H, W), (b, c, h, w) = (case[:4] for case in _CASES)
        return {
            "images": seeded(B, C, H, W, seed=seed),
            "more_images": seeded(b, c, h, w, seed=seed + 1),
        }

    @staticmethod
    def run(patchify, images, more_images):
        return [patchify(images, _CASES[0][-1]), patchify(more_images, _CASES[1][-1])]

    @staticmethod
    def judge(got, images, more_images) -> None:
        if not (isinstance(got, list) and len(got) == 2):
            raise ValueError("an answer that pack did not write")
        for answer, x, (B, C, H, W, P) in zip(got, (images, more_images), _CASES, strict=True):
            N = (H // P) * (W // P)
            other = 4 if P != 4 else 2  # what a patch size written into the code would give
            compare(
                answer,
                patching.patchify(x, P),
                _patchify_mistakes(x, P),
                generic=_PATCHIFY_GENERIC,
                shape_hints={
                    (B, P * P * C, N): _SWAPPED,
                    (B, (H // other) * (W // other), other * other * C): _PATCH_SIZE,
                },
            )


_UNDO_MORE = N_(
    "from (B, N, P·P·C): give the patches back their grid and pixel axes, (B, H/P, W/P, P, P, "
    "C); move the axes so that the channels come second and each grid axis sits just before "
    "its pixel axis; then merge each pair into one side."
)


def _unpatchify_mistakes(patches, P, H, W) -> list:
    """unpatchify's classic slips for these patches, each with what it would return."""
    B, N, K = patches.shape
    C = K // (P * P)
    grid = patches.reshape(B, H // P, W // P, P, P, C)  # (B, grid rows, grid cols, P, P, C)
    return [
        (
            Hint(
                N_(
                    "a plain reshape does not put the squares back: undo patchify's steps in "
                    "reverse order."
                ),
                more=_UNDO_MORE,
            ),
            lambda: patches.reshape(B, C, H, W),
        ),
        (
            Hint(
                N_(
                    "the grid and pixel axes are interleaved the wrong way: each grid axis goes "
                    "just before its own pixel axis, (grid rows, pixel rows) for the height and "
                    "(grid columns, pixel columns) for the width."
                ),
                more=_UNDO_MORE,
            ),
            lambda: grid.permute(0, 5, 3, 1, 4, 2).reshape(B, C, H, W),
        ),
        (
            Hint(
                N_(
                    "inside a patch the numbers are (row, column, channel), channel last, as "
                    "patchify wrote them: split each patch's P·P·C numbers in that order."
                ),
                more=_UNDO_MORE,
            ),
            lambda: (
                patches.reshape(B, H // P, W // P, C, P, P)
                .permute(0, 3, 1, 4, 2, 5)
                .reshape(B, C, H, W)
            ),
        ),
        (
            Hint(
                N_(
                    "the patches are laid out column by column: patch n goes to grid row n // "
                    "(W / P), column n % (W / P), in reading order."
                ),
                more=N_("the N axis splits into (grid rows, grid columns), rows first."),
            ),
            lambda: (
                patches.reshape(B, W // P, H // P, P, P, C)
                .permute(0, 5, 2, 3, 1, 4)
                .reshape(B, C, H, W)
            ),
        ),
        (
            N_("inside each patch the rows and columns of pixels are swapped."),
            lambda: grid.permute(0, 5, 1, 4, 2, 3).reshape(B, C, H, W),
        ),
    ]


@exercise("unpatchify", "01_patches", patching.unpatchify)
class check_unpatchify:
    """Check `fn(patches, patch_size, image_size=(H, W)) -> (B, C, H, W)`, patchify's inverse, on
    8 x 12 images in 4 x 4 patches and 8 x 8 images in 2 x 2 patches. Only the patches reach the
    learner's code: the images are computed again on the judge's side."""

    called = N_(
        "patches (2, 6, 48) with patch_size 4 and image_size (8, 12), and patches (2, 16, 12) "
        "with patch_size 2 and image_size (8, 8)"
    )
    raised = [_RESHAPE, _PERMUTE]
    more = _UNDO_MORE
    worked = N_(
        "the patches [0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15] (one image, one "
        "channel: a (1, 4, 4) tensor), patch_size 2 and image_size (4, 4) give back the (1, 1, 4, "
        "4) image whose rows are 0 1 2 3, 4 5 6 7, 8 9 10 11, 12 13 14 15. On the way the shapes "
        "are (1, 2, 2, 2, 2, 1), then (1, 1, 2, 2, 2, 2), then (1, 1, 4, 4). Run yours on it and "
        "compare."
    )
    shown = {"more_patches": "`patches`"}

    @staticmethod
    def inputs(seed: int) -> dict:
        (B, C, H, W, P), (b, c, h, w, p) = _CASES
        return {
            "patches": patching.patchify(seeded(B, C, H, W, seed=seed), P),
            "more_patches": patching.patchify(seeded(b, c, h, w, seed=seed + 1), p),
        }

    @staticmethod
    def run(unpatchify, patches, more_patches):
        (H, W, P), (h, w, p) = (case[2:] for case in _CASES)
        return [unpatchify(patches, P, (H, W)), unpatchify(more_patches, p, (h, w))]

    @staticmethod
    def judge(got, patches, more_patches) -> None:
        if not (isinstance(got, list) and len(got) == 2):
            raise ValueError("an answer that pack did not write")
        generic = Hint(
            N_(
                "unpatchify(patchify(x)) should give x back: undo patchify's steps in reverse "
                "order."
            ),
            more=_UNDO_MORE,
        )
        for answer, x, (B, C, H, W, P) in zip(got, (patches, more_patches), _CASES, strict=True):
            compare(
                answer,
                patching.unpatchify(x, P, (H, W)),
                _unpatchify_mistakes(x, P, H, W),
                generic=generic,
                shape_hints={
                    (B, C, W, H): N_(
                        "that is (B, C, W, H): image_size is (H, W), the height first, and the "
                        "image comes back (B, C, H, W)."
                    )
                },
            )
