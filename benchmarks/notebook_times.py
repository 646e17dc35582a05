"""How long each notebook takes to run top to bottom, in quick mode and in full mode.

Each notebook is executed by nbclient (as nbmake does) in its own folder, from a fresh kernel;
the time includes starting the kernel.

    python benchmarks/notebook_times.py                 # every notebook, both modes
    python benchmarks/notebook_times.py --mode quick notebooks/01_patches.ipynb
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def run(path: Path, quick: bool) -> float:
    """Seconds to execute one notebook from a fresh kernel."""
    os.environ["VITCOURSE_QUICK"] = "1" if quick else "0"  # the kernel inherits it
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=3600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every course notebook")
    parser.add_argument("--mode", choices=["quick", "full", "both"], default="both")
    args = parser.parse_args()
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    modes = {"quick": [True], "full": [False], "both": [True, False]}[args.mode]
    print(f"{'notebook':<32}" + "".join(f"{'quick' if q else 'full':>10}" for q in modes))
    for path in paths:
        times = [run(path, q) for q in modes]
        print(f"{path.name:<32}" + "".join(f"{t:>9.0f}s" for t in times), flush=True)


if __name__ == "__main__":
    main()
