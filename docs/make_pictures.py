"""Make the README's pictures from the course's own code and shipped data: `python docs/make_pictures.py`.

Each picture is a small PNG in this folder. The map of the model is drawn by the function notebooks
00 and 01 call; the others are figures the notebooks draw, taken from the notebooks themselves:
the script executes each notebook (as nbmake and the book do, in full mode, with the shipped models
and results), takes the image its cell drew, and shrinks it. So anyone can make them again after a
change, and a picture is always what a learner sees. Full mode takes about 6 minutes on a 2-core CPU
(notebook 06 trains for 5); `--quick` runs the notebooks in quick mode, in seconds each, which is
what `tests/test_docs.py` does to prove the script still runs (the committed pictures are full
mode's).
"""

from __future__ import annotations

import argparse
import base64
import io
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no window

import matplotlib.pyplot as plt  # noqa: E402

from vitcourse.data.loading import dataset_info, denormalize, load_dataset  # noqa: E402
from vitcourse.diagrams import model_map_figure  # noqa: E402
from vitcourse.language import speaking  # noqa: E402
from vitcourse.presets import preset_for  # noqa: E402

HERE = Path(__file__).resolve().parent
NOTEBOOKS = HERE.parent / "notebooks"
WIDTH = 900  # pixels: sharp in a README's column, small as a file

# name -> (notebook, id of the cell whose figure it is)
FROM_NOTEBOOKS = {
    "live_training.png": ("06_training", "665ea6aa"),
    "sqrt_d.png": ("03_attention", "93a766ff"),
    "rollout.png": ("07_inside_a_vit", "bcf8f038"),
    "race.png": ("08_vit_vs_cnn", "7431bdad"),
    "mae.png": ("09_when_vits_win", "d7da5cb5"),
}


def model_map(out: Path, language: str = "en") -> Path:
    """The map of the course (notebooks 00 and 01): the whole ViT, one notebook a step, in the
    language asked for (README.es.md shows the Spanish one, model_map.es.png)."""
    dataset = "fashion-mnist"
    image, label = load_dataset(dataset, train=False)[0]
    with speaking(language):
        fig = model_map_figure(
            preset_for(dataset), denormalize(image, dataset), dataset_info(dataset).classes[label]
        )
    path = out / ("model_map.png" if language == "en" else f"model_map.{language}.png")
    fig.savefig(path, dpi=72, bbox_inches="tight")
    plt.close(fig)
    return path


def executed(notebook: str, quick: bool) -> dict:
    """The notebook, executed in a fresh kernel in its own folder (explorers skipped, as nbmake
    and the book skip them)."""
    import nbformat
    from nbclient import NotebookClient

    os.environ["VITCOURSE_QUICK"] = "1" if quick else "0"  # the kernel inherits it
    os.environ["TQDM_DISABLE"] = "1"
    nb = nbformat.read(NOTEBOOKS / f"{notebook}.ipynb", as_version=4)
    NotebookClient(nb, timeout=1800, resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    return nb


def cell_picture(nb: dict, cell_id: str, path: Path) -> Path:
    """The first image the cell drew, shrunk to WIDTH pixels and saved as a PNG of 256 colours."""
    from PIL import Image

    cell = next(c for c in nb["cells"] if c.get("id") == cell_id)
    data = next(o["data"]["image/png"] for o in cell["outputs"] if "image/png" in o.get("data", {}))
    with Image.open(io.BytesIO(base64.b64decode(data))) as image:
        image = image.convert("RGB")
        if image.width > WIDTH:
            image = image.resize((WIDTH, round(image.height * WIDTH / image.width)), Image.LANCZOS)
        image.quantize(256).save(path, optimize=True)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the PNGs")
    parser.add_argument("--quick", action="store_true", help="notebooks in quick mode (a test)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    made = [model_map(args.out), model_map(args.out, "es")]
    runs: dict[str, dict] = {}
    for name, (notebook, cell_id) in FROM_NOTEBOOKS.items():
        if notebook not in runs:
            print(f"executing {notebook} ({'quick' if args.quick else 'full'} mode)", flush=True)
            runs[notebook] = executed(notebook, args.quick)
        made.append(cell_picture(runs[notebook], cell_id, args.out / name))
    for path in made:
        print(f"{path} ({path.stat().st_size / 1000:.0f} kB)")


if __name__ == "__main__":
    main()
