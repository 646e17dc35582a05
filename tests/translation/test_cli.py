"""python -m vitcourse.translate (vitcourse.translation.cli): the Spanish edition in es/ is what
the generator writes from the English and the catalogs, its code is the English code, and a
catalog with a hole is refused, naming it."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import need
from tests.translation.test_cells import skeleton
from vitcourse.translation import catalogs, cli

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    need("babel", "pip install -r requirements-book.txt")
    out = tmp_path_factory.mktemp("es")
    cli.edition("es", out)
    return out


def test_es_is_what_the_generator_writes(written):
    for folder in ("notebooks", "student"):
        made = sorted(p.name for p in (written / folder).iterdir())
        there = sorted(p.name for p in (ROOT / "es" / folder).glob("*.ipynb"))  # not their runs/
        assert made == there == [p.name for p in NOTEBOOKS], folder
        for name in made:
            assert (written / folder / name).read_bytes() == (
                ROOT / "es" / folder / name
            ).read_bytes(), (
                f"es/{folder}/{name} differs from what python -m vitcourse.translate es writes"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_spanish_code_is_the_english_code(path):
    english = json.loads(path.read_text())
    spanish = json.loads((ROOT / "es" / "notebooks" / path.name).read_text())
    first, *cells = spanish["cells"]
    assert "".join(first["source"]) == "%env VITCOURSE_LANG=es"
    assert spanish["metadata"]["vitcourse"]["language"] == "es"
    assert len(cells) == len(english["cells"])
    for en, es in zip(english["cells"], cells, strict=True):
        assert (es["id"], es["cell_type"], es["metadata"].get("slideshow")) == (
            en["id"], en["cell_type"], en["metadata"].get("slideshow"))  # fmt: skip
        if en["cell_type"] == "code":
            assert skeleton("".join(es["source"])) == skeleton("".join(en["source"])), en["id"]


def test_a_catalog_with_a_hole_is_refused_and_named(tmp_path):
    need("babel", "pip install -r requirements-book.txt")
    notebook = json.loads(NOTEBOOKS[1].read_text())
    catalog = catalogs.merged(catalogs.notebook_template(notebook), None, "es")
    for message in catalog:
        if message.id:
            message.string = "ES"
    hole = next(m for m in catalog if m.id.startswith("## 2."))
    hole.string = ""
    with pytest.raises(ValueError, match=r"not translated into es yet \(1\):\n.*## 2\."):
        cli.translated_notebook(notebook, catalog, "es", NOTEBOOKS[1].name)
    hole.string, hole.flags = "ES", {"fuzzy"}
    with pytest.raises(ValueError, match="fuzzy"):
        cli.translated_notebook(notebook, catalog, "es", NOTEBOOKS[1].name)


def test_an_unknown_language_is_a_one_line_error():
    done = subprocess.run([sys.executable, "-m", "vitcourse.translate", "fr"],
                          capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip() == (
        "python -m vitcourse.translate: the course speaks no language 'fr': it speaks "
        "en (English), es (español)"
    )


def test_the_spanish_readme_is_linked_and_opens_every_spanish_notebook():
    assert "[Español](README.es.md)" in (ROOT / "README.md").read_text()
    readme = (ROOT / "README.es.md").read_text()
    assert "[English](README.md)" in readme
    colab = "https://colab.research.google.com/github/vitcourse/vitcourse/blob/main/"
    for path in NOTEBOOKS:
        for folder in ("es/student", "es/notebooks"):
            assert f"{colab}{folder}/{path.name}" in readme, (folder, path.name)
            assert (ROOT / folder / path.name).is_file(), (folder, path.name)
