"""How long each notebook takes to run top to bottom, in quick mode and in full mode.

Each notebook is executed by nbclient (as nbmake does) in its own folder, from a fresh kernel;
the time includes starting the kernel.

    python benchmarks/notebook_times.py                 # every notebook, both modes
    python benchmarks/notebook_times.py --mode quick notebooks/01_patches.ipynb
    python benchmarks/notebook_times.py --mode full --save runs/executed notebooks/08_vit_vs_cnn.ipynb
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def run(path: Path, quick: bool, save: Path | None = None) -> float:
    """Seconds to execute one notebook from a fresh kernel; `save`: a folder to write the executed
    notebook to, outputs and all, to read its results."""
    os.environ["VITCOURSE_QUICK"] = "1" if quick else "0"  # the kernel inherits it
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=3600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    seconds = time.perf_counter() - start
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        mode = "quick" if quick else "full"
        nbformat.write(nb, save / f"{path.stem}.{mode}.ipynb")
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every course notebook")
    parser.add_argument("--mode", choices=["quick", "full", "both"], default="both")
    parser.add_argument("--save", type=Path, help="write the executed notebooks to this folder")
    args = parser.parse_args()
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    modes = {"quick": [True], "full": [False], "both": [True, False]}[args.mode]
    print(f"{'notebook':<32}" + "".join(f"{'quick' if q else 'full':>10}" for q in modes))
    for path in paths:
        times = [run(path, q, args.save) for q in modes]
        print(f"{path.name:<32}" + "".join(f"{t:>9.0f}s" for t in times), flush=True)


if __name__ == "__main__":
    main()
