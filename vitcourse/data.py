"""Datasets: one door, `load_dataset`, for Fashion-MNIST, MNIST, CIFAR-10 and CIFAR-100.

Introduced in notebook 00. Fashion-MNIST (the default) ships with the course in
`data/FashionMNIST/raw/` as its four official archives, so the course runs offline. The others are
downloaded by torchvision into the data folder when the machine is online, and checked by MD5.
Offline with the files missing, `load_dataset` raises `DatasetNotFoundError` at once, saying how to
get them: never a hang, never a silent swap to another dataset.

Images come out as normalised tensors (C, H, W): each channel minus the training set's mean,
divided by its standard deviation, so that pixel values are centred on 0 with spread 1.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlparse

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, Sampler, Subset
from torchvision import datasets, transforms

from vitcourse.environment import default_root, is_online, pick_device, quick_mode

# In quick mode `make_loaders` cuts the splits to these sizes (train, validation, test).
QUICK_SIZES = (1024, 256, 256)
# Seconds a download may go without receiving data before it is given up.
DOWNLOAD_TIMEOUT = 60


@dataclass(frozen=True)
class DatasetInfo:
    """What the course needs to know about one dataset."""

    name: str
    torchvision_class: type  # the torchvision dataset that reads the files
    image_size: int  # images are square: image_size x image_size pixels
    channels: int  # 1 for grayscale, 3 for colour
    mean: tuple[float, ...]  # per-channel mean of the training images, pixels in [0, 1]
    std: tuple[float, ...]  # per-channel standard deviation of the same
    classes: tuple[str, ...]
    hflip: bool  # is a mirrored image still the same class? (a shoe yes, a "2" no)
    crop_padding: int  # random-crop augmentation: pad by this much, then crop back to size
    archives: tuple[str, ...]  # files under the data folder that torchvision unpacks offline
    # The course's models for this dataset, by preset name (`vitcourse.vit.PRESETS`,
    # `vitcourse.cnn.CNN_PRESETS`); `vit.preset_for(name)` and `cnn.cnn_preset_for(name)` build them.
    vit_preset: str  # the pure ViT the notebooks build, train and look inside
    train_preset: str  # the command-line trainer's default ViT (for 28 x 28 images, a hybrid)
    hybrid_preset: str  # a hybrid ViT (convolutional stem) for notebook 08's race
    cnn_preset: str  # the CNN notebook 08 races against the ViT


_CIFAR100_CLASSES = tuple(
    "apple aquarium_fish baby bear beaver bed bee beetle bicycle bottle bowl boy bridge bus "
    "butterfly camel can castle caterpillar cattle chair chimpanzee clock cloud cockroach couch crab "
    "crocodile cup dinosaur dolphin elephant flatfish forest fox girl hamster house kangaroo keyboard "
    "lamp lawn_mower leopard lion lizard lobster man maple_tree motorcycle mountain mouse mushroom "
    "oak_tree orange orchid otter palm_tree pear pickup_truck pine_tree plain plate poppy porcupine "
    "possum rabbit raccoon ray road rocket rose sea seal shark shrew skunk skyscraper snail snake "
    "spider squirrel streetcar sunflower sweet_pepper table tank telephone television tiger tractor "
    "train trout tulip turtle wardrobe whale willow_tree wolf woman worm".split()
)

_MNIST_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)

DATASETS: dict[str, DatasetInfo] = {
    "fashion-mnist": DatasetInfo(
        name="fashion-mnist",
        torchvision_class=datasets.FashionMNIST,
        image_size=28,
        channels=1,
        mean=(0.2860,),
        std=(0.3530,),
        classes=(
            "T-shirt/top",
            "Trouser",
            "Pullover",
            "Dress",
            "Coat",
            "Sandal",
            "Shirt",
            "Sneaker",
            "Bag",
            "Ankle boot",
        ),
        hflip=True,
        crop_padding=2,
        archives=tuple(f"FashionMNIST/raw/{f}.gz" for f in _MNIST_FILES),
        vit_preset="course-28/7",
        train_preset="course-28/conv",
        hybrid_preset="course-28/conv",
        cnn_preset="cnn-28",
    ),
    "mnist": DatasetInfo(
        name="mnist",
        torchvision_class=datasets.MNIST,
        image_size=28,
        channels=1,
        mean=(0.1307,),
        std=(0.3081,),
        classes=tuple(str(d) for d in range(10)),
        hflip=False,
        crop_padding=2,
        archives=tuple(f"MNIST/raw/{f}.gz" for f in _MNIST_FILES),
        vit_preset="course-28/7",
        train_preset="course-28/conv",
        hybrid_preset="course-28/conv",
        cnn_preset="cnn-28",
    ),
    "cifar10": DatasetInfo(
        name="cifar10",
        torchvision_class=datasets.CIFAR10,
        image_size=32,
        channels=3,
        mean=(0.4914, 0.4822, 0.4465),
        std=(0.2470, 0.2435, 0.2616),
        classes=(
            "airplane",
            "automobile",
            "bird",
            "cat",
            "deer",
            "dog",
            "frog",
            "horse",
            "ship",
            "truck",
        ),
        hflip=True,
        crop_padding=4,
        archives=("cifar-10-python.tar.gz",),
        vit_preset="course-32/4",
        train_preset="course-32/4",
        hybrid_preset="course-32/conv",
        cnn_preset="cnn-32",
    ),
    "cifar100": DatasetInfo(
        name="cifar100",
        torchvision_class=datasets.CIFAR100,
        image_size=32,
        channels=3,
        mean=(0.5071, 0.4865, 0.4409),
        std=(0.2673, 0.2564, 0.2762),
        classes=_CIFAR100_CLASSES,
        hflip=True,
        crop_padding=4,
        archives=("cifar-100-python.tar.gz",),
        vit_preset="course-32/4",
        train_preset="course-32/4",
        hybrid_preset="course-32/conv",
        cnn_preset="cnn-32",
    ),
}

# MD5 of the *uncompressed* official Fashion-MNIST files (Zalando's release). The shipped .gz
# archives come from Debian's dataset-fashion-mnist package, whose gzip headers differ from the
# official archives', so we check what is inside them instead.
FASHION_MNIST_MD5 = {
    "train-images-idx3-ubyte": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
    "train-labels-idx1-ubyte": "9018921c3c673c538a1fc5bad174d6f9",
    "t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
    "t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
}


class DatasetNotFoundError(FileNotFoundError):
    """The dataset's files are not on disk and cannot be downloaded now."""


