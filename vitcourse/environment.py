"""The learner's machine: quick mode, the data folder, the device, and an environment report.

Introduced in notebook 00. Every notebook and the trainer ask this module which device to use, so
a laptop CPU, an Apple GPU and a CUDA box all run the same code. Every notebook's first cell calls
`setup`: on Colab or Kaggle it has `vitcourse.hosting` install what the course needs around the
preinstalled torch and fetch the course's data; everywhere it reports the device and how long the
notebook takes.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import threading
import urllib.request
from pathlib import Path

import torch
import torchvision

from vitcourse.hosting import BRANCH, REPOSITORY, hosted, set_up_hosted, time_estimate
from vitcourse.language import N_, _

QUICK_ENV = "VITCOURSE_QUICK"
DATA_ENV = "VITCOURSE_DATA"
# data/ beside the package: there in a clone of the repository, absent where pip installed the
# package alone (Colab, Kaggle), where `setup` makes one in the working folder instead.
PACKAGE_DATA = Path(__file__).resolve().parent.parent / "data"
COURSE_FOLDER = PACKAGE_DATA.parent


def quick_mode() -> bool:
    """True when `VITCOURSE_QUICK` is set to anything but 0/false: smaller data, fewer steps.

    Quick mode changes sizes, never code paths; the test suite turns it on so every notebook
    executes in seconds.
    """
    return os.environ.get(QUICK_ENV, "0").strip().lower() not in ("", "0", "false", "no")


def default_root() -> Path:
    """The course's data folder: `$VITCOURSE_DATA` if set, else `data/` at the top of the repo."""
    if os.environ.get(DATA_ENV):
        return Path(os.environ[DATA_ENV])
    return PACKAGE_DATA


def shown_path(path: str | Path) -> str:
    """A path as the course prints it: from the course's folder (`data`), else from the working
    folder, else from the home folder (`~/...`), so a printed output (the book's pages among
    them) does not name the folders of the machine that ran it. Elsewhere: the path itself."""
    path = Path(path).resolve()
    for base, prefix in ((COURSE_FOLDER, ""), (Path.cwd().resolve(), ""), (Path.home(), "~/")):
        if path.is_relative_to(base) and path != base:
            return prefix + path.relative_to(base).as_posix()
    return path.as_posix()


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The device to train on: the one asked for, else CUDA, else Apple's MPS, else the CPU.

    `VITCOURSE_DEVICE=cpu` forces a choice for a whole session (say, to compare speeds).
    """
    device = device or os.environ.get("VITCOURSE_DEVICE")
    if device is not None:
        device = torch.device(device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(_("device 'cuda' was asked for, but PyTorch sees no CUDA GPU here"))
        if device.type == "mps" and not torch.backends.mps.is_available():
            raise ValueError(_("device 'mps' was asked for, but PyTorch sees no Apple GPU here"))
        return device
    if torch.cuda.is_available():
        return torch.device("cuda")
    if torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def environment_report() -> dict[str, str]:
    """Versions, device and threads, as a learner would paste them into a question."""
    device = pick_device()
    if device.type == "cuda":
        device_name = f"cuda ({torch.cuda.get_device_name(device)})"
    else:
        device_name = device.type
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "device": device_name,
        "cpu cores": str(os.cpu_count()),
        "torch threads": str(torch.get_num_threads()),
        "quick mode": _("on") if quick_mode() else _("off"),
        "data folder": shown_path(default_root()),
    }


def is_online(url: str, timeout: float = 5.0) -> bool:
    """Does the URL's server answer a HEAD request with success within `timeout` seconds?

    We ask for the file itself rather than just opening a connection: some networks accept every
    connection and answer with an error page. The name lookup has no timeout of its own, so the
    probe runs in a thread we stop waiting for: an offline machine answers False in seconds.
    """
    ok = []

    def probe() -> None:
        try:
            with urllib.request.urlopen(
                urllib.request.Request(url, method="HEAD"), timeout=timeout
            ):
                ok.append(True)
        except (OSError, ValueError):
            pass

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout + 1)
    return bool(ok)


# --- the notebooks' set-up cell -----------------------------------------------------------------

# The reports' lines as `print_report` prints them, in the learner's language (the reports' keys
# stay English: code and tests read them).
REPORT_LABELS = {
    "where": N_("where"),
    "edition": N_("edition"),
    "device": N_("device"),
    "quick mode": N_("quick mode"),
    "time": N_("time"),
    "set-up": N_("set-up"),
    "advice": N_("advice"),
    "cpu cores": N_("cpu cores"),
    "torch threads": N_("torch threads"),
    "data folder": N_("data folder"),
}


def print_report(report: dict[str, str]) -> None:
    """Print a report (`environment_report`'s, `prepare_environment`'s) a line a key, its labels
    in the learner's language and aligned."""
    labels = {key: _(REPORT_LABELS.get(key, key)) + ":" for key in report}
    width = max([12, *(len(label) for label in labels.values())])
    for key, value in report.items():
        print(f"{labels[key]:<{width}} {value}")


