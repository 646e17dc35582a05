"""The course's book: Sphinx with MyST-NB and the book theme (`book/build` runs it).

Sphinx reads the pages in this folder; the notebooks and the pages of `docs/` (hosted, command
line, scaling, bridges, teachers, results, maintainers) are staged into it first (`stage`, below:
copies, git-ignored), because Sphinx reads only files under its source folder. Staging adds to each notebook a line of links (the same notebook
and its student copy on Colab, built from `vitcourse.hosting` as the README's links are) and, under
each explorer, a sentence that its sliders work in JupyterLab or Colab: the book shows the
explorer's first view, which the cell above it draws. Each exercise is shown as the student copy
has it, and its solution cell collapsed under "Show the solution" (`exercise_cells`); a page's
.ipynb download is the notebook's student copy (`student/`, put in place when the build ends).
Notebook 06's page trains for a fixed number of passes instead of its time budget
(`fixed_passes`), so that it shows a run of the same length on any build machine.

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
sys.path.insert(0, str(HERE))  # book/decks.py

from decks import DECKS, write_decks  # noqa: E402  (book/decks.py, beside this file)
from words import WORDS, other_editions  # noqa: E402  (book/words.py: the book's own words)

import vitcourse  # noqa: E402
from vitcourse.classroom.student import BEGIN, strip_solutions  # noqa: E402
from vitcourse.hosting import colab_url  # noqa: E402

# The edition: English (the source), or another language in book/words.py (`book/build --language
# es`: the notebooks of es/, written by python -m vitcourse.translate es, into html/es/; its
# landing page is book/es/index.md).
LANGUAGE = os.environ.get("VITCOURSE_BOOK_LANGUAGE", "en")
WORDS_HERE = WORDS[LANGUAGE]
EDITION = ROOT if LANGUAGE == "en" else ROOT / LANGUAGE  # notebooks/ and student/ are in it
NOTEBOOKS = Path(os.environ.get("VITCOURSE_BOOK_NOTEBOOKS", EDITION / "notebooks")).resolve()
QUICK = os.environ.get("VITCOURSE_QUICK", "0") not in ("", "0")
MODE = "quick" if QUICK else "full"
EXPLORER_NOTE = WORDS_HERE["explorer"]


def links_line(name: str) -> str:
    """The line under a notebook's title: it and its student copy on Colab, as in the README, and
    its slide deck (book/decks.py)."""
    folder = "student" if LANGUAGE == "en" else f"{LANGUAGE}/student"
    return WORDS_HERE["links"].format(
        teacher=colab_url(EDITION.relative_to(ROOT).joinpath("notebooks").as_posix(), name),
        student=colab_url(folder, name), folder=folder, name=name,
        deck=f"{DECKS}/{Path(name).stem}.slides.html",
    )  # fmt: skip


SHOW_SOLUTION = WORDS_HERE["show"]
HIDE_SOLUTION = WORDS_HERE["hide"]


def slide_mark(cell: dict) -> dict:
    """A cell's slide mark (Jupyter's slideshow metadata), for a cell the book inserts before it."""
    return {"slideshow": cell["metadata"]["slideshow"]} if "slideshow" in cell["metadata"] else {}


CONTINUES = {"slideshow": {"slide_type": "-"}}  # on the slide of the cell before
SKIPPED = {"slideshow": {"slide_type": "skip"}}  # on the page, not on the slides


def exercise_cells(cell: dict, where: str) -> list[dict]:
    """An exercise's cell as the book shows it: the exercise as the student copy has it (its
    solution replaced by `raise NotImplementedError()`), then the cell itself, whose code the
    page folds under "Show the solution" (MyST-NB's hide-input tag): a reader tries first. The
    exercise takes the cell's slide; the solution's code is left out of the deck (book/decks.py)."""
    source = "".join(cell["source"])
    exercise, _ = strip_solutions(source, where, language=LANGUAGE)
    shown = {
        "cell_type": "markdown",
        "metadata": slide_mark(cell),
        "source": f"{WORDS_HERE['exercise']}\n\n```python\n{exercise}\n```",
    }
    tags = [*cell["metadata"].get("tags", []), "hide-input"]
    prompts = {"code_prompt_show": SHOW_SOLUTION, "code_prompt_hide": HIDE_SOLUTION}
    mystnb = {**cell["metadata"].get("mystnb", {}), **prompts}
    metadata = {**cell["metadata"], "tags": tags, "mystnb": mystnb, **CONTINUES}
    return [shown, {**cell, "metadata": metadata}]


# Notebook 06 trains for a time budget (`MINUTES`), so what its page shows would depend on how busy
# the machine that builds the book was (a loaded one printed 1 pass and 69% under prose that
# describes a full run). The book's copy trains for a fixed number of passes instead, seeded, and
# says so above the cell: the page shows a run of the same length on any build machine.
BOOK_EPOCHS = 7
TIME_BUDGET = "TrainConfig(minutes=MINUTES)"
# A quick build runs quick mode's one short pass (the notebook's own `if QUICK`), and says so.
FIXED_PASSES_NOTE = WORDS_HERE["fixed_quick" if QUICK else "fixed"].format(epochs=BOOK_EPOCHS)


def fixed_passes(cell: dict, notebook: str) -> list[dict]:
    """Notebook 06's cell that sets the time budget, as the book runs it: a fixed number of passes."""
    source = "".join(cell["source"])
    if notebook != "06_training.ipynb" or cell["cell_type"] != "code" or TIME_BUDGET not in source:
        return [cell]
    fixed = source.replace(TIME_BUDGET, f"TrainConfig(epochs={BOOK_EPOCHS})")
    return [
        {"cell_type": "markdown", "metadata": slide_mark(cell), "source": FIXED_PASSES_NOTE},
        {**cell, "source": fixed, "metadata": {**cell["metadata"], **CONTINUES}},
    ]


def staged_notebook(source: Path) -> dict:
    """The notebook as the book shows it: the links under its title, a note under each explorer,
    each exercise shown open and its solution folded."""
    notebook = json.loads(source.read_text())
    cells, titled = [], False
    for index, cell in enumerate(notebook["cells"]):
        if not titled and cell["cell_type"] == "markdown":  # the links go under the title
            titled = True
            title, _, rest = "".join(cell["source"]).partition("\n")
            links = {
                "cell_type": "markdown",
                "metadata": SKIPPED,
                "source": links_line(source.name),
            }
            cells += [{**cell, "source": title}, links]  # the deck shows no links: skipped
            cell = {**cell, "id": None, "source": rest.strip("\n"), "metadata": CONTINUES}
        if cell["cell_type"] == "code" and BEGIN in "".join(cell["source"]):
            cells += exercise_cells(cell, f"{source.name}, cell {index}")
            continue
        cells += fixed_passes(cell, source.name)
        if "skip-execution" in cell["metadata"].get("tags", []):
            cells.append({"cell_type": "markdown", "metadata": CONTINUES, "source": EXPLORER_NOTE})
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
    docs = [] if LANGUAGE != "en" else sorted((ROOT / "docs").glob("*.md"))  # English only
    for source in docs + sorted((ROOT / "docs").glob("*.png")):
        target = HERE / "docs" / source.name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            target.parent.mkdir(exist_ok=True)
            shutil.copyfile(source, target)


def execution_cache() -> str:
    """The folder of executed notebooks for this mode and this version of the package and its
    shipped data. jupyter-cache knows a notebook by its code cells only; the outputs also depend on
    `vitcourse` and data/trained/, so a change there starts a new cache (and removes the old)."""
    digest = hashlib.sha256()
    sources = sorted((ROOT / "vitcourse").rglob("*.py")) + sorted(
        (ROOT / "data" / "trained").glob("*")
    )
    for path in sources:
        digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    folder = HERE / "_build" / f".jupyter_cache-{MODE}-{LANGUAGE}-{digest.hexdigest()[:12]}"
    for old in folder.parent.glob(f".jupyter_cache-{MODE}-{LANGUAGE}-*"):
        if old != folder:
            shutil.rmtree(old)
    return str(folder)


stage()


# The interface's words in the edition's language where the themes' catalogs lack them or have
# them wrong (book/_locale/<language>/LC_MESSAGES/: Sphinx's "sphinx" catalog and the book theme's
# "booktheme"), compiled here and read before the themes' own (locale_dirs; setup, below).
INTERFACE_LOCALE = HERE / "_build" / f"interface-locale-{LANGUAGE}"


def interface_catalogs() -> None:
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    for po in sorted((HERE / "_locale" / LANGUAGE / "LC_MESSAGES").glob("*.po")):
        mo = INTERFACE_LOCALE / LANGUAGE / "LC_MESSAGES" / po.with_suffix(".mo").name
        mo.parent.mkdir(parents=True, exist_ok=True)
        with po.open("rb") as source, mo.open("wb") as compiled:
            write_mo(compiled, read_po(source, locale=LANGUAGE))


interface_catalogs()
locale_dirs = [str(INTERFACE_LOCALE)]

project = WORDS_HERE["title"]
language = LANGUAGE  # the pages' lang="...", and Sphinx's and the theme's own words
# The footer's "By ..." and "© Copyright ...", in the edition's words.
author = WORDS_HERE["authors"]
copyright = WORDS_HERE["authors"]  # noqa: A001 (Sphinx's name)
# sphinx-mathjax-offline: MathJax 3 copied into the site, so the equations render offline (the
# default loads it from a CDN).
# sphinx-copybutton: a button on each code cell that copies its code (not its output), so a reader
# can paste a cell into their own notebook.
extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx-mathjax-offline",
    "sphinx_copybutton",
]
copybutton_selector = "div:not(.output) > div.highlight pre"  # code, not the outputs
# book/es/ and any other language's folder: that edition's landing page, built on its own.
exclude_patterns = ["_build", "README.md", "**/.ipynb_checkpoints"]
exclude_patterns += [code for code in WORDS if code != "en"]
templates_path = ["_templates"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "substitution"]
# The home page says how its notebooks ran ({{ run_mode }}): true of this build, quick or full.
myst_substitutions = {"run_mode": WORDS_HERE["run_mode"][MODE]}
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
# A quiz (vitcourse.quiz) is widgets in JupyterLab and HTML in the book: a page has no kernel for
# the widgets, so the book shows the HTML, which answers in the page (_static/quiz.js).
nb_mime_priority_overrides = [("*", "application/vnd.jupyter.widget-view+json", None)]
# No widget is drawn, so none of the widgets' JavaScript, which MyST-NB would load from two CDNs on
# every page whose notebook saved a widget's state (the book works offline).
nb_ipywidgets_js: dict = {}

