"""The `DATASET` switch is real: every notebook that loads data runs top to bottom, in quick mode,
with each of "mnist", "cifar10" and "cifar100" in place of "fashion-mnist", and with a folder of
images (one sub-folder per class, `vitcourse.data.folders`).

Those datasets cannot be downloaded here, so the test writes small files in torchvision's own
on-disk formats (a few thousand random images: enough for the 5,000 images `make_loaders` holds
out for validation) and points `VITCOURSE_DATA` at them. torchvision MD5-checks CIFAR's files
against the official ones; the notebook's first cell, added by the test, gives it our files'
MD5s instead, so its real integrity check still runs. `VITCOURSE_DATA` holds no Fashion-MNIST, so
a notebook that quietly read it instead of the dataset asked for would fail here.
"""

import json
import shutil
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient
from PIL import Image

from tests.data.test_loading import _write_cifar, _write_idx

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_LINE = 'DATASET = "fashion-mnist"'
# Notebook 10's dataset is a folder of images it writes itself (from Fashion-MNIST's files, shown
# as the layout of the learner's own), and its Hugging Face section converts the shipped
# Fashion-MNIST model: it offers a `FOLDER`, not the switch.
WITHOUT_SWITCH = ("10_bridges.ipynb",)
LOADS_DATA = [
    path
    for path in sorted((ROOT / "notebooks").glob("*.ipynb"))
    if ("load_dataset(" in path.read_text() or "make_loaders(" in path.read_text())
    and path.name not in WITHOUT_SWITCH
]
TRAIN, TEST = 5500, 300  # images per split


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    """MNIST, CIFAR-10 and CIFAR-100 in torchvision's layout; returns (folder, CIFAR MD5s)."""
    root = tmp_path_factory.mktemp("data")
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", TRAIN), ("t10k", TEST)):
        _write_idx(raw / f"{split}-images-idx3-ubyte", rng.integers(0, 256, (n, 28, 28)))
        _write_idx(raw / f"{split}-labels-idx1-ubyte", np.arange(n) % 10)
    md5s = {
        "cifar10": _write_cifar(root / "cifar-10-batches-py", 10, n=TRAIN // 5, n_test=TEST),
        "cifar100": _write_cifar(root / "cifar-100-python", 100, n=TRAIN, n_test=TEST),
    }
    # A learner's own folder: 4 classes of 150 small images, PNG and JPEG, grayscale and colour.
    for label in range(4):
        folder = root / "my_images" / f"class{label}"
        folder.mkdir(parents=True)
        for i in range(150):
            pixels = rng.integers(0, 256, (24, 30, 3) if i % 3 else (28, 28), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / f"{i}.{'jpg' if i % 3 else 'png'}")
    return root, md5s


def _trust_cell(md5s: dict) -> str:
    return f"""# Added by tests/test_dataset_switch.py: trust the test's small CIFAR files.
from torchvision import datasets
for cls, md5 in ((datasets.CIFAR10, {md5s["cifar10"]!r}), (datasets.CIFAR100, {md5s["cifar100"]!r})):
    cls.train_list = [[name, md5[name]] for name, _ in cls.train_list]
    cls.test_list = [[name, md5[name]] for name, _ in cls.test_list]
    cls.meta = {{**cls.meta, "md5": md5[cls.meta["filename"]]}}
"""


def test_every_notebook_that_loads_data_offers_the_switch():
    assert len(LOADS_DATA) >= 5
    for path in LOADS_DATA:
        source = "".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
        line = f'{DEFAULT_LINE}  # or "mnist", "cifar10", "cifar100"'
        assert source.count(line) == 1, f"{path.name}: no `{line}` line"


@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["mnist", "a folder"])  # CIFAR's: test_dataset_switch_cifar.py
@pytest.mark.parametrize("path", LOADS_DATA, ids=lambda p: p.name)
def test_notebook_runs_with_another_dataset(path, dataset, data_root, tmp_path, monkeypatch):
    run_with(path, dataset, data_root, tmp_path, monkeypatch)


def run_with(path: Path, dataset: str, data_root, tmp_path: Path, monkeypatch) -> None:
    """Execute the notebook at `path` in quick mode with `dataset` on its `DATASET` line."""
    root, md5s = data_root
    nb = nbformat.read(path, as_version=4)
    switched = 0
    for cell in nb.cells:
        if cell.cell_type == "code" and DEFAULT_LINE in cell.source:
            name = str(root / "my_images") if dataset == "a folder" else dataset
            cell.source = cell.source.replace(DEFAULT_LINE, f'DATASET = "{name}"')
            switched += 1
    assert switched == 1
    nb.cells.insert(0, nbformat.v4.new_code_cell(_trust_cell(md5s)))
    for cell in nb.cells:  # explorers are skipped, as under nbmake
        if "skip-execution" in cell.metadata.get("tags", []):
            cell.source = "pass"
    work = tmp_path / "notebooks"
    work.mkdir()
    monkeypatch.setenv("VITCOURSE_DATA", str(root))
    monkeypatch.setenv("VITCOURSE_QUICK", "1")
    client = NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(work)}}
    )
    try:
        client.execute()
    finally:
        shutil.rmtree(work / "runs", ignore_errors=True)
    printed = "".join(
        o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs
    )
    assert "Traceback" not in printed  # no error caught and printed along the way