def dataset_info(name: str) -> DatasetInfo:
    """The `DatasetInfo` for a name such as "fashion-mnist" or "cifar10"."""
    key = name.strip().lower().replace("_", "-")
    if key not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}: expected one of {', '.join(DATASETS)}")
    return DATASETS[key]


def image_transform(name: str, augment: bool = False) -> transforms.Compose:
    """PIL image -> normalised tensor, with the dataset's training augmentation if `augment`."""
    info = dataset_info(name)
    steps: list = []
    if augment:
        steps.append(transforms.RandomCrop(info.image_size, padding=info.crop_padding))
        if info.hflip:
            steps.append(transforms.RandomHorizontalFlip())
    steps += [transforms.ToTensor(), transforms.Normalize(info.mean, info.std)]
    return transforms.Compose(steps)


def denormalize(images: torch.Tensor, name: str) -> torch.Tensor:
    """Undo the normalisation, back to pixels in [0, 1] for drawing. Works on (C, H, W) or (B, C, H, W)."""
    info = dataset_info(name)
    mean = torch.tensor(info.mean, device=images.device).view(-1, 1, 1)
    std = torch.tensor(info.std, device=images.device).view(-1, 1, 1)
    return (images * std + mean).clamp(0, 1)


def prepare_fashion_mnist(root: str | Path | None = None) -> Path:
    """Unpack the shipped Fashion-MNIST archives into torchvision's layout and verify them.

    torchvision reads the uncompressed files in `root/FashionMNIST/raw/`. We write each one from
    its `.gz` (found there, or in the course's own data folder), check its MD5 against the
    official file's, and only then move it into place, so a half-written file is never used.
    Returns the raw folder.
    """
    root = Path(root) if root is not None else default_root()
    raw = root / "FashionMNIST" / "raw"
    for filename, expected in FASHION_MNIST_MD5.items():
        target = raw / filename
        if target.exists():
            got = _md5(target.read_bytes())
            if got != expected:
                raise DatasetNotFoundError(
                    f"{target} is damaged: its MD5 is {got}, expected {expected}. "
                    "Delete it and it will be unpacked again from the .gz archive."
                )
            continue
        archive = _find_fashion_archive(raw, filename)
        with gzip.open(archive, "rb") as f:
            content = f.read()
        got = _md5(content)
        if got != expected:
            raise DatasetNotFoundError(
                f"{archive} does not hold the official Fashion-MNIST {filename}: MD5 {got}, "
                f"expected {expected}. Restore it with `git checkout data/` or from Debian's "
                "dataset-fashion-mnist package."
            )
        raw.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(content)
        os.replace(tmp, target)
    return raw


