"""vitcourse.data.loading: Fashion-MNIST offline through `load_dataset`, the loaders, the other
datasets' code paths on small files in torchvision's on-disk format written here, and every name
that moved out of it still found in `vitcourse.data`. (The files themselves are
tests/data/test_files.py's, the table tests/data/test_datasets.py's, the in-memory batches
tests/data/test_batching.py's.)"""

import hashlib
import pickle
import struct
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision import datasets, transforms

from vitcourse.data import batching, files, photos, sharding
from vitcourse.data import datasets as table
from vitcourse.data import loading as data
from vitcourse.data.batching import InMemoryImages
from vitcourse.data.loading import dataset_info, denormalize, load_dataset, make_loaders

# --- Fashion-MNIST, shipped in data/ -------------------------------------


@pytest.mark.parametrize("train, size", [(True, 60_000), (False, 10_000)])
def test_fashion_mnist_loads_offline(train, size):
    ds = load_dataset("fashion-mnist", train=train)
    assert len(ds) == size
    x, y = ds[0]
    assert x.shape == (1, 28, 28) and x.dtype == torch.float32
    assert isinstance(y, int)
    assert set(ds.targets.tolist()) == set(range(10))
    # Each class is a tenth of the split, as in the official release.
    assert torch.bincount(ds.targets).tolist() == [size // 10] * 10


def test_fashion_mnist_normalisation_statistics():
    info = dataset_info("fashion-mnist")
    ds = load_dataset("fashion-mnist", train=True)
    pixels = ds.data.float() / 255
    assert pixels.mean().item() == pytest.approx(info.mean[0], abs=1e-4)
    assert pixels.std().item() == pytest.approx(info.std[0], abs=1e-4)
    idx = torch.randperm(len(ds), generator=torch.Generator().manual_seed(0))[:3000]
    x = torch.stack([ds[i][0] for i in idx.tolist()])
    assert abs(x.mean().item()) < 0.03
    assert abs(x.std().item() - 1) < 0.03


# --- augmentation and loaders ------------------------------------------------------------------


def _steps(ds):
    return [type(t) for t in ds.transform.transforms]


def test_augmentation_suits_each_dataset():
    plain = load_dataset("fashion-mnist", train=False)
    aug = load_dataset("fashion-mnist", train=False, augment=True)
    assert transforms.RandomCrop not in _steps(plain)
    assert _steps(aug)[:2] == [transforms.RandomCrop, transforms.RandomHorizontalFlip]
    digits = data.image_transform("mnist", augment=True)
    assert transforms.RandomHorizontalFlip not in [type(t) for t in digits.transforms]
    torch.manual_seed(0)
    a, b = aug[0][0], aug[0][0]
    assert a.shape == (1, 28, 28) and not torch.equal(a, b), "augmentation draws anew each read"


def test_make_loaders_splits_without_overlap_and_quick_sizes():
    loaders = make_loaders("fashion-mnist", batch_size=64, seed=3)
    train_idx = set(loaders.train.dataset.indices)
    val_idx = set(loaders.val.dataset.indices)
    assert not train_idx & val_idx
    assert (len(train_idx), len(val_idx), len(loaders.test.dataset)) == data.QUICK_SIZES
    assert loaders.train.dataset.dataset.augment and not loaders.val.dataset.dataset.augment
    assert not loaders.test.dataset.dataset.augment
    x, y = next(iter(loaders.train))
    assert x.shape == (64, 1, 28, 28) and x.dtype == torch.float32
    assert y.shape == (64,) and y.dtype == torch.int64
    first = loaders.train.dataset[0][0]
    assert not torch.equal(first, loaders.train.dataset[0][0]), "augmentation draws anew each read"
    assert torch.equal(loaders.val.dataset[0][0], loaders.val.dataset[0][0])
    again = make_loaders("fashion-mnist", batch_size=64, seed=3)
    assert again.val.dataset.indices == loaders.val.dataset.indices
    other = make_loaders("fashion-mnist", batch_size=64, seed=4)
    assert other.val.dataset.indices != loaders.val.dataset.indices


def test_make_loaders_limit_and_bad_val_size():
    loaders = make_loaders("fashion-mnist", limit=400, val_size=1000)
    assert (len(loaders.train.dataset), len(loaders.val.dataset), len(loaders.test.dataset)) == (
        400,
        100,
        100,
    )
    with pytest.raises(ValueError, match="val_size must be between 1 and 59999.*got 60000"):
        make_loaders("fashion-mnist", val_size=60_000)
    with pytest.raises(ValueError, match="limit must be at least 4 images, got 3"):
        make_loaders("fashion-mnist", limit=3)


def test_loader_settings_per_device():
    assert data.loader_settings(torch.device("cpu")) == {"num_workers": 0}
    cuda = data.loader_settings(torch.device("cuda"))
    assert cuda["pin_memory"] and cuda["num_workers"] >= 1


def test_denormalize_inverts_the_transform():
    ds = load_dataset("fashion-mnist", train=False)
    x = denormalize(ds[0][0], "fashion-mnist")
    expected = transforms.ToTensor()(ds.data[0].numpy())
    torch.testing.assert_close(x, expected, atol=1e-6, rtol=0)


# --- MNIST and CIFAR: small files in torchvision's on-disk format ------------------------------


def _write_idx(path: Path, array: np.ndarray) -> None:
    kind = 0x08  # unsigned byte
    header = struct.pack(">HBB", 0, kind, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


def test_mnist_reads_torchvision_layout(tmp_path):
    raw = tmp_path / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", 50), ("t10k", 20)):
        _write_idx(raw / f"{split}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        _write_idx(raw / f"{split}-labels-idx1-ubyte", np.arange(n) % 10)
    train = load_dataset("mnist", root=tmp_path)
    test = load_dataset("mnist", train=False, root=tmp_path)
    assert (len(train), len(test)) == (50, 20)
    x, y = train[13]
    assert x.shape == (1, 28, 28) and y == 3
    assert x.min() < 0 < x.max()  # normalised, not raw pixels


def _write_cifar(folder: Path, n_classes: int, n: int = 12, n_test: int = 12) -> dict[str, str]:
    """Write tiny CIFAR pickles like the official ones, `n` images in each training file and
    `n_test` in the test file; returns each file's MD5."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    label_key = "labels" if n_classes == 10 else "fine_labels"
    names = (
        [
            "data_batch_1",
            "data_batch_2",
            "data_batch_3",
            "data_batch_4",
            "data_batch_5",
            "test_batch",
        ]
        if n_classes == 10
        else ["train", "test"]
    )
    for name in names:
        size = n_test if name.startswith("test") else n
        entry = {
            "data": rng.integers(0, 256, (size, 3 * 32 * 32), dtype=np.uint8),
            label_key: [i % n_classes for i in range(size)],
        }
        (folder / name).write_bytes(pickle.dumps(entry))
    meta_name, meta_key = (
        ("batches.meta", "label_names") if n_classes == 10 else ("meta", "fine_label_names")
    )
    classes = list(dataset_info("cifar10" if n_classes == 10 else "cifar100").classes)
    (folder / meta_name).write_bytes(pickle.dumps({meta_key: classes}))
    return {p.name: hashlib.md5(p.read_bytes()).hexdigest() for p in folder.iterdir()}


def _trust(monkeypatch, cls, md5s):
    """Point torchvision's MD5 table at our tiny files, so its real integrity check runs on them."""
    monkeypatch.setattr(cls, "train_list", [[n, md5s[n]] for n, _ in cls.train_list])
    monkeypatch.setattr(cls, "test_list", [[n, md5s[n]] for n, _ in cls.test_list])
    monkeypatch.setattr(cls, "meta", {**cls.meta, "md5": md5s[cls.meta["filename"]]})


def test_cifar100_reads_an_unpacked_folder(tmp_path, monkeypatch):
    md5s = _write_cifar(tmp_path / "cifar-100-python", 100)
    _trust(monkeypatch, datasets.CIFAR100, md5s)
    train = load_dataset("cifar100", root=tmp_path, augment=True)
    assert len(train) == 12
    x, y = train[5]
    assert x.shape == (3, 32, 32) and y == 5
    assert train.classes[:3] == ["apple", "aquarium_fish", "baby"]
    # The loaders' in-memory copy turns numpy's (N, H, W, C) into (N, C, H, W), pixel for pixel.
    memory = InMemoryImages.from_torchvision(train, dataset_info("cifar100"))
    assert memory.images.shape == (12, 3, 32, 32)
    plain = load_dataset("cifar100", root=tmp_path)
    assert all(torch.equal(memory[i][0], plain[i][0]) for i in range(12))
    assert [memory[i][1] for i in range(12)] == [plain[i][1] for i in range(12)]


def test_cifar10_unpacks_an_archive_offline(tmp_path, monkeypatch):
    """An archive copied into data/ is verified and unpacked without the network."""
    staging = tmp_path / "staging"
    md5s = _write_cifar(staging / "cifar-10-batches-py", 10)
    archive = tmp_path / "root" / "cifar-10-python.tar.gz"
    archive.parent.mkdir()
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(staging / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    _trust(monkeypatch, datasets.CIFAR10, md5s)
    monkeypatch.setattr(datasets.CIFAR10, "tgz_md5", hashlib.md5(archive.read_bytes()).hexdigest())
    monkeypatch.setattr(files, "is_online", lambda url, timeout=5.0: pytest.fail("went online"))
    test = load_dataset("cifar10", train=False, root=archive.parent)
    assert len(test) == 12 and test[0][0].shape == (3, 32, 32)
    assert test.classes == list(dataset_info("cifar10").classes)


def test_make_loaders_fraction_keeps_a_share_of_training_only():
    whole = make_loaders("fashion-mnist", limit=400)
    tenth = make_loaders("fashion-mnist", limit=400, fraction=0.1)
    assert len(tenth.train.dataset) == 40
    assert set(tenth.train.dataset.indices) <= set(whole.train.dataset.indices)
    assert tenth.val.dataset.indices == whole.val.dataset.indices
    assert len(tenth.test.dataset) == len(whole.test.dataset)
    for bad in (0, -0.5, 1.5):
        with pytest.raises(ValueError, match=f"share of the training images in .0, 1., got {bad}"):
            make_loaders("fashion-mnist", fraction=bad)


# --- the names that moved out ---------------------------------------------------------------


@pytest.mark.parametrize(
    "module, name",
    [
        (table, "DATASETS"),
        (table, "DatasetInfo"),
        (files, "DOWNLOAD_TIMEOUT"),
        (files, "FASHION_MNIST_MD5"),
        (files, "DatasetNotFoundError"),
        (files, "prepare_fashion_mnist"),
        (batching, "InMemoryImages"),
        (batching, "random_crop_flip"),
        (photos, "PHOTOS"),
        (photos, "load_photo"),
        (sharding, "ShardSampler"),
    ],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_names_that_moved_out_are_still_found_in_data(module, name):
    """Notebooks, student copies and learners' own code import these from `vitcourse.data`; the
    book documents them once, in their room (`vitcourse.data` documents no names of its own)."""
    import vitcourse.data

    assert name in vitcourse.data._ROOMS and not hasattr(vitcourse.data, "__all__")
    assert name not in data.__all__  # nor does `vitcourse.data.loading`
    assert getattr(vitcourse.data, name) is getattr(module, name)


def test_data_dataset_info_is_the_tables_for_its_names():
    """`vitcourse.data.loading.dataset_info` is the door: the table's entry for a name (a folder's
    path is `vitcourse.data.folders`', tests/data/test_folders.py), and a `DatasetInfo` stands for
    itself."""
    assert "dataset_info" in data.__all__
    for name in table.DATASETS:
        assert data.dataset_info(name) is table.dataset_info(name) is table.DATASETS[name]
        assert data.dataset_info(table.DATASETS[name]) is table.DATASETS[name]
