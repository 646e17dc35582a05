"""Datasets: one door, `load_dataset`, for Fashion-MNIST, MNIST, CIFAR-10, CIFAR-100 and your own.

Introduced in notebook 00. Fashion-MNIST (the default) ships with the course in
`data/FashionMNIST/raw/` as four `.gz` archives (Debian's repacks of Zalando's files: the same
contents, checked by MD5 once unpacked), so the course runs offline. The others are
downloaded by torchvision into the data folder when the machine is online, and checked by MD5.
Offline with the files missing, `load_dataset` raises `DatasetNotFoundError` at once, saying how to
get them: never a hang, never a silent swap to another dataset. A name that is the path of a
folder, one sub-folder per class, is your own images (`vitcourse.data.folders`): every function here
takes it as it takes "cifar10".

Images come out as normalised tensors (C, H, W): each channel minus the training set's mean,
divided by its standard deviation, so that pixel values are centred on 0 with spread 1.
`make_loaders` gives a training run its train, validation and test loaders.

It reads from the other rooms of `vitcourse.data` (the table, the files, in-memory batching,
your folders, and `sharding`: each process's share under torchrun).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import torch
from torch.utils.data import DataLoader, Dataset, Subset
from torchvision import transforms
from torchvision.datasets import FashionMNIST

from vitcourse.data import datasets
from vitcourse.data.batching import InMemoryImages
from vitcourse.data.datasets import DatasetInfo
from vitcourse.data.files import (
    prepare_fashion_mnist,
    unpack_or_download,
)
from vitcourse.data.folders import (
    folder_images,
    folder_info,
    folder_split,
    is_image_folder,
    prepare_image,
)
from vitcourse.data.sharding import ShardSampler
from vitcourse.environment import default_root, pick_device, quick_mode
from vitcourse.language import _
from vitcourse.scrambling import scramble_fixed

__all__ = [
    "QUICK_SIZES",
    "Loaders",
    "dataset_info",
    "denormalize",
    "image_transform",
    "load_dataset",
    "loader_settings",
    "make_loaders",
]

# In quick mode `make_loaders` cuts the splits to these sizes (train, validation, test): two
# batches of 128 to train on, enough for every notebook to run in seconds with any dataset (a
# pass over 1,024 CIFAR images took a minute on a busy 2-core CPU, and notebooks 08 and 09 make
# several).
QUICK_SIZES = (256, 128, 128)


def dataset_info(name: str | DatasetInfo, image_size: int | None = None) -> DatasetInfo:
    """The `DatasetInfo` of a dataset: "fashion-mnist", "mnist", "cifar10", "cifar100", or the path
    of a folder of your own images, resized to `image_size` pixels (default 32;
    `vitcourse.data.folders`). A `DatasetInfo` stands for itself, so code that holds one (a run's,
    with the statistics kept in its run.json) passes it wherever a name goes."""
    if isinstance(name, DatasetInfo):
        return name
    if is_image_folder(name):
        return folder_info(name, image_size)
    info = datasets.dataset_info(name)
    if image_size is not None and image_size != info.image_size:
        raise ValueError(
            _(
                "{argument} resizes a folder of your own images; {name}'s images are {size} x "
                "{size}"
            ).format(argument="image_size", name=info.name, size=info.image_size)
        )
    return info


def image_transform(name: str | DatasetInfo, augment: bool = False) -> transforms.Compose:
    """PIL image -> normalised tensor, with the dataset's training augmentation if `augment`.
    For a folder, any image (a new photo of yours) is first made as its images were."""
    info = dataset_info(name)
    steps: list = []
    if info.folder is not None:  # to uint8 (C, S, S), then to [0, 1]: what ToTensor does
        size, channels = info.image_size, info.channels
        steps.append(transforms.Lambda(lambda image: prepare_image(image, size, channels)))
        steps.append(transforms.Lambda(lambda pixels: pixels.float().div(255)))
    if augment:
        steps.append(transforms.RandomCrop(info.image_size, padding=info.crop_padding))
        if info.hflip:
            steps.append(transforms.RandomHorizontalFlip())
    if info.folder is None:
        steps.append(transforms.ToTensor())
    steps.append(transforms.Normalize(info.mean, info.std))
    if info.scramble:  # last: the image is cropped, flipped and normalised, then scrambled
        steps.append(transforms.Lambda(lambda pixels: scramble_fixed(pixels, info.scramble)))
    return transforms.Compose(steps)


def denormalize(images: torch.Tensor, name: str | DatasetInfo) -> torch.Tensor:
    """Undo the normalisation, back to pixels in [0, 1] for drawing. Works on (C, H, W) or (B, C, H, W)."""
    info = dataset_info(name)
    mean = torch.tensor(info.mean, device=images.device).view(-1, 1, 1)  # (C, 1, 1)
    std = torch.tensor(info.std, device=images.device).view(-1, 1, 1)
    return (images * std + mean).clamp(0, 1)


def load_dataset(
    name: str | DatasetInfo = "fashion-mnist",
    train: bool = True,
    root: str | Path | None = None,
    augment: bool = False,
    download: bool = True,
) -> Dataset:
    """The training or test split of a dataset, as normalised (C, H, W) tensors and int labels.

    `name` is one of "fashion-mnist" (the default, shipped with the course), "mnist", "cifar10",
    "cifar100", one of their scrambled twins ("fashion-mnist-scrambled": `vitcourse.scrambling`),
    or the path of a folder of your own images (its training or test split, read
    once into memory: `vitcourse.data.folders`). `root` is the data folder (default:
    `default_root()`). With `augment`, each image is randomly cropped (and mirrored where that
    keeps the class) every time it is read. A dataset that is not on disk is downloaded when
    `download` is true and the machine is online; otherwise a `DatasetNotFoundError` says how to
    get it.
    """
    info = dataset_info(name)
    if info.folder is not None:
        return folder_split(info, "train" if train else "test", augment)
    root = Path(root) if root is not None else default_root()
    transform = image_transform(info, augment)
    if info.torchvision_class is FashionMNIST:  # fashion-mnist and its scrambled twin
        prepare_fashion_mnist(root)
        return info.torchvision_class(str(root), train=train, transform=transform, download=False)

    try:  # already unpacked on disk? torchvision checks (and, for CIFAR, MD5-checks) the files
        return info.torchvision_class(str(root), train=train, transform=transform, download=False)
    except RuntimeError:
        pass
    return unpack_or_download(info, root, train, transform, download)


class Loaders(NamedTuple):
    """The three data loaders of a training run, and the dataset they come from."""

    train: DataLoader
    val: DataLoader
    test: DataLoader
    info: DatasetInfo


def make_loaders(
    name: str | DatasetInfo = "fashion-mnist",
    batch_size: int = 128,
    val_size: int = 5000,
    augment: bool = True,
    root: str | Path | None = None,
    seed: int = 0,
    limit: int | None = None,
    device: str | torch.device | None = None,
    fraction: float = 1.0,
    rank: int = 0,
    world_size: int = 1,
    on_device: bool = False,
) -> Loaders:
    """Train, validation and test loaders.

    The validation split is `val_size` images held out of the training set (the same ones for a
    given `seed`), read without augmentation; the test split is the official one, kept for the
    final score. A folder of your own holds out `val_size` images or a tenth of its training
    images, whichever is fewer (or uses its own val/ beside test/). `limit` cuts the training
    split to that many images (validation and test to a quarter of it); in quick mode it defaults
    to `QUICK_SIZES` (never more than there are). `fraction` then keeps only that share of the
    training images (the same ones for a given `seed`; validation and test stay whole), to see how
    a model copes with less data (notebook 08). The images are held in memory as bytes and
    augmented a batch at a time (`InMemoryImages`).

    On a CUDA GPU, worker processes prepare the batches in pinned (page-locked) memory, which the
    trainer copies to the GPU in the background (`non_blocking`). With `on_device=True` (the
    command-line trainers on a GPU) the bytes are kept on the GPU instead, and the batches are cut,
    augmented and normalised there: nothing crosses from the CPU while training, but the batches
    then come out on the GPU, so code that plots them or compares them with CPU tensors must move
    them first (the notebooks' cells do both, so they keep the default). On a CPU the model needs
    every core, and reading batches from memory costs little next to a training step, so the main
    process loads the data itself.

    Under torchrun, `rank` and `world_size` give each process its share (`ShardSampler`): the
    training images split into equal shares (reshuffled together every epoch), validation and test
    images each read by exactly one process. `batch_size` is then each process's batch.
    """
    info = dataset_info(name)
    if not 0 < fraction <= 1:
        raise ValueError(
            _("{argument} is a share of the training images in (0, 1], got {value}").format(
                argument="fraction", value=fraction
            )
        )
    train_images, test_images, own_val = _images_in_memory(info, root, augment)
    if info.folder is not None:  # often a few hundred images: keep most of them to train on
        val_size = min(val_size, max(1, len(train_images) // 10))
    train_idx, val_idx, test_idx = _split_indices(
        len(train_images), len(test_images), info.name, val_size, seed, limit, fraction, own_val
    )
    device = pick_device(device)
    if on_device:  # the bytes live on the device: batches are cut there, no worker loads them
        train_images, test_images = train_images.to(device), test_images.to(device)
    settings = {"num_workers": 0} if on_device else loader_settings(device)
    # The validation images come from the same bytes in memory, read without augmentation.
    val_images = InMemoryImages(train_images.images, train_images.labels, info, augment=False)
    splits = (
        Subset(train_images, train_idx),
        Subset(val_images, val_idx),
        Subset(test_images, test_idx),
    )
    train, val, test = _batch_loaders(splits, batch_size, seed, rank, world_size, settings)
    return Loaders(train=train, val=val, test=test, info=info)


def loader_settings(device: torch.device) -> dict:
    """DataLoader keyword arguments that suit the device: workers and pinned memory on CUDA only."""
    if device.type == "cuda":
        workers = min(8, os.cpu_count() or 1)
        return {"num_workers": workers, "pin_memory": True, "persistent_workers": workers > 0}
    return {"num_workers": 0}


def _images_in_memory(
    info: DatasetInfo, root: str | Path | None, augment: bool
) -> tuple[InMemoryImages, InMemoryImages, int]:
    """The training split (augmented if `augment`) and the test split, held in memory as bytes,
    and how many of the training bytes, at their end, are a folder's own validation images."""
    if info.folder is not None:
        (train, labels), (val, val_labels) = (folder_images(info, s) for s in ("train", "val"))
        both = InMemoryImages(
            torch.cat([train, val]), torch.cat([labels, val_labels]), info, augment
        )
        return both, folder_split(info, "test"), len(val)
    train = InMemoryImages.from_torchvision(
        load_dataset(info.name, train=True, root=root), info, augment=augment
    )
    test = InMemoryImages.from_torchvision(load_dataset(info.name, train=False, root=root), info)
    return train, test, 0


def _split_indices(
    n_train: int,
    n_test: int,
    name: str,
    val_size: int,
    seed: int,
    limit: int | None,
    fraction: float,
    own_val: int = 0,
) -> tuple[list[int], list[int], list[int]]:
    """The images of the train, validation and test splits: `val_size` training images held out
    (the same ones for a given `seed`) unless the last `own_val` are a folder's own validation
    images, each split cut to its size (`_split_sizes`), then only `fraction` of the training
    images kept."""
    generator = torch.Generator().manual_seed(seed)
    if own_val:
        train_idx = torch.randperm(n_train - own_val, generator=generator).tolist()
        val_idx = list(range(n_train - own_val, n_train))
    elif not 0 < val_size < n_train:
        raise ValueError(
            _("{argument} must be between 1 and {most} for {name}, got {value}").format(
                argument="val_size", most=n_train - 1, name=name, value=val_size
            )
        )
    else:
        order = torch.randperm(n_train, generator=generator).tolist()
        val_idx, train_idx = order[:val_size], order[val_size:]
    test_idx = list(range(n_test))
    sizes = _split_sizes(limit, whole=(len(train_idx), len(val_idx), len(test_idx)))
    sizes = (max(1, round(sizes[0] * fraction)), *sizes[1:])
    return train_idx[: sizes[0]], val_idx[: sizes[1]], test_idx[: sizes[2]]


def _split_sizes(limit: int | None, whole: tuple[int, int, int]) -> tuple[int, int, int]:
    """How many images (train, validation, test): `limit` and a quarter of it each for the others,
    else `QUICK_SIZES` in quick mode, else the `whole` splits; never more than the whole (a folder
    of your own may hold fewer)."""
    if limit is None and quick_mode():
        cut = QUICK_SIZES
    elif limit is not None:
        if limit < 4:
            raise ValueError(
                _("{argument} must be at least 4 images, got {value}").format(
                    argument="limit", value=limit
                )
            )
        cut = (limit, max(1, limit // 4), max(1, limit // 4))
    else:
        return whole
    return tuple(min(c, w) for c, w in zip(cut, whole, strict=True))


def _batch_loaders(
    splits: tuple[Subset, Subset, Subset],
    batch_size: int,
    seed: int,
    rank: int,
    world_size: int,
    settings: dict,
) -> tuple[DataLoader, DataLoader, DataLoader]:
    """Loaders for the (train, validation, test) splits: training shuffled (seeded), evaluation in
    order and in batches twice as large (no gradients to keep). Under torchrun each process reads
    its `ShardSampler` share of each split."""
    gen = torch.Generator().manual_seed(seed)
    if world_size == 1:
        train = DataLoader(splits[0], batch_size, shuffle=True, generator=gen, **settings)
        val, test = (DataLoader(split, batch_size * 2, **settings) for split in splits[1:])
        return train, val, test
    shares = [
        ShardSampler(len(split), rank, world_size, shuffle, gen if shuffle else None)
        for split, shuffle in zip(splits, (True, False, False), strict=True)
    ]
    train = DataLoader(splits[0], batch_size, sampler=shares[0], generator=gen, **settings)
    val, test = (
        DataLoader(split, batch_size * 2, sampler=share, **settings)
        for split, share in zip(splits[1:], shares[1:], strict=True)
    )
    return train, val, test
