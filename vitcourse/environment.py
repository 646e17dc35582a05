"""The learner's machine: quick mode, the data folder, the device, and an environment report.

Introduced in notebook 00. Every notebook and the trainer ask this module which device to use, so
a laptop CPU, an Apple GPU and a CUDA box all run the same code.
"""

from __future__ import annotations

import os
import platform
import threading
import urllib.request
from pathlib import Path

import torch
import torchvision

QUICK_ENV = "VITCOURSE_QUICK"
DATA_ENV = "VITCOURSE_DATA"


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
    return Path(__file__).resolve().parent.parent / "data"


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The device to train on: the one asked for, else CUDA, else Apple's MPS, else the CPU.

    `VITCOURSE_DEVICE=cpu` forces a choice for a whole session (say, to compare speeds).
    """
    device = device or os.environ.get("VITCOURSE_DEVICE")
    if device is not None:
        device = torch.device(device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("device 'cuda' was asked for, but PyTorch sees no CUDA GPU here")
        if device.type == "mps" and not torch.backends.mps.is_available():
            raise ValueError("device 'mps' was asked for, but PyTorch sees no Apple GPU here")
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
        "quick mode": "on" if quick_mode() else "off",
        "data folder": str(default_root()),
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
