"""Photos at the paper's scale: 224 x 224 colour images, for the ImageNet-sized ViTs.

The course's datasets are small (28 x 28, 32 x 32); the paper's ViT-B/16 reads 224 x 224 photos as
14 x 14 = 196 patches of 16 x 16 pixels (Section 3.1). These photos ship inside scikit-image's
wheel, so they need no download: notebook 01 cuts one into those 196 patches, notebook 05 feeds
one to ViT-Tiny/16, and notebook 09 looks inside a pretrained ViT with three of them.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from vitcourse.language import _

# Photos that ship inside scikit-image's wheel (no download): name -> the skimage.data function.
PHOTOS = ("chelsea", "astronaut", "coffee", "rocket")


def load_photo(name: str = "chelsea", size: int = 224) -> torch.Tensor:
    """One of scikit-image's photos as a (3, size, size) tensor in [0, 1]: the largest centred
    square, resized (antialiased). "chelsea" is a cat, "coffee" a cup, "rocket" a launch."""
    import skimage.data  # here, not at the top: a hosted set-up may install it first

    if name not in PHOTOS:
        raise ValueError(
            _("unknown photo {name}: expected one of {names}").format(
                name=repr(name), names=", ".join(PHOTOS)
            )
        )
    pixels = np.asarray(getattr(skimage.data, name)())  # (H, W, 3) uint8
    image = torch.from_numpy(pixels).permute(2, 0, 1).float() / 255  # (3, H, W)
    H, W = image.shape[1:]
    side = min(H, W)
    top, left = (H - side) // 2, (W - side) // 2
    square = image[:, top : top + side, left : left + side]  # (3, side, side)
    resized = F.interpolate(square[None], size=(size, size), mode="bilinear", antialias=True)
    return resized[0].clamp(0, 1)  # (3, size, size)
