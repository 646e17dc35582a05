"""The book's slide decks: one reveal.js deck per notebook, from the slide marks in its cells.

Each notebook's cells carry Jupyter's `slideshow` metadata (a slide, a sub-slide, a fragment, the
speaker's notes, or skipped; tests/test_slides.py says what every notebook must have). When the
book is built (book/conf.py), `write_decks` runs nbconvert's slides exporter on each notebook as the
book executed it (the staged notebook, merged with its outputs from the jupyter-cache) and writes
`slides/NN_name.slides.html`; each notebook's page links to its deck.

nbconvert's own page loads reveal.js, require.js, jQuery and MathJax from CDNs, so its decks are
blank offline (jupyter/nbconvert#296). The book's page (`_slides/index.html.j2`) loads them from the
book: reveal.js from the copy that PyPI's sphinx-revealjs ships (`copy_reveal`), MathJax from the
copy sphinx-mathjax-offline already puts in `_static/`. On the deck: the exercise as the student
copy has it, its solution's code left out (its output kept), each quiz question a slide of its own
with its answer in the speaker's notes (`quiz_slides`), the speaker's notes in reveal's speaker
view (press "s").
"""

from __future__ import annotations

import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
DECKS = "slides"
REVEAL_FILES = [  # what a deck loads, of reveal.js's distribution: the white theme, the notes
    "LICENSE",
    "dist/reveal.js",
    "dist/reveal.css",
    "dist/theme/white.css",
    "dist/theme/fonts/source-sans-pro",
    "plugin/notes/notes.js",
]


def reveal_source() -> Path:
    """reveal.js as sphinx-revealjs ships it (requirements-book.txt)."""
    import sphinx_revealjs

    return Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs"


def copy_reveal(static: Path) -> Path:
    """Copy what the decks load of reveal.js into the book's `_static/reveal.js/`."""
    source, target = reveal_source(), static / "reveal.js"
    for name in REVEAL_FILES:
        where = source / name
        if not where.exists():
            raise FileNotFoundError(f"sphinx-revealjs ships no {name} (looked in {source})")
        if where.is_dir():
            shutil.copytree(where, target / name, dirs_exist_ok=True)
        else:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(where, target / name)
    return target


def exporter():
    """nbconvert's slides exporter with the book's page, no prompts, and the code of a cell the
    page folds (a solution: MyST-NB's hide-input tag) left out."""
    from nbconvert import SlidesExporter
    from traitlets.config import Config

    config = Config()
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_input_tags = {"hide-input", FIGURE_TAG}
    config.SlidesExporter.exclude_input_prompt = True
    config.SlidesExporter.exclude_output_prompt = True
    return SlidesExporter(
        config=config, template_file="index.html.j2", extra_template_basedirs=[str(HERE)],
        template_name="_slides", reveal_url_prefix="../_static",
    )  # fmt: skip


FIGURE_TAG = "deck-outputs"  # a slide of a cell's outputs, without its code
ROOM = 26  # lines of a slide: code, text output, and a figure counted as 16


def output_lines(cell) -> int:
    """About how many lines a cell's outputs take on a slide."""
    lines = 0
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if any(mime.startswith("image/") for mime in data):
            lines += 16
        else:
            text = output.get("text") or data.get("text/plain", "")
            lines += len("".join(text).splitlines())
    return lines


def output_slides(notebook):
    """A cell whose code and outputs would not fit a slide together (about `ROOM` lines) is shown
    twice: its code without outputs, then its outputs without its code (`FIGURE_TAG`) on the next
    sub-slide; so a figure is never shrunk under a long cell. Only the deck is cut so: JupyterLab's
    slideshow shows the cell as it is."""
    import copy

    cells = []
    for cell in notebook.cells:
        kind = cell.metadata.get("slideshow", {}).get("slide_type")
        code = len(cell.source.splitlines()) if cell.cell_type == "code" else 0
        if kind == "skip" or not code or code + output_lines(cell) <= ROOM or not cell.outputs:
            cells.append(cell)
            continue
        inputs, outputs = copy.deepcopy(cell), copy.deepcopy(cell)
        inputs.outputs = []
        outputs.id = f"{cell.get('id', 'cell')}-outputs"
        outputs.metadata["tags"] = [*cell.metadata.get("tags", []), FIGURE_TAG]
        outputs.metadata["slideshow"] = {"slide_type": "subslide"}
        cells += [inputs, outputs]
    notebook.cells = cells
    return notebook


def quiz_slides(notebook, language: str = "en"):
    """A cell that shows questions (`quiz("NN_name", {...})`, vitcourse.quiz) becomes a slide per
    question, its options listed, and the right answer with its reason in the speaker's notes: a
    teacher asks the room, then reads the answer from the speaker view ("s")."""
    import nbformat

    from vitcourse.language import speaking
    from vitcourse.quiz.page import answer_text, question_text
    from vitcourse.quiz.questions import answers_in, questions

    cells = []
    for cell in notebook.cells:
        asked = answers_in(cell.source) if cell.cell_type == "code" else []
        if not asked:
            cells.append(cell)
            continue
        with speaking(language):
            for name, answers in asked:
                for question in (questions(name)[key] for key in answers):
                    shown = nbformat.v4.new_markdown_cell(question_text(question))
                    shown.metadata["slideshow"] = {"slide_type": "slide"}
                    notes = nbformat.v4.new_markdown_cell(answer_text(question))
                    notes.metadata["slideshow"] = {"slide_type": "notes"}
                    cells += [shown, notes]
    notebook.cells = cells
    return notebook


def deck_title(notebook: dict) -> str:
    """The notebook's title, its first line without the "# "."""
    first = "".join(notebook["cells"][0]["source"]).partition("\n")[0]
    return first.lstrip("# ").strip()


def write_decks(
    outdir: Path,
    staged: Path,
    cache_path: str,
    names: list[str],
    language: str = "en",
    slides_word: str = "slides",
) -> list[Path]:
    """Write `outdir/slides/NAME.slides.html` for each notebook, with the outputs the book shows,
    in the edition's `language` (the page's lang, which screen readers and hyphenation follow;
    `slides_word`, the word in its title)."""
    import nbformat
    from jupyter_cache import get_cache

    copy_reveal(outdir / "_static")
    cache = get_cache(cache_path)
    slides = exporter()
    written = []
    for name in names:
        notebook = nbformat.read(staged / name, as_version=4)
        _, executed = cache.merge_match_into_notebook(notebook)
        executed = quiz_slides(output_slides(executed), language)
        resources = {
            "deck_title": deck_title(executed),
            "deck_language": language,
            "deck_slides": slides_word,
            "metadata": {"name": Path(name).stem},
        }
        html, _ = slides.from_notebook_node(executed, resources=resources)
        target = outdir / DECKS / f"{Path(name).stem}.slides.html"
        target.parent.mkdir(exist_ok=True)
        target.write_text(html)
        written.append(target)
    return written
