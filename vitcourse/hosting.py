"""Hosted notebooks: Colab and Kaggle, and the course's files fetched there.

Introduced in notebook 00. On Colab or Kaggle every notebook's first cell installs this package
from GitHub (`REPOSITORY`) and calls `vitcourse.environment.setup`, which asks this module to
install what the course needs around the runtime's preinstalled torch (`set_up_hosted`) and to
fetch the course's data files (`COURSE_FILES`, each checked by its SHA-256), and reports how long
the notebook took when it was measured (`CPU_SECONDS`, `time_estimate`). This module reads
nothing of the learner's machine: `vitcourse.environment` (the device, the data folder) imports
it, not the other way round.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import torch
import torchvision

from vitcourse.language import _

# The course's repository on GitHub: the notebooks' set-up cell installs the package from it, and
# `setup` fetches the data files from it.
REPOSITORY = "vitcourse/vitcourse"
BRANCH = "main"
RAW_URL = f"https://raw.githubusercontent.com/{REPOSITORY}/{BRANCH}/data/"


def colab_url(folder: str, notebook: str) -> str:
    """A notebook of the repository opened on Colab: folder "notebooks" (the teacher's version,
    with the solutions) or "student" (the exercises open). The README and the book link these."""
    return (
        f"https://colab.research.google.com/github/{REPOSITORY}/blob/{BRANCH}/{folder}/{notebook}"
    )


# What the notebooks import that a hosted runtime may lack: import name -> pip requirement. Not
# torch and torchvision, which every hosted runtime has preinstalled (built for its GPU) and
# `setup` never reinstalls, nor numpy and matplotlib, which come with them there (the package
# imports them before `setup` runs).
HOSTED_PACKAGES = {
    "tqdm": "tqdm>=4.60",
    "ipywidgets": "ipywidgets>=8",
    "timm": "timm>=1.0",
    "skimage": "scikit-image>=0.21",
}

# The files under data/ that the notebooks read, with their SHA-256: Fashion-MNIST's official
# archives and the trained models and measured results the course ships (data/README.md).
COURSE_FILES = {
    "FashionMNIST/raw/train-images-idx3-ubyte.gz": (
        "b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7"
    ),
    "FashionMNIST/raw/train-labels-idx1-ubyte.gz": (
        "0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056"
    ),
    "FashionMNIST/raw/t10k-images-idx3-ubyte.gz": (
        "cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa"
    ),
    "FashionMNIST/raw/t10k-labels-idx1-ubyte.gz": (
        "8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05"
    ),
    "trained/course-28-7_fashion-mnist.pt": (
        "db1ccf830c33b274a696c8e15e1c2d7097e2f49f3cca60a8bc5f797552050c01"
    ),
    "trained/course-28-4-w64_fashion-mnist.pt": (
        "cb7a3ef5aa2928e07eb8a3157e6f7a3d1512efb89c48339981ae1ca1c1d84b1b"
    ),
    "trained/mae-course-28-7_fashion-mnist.pt": (
        "655c988d499e5cebd462b0148cf3db3b9f3b281106925c0e19b685a288243314"
    ),
    "trained/race_fashion-mnist.json": (
        "6b05595c5fc8bd625bd05c0767206b2290dc8e8c0ff694c5e155b770bda94fff"
    ),
    "trained/cnn-28_fashion-mnist.pt": (
        "482ab35cfc576e74f9e3c4484a777f4b247037890feccc6e4f1a4d69280329f2"
    ),
    "trained/vit_wins_fashion-mnist-scrambled_3-minutes.json": (
        "fd331c72022673fce00f5af5581e2100e8e1848dcf19b37f4d143e491ce7d327"
    ),
    "trained/vit_wins_fashion-mnist_3-minutes.json": (
        "8e824986df5fd61307d6070088ae47389cf115f1f9c6950299063659f43364ff"
    ),
    "trained/vit_wins_fashion-mnist-scrambled_5-passes.json": (
        "c14a58974655d6e793e297e7f127858dcfbb3a076ce5d240120be5279eac544b"
    ),
    "trained/vit_wins_fashion-mnist_5-passes.json": (
        "a5ec4bfdd38d3cec2889cc3937007cc10290156a6932d880478e4b06287c1772"
    ),
    "trained/vit_wins_fashion-mnist-scrambled_15-passes.json": (
        "6cc596db7ff8a82b1162662c240bd5fe51888649faa7919bfdba9395847f5b8a"
    ),
    "trained/vit_wins_fashion-mnist_15-passes.json": (
        "2ff12d59a49cf9a178a4148ccd6fd3bde57ab701f73539f5dd9890572f111e77"
    ),
    "trained/when_vits_win_fashion-mnist.json": (
        "90b0231ee39947ccd38bfd547d2a6e5becf8cfbcdf9c91f31374f3949b67d836"
    ),
}

# Each notebook in full mode with its defaults, in seconds, measured on a 2-core CPU with
# `python benchmarks/notebook_times.py --mode full` (the README's table). Nothing was timed on a
# GPU. The options that train for longer, with theirs.
CPU_SECONDS = {
    "00_welcome_and_data": 16,
    "01_patches": 15,
    "02_embeddings": 10,
    "03_attention": 10,
    "04_transformer_block": 10,
    "05_vision_transformer": 11,
    "06_training": 330,
    "07_inside_a_vit": 14,
    "08_vit_vs_cnn": 20,
    "09_when_vits_win": 11,
    "10_bridges": 93,
}
# Notebooks whose full mode (or live option) trains for a set number of minutes: as long anywhere.
TIME_BUDGETS = ("06_training", "08_vit_vs_cnn", "09_when_vits_win")
LIVE_OPTIONS = {
    "08_vit_vs_cnn": ("RACE_LIVE = True", 909),
    "09_when_vits_win": ("COMPARE_LIVE = True", 1374),
}


def hosted() -> str | None:
    """ "colab" or "kaggle" when running in one of their notebooks, else None."""
    if "google.colab" in sys.modules:
        return "colab"
    if "KAGGLE_KERNEL_RUN_TYPE" in os.environ:
        return "kaggle"
    return None


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return _("{minutes} minutes").format(minutes=f"{seconds / 60:.1f}".removesuffix(".0"))


def time_estimate(notebook: str | None, device: torch.device) -> str:
    """What the measured table says about this notebook's running time, in a sentence."""
    if notebook not in CPU_SECONDS:
        return _("this notebook's running time was not measured")
    live = ""
    if notebook in LIVE_OPTIONS:
        option, seconds = LIVE_OPTIONS[notebook]
        live = f" ({option}: {_minutes(seconds)})"
    text = _("full mode took {time} on a 2-core CPU{live}").format(
        time=_minutes(CPU_SECONDS[notebook]), live=live
    )
    if device.type == "cpu":
        return text
    if notebook in TIME_BUDGETS:
        untimed = _(
            "{estimate}; not timed on a {device}: its trainings run for set minutes, as "
            "long there, and get further"
        )
    else:
        untimed = _("{estimate}; not timed on a {device}")
    return untimed.format(
        estimate=text, device="GPU" if device.type == "cuda" else device.type.upper()
    )


