"""vitcourse.data.files: the shipped Fashion-MNIST archives unpacked and MD5-checked, damaged files
named in the error, and a missing dataset offline a clear, fast error."""

import gzip
import hashlib
import shutil
import time
from pathlib import Path

import pytest

from vitcourse.data import files
from vitcourse.data.files import DatasetNotFoundError, prepare_fashion_mnist
from vitcourse.data.loading import dataset_info, load_dataset

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "FashionMNIST" / "raw"


# --- Fashion-MNIST, from the archives that ship in data/ -------------------------------------


def test_shipped_archives_unpack_to_the_official_files(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    for gz in SHIPPED.glob("*.gz"):
        shutil.copy(gz, raw)
    assert prepare_fashion_mnist(tmp_path) == raw
    for name, md5 in files.FASHION_MNIST_MD5.items():
        assert hashlib.md5((raw / name).read_bytes()).hexdigest() == md5
    assert not list(raw.glob("*.tmp")), "no half-written files are left behind"


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


# --- the offline error ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mnist", "cifar10", "cifar100"])
def test_missing_dataset_offline_is_a_clear_fast_error(name, tmp_path, monkeypatch):
    # A closed local port stands in for an unreachable download server.
    monkeypatch.setattr(files, "_download_url", lambda info: "http://127.0.0.1:9/file.tar.gz")
    start = time.perf_counter()
    with pytest.raises(DatasetNotFoundError) as err:
        load_dataset(name, root=tmp_path)
    assert time.perf_counter() - start < 10
    message = str(err.value)
    assert f"{name} is not in {tmp_path}" in message
    assert "127.0.0.1 cannot be reached" in message
    assert f"load_dataset('{name}')" in message  # how to get it
    assert not any(tmp_path.iterdir()), "nothing half-downloaded is left behind"


def test_the_offline_error_names_the_courses_data_folder_not_the_machines():
    """In the course's own data/ (the default), the message says `data/...`: notebook 00 prints it,
    and the book shows it, so it must not carry the folders of the machine that ran it."""
    course = Path(files.__file__).resolve().parents[2]  # the course: vitcourse/data/files.py
    cifar10 = dataset_info("cifar10")
    message = files._missing_message(cifar10, course / "data", "http://x/y.tar.gz", "offline")
    assert "cifar10 is not in data and" in message
    assert "place them at: data/cifar-10-python.tar.gz" in message
    assert str(course) not in message


def test_download_false_never_touches_the_network(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "is_online", lambda url, timeout=5.0: pytest.fail("went online"))
    with pytest.raises(DatasetNotFoundError, match="download=False was given"):
        load_dataset("cifar10", root=tmp_path, download=False)


def test_the_data_layers_messages_are_in_the_translation_template():
    """What `load_dataset`, `make_loaders` and a folder of your own say goes through `_`, so the
    catalog extraction finds it (vitcourse.language)."""
    from vitcourse.translation.catalogs import package_template

    catalog = package_template()
    for message in (
        "{name} is not in {folder} and cannot be downloaded: {reason}.\n"
        "To get it, either run this once on a machine that is online:\n"
        "    {command}\n"
        "and copy its data folder here, or download the archive(s) from {url}/ "
        "and place them at: {archives}.\n"
        "Fashion-MNIST ships with the course and always works offline: {offline}.",
        "{host} cannot be reached (offline?)",
        "unknown dataset {name}: expected one of {names}, or the path of a folder of your own "
        "images with one sub-folder per class",
        "{argument} must be between 1 and {most} for {name}, got {value}",
        "no course model fits {size} x {size} images: sizes {sizes}",
        "28, or a multiple of 4 from 16 to 64 (32 by default)",
        "unknown photo {name}: expected one of {names}",
    ):
        assert catalog.get(message) is not None, message
