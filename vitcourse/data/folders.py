"""Your own images: a folder with one sub-folder per class, read as a dataset (notebook 10).

The layout is torchvision's `ImageFolder`'s: `PATH/cats/*.jpg`, `PATH/dogs/*.png`, ..., the classes
being the sub-folders' names, sorted. With split sub-folders, `PATH/train/cats/...` and
`PATH/test/cats/...` (or `val/`), the test split is given; without them one image in five of each
class is set aside for testing, drawn with a fixed seed: the same ones every time.

Every image, whatever its size and mode (RGB, grayscale, RGBA, palette, JPEG, PNG, ...), is decoded
once with PIL, turned upright (EXIF), laid on white where it is transparent, scaled so its shorter
side is `image_size` pixels and cropped to the centred square (torchvision's Resize + CenterCrop),
then kept in memory as bytes: `InMemoryImages` reads it as it reads CIFAR. The folder's
`DatasetInfo` holds its classes, its channels (1 when every training image is grayscale, else 3),
the statistics of its training images, and the course's models for its size. A file PIL cannot read
is named and skipped; hidden files (.DS_Store) are ignored. `vitcourse.data.loading` takes a
folder's path wherever it takes a dataset's name: `DATASET = "my_photos"` works in every notebook.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path

import numpy as np
import torch
import torchvision
from PIL import Image, ImageOps

from vitcourse.data.batching import InMemoryImages
from vitcourse.data.datasets import DATASETS, DatasetInfo, table_key
from vitcourse.language import N_, _

# 32 x 32 pixels unless asked otherwise: CIFAR's size, so the course's 32-pixel models (8 x 8
# patches of 4 x 4 pixels) train on a laptop's CPU in minutes. Each doubling of the side makes four
# times as many patches, and attention costs grow faster than that.
DEFAULT_IMAGE_SIZE = 32
# Sizes with a course model: 28 (Fashion-MNIST's), and multiples of 4 from 16 to 64 (CIFAR's, whose
# 4 x 4 patches fit any multiple of 4; at 64, 256 patches: a CPU's limit).
SIZES_THAT_WORK = N_("28, or a multiple of 4 from 16 to 64 (32 by default)")  # shown through _
TEST_EVERY = 5  # without a test split, one image in 5 of each class is held out for testing
SPLITS = {"train": "train", "val": "val", "valid": "val", "validation": "val", "test": "test"}
LITTER = {"__MACOSX", "Thumbs.db", "desktop.ini"}  # what zip tools and file browsers leave behind
GRAY_MODES = {"1", "L", "LA", "La", "I", "I;16", "I;16L", "I;16B", "F"}


class FolderError(ValueError):
    """A folder that cannot be a classification dataset; the message says what was found."""


@dataclasses.dataclass(frozen=True)
class _Folder:
    """A folder's images, decoded once: RGB bytes (N, 3, S, S), labels, each image's split."""

    info: DatasetInfo
    images: torch.Tensor  # uint8 (N, 3, S, S); grayscale images have three equal channels
    labels: torch.Tensor  # (N,) class indices
    splits: tuple[str, ...]  # "train", "val" or "test", per image
    changed: tuple  # the folders' modification times when read: a new or deleted file shows


_READ: dict[tuple[Path, int], _Folder] = {}  # (folder, image size) -> its images, decoded once


class FolderImages(InMemoryImages):
    """One split of a folder, with torchvision's names for what notebook 00 reads."""

    @property
    def data(self) -> torch.Tensor:
        """The bytes as torchvision keeps them: (N, H, W) for grayscale, (N, H, W, C) for colour."""
        return self.images[:, 0] if self.images.shape[1] == 1 else self.images.permute(0, 2, 3, 1)

    @property
    def targets(self) -> list[int]:
        return self.labels.tolist()

    @property
    def classes(self) -> list[str]:
        return list(self.info.classes)


def is_image_folder(name: str | os.PathLike) -> bool:
    """True when `name` is not a dataset of the course's table but a path that exists: the course's
    names win, so a folder called "mnist" is given as "./mnist"."""
    return table_key(str(name)) not in DATASETS and Path(name).expanduser().exists()


def folder_name(path: str | os.PathLike) -> str:
    """A folder's dataset name: its own name, or "mnist-folder" for a folder called "mnist", so
    that no model or result the course ships for its own datasets is taken for it."""
    name = _full_path(path).name
    return f"{name}-folder" if table_key(name) in DATASETS else name


