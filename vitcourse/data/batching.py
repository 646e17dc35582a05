"""In-memory batching: a dataset's images kept as bytes, augmented and normalised a batch at a time.

Introduced in notebook 00, with `make_loaders`, which builds its loaders on it. Training reads
tens of thousands of images an epoch (notebook 06): decoding and transforming one PIL image at a
time, torchvision's way, is much of an epoch's time on a 2-core CPU. Holding the images as uint8
(N, C, H, W) and cropping, flipping and normalising a whole batch in a few tensor operations gives
the same numbers many times faster (benchmarks/data_loading.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from vitcourse.data.datasets import DatasetInfo
from vitcourse.language import _
from vitcourse.scrambling import scramble_fixed


def random_crop_flip(images: torch.Tensor, padding: int, hflip: bool) -> torch.Tensor:
    """Augment a whole batch at once: each image shifted by up to `padding` pixels each way (the
    uncovered border filled with 0) and, if `hflip`, mirrored with probability 1/2.

    The same augmentation as torchvision's `RandomCrop(size, padding)` and `RandomHorizontalFlip`,
    done for (B, C, H, W) in a few tensor operations instead of image by image. Offsets and flips
    come from torch's random generator, so `torch.manual_seed` makes them repeat.
    """
    if images.ndim != 4:
        raise ValueError(
            _("expected a batch of images (B, C, H, W), got shape {shape}").format(
                shape=tuple(images.shape)
            )
        )
    b, _channels, h, w = images.shape
    on = {"device": images.device}  # on the GPU when the images are kept there
    padded = F.pad(images, (padding,) * 4)  # zeros around every image
    # The crop's top-left corner, per image.
    dy, dx = torch.randint(0, 2 * padding + 1, (2, b, 1), **on)
    rows = (dy + torch.arange(h, **on)).view(b, 1, h, 1)
    cols = (dx + torch.arange(w, **on)).view(b, 1, 1, w)
    out = padded[
        torch.arange(b, **on).view(b, 1, 1, 1),
        torch.arange(images.shape[1], **on).view(1, -1, 1, 1),
        rows,
        cols,
    ]
    if hflip:
        flip = torch.rand(b, **on) < 0.5
        out[flip] = out[flip].flip(-1)
    return out


class InMemoryImages(Dataset):
    """A dataset's images held in memory as bytes (uint8, (N, C, H, W)), read as normalised tensors.

    Training reads images a batch at a time (the DataLoader calls `__getitems__` with a batch's
    indices), so augmentation and normalisation run once per batch, in tensor operations: on a
    2-core CPU that is many times faster than decoding and transforming one PIL image at a time.
    Without augmentation an image (`dataset[i]`) comes out exactly as `load_dataset` gives it.
    """

    def __init__(
        self, images: torch.Tensor, labels: torch.Tensor, info: DatasetInfo, augment: bool
    ):
        if images.dtype != torch.uint8 or images.ndim != 4 or len(images) != len(labels):
            raise ValueError(
                _(
                    "expected uint8 images (N, C, H, W) and N labels, got {dtype} {shape} and "
                    "{count} labels"
                ).format(dtype=images.dtype, shape=tuple(images.shape), count=len(labels))
            )
        self.images, self.labels, self.info, self.augment = images, labels, info, augment
        self._mean = torch.tensor(info.mean, device=images.device).view(1, -1, 1, 1)
        self._std = torch.tensor(info.std, device=images.device).view(1, -1, 1, 1)

    def to(self, device: str | torch.device) -> InMemoryImages:
        """The same images kept on `device`: on a GPU, batches are then cut, augmented and
        normalised there, and nothing crosses from the CPU while training (Fashion-MNIST's
        70,000 images take 55 MB as bytes)."""
        return InMemoryImages(
            self.images.to(device), self.labels.to(device), self.info, self.augment
        )

    @classmethod
    def from_torchvision(cls, dataset, info: DatasetInfo, augment: bool = False) -> InMemoryImages:
        """Copy the pixels and labels out of a torchvision MNIST-style or CIFAR-style dataset."""
        pixels = torch.as_tensor(dataset.data)
        if pixels.ndim == 3:  # MNIST-style: (N, H, W), one channel
            pixels = pixels.unsqueeze(1)
        elif pixels.shape[-1] == info.channels:  # CIFAR-style: (N, H, W, C) as numpy stores it
            pixels = pixels.permute(0, 3, 1, 2)
        return cls(pixels.contiguous(), torch.as_tensor(dataset.targets), info, augment)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        """One image and its label, on the CPU wherever the bytes are kept: one image is for
        looking at (plotting, a figure's samples), batches are for training."""
        image, label = self.__getitems__([index])[0]
        return image.cpu(), int(label)

    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, int]]:
        images = self.images[indices]
        if self.augment:
            images = random_crop_flip(images, self.info.crop_padding, self.info.hflip)
        # The same arithmetic as ToTensor + Normalize, so the numbers match to the last bit.
        images = (images.float().div(255) - self._mean) / self._std
        if self.info.scramble:  # a scrambled twin: cropped, flipped, normalised, then scrambled
            images = scramble_fixed(images, self.info.scramble)
        labels = self.labels[indices]
        if labels.device.type == "cpu":
            labels = labels.tolist()  # plain ints, as torchvision's datasets give them
        # (kept on the GPU there: the loader stacks them into a batch without leaving the device)
        return list(zip(images, labels, strict=True))