def load_dataset(
    name: str = "fashion-mnist",
    train: bool = True,
    root: str | Path | None = None,
    augment: bool = False,
    download: bool = True,
) -> Dataset:
    """The training or test split of a dataset, as normalised (C, H, W) tensors and int labels.

    `name` is one of "fashion-mnist" (the default, shipped with the course), "mnist", "cifar10",
    "cifar100". `root` is the data folder (default: `default_root()`). With `augment`, each image
    is randomly cropped (and mirrored where that keeps the class) every time it is read. A
    dataset that is not on disk is downloaded when `download` is true and the machine is online;
    otherwise a `DatasetNotFoundError` says how to get it.
    """
    info = dataset_info(name)
    root = Path(root) if root is not None else default_root()
    transform = image_transform(info.name, augment)
    if info.name == "fashion-mnist":
        prepare_fashion_mnist(root)
        return info.torchvision_class(str(root), train=train, transform=transform, download=False)

    try:  # already unpacked on disk? torchvision checks (and, for CIFAR, MD5-checks) the files
        return info.torchvision_class(str(root), train=train, transform=transform, download=False)
    except RuntimeError:
        pass
    # With every archive on disk, torchvision verifies and unpacks them without the network.
    if not all((root / a).exists() for a in info.archives):
        url = _download_url(info)
        reason = None
        if not download:
            reason = "download=False was given"
        elif not is_online(url):
            reason = f"{urlparse(url).hostname} cannot be reached (offline?)"
        if reason:
            raise DatasetNotFoundError(_missing_message(info, root, url, reason))
    # torchvision's downloader sets no timeout: a stalled server would hang the notebook forever.
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT)
    try:
        return info.torchvision_class(str(root), train=train, transform=transform, download=True)
    except (OSError, RuntimeError) as e:
        raise DatasetNotFoundError(
            _missing_message(info, root, _download_url(info), f"the download failed ({e})")
        ) from e
    finally:
        socket.setdefaulttimeout(previous)


def random_crop_flip(images: torch.Tensor, padding: int, hflip: bool) -> torch.Tensor:
    """Augment a whole batch at once: each image shifted by up to `padding` pixels each way (the
    uncovered border filled with 0) and, if `hflip`, mirrored with probability 1/2.

    The same augmentation as torchvision's `RandomCrop(size, padding)` and `RandomHorizontalFlip`,
    done for (B, C, H, W) in a few tensor operations instead of image by image. Offsets and flips
    come from torch's random generator, so `torch.manual_seed` makes them repeat.
    """
    if images.ndim != 4:
        raise ValueError(
            f"expected a batch of images (B, C, H, W), got shape {tuple(images.shape)}"
        )
    b, _, h, w = images.shape
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
                f"expected uint8 images (N, C, H, W) and N labels, got {images.dtype} "
                f"{tuple(images.shape)} and {len(labels)} labels"
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
        labels = self.labels[indices]
        if labels.device.type == "cpu":
            labels = labels.tolist()  # plain ints, as torchvision's datasets give them
        # (kept on the GPU there: the loader stacks them into a batch without leaving the device)
        return list(zip(images, labels, strict=True))