def folder_info(path: str | os.PathLike, image_size: int | None = None) -> DatasetInfo:
    """The `DatasetInfo` of a folder of images resized to `image_size` (default 32) pixels."""
    return _read(path, image_size).info


def kept_info(path: str | os.PathLike, kept: dict) -> DatasetInfo:
    """The folder's `DatasetInfo` with the size, channels and statistics a run kept
    (`kept_settings`), so a resumed run normalises as it began; an error if its classes changed."""
    info = folder_info(path, kept["image_size"])
    if list(info.classes) != list(kept["classes"]):
        raise FolderError(
            _(
                "the classes in {folder} changed since the run began: it had {before}; now {now}"
            ).format(
                folder=info.folder, before=", ".join(kept["classes"]), now=", ".join(info.classes)
            )
        )
    statistics = {key: tuple(kept[key]) for key in ("mean", "std")}
    return dataclasses.replace(info, channels=kept["channels"], **statistics)


def kept_settings(info: DatasetInfo) -> dict:
    """What a run keeps of a folder (in run.json): its size, classes, channels and statistics."""
    fields = ("image_size", "channels", "mean", "std", "classes")
    return {key: list(v) if isinstance(v := getattr(info, key), tuple) else v for key in fields}


def folder_images(info: DatasetInfo, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A split's uint8 images (N, C, S, S) with `info.channels`, and its labels. "val" is the
    folder's own validation split (its val/ beside test/): none for most folders."""
    folder = _read(info.folder, info.image_size)
    chosen = torch.tensor([s == split for s in folder.splits], dtype=torch.bool)
    return _with_channels(folder.images[chosen], info.channels), folder.labels[chosen]


def folder_split(info: DatasetInfo, split: str, augment: bool = False) -> FolderImages:
    """A split of the folder as a dataset of normalised (C, S, S) tensors and int labels."""
    return FolderImages(*folder_images(info, split), info, augment=augment)


def prepare_image(image: Image.Image, size: int, channels: int) -> torch.Tensor:
    """Any PIL image -> uint8 (channels, size, size): upright, on white where transparent, its
    shorter side scaled to `size` and the centred square cut out."""
    image = ImageOps.exif_transpose(image)  # a phone's photo, turned as it was taken
    if image.mode.startswith("I"):  # 16-bit grayscale: scale 0-65535 to 0-255, not clip it
        image = image.convert("I").point(lambda v: v / 256).convert("L")
    if "A" in image.getbands() or "transparency" in image.info:
        rgba = image.convert("RGBA")
        image = Image.alpha_composite(Image.new("RGBA", rgba.size, "white"), rgba)
    image = ImageOps.fit(image.convert("RGB"), (size, size), Image.Resampling.BICUBIC)
    rgb = torch.from_numpy(np.array(image)).permute(2, 0, 1)  # (S, S, 3) -> (3, S, S)
    return _with_channels(rgb.unsqueeze(0), channels)[0]


def _read(path: str | os.PathLike, image_size: int | None) -> _Folder:
    """The folder's images at `image_size`, decoded once and read again only if files came or
    went; a `FolderError` saying what was found if it cannot be a dataset."""
    root = _full_path(path)
    size = DEFAULT_IMAGE_SIZE if image_size is None else image_size
    _family(size)  # a size without a model is refused before any decoding
    if not root.exists():
        raise FolderError(_("there is no folder {folder}").format(folder=root))
    if not root.is_dir():
        raise FolderError(
            _(
                "{file} is a file, not a folder: your own dataset is a folder with one sub-folder "
                "per class (unzip an archive first)"
            ).format(file=root)
        )
    changed = _modification_times(root)
    cached = _READ.get((root, size))
    if cached is None or cached.changed != changed:
        _READ[(root, size)] = _decode_folder(root, size, changed)
    return _READ[(root, size)]


def _decode_folder(root: Path, size: int, changed: tuple) -> _Folder:
    """Decode every file of the folder that PIL can read, name the others, split, and measure."""
    splits = _layout(root)
    classes, files = _list_files(root, splits)
    decoded, skipped = [], []
    for split, label, file in files:
        try:
            with Image.open(file) as image:
                image.draft(None, (size, size))  # a JPEG decodes at a fraction of its size: fast
                gray = image.mode in GRAY_MODES
                decoded.append((split, label, gray, prepare_image(image, size, 3)))
        except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError):
            skipped.append(str(file.relative_to(root)))  # not an image, truncated, empty...
    if skipped:
        _warn_skipped(root, skipped)
    if not decoded:
        raise FolderError(
            _("found no readable images in {folder} ({count} class folders)").format(
                folder=root, count=len(classes)
            )
        )
    names = [split for split, *_rest in decoded]
    labels = torch.tensor([label for _split, label, *_rest in decoded])
    if "test" not in splits:
        names = _hold_out_tests(labels, names)
    _check_training_images(splits["train"], classes, labels, names)
    images = torch.stack([image for *_rest, image in decoded])
    train = torch.tensor([s == "train" for s in names])
    grays = torch.tensor([gray for _split, _label, gray, _image in decoded])
    channels = 1 if grays[train].all() else 3  # grayscale only if every training image is
    info = _info(root, size, classes, channels, _with_channels(images[train], channels))
    return _Folder(info, images, labels, tuple(names), changed)