# The package's reference, one page per module, from the docstrings (reference.md).
autosummary_generate = True
# The commands' files (`vitcourse.COMMANDS`) run modules documented in their subpackages: no page.
autosummary_context = {"commands": [f"vitcourse.{name}" for name in vitcourse.COMMANDS]}
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_inherit_docstrings = False  # not Lightning's docstrings on our overrides
default_role = "code"  # the docstrings' `name` is code, as in Markdown

html_theme = "sphinx_book_theme"
html_title = "vitcourse" if LANGUAGE == "en" else f"vitcourse ({LANGUAGE})"
html_theme_options = {
    "repository_url": f"https://github.com/{__import__('vitcourse.hosting').hosting.REPOSITORY}",
    "use_repository_button": True,
    "use_download_button": True,
    "show_toc_level": 2,
    "search_bar_text": WORDS_HERE["interface"]["search"],
}
if QUICK:  # every page of a quick build says so, in the theme's banner
    html_theme_options["announcement"] = WORDS_HERE["quick"]
# course.css: a wider column for the course's 100-character lines of code, outputs wrapped
# rather than scrolled, wide figures at the column's full width.
html_static_path = ["_static"]
html_css_files = ["course.css"]
# navigation.js: the menu and contents buttons work on every screen (a theme bug; the file says).
# figures.js: each figure a notebook draws is a link to its image, to open at full size.
# quiz.js: the notebooks' questions answer in the page (vitcourse/quiz/page.py writes them).
html_js_files = ["navigation.js", "figures.js", "quiz.js"]
html_favicon = "favicon.png"
# Light or dark as the reader's system is set (the theme's switch still changes it); named, as the
# theme's switch otherwise logs an error at first.
html_context = {
    "default_mode": "auto",
    "other_editions": other_editions(LANGUAGE),
    "interface": WORDS_HERE["interface"],
}
# Every page links to the other editions, under the navigation (_templates/other-edition.html).
html_sidebars = {"**": ["navbar-logo.html", "icon-links.html", "search-button-field.html",
                        "sbt-sidebar-nav.html", "other-edition.html"]}  # fmt: skip
