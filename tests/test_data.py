"""vitcourse.data: Fashion-MNIST offline from the shipped archives, the other datasets' code paths
on small files in torchvision's on-disk format written here, and the offline error."""

import gzip
import hashlib
import http.server
import pickle
import shutil
import socket
import struct
import tarfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from torchvision import datasets, transforms

from vitcourse import data
from vitcourse.data import (
    DatasetNotFoundError,
    InMemoryImages,
    dataset_info,
    denormalize,
    load_dataset,
    make_loaders,
    prepare_fashion_mnist,
    random_crop_flip,
)
from vitcourse.environment import is_online

SHIPPED = Path(__file__).resolve().parent.parent / "data" / "FashionMNIST" / "raw"


# --- Fashion-MNIST, from the archives that ship in data/ -------------------------------------


def test_shipped_archives_unpack_to_the_official_files(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for gz in SHIPPED.glob("*.gz"):
        shutil.copy(gz, raw)
    assert prepare_fashion_mnist(tmp_path) == raw
    for name, md5 in data.FASHION_MNIST_MD5.items():
        assert hashlib.md5((raw / name).read_bytes()).hexdigest() == md5
    assert not list(raw.glob("*.tmp")), "no half-written files are left behind"


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


def test_damaged_archive_is_named_in_the_error(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for gz in SHIPPED.glob("*.gz"):
        shutil.copy(gz, raw)
    with gzip.open(raw / "t10k-labels-idx1-ubyte.gz", "wb") as f:
        f.write(b"not the labels")
    with pytest.raises(DatasetNotFoundError, match="t10k-labels-idx1-ubyte.gz.*MD5"):
        prepare_fashion_mnist(tmp_path)
    assert not (raw / "t10k-labels-idx1-ubyte").exists()


def test_damaged_unpacked_file_is_named_in_the_error(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    (raw / "train-images-idx3-ubyte").write_bytes(b"truncated")
    with pytest.raises(DatasetNotFoundError, match="train-images-idx3-ubyte is damaged"):
        prepare_fashion_mnist(tmp_path)


def test_archives_come_from_the_course_folder_when_root_has_none(tmp_path):
    ds = load_dataset("fashion-mnist", train=False, root=tmp_path)
    assert len(ds) == 10_000
    assert (tmp_path / "FashionMNIST" / "raw" / "t10k-images-idx3-ubyte").exists()


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown dataset 'imagenet'.*fashion-mnist.*cifar10"):
        load_dataset("imagenet")
    assert dataset_info("Fashion_MNIST").name == "fashion-mnist"


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


def test_in_memory_images_read_exactly_as_load_dataset():
    """The loaders' fast in-memory copy gives the same numbers as torchvision's PIL pipeline."""
    files = load_dataset("fashion-mnist", train=False)
    memory = InMemoryImages.from_torchvision(files, dataset_info("fashion-mnist"))
    assert len(memory) == len(files) == 10_000
    for i in (0, 1, 4321, 9999):
        (a, label_a), (b, label_b) = files[i], memory[i]
        assert torch.equal(a, b) and label_a == label_b and isinstance(label_b, int)
    batch = memory.__getitems__([3, 1, 4])
    assert [y for _, y in batch] == [files[i][1] for i in (3, 1, 4)]
    assert torch.equal(batch[2][0], files[4][0])
    with pytest.raises(ValueError, match="expected uint8 images .N, C, H, W. and N labels, got"):
        InMemoryImages(torch.zeros(3, 1, 28, 28), torch.zeros(3), dataset_info("mnist"), False)


def _shifted(image, dy, dx, padding):
    """`image` moved by the crop at (dy, dx) of its zero-padded copy, as RandomCrop does it."""
    h, w = image.shape[-2:]
    return torch.nn.functional.pad(image, (padding,) * 4)[:, dy : dy + h, dx : dx + w]


def test_random_crop_flip_shifts_and_mirrors_each_image():
    images = torch.randint(1, 256, (64, 1, 28, 28), dtype=torch.uint8)  # no zeros: shifts show
    torch.manual_seed(0)
    out = random_crop_flip(images, padding=2, hflip=True)
    assert out.shape == images.shape and out.dtype == torch.uint8
    seen = set()
    for image, result in zip(images, out, strict=True):
        matches = [
            (dy, dx, flip)
            for dy in range(5)
            for dx in range(5)
            for flip in (False, True)
            if torch.equal(result, _shifted(image.flip(-1) if flip else image, dy, dx, 2))
        ]
        assert len(matches) == 1, "each output is one shift (and maybe mirror) of its input"
        seen.add(matches[0])
    assert len({(dy, dx) for dy, dx, _ in seen}) >= 15, "offsets vary from image to image"
    assert {flip for _, _, flip in seen} == {False, True}
    torch.manual_seed(0)
    assert torch.equal(random_crop_flip(images, 2, True), out), "seeded: the same draws"
    torch.manual_seed(1)
    digits = random_crop_flip(images, 2, hflip=False)
    assert all(
        any(torch.equal(r, _shifted(i, dy, dx, 2)) for dy in range(5) for dx in range(5))
        for i, r in zip(images, digits, strict=True)
    ), "without hflip no image is mirrored"
    with pytest.raises(ValueError, match=r"expected a batch of images \(B, C, H, W\), got shape"):
        random_crop_flip(images[0], 2, True)


def test_make_loaders_limit_and_bad_val_size():
    loaders = make_loaders("fashion-mnist", limit=400, val_size=1000)
    assert (len(loaders.train.dataset), len(loaders.val.dataset), len(loaders.test.dataset)) == (
        400,
        100,
        100,
    )
    with pytest.raises(ValueError, match="val_size must be between 1 and 59999.*got 60000"):
        make_loaders("fashion-mnist", val_size=60_000)


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
    monkeypatch.setattr(data, "is_online", lambda url, timeout=5.0: pytest.fail("went online"))
    test = load_dataset("cifar10", train=False, root=archive.parent)
    assert len(test) == 12 and test[0][0].shape == (3, 32, 32)
    assert test.classes == list(dataset_info("cifar10").classes)


# --- the offline error ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mnist", "cifar10", "cifar100"])
def test_missing_dataset_offline_is_a_clear_fast_error(name, tmp_path, monkeypatch):
    # A closed local port stands in for an unreachable download server.
    monkeypatch.setattr(data, "_download_url", lambda info: "http://127.0.0.1:9/file.tar.gz")
    start = time.perf_counter()
    with pytest.raises(DatasetNotFoundError) as err:
        load_dataset(name, root=tmp_path)
    assert time.perf_counter() - start < 10
    message = str(err.value)
    assert f"{name} is not in {tmp_path}" in message
    assert "127.0.0.1 cannot be reached" in message
    assert f"load_dataset('{name}')" in message  # how to get it
    assert not any(tmp_path.iterdir()), "nothing half-downloaded is left behind"


def test_download_false_never_touches_the_network(tmp_path, monkeypatch):
    monkeypatch.setattr(data, "is_online", lambda url, timeout=5.0: pytest.fail("went online"))
    with pytest.raises(DatasetNotFoundError, match="download=False was given"):
        load_dataset("cifar10", root=tmp_path, download=False)


def test_reachability_probe_gives_up_on_a_silent_server():
    """A server that accepts the connection and never answers must not hang us."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        start = time.perf_counter()
        assert is_online(f"http://127.0.0.1:{port}/file.gz", timeout=1.0) is False
        assert time.perf_counter() - start < 3


def test_reachability_probe_wants_the_file_not_just_a_connection():
    """Some networks answer every address with an error page: that is not 'online'."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(404 if "missing" in self.path else 200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        assert is_online(f"{base}/missing.gz", timeout=2.0) is False
        assert is_online(f"{base}/file.gz", timeout=2.0) is True
    finally:
        server.shutdown()


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


def test_cifar100_has_its_100_classes_in_torchvisions_order():
    classes = dataset_info("cifar100").classes
    # torchvision reads the names from the archive's meta file, in alphabetical order; a missing
    # name would shift every label after it.
    assert len(classes) == len(set(classes)) == 100 and list(classes) == sorted(classes)
    assert classes[91] == "trout"  # its label in the official files


@pytest.mark.parametrize("name", list(data.DATASETS))
def test_every_dataset_entry_names_models_that_exist(name):
    from vitcourse.cnn import CNN_PRESETS
    from vitcourse.vit import PRESETS

    info = dataset_info(name)
    vits = [PRESETS[info.vit_preset], PRESETS[info.train_preset], PRESETS[info.hybrid_preset]]
    assert info.cnn_preset in CNN_PRESETS
    assert not vits[0].stem_channels and vits[2].stem_channels  # a pure ViT, and a hybrid
    for config in vits:
        assert config.image_size == info.image_size and config.in_channels == info.channels
    assert len(info.mean) == len(info.std) == info.channels


def test_photos_ship_with_scikit_image_and_come_square():
    from vitcourse.data import PHOTOS, load_photo

    for name in PHOTOS:
        photo = load_photo(name, size=64)
        assert photo.shape == (3, 64, 64) and photo.dtype == torch.float32
        assert 0 <= photo.min() and photo.max() <= 1 and photo.std() > 0.05
    cat = load_photo("chelsea")
    assert cat.shape == (3, 224, 224)
    with pytest.raises(ValueError, match="unknown photo 'dog'"):
        load_photo("dog")
