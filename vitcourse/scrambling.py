"""Scrambled images: a task where a CNN's assumptions are false and a ViT's are not (notebook 09).

Introduced in notebook 09. Every image is cut into its P x P patches (`vitcourse.patching`); the
patches change places by one fixed permutation, `patch_order`, and the numbers inside every patch
by another, `pixel_order`: the same two for every image, training and test alike, and each moves
every patch and every number (no patch stays in its place). Nothing is
lost (the permutations can be undone), but neighbouring pixels no longer belong together.

A CNN assumes they do: a 3 x 3 filter looks at neighbours, and pooling gathers nearby features
(notebook 08). A ViT with patches of the same P x P assumes nothing of the kind: its patch
embedding is one linear map over a patch's P*P*C numbers, for which their order is only the order
of its weights' columns, and its learned position embeddings give each place its own vector, for
which the patches' order is only which vector goes where. So a scrambled image is, to that ViT,
the same problem as the image itself; to a CNN it is a harder one.

The dataset table has a scrambled twin of every dataset ("fashion-mnist-scrambled", ...), with
`DatasetInfo.scramble` set to half the image's side: a 2 x 2 grid of squares, 14 x 14 pixels for
28 x 28 images (`datasets.scrambled_twin`). The larger the squares, the less of an image's
layout the scramble leaves to a CNN (our explanation, not measured: inside a 7 x 7 square it can
still read how bright the square is and how much it varies), while nothing changes for a ViT whose patches are those squares:
notebook 09 races that ViT against the CNN (benchmarks/vit_wins.py). The data layer scrambles
the images last (cropped, flipped and normalised first, each colour channel with its own
statistics: a scramble may move a number to another channel), so both models see the same
images.
"""

from __future__ import annotations

import functools

import torch

from vitcourse.language import _
from vitcourse.patching import patchify, unpatchify

SEED = 0  # the seed of the course's fixed orders: the same scramble on every machine


def scramble_orders(
    num_patches: int, patch_numbers: int, seed: int = SEED
) -> tuple[torch.Tensor, torch.Tensor]:
    """Two fixed random permutations: `patch_order` of the `num_patches` patches and `pixel_order`
    of the `patch_numbers` (P*P*C) numbers inside a patch, drawn from `seed`. Both move every
    element (derangements: no patch and no number stays where it was), for every seed."""
    generator = torch.Generator().manual_seed(seed)
    return _derangement(num_patches, generator), _derangement(patch_numbers, generator)


def _derangement(n: int, generator: torch.Generator) -> torch.Tensor:
    """A random permutation of `n` with no fixed point, uniform over those (draw, and draw again
    while one stays: about e = 2.7 draws on average). With one element there is nowhere to go."""
    if n < 2:
        return torch.arange(n)
    while True:
        order = torch.randperm(n, generator=generator)
        if not (order == torch.arange(n)).any():
            return order


def scramble(
    images: torch.Tensor, patch_size: int, patch_order: torch.Tensor, pixel_order: torch.Tensor
) -> torch.Tensor:
    """(B, C, H, W) images -> (B, C, H, W) scrambled: patch n of the result is patch
    `patch_order[n]` of the image, and number k inside each patch is its number `pixel_order[k]`
    (numbers in `patchify`'s order)."""
    patches = patchify(images, patch_size)  # (B, N, K)
    if patch_order.shape != (patches.shape[1],) or pixel_order.shape != (patches.shape[2],):
        message = _(
            "{shape} images in {patch_size} x {patch_size} patches need a "
            "patch_order of {patches} and a pixel_order of {numbers}, got "
            "{patch_order} and {pixel_order}"
        )
        raise ValueError(
            message.format(
                shape=tuple(images.shape),
                patch_size=patch_size,
                patches=patches.shape[1],
                numbers=patches.shape[2],
                patch_order=tuple(patch_order.shape),
                pixel_order=tuple(pixel_order.shape),
            )
        )
    moved = patches[:, patch_order][:, :, pixel_order]  # (B, N, K): the same numbers, elsewhere
    return unpatchify(moved, patch_size, images.shape[-2:])


@functools.cache
def _where_from(channels: int, height: int, width: int, patch_size: int) -> torch.Tensor:
    """For each number of a scrambled (C, H, W) image, the index it comes from in the flattened
    image: the course's fixed scramble, worked out once as a lookup table. (It moves the numbers
    as `scramble` does without calling it: the class grader's sandbox lacks notebook 09's
    solutions, `scramble` among them, and its data must still load.)"""
    places = torch.arange(channels * height * width).view(1, channels, height, width)
    patches = patchify(places, patch_size)  # (1, N, K): each number's place in the image
    patch_order, pixel_order = scramble_orders(patches.shape[1], patches.shape[2])
    moved = patches[:, patch_order][:, :, pixel_order]
    return unpatchify(moved, patch_size, (height, width)).flatten()


def scramble_fixed(images: torch.Tensor, patch_size: int) -> torch.Tensor:
    """The course's scramble (the orders of seed `SEED`) of (C, H, W) or (B, C, H, W) images of
    any type, on any device: one lookup, fast enough to run on every training batch."""
    *batch, c, h, w = images.shape
    where = _where_from(c, h, w, patch_size).to(images.device)
    return images.flatten(-3)[..., where].view(*batch, c, h, w)