def fetch_course_files(root: Path, fetch=None) -> list[str]:
    """Download the files of `COURSE_FILES` missing under `root` from the course's repository,
    checking each one's SHA-256 before moving it into place. Returns the files fetched.

    `fetch(url) -> bytes` downloads one file (a test passes its own)."""
    fetch = fetch or _download
    fetched = []
    for name, expected in COURSE_FILES.items():
        target = root / name
        if target.exists():
            continue
        url = RAW_URL + name
        try:
            content = fetch(url)
        except OSError as e:
            raise RuntimeError(
                _(
                    "could not download {url} ({error}). On Kaggle, turn on Internet in the "
                    "notebook's settings; elsewhere, check the connection, or copy the course's "
                    "data/ folder to {folder}"
                ).format(url=url, error=e, folder=root)
            ) from e
        got = hashlib.sha256(content).hexdigest()
        if got != expected:
            raise RuntimeError(
                _(
                    "{url} is not the course's {file}: its SHA-256 is {got}, expected {expected}"
                ).format(url=url, file=name, got=got, expected=expected)
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(content)
        os.replace(tmp, target)  # never a half-written file in place
        fetched.append(name)
    return fetched


def _download(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def set_up_hosted(host: str, root: Path, run=subprocess.run, fetch=None) -> list[str]:
    """A hosted runtime's set-up: the missing packages, the course's files fetched into the data
    folder `root`, Colab's widgets. Returns what was done, in words."""
    done = []
    missing = [req for name, req in HOSTED_PACKAGES.items() if not _importable(name)]
    if missing:
        run(_pip_install(missing), check=True)
        importlib.invalidate_caches()
        done.append(_("installed {packages}").format(packages=", ".join(missing)))
    fetched = fetch_course_files(root, fetch)
    if fetched:
        done.append(
            _("fetched {count} data files into {folder}").format(count=len(fetched), folder=root)
        )
    if host == "colab":
        from google.colab import output  # only there

        output.enable_custom_widget_manager()
        done.append(_("turned on Colab's widget manager"))
    return done


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _pip_install(requirements: list[str]) -> list[str]:
    """The pip command that installs `requirements` and holds torch and torchvision to the
    versions already installed (a constraints file), so nothing pulls in another build."""
    pins = Path(tempfile.mkdtemp(prefix="vitcourse-")) / "constraints.txt"
    pins.write_text(f"torch=={torch.__version__}\ntorchvision=={torchvision.__version__}\n")
    return [sys.executable, "-m", "pip", "install", "-q", "-c", str(pins), *requirements]
