"""Every notebook is also a lecture: its cells carry Jupyter's slide marks (`slideshow` metadata).

A teacher presents a notebook live in JupyterLab (jupyterlab-rise, tests/test_slides_lab.py) or
from the book's deck (book/decks.py, tests/test_book_slides.py); both read the same marks. What a
notebook must have (`slide_problems`), for a 20-30 minute lecture:

- every cell is marked: `slide`, `subslide`, `fragment`, `-` (on the slide before), `skip` or
  `notes` (the speaker's view);
- the title and each `## ` section open a slide, and a heading starts its cell;
- each section shown has one `notes` cell, its key point in a sentence or two, right under its
  heading (the speaker view shows it as the section opens; a learner reads it as a summary);
- what a notebook folds away (`<details>`: answers, what our run printed), a section of answers,
  the Colab set-up and the progress report are skipped; every exercise is
  shown, on a slide or sub-slide of its own (or of its statement), and its check with it;
- between 8 and 40 slides and sub-slides: about a minute each.

The student copies (`python -m vitcourse.student`) keep the marks.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from vitcourse.classroom.student import BEGIN

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TYPES = {"slide", "subslide", "fragment", "-", "skip", "notes"}
OPENS = {"slide", "subslide"}
SLIDES = (8, 40)  # slides and sub-slides in a lecture of 20-30 minutes
NOTE_WORDS = 60


def slide_type(cell: dict) -> str | None:
    return cell["metadata"].get("slideshow", {}).get("slide_type")


def text(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def must_skip(cell: dict) -> str | None:
    """Why a cell is not lecture material, or None."""
    source = text(cell)
    if cell["cell_type"] == "markdown":
        if "<details" in source:
            return "folded away (an answer, or what our run printed)"
        if source.startswith("## Answers"):
            return "a section of answers"
        if source.lstrip().startswith("### Your progress"):
            return "the progress report"
    elif source.startswith("# Set-up. On Colab"):
        return "the Colab set-up"
    elif "progress(" in source and "import progress" in source:
        return "the progress report"
    return None


def slide_problems(notebook: dict) -> list[str]:
    """What keeps a notebook from being a lecture (empty when it is one)."""
    cells = notebook["cells"]
    problems = []
    for index, cell in enumerate(cells):
        kind = slide_type(cell)
        if kind not in TYPES:
            problems.append(f"cell {index}: slide mark {kind!r}, expected one of {sorted(TYPES)}")
            continue
        reason = must_skip(cell)
        if reason and kind != "skip":
            problems.append(f"cell {index} is {reason}: it should be 'skip', it is {kind!r}")
        if cell["cell_type"] == "markdown" and re.search(r"\n#{1,3} ", text(cell)):
            problems.append(f"cell {index}: a heading inside it should start a cell of its own")
        before = [c for c in cells[:index] if slide_type(c) not in ("notes", "skip")]
        statement = before and "Exercise" in text(before[-1]) and slide_type(before[-1]) in OPENS
        if BEGIN in text(cell) and kind not in OPENS and not (statement and kind == "-"):
            problems.append(
                f"cell {index}, an exercise, should open a slide or sub-slide, or share one with its "
                f"statement: {kind!r}"
            )
        if text(cell).lstrip().startswith("check_") or " = check_" in text(cell):
            if kind not in ("-", "fragment"):
                problems.append(f"cell {index}, a check, should be on its exercise's slide")
    if problems:
        return problems

    sections = [
        i
        for i, cell in enumerate(cells)
        if cell["cell_type"] == "markdown" and text(cell).lstrip().startswith(("# ", "## "))
    ]
    if not sections or sections[0] != 0:
        problems.append("the first cell should be the notebook's title (# ...)")
    for start, end in zip(sections, sections[1:] + [len(cells)], strict=True):
        heading = text(cells[start]).partition("\n")[0]
        kind = slide_type(cells[start])
        notes = [i for i in range(start, end) if slide_type(cells[i]) == "notes"]
        if kind == "skip" and must_skip(cells[start]):
            if notes:
                problems.append(f"{heading!r} is skipped but has notes for the teacher")
            continue
        if kind != "slide":
            problems.append(f"{heading!r} should open a slide, it is {kind!r}")
        if len(notes) != 1:
            problems.append(f"{heading!r} should have one notes cell, it has {len(notes)}")
            continue
        if notes[0] != start + 1:
            problems.append(f"{heading!r}: its notes cell should come right under the heading")
        words = len(text(cells[notes[0]]).split())
        if not 5 <= words <= NOTE_WORDS:
            problems.append(
                f"{heading!r}: its notes have {words} words, expected 5 to {NOTE_WORDS}"
            )
    opened = sum(slide_type(cell) in OPENS for cell in cells)
    if not SLIDES[0] <= opened <= SLIDES[1]:
        problems.append(f"{opened} slides and sub-slides, expected {SLIDES[0]} to {SLIDES[1]}")
    return problems


def load(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_is_marked_for_a_lecture(path):
    assert slide_problems(load(path)) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_student_copy_keeps_the_marks(path):
    teacher, student = load(path), load(ROOT / "student" / path.name)
    assert [slide_type(c) for c in student["cells"]] == [slide_type(c) for c in teacher["cells"]]
    assert slide_problems(student) == []


def test_the_checks_fail_a_notebook_without_marks_or_notes():
    notebook = load(ROOT / "notebooks" / "01_patches.ipynb")
    bare = copy.deepcopy(notebook)
    for cell in bare["cells"]:
        cell["metadata"].pop("slideshow", None)
    assert any("slide mark None" in p for p in slide_problems(bare))

    no_notes = copy.deepcopy(notebook)
    no_notes["cells"] = [c for c in no_notes["cells"] if slide_type(c) != "notes"]
    assert any("should have one notes cell, it has 0" in p for p in slide_problems(no_notes))

    shown_answers = copy.deepcopy(notebook)
    setup = next(c for c in shown_answers["cells"] if must_skip(c) == "the Colab set-up")
    setup["metadata"]["slideshow"]["slide_type"] = "-"
    assert any("the Colab set-up" in p for p in slide_problems(shown_answers))

    merged = copy.deepcopy(notebook)  # a section's heading inside the title's cell
    merged["cells"][0]["source"] = text(merged["cells"][0]) + "\n\n## 1. Patches\n\nMore."
    assert any("a heading inside it" in p for p in slide_problems(merged))

    one_slide = copy.deepcopy(notebook)
    for cell in one_slide["cells"][1:]:
        if slide_type(cell) in OPENS:
            cell["metadata"]["slideshow"]["slide_type"] = "-"
    assert slide_problems(one_slide)  # sections no longer open slides; one slide in all


@pytest.mark.parametrize(
    "path", sorted((ROOT / "es" / "notebooks").glob("*.ipynb")), ids=lambda p: f"es/{p.name}"
)
def test_the_spanish_notes_are_as_short(path):
    """A translation runs longer than its source; the teacher's notes stay within the limit."""
    cells = load(path)["cells"]
    words = [len(text(c).split()) for c in cells if slide_type(c) == "notes"]
    assert words and all(5 <= n <= NOTE_WORDS for n in words), words