def _warn_skipped(root: Path, skipped: list[str]) -> None:
    """Name the files PIL could not read (the first ten, and how many more)."""
    shown = ", ".join(skipped[:10])
    if skipped[10:]:
        shown += _(" and {count} more").format(count=len(skipped) - 10)
    if len(skipped) > 1:
        message = _("{folder}: skipped {count} files that are not readable images: {files}")
    else:
        message = _("{folder}: skipped {count} file that is not a readable image: {files}")
    warnings.warn(message.format(folder=root, count=len(skipped), files=shown), stacklevel=6)


def _layout(root: Path) -> dict[str, Path]:
    """The split folders: {"train": root} for one folder of classes, else its train/ with test/
    (or val/, which then is the test split; both: val/ is the validation split)."""
    folders = _subfolders(root)
    splits = {SPLITS[f.name.lower()]: f for f in folders if f.name.lower() in SPLITS}
    if "train" not in splits:
        return {"train": root}
    others = [f.name for f in folders if f.name.lower() not in SPLITS]
    if others:
        raise FolderError(
            _(
                "{folder} has split folders ({splits}) and also {others}: put every class in "
                "{train} and {test} (or {val}), or none"
            ).format(
                folder=root,
                splits=", ".join(f.name for f in splits.values()),
                others=", ".join(others),
                train="train/",
                test="test/",
                val="val/",
            )
        )
    if "val" in splits and "test" not in splits:
        splits["test"] = splits.pop("val")
    return splits


def _list_files(root: Path, splits: dict[str, Path]) -> tuple[tuple[str, ...], list]:
    """The classes (every split's sub-folders' names, sorted) and (split, label, path) per file."""
    per_split = {split: {c.name: c for c in _subfolders(f)} for split, f in splits.items()}
    classes = tuple(sorted(set().union(*per_split.values())))
    if len(classes) < 2:
        if classes:
            message = _(
                "found 1 class ({name}) in {folder}: a classifier needs at least two, "
                "each a sub-folder of its images ({example})"
            )
        else:
            message = _(
                "found no class sub-folders in {folder}: a classifier needs at least "
                "two, each a sub-folder of its images ({example})"
            )
        raise FolderError(
            message.format(
                name=classes[0] if classes else "",
                folder=splits["train"],
                example="cats/..., dogs/...",
            )
        )
    files = [
        (split, label, file)
        for split, in_split in per_split.items()
        for label, name in enumerate(classes)
        if name in in_split
        for file in _files_in(in_split[name])
    ]
    return classes, files


