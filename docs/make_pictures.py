"""Make the README's pictures from the course's own code and shipped data: `python docs/make_pictures.py`.

Each picture is a small PNG in this folder, drawn by the same functions the notebooks call, so
anyone can make them again after a change (`tests/test_docs.py` runs this script).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no window

import matplotlib.pyplot as plt  # noqa: E402

from vitcourse.data import dataset_info, denormalize, load_dataset  # noqa: E402
from vitcourse.diagrams import model_map_figure  # noqa: E402
from vitcourse.vit import preset_for  # noqa: E402

HERE = Path(__file__).resolve().parent


def model_map(out: Path) -> Path:
    """The map of the course (notebooks 00 and 01): the whole ViT, one notebook a step."""
    dataset = "fashion-mnist"
    image, label = load_dataset(dataset, train=False)[0]
    fig = model_map_figure(
        preset_for(dataset), denormalize(image, dataset), dataset_info(dataset).classes[label]
    )
    path = out / "model_map.png"
    fig.savefig(path, dpi=72, bbox_inches="tight")
    plt.close(fig)
    return path


PICTURES = [model_map]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the PNGs")
    out = parser.parse_args(argv).out
    out.mkdir(parents=True, exist_ok=True)
    for draw in PICTURES:
        path = draw(out)
        print(f"{path} ({path.stat().st_size / 1000:.0f} kB)")


if __name__ == "__main__":
    main()