def setup(notebook: str | None = None, run=subprocess.run, fetch=None) -> None:
    """Get a notebook ready to run, and say where it runs: every notebook's first cell calls it
    with the notebook's name. `prepare_environment` does the work; this prints its report."""
    print_report(prepare_environment(notebook, run, fetch))


def edition(host: str | None) -> str:
    """Which edition of the course runs: on Colab or Kaggle, the repository and branch (or tag) the
    set-up cell installs it and its data from; elsewhere the version of this checkout."""
    if host:
        return _(
            "vitcourse from github.com/{repository}, {branch} (vitcourse.hosting.BRANCH)"
        ).format(repository=REPOSITORY, branch=BRANCH)
    try:
        version = importlib.metadata.version("vitcourse")
    except importlib.metadata.PackageNotFoundError:
        version = _("not installed")
    return _(
        "vitcourse {version}, this checkout (requirements.txt; a class pins constraints.txt)"
    ).format(version=version)


def prepare_environment(
    notebook: str | None = None, run=subprocess.run, fetch=None
) -> dict[str, str]:
    """Get a notebook ready to run; returns a report of where it runs and what was done.

    On Colab or Kaggle (the set-up cell has just installed this package from GitHub):

    - installs the packages the course needs that the runtime lacks (`HOSTED_PACKAGES`), never
      torch or torchvision: pip is held to the preinstalled versions, built for the runtime's GPU;
    - where the data folder is missing, makes `data/` in the working folder and fetches
      Fashion-MNIST and the course's trained models into it from the repository;
    - on Colab, turns on its custom widget manager, which ipywidgets' sliders need there.

    Everywhere: reports the device and the notebook's measured running time, and on a hosted
    runtime without a GPU, how to get one.

    `run` runs a command (the tests pass one that records it), `fetch` downloads a file.
    """
    host = hosted()
    done = _set_up(host, run, fetch) if host else []
    device = pick_device()
    report = {
        "where": host or _("this machine"),
        "edition": edition(host),
        "device": environment_report()["device"],
        "torch": torch.__version__,
        "quick mode": _("on") if quick_mode() else _("off"),
        "time": time_estimate(notebook, device),
    }
    if done:
        report["set-up"] = "; ".join(done)
    if host and device.type == "cpu":
        menu = (
            _("Runtime > Change runtime type > T4 GPU")
            if host == "colab"
            else _("Settings > Accelerator > GPU")
        )
        report["advice"] = _(
            "no GPU in this runtime: everything runs on its CPU as timed above; for a GPU, "
            "{menu}, then run this cell again"
        ).format(menu=menu)
    return report


def _set_up(host: str, run, fetch) -> list[str]:
    """On Colab or Kaggle: a data folder where the package came without one, then hosting's
    set-up (packages, the course's files, Colab's widgets)."""
    if not os.environ.get(DATA_ENV) and not (default_root() / "FashionMNIST").is_dir():
        os.environ[DATA_ENV] = str(Path.cwd() / "data")  # the package came without data/
    return set_up_hosted(host, default_root(), run, fetch)
