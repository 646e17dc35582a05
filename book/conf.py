"""The course's book: Sphinx with MyST-NB and the book theme (`book/build` runs it).

Sphinx reads the pages in this folder; the notebooks and the pages of `docs/` (hosted, command
line, scaling, bridges, teachers, results, maintainers) are staged into it first (`stage`, below:
copies, git-ignored), because Sphinx reads only files under its source folder. Staging adds to each notebook a line of links (the same notebook
and its student copy on Colab, built from `vitcourse.hosting` as the README's links are) and, under
each explorer, a sentence that its sliders work in JupyterLab or Colab: the book shows the
explorer's first view, which the cell above it draws.

MyST-NB executes the staged notebooks through jupyter-cache (`nb_execution_mode = "cache"`): a
notebook is executed again only when its code changes, so a rebuild after a text edit executes
nothing; a change to the package or to the shipped models starts afresh (`execution_cache`).
Quick mode (`VITCOURSE_QUICK=1`) has a cache of its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = Path(os.environ.get("VITCOURSE_ROOT", HERE.parent)).resolve()
sys.path.insert(0, str(ROOT))

from vitcourse.hosting import colab_url  # noqa: E402

NOTEBOOKS = Path(os.environ.get("VITCOURSE_BOOK_NOTEBOOKS", ROOT / "notebooks")).resolve()
QUICK = os.environ.get("VITCOURSE_QUICK", "0") not in ("", "0")
MODE = "quick" if QUICK else "full"
EXPLORER_NOTE = (
    "*The book shows this explorer's first view: the figure drawn by the cell above. In JupyterLab "
    "or on Colab the cell opens it with its sliders, and moving them redraws the figure.*"
)


def links_line(name: str) -> str:
    """The line under a notebook's title: it and its student copy on Colab, as in the README."""
    return (
        f"**Run it:** [this notebook on Colab]({colab_url('notebooks', name)}) · "
        f"[the student copy on Colab]({colab_url('student', name)}) "
        "(the exercises open; this page shows the solutions) · on your machine, "
        f"`jupyter lab student/{name}` ([set-up](../index.md#run-it-on-your-machine))"
    )


def staged_notebook(source: Path) -> dict:
    """The notebook as the book shows it: the links under its title, a note under each explorer."""
    notebook = json.loads(source.read_text())
    cells = []
    for cell in notebook["cells"]:
        if not cells and cell["cell_type"] == "markdown":
            text = "".join(cell["source"])
            title, _, rest = text.partition("\n")
            cell = {**cell, "source": f"{title}\n\n{links_line(source.name)}\n{rest}"}
        cells.append(cell)
        if "skip-execution" in cell["metadata"].get("tags", []):
            cells.append({"cell_type": "markdown", "metadata": {}, "source": EXPLORER_NOTE})
    for i, cell in enumerate(cells):  # ids stay unique after the inserted notes
        cell["id"] = cell.get("id") or f"book-{i}"
    return {**notebook, "cells": cells}


def write_if_changed(path: Path, text: str) -> None:
    """Write only a change, so Sphinx reads again only what changed (it compares times)."""
    if not path.exists() or path.read_text() != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def stage() -> None:
    """Copy the notebooks and docs/'s pages into this folder, where Sphinx reads them."""
    folder = HERE / "notebooks"
    sources = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not sources:
        raise SystemExit(f"no notebooks (NN_name.ipynb) in {NOTEBOOKS}")
    for stale in set(folder.glob("*.ipynb")) - {folder / s.name for s in sources}:
        stale.unlink()
    for source in sources:
        text = json.dumps(staged_notebook(source), indent=1, ensure_ascii=False) + "\n"
        write_if_changed(folder / source.name, text)
    for source in sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs").glob("*.png")):
        target = HERE / "docs" / source.name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            target.parent.mkdir(exist_ok=True)
            shutil.copyfile(source, target)


def execution_cache() -> str:
    """The folder of executed notebooks for this mode and this version of the package and its
    shipped data. jupyter-cache knows a notebook by its code cells only; the outputs also depend on
    `vitcourse` and data/trained/, so a change there starts a new cache (and removes the old)."""
    digest = hashlib.sha256()
    sources = sorted((ROOT / "vitcourse").rglob("*.py")) + sorted((ROOT / "data" / "trained").glob("*"))
    for path in sources:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    folder = HERE / "_build" / f".jupyter_cache-{MODE}-{digest.hexdigest()[:12]}"
    for old in folder.parent.glob(f".jupyter_cache-{MODE}-*"):
        if old != folder:
            shutil.rmtree(old)
    return str(folder)


stage()

project = "vitcourse: build a Vision Transformer, step by step"
author = "the vitcourse authors"
copyright = "the vitcourse authors"  # noqa: A001 (Sphinx's name)
# sphinx-mathjax-offline: MathJax 3 copied into the site, so the equations render offline (the
# default loads it from a CDN).
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx-mathjax-offline"]
exclude_patterns = ["_build", "README.md", "**/.ipynb_checkpoints"]
templates_path = ["_templates"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # notebooks' titles carry their numbers, e.g. "# 01 · Patches"

# Execution: every notebook as a learner runs it (full mode unless VITCOURSE_QUICK=1), cached.
nb_execution_mode = "cache"
# tqdm's bars are ipywidgets in a notebook: the page would load the widgets' JavaScript from a CDN
# and show an empty box. A book is read after the run: no bars (the kernels inherit this).
os.environ["TQDM_DISABLE"] = "1"
# The checks' record of a learner's progress (`progress()`): the book's own, empty, not the
# progress of whoever builds it.
os.environ["VITCOURSE_PROGRESS"] = str(Path(tempfile.mkdtemp(prefix="book-")) / "progress.json")
nb_execution_cache_path = os.environ.get("VITCOURSE_BOOK_CACHE") or execution_cache()
nb_execution_timeout = 1800  # notebook 06 trains for 5 minutes in one cell
nb_execution_in_temp = True  # what a notebook writes (runs/, checkpoints) stays out of the repo
nb_execution_raise_on_error = True  # a cell that fails stops the build, naming the notebook
nb_execution_show_tb = True
nb_merge_streams = False  # 1.4 merges them and keeps the parts too: every line twice

# The package's reference, one page per module, from the docstrings (reference.md).
autosummary_generate = True
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_inherit_docstrings = False  # not Lightning's docstrings on our overrides
default_role = "code"  # the docstrings' `name` is code, as in Markdown

html_theme = "sphinx_book_theme"
html_title = "vitcourse"
html_theme_options = {
    "repository_url": f"https://github.com/{__import__('vitcourse.hosting').hosting.REPOSITORY}",
    "use_repository_button": True,
    "use_download_button": True,
    "show_toc_level": 2,
}
html_static_path: list[str] = []
html_favicon = "favicon.png"
html_context = {"default_mode": "light"}  # the theme's switch otherwise logs an error at first
html_last_updated_fmt = None


def setup(app):
    """Say where the executed notebooks are cached, next to the html (tests/test_book.py reads the
    notebooks there as the book shows them: MyST-NB's own copies in jupyter_execute/ lack the
    outputs when they came from the cache)."""

    def record(app):
        (Path(app.outdir).parent / "execution-cache.txt").write_text(nb_execution_cache_path)

    app.connect("builder-inited", record)