class Loaders(NamedTuple):
    """The three data loaders of a training run, and the dataset they come from."""

    train: DataLoader
    val: DataLoader
    test: DataLoader
    info: DatasetInfo


def make_loaders(
    name: str = "fashion-mnist",
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
    final score. `limit` cuts the training split to that many images (validation and test to a
    quarter of it); in quick mode it defaults to `QUICK_SIZES`. `fraction` then keeps only that
    share of the training images (the same ones for a given `seed`; validation and test stay
    whole), to see how a model copes with less data (notebook 08). The images are held in memory
    as bytes and augmented a batch at a time (`InMemoryImages`).

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
        raise ValueError(f"fraction is a share of the training images in (0, 1], got {fraction}")
    train_files = load_dataset(info.name, train=True, root=root)
    train_aug = InMemoryImages.from_torchvision(train_files, info, augment=augment)
    # The validation images come from the same bytes in memory, read without augmentation.
    train_plain = InMemoryImages(train_aug.images, train_aug.labels, info, augment=False)
    test = InMemoryImages.from_torchvision(load_dataset(info.name, train=False, root=root), info)
    n = len(train_plain)
    if not 0 < val_size < n:
        raise ValueError(f"val_size must be between 1 and {n - 1} for {info.name}, got {val_size}")
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    val_idx, train_idx = order[:val_size], order[val_size:]
    test_idx = list(range(len(test)))
    if limit is None and quick_mode():
        sizes = QUICK_SIZES
    elif limit is not None:
        if limit < 4:
            raise ValueError(f"limit must be at least 4 images, got {limit}")
        sizes = (limit, max(1, limit // 4), max(1, limit // 4))
    else:
        sizes = (len(train_idx), len(val_idx), len(test_idx))
    sizes = (max(1, round(sizes[0] * fraction)), *sizes[1:])
    train_idx, val_idx, test_idx = train_idx[: sizes[0]], val_idx[: sizes[1]], test_idx[: sizes[2]]

    device = pick_device(device)
    if on_device:
        train_aug, test = train_aug.to(device), test.to(device)
        train_plain = InMemoryImages(train_aug.images, train_aug.labels, info, augment=False)
        settings = {"num_workers": 0}  # nothing to load: the batches are cut on the device
    else:
        settings = loader_settings(device)
    gen = torch.Generator().manual_seed(seed)
    splits = (Subset(train_aug, train_idx), Subset(train_plain, val_idx), Subset(test, test_idx))
    if world_size == 1:
        train = DataLoader(splits[0], batch_size, shuffle=True, generator=gen, **settings)
        val, test = (DataLoader(split, batch_size * 2, **settings) for split in splits[1:])
    else:
        shares = [
            ShardSampler(len(split), rank, world_size, shuffle, gen if shuffle else None)
            for split, shuffle in zip(splits, (True, False, False), strict=True)
        ]
        train = DataLoader(splits[0], batch_size, sampler=shares[0], generator=gen, **settings)
        val, test = (
            DataLoader(split, batch_size * 2, sampler=share, **settings)
            for split, share in zip(splits[1:], shares[1:], strict=True)
        )
    return Loaders(train=train, val=val, test=test, info=info)


class ShardSampler(Sampler[int]):
    """One process's share of a split when `world_size` processes train together (torchrun): the
    job of torch's `DistributedSampler`, for the course's loaders.

    Training (`shuffle=True`): every process draws the same permutation of the split from
    `generator` (seeded alike in each), cuts it to a multiple of `world_size` (the few images left
    over sit out this epoch, as with `drop_last`) and takes every `world_size`-th image from `rank`
    on. The shares are equal and disjoint, so every process takes the same number of steps; together
    the processes' batches are the batch one process would read from that permutation.
    Evaluation (`shuffle=False`): images rank, rank + world_size, ...: each image is read by
    exactly one process, none twice (`DistributedSampler` would pad with repeats).
    """

    def __init__(
        self,
        size: int,
        rank: int,
        world_size: int,
        shuffle: bool,
        generator: torch.Generator | None = None,
    ):
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, {world_size}), got {rank}")
        if shuffle and size < world_size:
            raise ValueError(
                f"{world_size} processes cannot share {size} training images: each needs at least one"
            )
        self.size, self.rank, self.world_size = size, rank, world_size
        self.shuffle, self.generator = shuffle, generator

    def __len__(self) -> int:
        if self.shuffle:
            return self.size // self.world_size
        return len(range(self.rank, self.size, self.world_size))

    def __iter__(self):
        if self.shuffle:
            order = torch.randperm(self.size, generator=self.generator)
            order = order[: len(self) * self.world_size]
        else:
            order = torch.arange(self.size)
        return iter(order[self.rank :: self.world_size].tolist())


def loader_settings(device: torch.device) -> dict:
    """DataLoader keyword arguments that suit the device: workers and pinned memory on CUDA only."""
    if device.type == "cuda":
        workers = min(8, os.cpu_count() or 1)
        return {"num_workers": workers, "pin_memory": True, "persistent_workers": workers > 0}
    return {"num_workers": 0}


def _md5(content: bytes) -> str:
    return hashlib.md5(content).hexdigest()


def _find_fashion_archive(raw: Path, filename: str) -> Path:
    for folder in (raw, default_root() / "FashionMNIST" / "raw"):
        if (folder / f"{filename}.gz").exists():
            return folder / f"{filename}.gz"
    raise DatasetNotFoundError(
        f"fashion-mnist: {filename}.gz is missing from {raw}. The course ships the four archives "
        "in data/FashionMNIST/raw/: restore them with `git checkout data/`, or copy them from "
        "Debian's dataset-fashion-mnist package (/usr/share/datasets/fashion-mnist/)."
    )


def _download_url(info: DatasetInfo) -> str:
    cls = info.torchvision_class
    if hasattr(cls, "mirrors"):  # MNIST and friends
        return cls.mirrors[0] + cls.resources[0][0]
    return cls.url


def _missing_message(info: DatasetInfo, root: Path, url: str, reason: str) -> str:
    archives = ", ".join(str(root / a) for a in info.archives)
    return (
        f"{info.name} is not in {root} and cannot be downloaded: {reason}.\n"
        f"To get it, either run this once on a machine that is online:\n"
        f"    python -c \"from vitcourse.data import load_dataset; load_dataset('{info.name}')\"\n"
        f"and copy its data folder here, or download the archive(s) from {url.rsplit('/', 1)[0]}/ "
        f"and place them at: {archives}.\n"
        f"Fashion-MNIST ships with the course and always works offline: load_dataset('fashion-mnist')."
    )


# Photos that ship inside scikit-image's wheel (no download): name -> the skimage.data function.
PHOTOS = ("chelsea", "astronaut", "coffee", "rocket")


def load_photo(name: str = "chelsea", size: int = 224) -> torch.Tensor:
    """One of scikit-image's photos as a (3, size, size) tensor in [0, 1]: the largest centred
    square, resized (antialiased). "chelsea" is a cat, "coffee" a cup, "rocket" a launch."""
    import skimage.data  # here, not at the top: a hosted set-up may install it first

    if name not in PHOTOS:
        raise ValueError(f"unknown photo {name!r}: expected one of {', '.join(PHOTOS)}")
    pixels = np.asarray(getattr(skimage.data, name)())  # (H, W, 3) uint8
    image = torch.from_numpy(pixels).permute(2, 0, 1).float() / 255  # (3, H, W)
    H, W = image.shape[1:]
    side = min(H, W)
    top, left = (H - side) // 2, (W - side) // 2
    square = image[:, top : top + side, left : left + side]
    resized = F.interpolate(square[None], size=(size, size), mode="bilinear", antialias=True)
    return resized[0].clamp(0, 1)
