"""The datasets' files on disk: checked, unpacked, downloaded, or explained when they are missing.

Introduced in notebook 00. Fashion-MNIST ships with the course in `data/FashionMNIST/raw/` as its
four `.gz` archives, Debian's repacks of Zalando's official files: `prepare_fashion_mnist` unpacks
them and checks each unpacked file against the official file's MD5, so the course runs offline. The other datasets are downloaded by torchvision into the data folder when
the machine is online (`unpack_or_download`), and checked by MD5. Offline with the files missing,
a `DatasetNotFoundError` comes at once, saying how to get them: never a hang, never a silent swap
to another dataset.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse

from torch.utils.data import Dataset

from vitcourse.data.datasets import DatasetInfo
from vitcourse.environment import default_root, is_online, shown_path
from vitcourse.language import _

# Seconds a download may go without receiving data before it is given up.
DOWNLOAD_TIMEOUT = 60

# MD5 of the *uncompressed* official Fashion-MNIST files (Zalando's release). The shipped .gz
# archives come from Debian's dataset-fashion-mnist package, whose gzip headers differ from the
# official archives', so we check what is inside them instead.
FASHION_MNIST_MD5 = {
    "train-images-idx3-ubyte": "f4a8712d7a061bf5bd6d2ca38dc4d50a",
    "train-labels-idx1-ubyte": "9018921c3c673c538a1fc5bad174d6f9",
    "t10k-images-idx3-ubyte": "8181f5470baa50b63fa0f6fddb340f0a",
    "t10k-labels-idx1-ubyte": "15d484375f8d13e6eb1aabb0c3f46965",
}


# How to get the shipped Fashion-MNIST archives back (names kept out of the translated messages).
_RESTORE = {"restore": "`git checkout data/`", "package": "dataset-fashion-mnist"}


class DatasetNotFoundError(FileNotFoundError):
    """The dataset's files are not on disk and cannot be downloaded now."""


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
                    _(
                        "{file} is damaged: its MD5 is {got}, expected {expected}. Delete it and "
                        "it will be unpacked again from the .gz archive."
                    ).format(file=target, got=got, expected=expected)
                )
            continue
        archive = _find_fashion_archive(raw, filename)
        with gzip.open(archive, "rb") as f:
            content = f.read()
        got = _md5(content)
        if got != expected:
            raise DatasetNotFoundError(
                _(
                    "{archive} does not hold the official Fashion-MNIST {file}: MD5 {got}, "
                    "expected {expected}. Restore it with {restore} or from Debian's {package} "
                    "package."
                ).format(archive=archive, file=filename, got=got, expected=expected, **_RESTORE)
            )
        raw.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(content)
        os.replace(tmp, target)
    return raw


def unpack_or_download(
    info: DatasetInfo, root: Path, train: bool, transform: Callable, download: bool = True
) -> Dataset:
    """A split that is not unpacked in `root` yet, read by torchvision once its files are there.

    With every archive on disk, torchvision verifies and unpacks them without the network.
    Otherwise it downloads them, when `download` is true and the server answers; if not, or if
    the download fails, a `DatasetNotFoundError` says how to get them.
    """
    if not all((root / a).exists() for a in info.archives):
        url = _download_url(info)
        reason = None
        if not download:
            reason = _("{argument} was given").format(argument="download=False")
        elif not is_online(url):
            reason = _("{host} cannot be reached (offline?)").format(host=urlparse(url).hostname)
        if reason:
            raise DatasetNotFoundError(_missing_message(info, root, url, reason))
    # torchvision's downloader sets no timeout: a stalled server would hang the notebook forever.
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(DOWNLOAD_TIMEOUT)
    try:
        return info.torchvision_class(str(root), train=train, transform=transform, download=True)
    except (OSError, RuntimeError) as e:
        raise DatasetNotFoundError(
            _missing_message(
                info, root, _download_url(info), _("the download failed ({error})").format(error=e)
            )
        ) from e
    finally:
        socket.setdefaulttimeout(previous)


def _md5(content: bytes) -> str:
    return hashlib.md5(content).hexdigest()


def _find_fashion_archive(raw: Path, filename: str) -> Path:
    for folder in (raw, default_root() / "FashionMNIST" / "raw"):
        if (folder / f"{filename}.gz").exists():
            return folder / f"{filename}.gz"
    raise DatasetNotFoundError(
        _(
            "fashion-mnist: {file} is missing from {folder}. The course ships the four archives "
            "in {shipped}: restore them with {restore}, or copy them from Debian's {package} "
            "package ({installed})."
        ).format(
            file=f"{filename}.gz",
            folder=shown_path(raw),
            shipped="data/FashionMNIST/raw/",
            installed="/usr/share/datasets/fashion-mnist/",
            **_RESTORE,
        )
    )


def _download_url(info: DatasetInfo) -> str:
    cls = info.torchvision_class
    if hasattr(cls, "mirrors"):  # MNIST and friends
        return cls.mirrors[0] + cls.resources[0][0]
    return cls.url


def _missing_message(info: DatasetInfo, root: Path, url: str, reason: str) -> str:
    # Paths from the course's folder (`data`): the message names no folder of the machine it ran on.
    archives = ", ".join(shown_path(root / a) for a in info.archives)
    return _(
        "{name} is not in {folder} and cannot be downloaded: {reason}.\n"
        "To get it, either run this once on a machine that is online:\n"
        "    {command}\n"
        "and copy its data folder here, or download the archive(s) from {url}/ "
        "and place them at: {archives}.\n"
        "Fashion-MNIST ships with the course and always works offline: {offline}."
    ).format(
        name=info.name,
        folder=shown_path(root),
        reason=reason,
        command=f'python -c "from vitcourse.data import load_dataset; '
        f"load_dataset('{info.name}')\"",
        url=url.rsplit("/", 1)[0],
        archives=archives,
        offline="load_dataset('fashion-mnist')",
    )