html_last_updated_fmt = None


def student_downloads(outdir: Path, notebooks: list[str]) -> list[Path]:
    """Make each notebook page's .ipynb download (the theme's download button serves the page's
    source from _sources/) the notebook's student copy: a reader downloads the exercises open."""
    written = []
    for name in notebooks:
        student = EDITION / "student" / name
        target = outdir / "_sources" / "notebooks" / name
        if student.is_file() and target.parent.is_dir():
            shutil.copyfile(student, target)
            written.append(target)
    return written


FOLDED = 'aria-label="Toggle hidden content"'  # MyST-NB writes it in English, whatever the language


def folded_in_words(outdir: Path) -> None:
    """Each folded cell's button named in the edition's words (MyST-NB's is fixed in English)."""
    said = f'aria-label="{WORDS_HERE["interface"]["folded"]}"'
    for page in outdir.rglob("*.html"):
        text = page.read_text()
        if FOLDED in text and said != FOLDED:
            page.write_text(text.replace(FOLDED, said))


def setup(app):
    """Say where the executed notebooks are cached and staged, next to the html (tests/
    test_book.py reads the staged notebooks with their outputs from the cache: MyST-NB's own copies
    in jupyter_execute/ lack the outputs when they came from the cache, and _sources/ holds the
    student copies); when the build ends, put the student copies in _sources/ and write each
    notebook's slide deck into slides/ (book/decks.py)."""

    def record(app):
        (Path(app.outdir).parent / "execution-cache.txt").write_text(nb_execution_cache_path)
        (Path(app.outdir).parent / "staged-notebooks.txt").write_text(str(HERE / "notebooks"))

    def finished(app, exception):
        if exception is None:
            names = [p.name for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))]
            student_downloads(Path(app.outdir), names)
            folded_in_words(Path(app.outdir))
            if app.config.nb_execution_mode != "off":  # -D nb_execution_mode=off: pages only
                staged, words = HERE / "notebooks", WORDS_HERE["slides"]
                write_decks(
                    Path(app.outdir), staged, nb_execution_cache_path, names, LANGUAGE, words
                )

    app.connect("builder-inited", record)
    app.connect("build-finished", finished)
    # Read before the book theme adds its own catalog (it loads later, with the theme).
    app.add_message_catalog("booktheme", str(INTERFACE_LOCALE))