def _hold_out_tests(labels: torch.Tensor, names: list[str]) -> list[str]:
    """A seeded random 1/`TEST_EVERY` of each class (the same ones every time) to "test"."""
    names, generator = list(names), torch.Generator().manual_seed(0)
    for label in labels.unique().tolist():
        members = torch.nonzero(labels == label).flatten()
        chosen = members[torch.randperm(len(members), generator=generator)]
        for index in chosen[: len(members) // TEST_EVERY].tolist():
            names[index] = "test"
    return names


def _check_training_images(train: Path, classes: tuple, labels: torch.Tensor, names: list) -> None:
    """Every class needs a training image, and the test split an image."""
    trained = labels[torch.tensor([n == "train" for n in names])]
    missing = [c for i, c in enumerate(classes) if not (trained == i).any()]
    if missing:
        names, where = ", ".join(missing), ", ".join(str(train / c) for c in missing)
        message = _("class {names} has no training image: no readable image in {folders}")
        raise FolderError(message.format(names=names, folders=where))
    if "test" not in names:
        raise FolderError(
            _(
                "{folder} has too few images to set some aside for testing ({count}): give a "
                "class {least} or more, or a {test} folder beside {train}"
            ).format(folder=train, count=len(names), least=TEST_EVERY, test="test/", train="train/")
        )


def _info(root: Path, size: int, classes: tuple, channels: int, train: torch.Tensor):
    """The folder's `DatasetInfo`: the models and crop padding of the course's dataset of its size
    (scaled from CIFAR's for the others), the statistics of its training images."""
    family = _family(size)
    mean, std = _statistics(train)
    return dataclasses.replace(
        family,
        name=folder_name(root),
        torchvision_class=torchvision.datasets.ImageFolder,  # the layout it reads
        image_size=size,
        channels=channels,
        mean=mean,
        std=std,
        classes=classes,
        hflip=True,
        crop_padding=family.crop_padding * size // family.image_size,
        archives=(),
        folder=root,
    )


def _family(size: int) -> DatasetInfo:
    """The course's dataset whose models fit `size`-pixel images."""
    same = [info for info in DATASETS.values() if info.image_size == size]
    if same:
        return same[0]
    if not isinstance(size, int) or size % 4 or not 16 <= size <= 64:
        raise FolderError(
            _("no course model fits {size} x {size} images: sizes {sizes}").format(
                size=size, sizes=_(SIZES_THAT_WORK)
            )
        )
    return DATASETS["cifar10"]


def _statistics(images: torch.Tensor) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and standard deviation of uint8 (N, C, S, S) images, as pixels in [0, 1],
    rounded to 4 places as the table's are. Sums of integers a chunk at a time: exact, and light
    on memory."""
    total = squares = torch.zeros(images.shape[1], dtype=torch.int64)
    for chunk in images.split(1024):
        pixels = chunk.long()
        total = total + pixels.sum(dim=(0, 2, 3))
        squares = squares + (pixels * pixels).sum(dim=(0, 2, 3))
    n = images.numel() // images.shape[1]
    mean = total.double() / n
    variance = (squares.double() - total.double() * mean) / (n - 1)  # as torch.std computes it
    # A channel that never changes (no blue anywhere) would divide by zero: one level's worth.
    std = variance.sqrt().clamp(min=1.0)
    return tuple(round(v / 255, 4) for v in mean.tolist()), tuple(
        round(v / 255, 4) for v in std.tolist()
    )


def _with_channels(rgb: torch.Tensor, channels: int) -> torch.Tensor:
    """uint8 (N, 3, S, S) -> (N, channels, S, S): grayscale by PIL's weights (ITU-R 601-2), which
    give back the one value of an image with three equal channels."""
    if channels == 3:
        return rgb
    weights = torch.tensor([299, 587, 114]).view(1, 3, 1, 1)
    gray = (rgb.long() * weights).sum(1, keepdim=True)  # (N, 3, S, S) -> (N, 1, S, S), times 1000
    return (gray + 500).div(1000, rounding_mode="floor").byte()  # rounded, as PIL rounds


def _full_path(path: str | os.PathLike) -> Path:
    """The path from the root, as typed: "~" expanded, ".." removed, a link's own name kept."""
    return Path(os.path.abspath(Path(path).expanduser()))


def _visible(path: Path) -> bool:
    return not path.name.startswith(".") and path.name not in LITTER


def _subfolders(folder: Path) -> list[Path]:
    """The visible sub-folders, sorted (`scandir` knows which entries are folders without asking
    the disk about each file)."""
    with os.scandir(folder) as entries:
        return sorted(Path(e.path) for e in entries if e.is_dir() and _visible(Path(e.name)))


def _files_in(folder: Path) -> list[Path]:
    """Every visible file under `folder`, sub-folders included, in a fixed order."""
    found = []
    for parent, dirs, names in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if _visible(Path(d)))
        found += [Path(parent) / n for n in sorted(names) if _visible(Path(n))]
    return found


def _modification_times(root: Path) -> tuple:
    """When the folder, its sub-folders and (for train/, test/, ...) theirs last changed: a file
    added to or deleted from a class folder changes its time, so the images are decoded again."""
    folders = [root, *_subfolders(root)]
    folders += [sub for f in folders[1:] if f.name.lower() in SPLITS for sub in _subfolders(f)]
    return tuple(folder.stat().st_mtime_ns for folder in folders)
