"""Checks for notebook 01's exercises: `patchify` and `unpatchify` (`vitcourse.patching`)."""

from __future__ import annotations

from vitcourse import patching
from vitcourse.checks.harness import compare, seeded
from vitcourse.checks.registry import exercise


@exercise("patchify", "01_patches", patching.patchify)
class check_patchify:
    """Check `fn(images, patch_size) -> (B, N, P*P*C)`."""

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
                "the patches come out column by column. Walk the grid like reading a page: along "
                "the first row left to right, then the next row (permute grid rows before grid "
                "columns).",
                lambda: grid.permute(0, 4, 2, 3, 5, 1).reshape(B, 6, P * P * C),
            ),
            (
                "each patch has the right pixels, but in the wrong order: channels should come "
                "last, (row, column, channel), as the instructions ask. Permute to "
                "(B, H/P, W/P, P, P, C).",
                lambda: grid.permute(0, 2, 4, 1, 3, 5).reshape(B, 6, P * P * C),
            ),
            (
                "inside each patch the pixels are read column by column; read them row by row.",
                lambda: grid.permute(0, 2, 4, 5, 3, 1).reshape(B, 6, P * P * C),
            ),
            (
                "a plain reshape does not cut out squares: it takes numbers in memory order (whole "
                "pixel rows). First split each side into (grid, pixel) with reshape, then permute, "
                "then reshape.",
                lambda: images.reshape(B, 6, P * P * C),
            ),
        ]
        compare(
            got,
            patching.patchify(images, P),
            mistakes,
            shape_hints={(B, P * P * C, 6): "the last two axes are swapped: (B, N, P*P*C) wanted."},
        )


@exercise("unpatchify", "01_patches", patching.unpatchify)
class check_unpatchify:
    """Check `fn(patches, patch_size, image_size=(H, W)) -> (B, C, H, W)`, patchify's inverse."""

    @staticmethod
    def inputs(seed: int) -> dict:
        images = seeded(2, 3, 8, 12, seed=seed)
        return {"images": images, "patches": patching.patchify(images, 4)}

    @staticmethod
    def run(unpatchify, images, patches):
        return unpatchify(patches, 4, (8, 12))

    @staticmethod
    def judge(got, images, patches) -> None:
        undo = (
            "undo patchify's steps in reverse: reshape to (B, H/P, W/P, P, P, C), permute to "
            "(B, C, H/P, P, W/P, P), then reshape to (B, C, H, W)."
        )
        mistakes = [
            (
                "a plain reshape does not put the squares back; " + undo,
                lambda: patches.reshape(2, 3, 8, 12),
            )
        ]
        compare(
            got, images, mistakes, generic="unpatchify(patchify(x)) should give x back: " + undo
        )
