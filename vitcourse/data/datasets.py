"""The dataset table: one `DatasetInfo` entry per dataset the course can train on.

Introduced in notebook 00. Adding a dataset means adding one entry to `DATASETS` (CONTRIBUTING's
"Add a dataset"): the torchvision class that reads its files, its image size and channels, the
statistics that normalise it, its classes, the augmentation that keeps them, and the course's models
for it. Everything else (`vitcourse.data.loading.load_dataset`, the loaders, the presets) reads the
table, so nothing else changes. A folder of your own images gets an entry of its own, made when it
is read (`vitcourse.data.folders`). Every dataset has a scrambled twin ("cifar10-scrambled"): the
same images, scrambled (`vitcourse.scrambling`, notebook 09's task).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torchvision

from vitcourse.language import _


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
    # The course's models for this dataset, by preset name (`vitcourse.presets.PRESETS`,
    # `vitcourse.cnn.CNN_PRESETS`); `presets.preset_for(name)` and `cnn.cnn_preset_for(name)`
    # build them.
    vit_preset: str  # the pure ViT the notebooks build, train and look inside
    train_preset: str  # the command-line trainer's default ViT (for 28 x 28 images, a hybrid)
    hybrid_preset: str  # a hybrid ViT (convolutional stem) for notebook 08's race
    cnn_preset: str  # the CNN notebook 08 races against the ViT
    # Your own images (`vitcourse.data.folders`): the folder they are read from; None for the table's.
    folder: Path | None = None
    # 0: the images as they are. P: every image scrambled, its P x P patches and the pixels inside
    # them moved by one fixed permutation each (`vitcourse.scrambling`, notebook 09's task).
    scramble: int = 0


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

# The four files of MNIST and of Fashion-MNIST, which share its format.
_MNIST_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)

DATASETS: dict[str, DatasetInfo] = {
    "fashion-mnist": DatasetInfo(
        name="fashion-mnist",
        torchvision_class=torchvision.datasets.FashionMNIST,
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
        torchvision_class=torchvision.datasets.MNIST,
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
        torchvision_class=torchvision.datasets.CIFAR10,
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
        torchvision_class=torchvision.datasets.CIFAR100,
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


def scrambled_twin(info: DatasetInfo) -> DatasetInfo:
    """The same dataset (files, classes, CNN), its images scrambled in squares of half their side,
    a 2 x 2 grid (`vitcourse.scrambling`): notebook 09 races the course's ViT, with patches of that
    size, against the CNN on it (benchmarks/vit_wins.py). Works for a folder of your own images
    too, to pass to `make_loaders` as notebook 09 does (it has no name of its own)."""
    if info.image_size % 2:
        raise ValueError(
            _("a 2 x 2 grid of squares needs an even image size, got {size}").format(
                size=info.image_size
            )
        )
    return replace(info, name=f"{info.name}-scrambled", scramble=info.image_size // 2)


# Each dataset's scrambled twin, by name: "fashion-mnist-scrambled", "cifar10-scrambled", ... Its
# ViT, for the command line too, is the pure ViT with the squares as its patches.
DATASETS.update(
    {
        f"{name}-scrambled": replace(scrambled_twin(info), vit_preset=vit, train_preset=vit)
        for name, info in DATASETS.items()
        for vit in [{28: "course-28/14", 32: "course-32/16"}[info.image_size]]
    }
)


def table_key(name: str) -> str:
    """The table's key for a name as typed: "Fashion_MNIST" -> "fashion-mnist"."""
    return str(name).strip().lower().replace("_", "-")


def dataset_info(name: str) -> DatasetInfo:
    """The `DatasetInfo` for a name such as "fashion-mnist" or "cifar10" (a folder of your own
    images: `vitcourse.data.loading.dataset_info`)."""
    key = table_key(name)
    if key not in DATASETS:
        raise ValueError(
            _(
                "unknown dataset {name}: expected one of {names}, or the path of a folder of your "
                "own images with one sub-folder per class"
            ).format(name=repr(name), names=", ".join(DATASETS))
        )
    # Its class names as the learner reads them (the table keeps the English; the catalogs take
    # every class name of the table: vitcourse.translation.catalogs.package_template).
    info = DATASETS[key]
    classes = tuple(_(name) for name in info.classes)
    return info if classes == info.classes else replace(info, classes=classes)


def table_classes(info: DatasetInfo) -> tuple[str, ...]:
    """`info`'s class names as the table writes them, in English whatever the language: what a
    file keeps (`dataset_info` gives them in the learner's language); a folder's are its folders'."""
    table = DATASETS.get(table_key(info.name))
    return table.classes if info.folder is None and table is not None else info.classes
