"""A third language, end to end, as docs/maintainers.md ("A new language") says to add one.

In a copy of the course (the package, the notebooks, the catalogs, the book; the data linked), the
test adds Esperanto, a language the course does not ship, and follows the recipe: the language in
`vitcourse.language.LANGUAGES`, `python -m vitcourse.translate merge eo`, every entry translated
(a pseudo-translation: the English, with a few marked entries that show where the words came from),
`python -m vitcourse.translate eo`, the book's words and a landing page, and
`book/build --language eo` in quick mode, on one notebook (the recipe's build runs them all; one
is enough to show that the machinery is not made for two languages only). Nothing is written in
the repository.

    pytest tests/translation/test_cli_new_language.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import need

ROOT = Path(__file__).resolve().parents[2]
CODE = "eo"
NOTEBOOK = "01_patches"
SHIPPED = 'LANGUAGES = {"en": "English", "es": "español"}'
MARKED = {"YOUR CODE HERE": "VIA KODO ĈI TIE", "passed": "ĝusta"}  # the package's, marked
EDITION = "La kurso en Esperanto"

pytestmark = pytest.mark.slow


def pseudo(message) -> str:
    """A translator's work, as a test can do it: the English kept, a notebook's title marked."""
    if message.id in MARKED:
        return MARKED[message.id]
    title, dot, rest = message.id.partition(" · ")
    if dot and title.startswith("# ") and title[2:].isdigit():
        return f"{title} · [{CODE}] {rest}"
    return message.id


def run(command: list[str], copy: Path, **env: str) -> str:
    done = subprocess.run(
        command,
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(copy), "VITCOURSE_ROOT": str(copy), **env},
    )
    assert done.returncode == 0, (
        f"{' '.join(command)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done.stdout


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """The copy of the course, with the recipe's steps done, and its Esperanto book built."""
    need("babel", "pip install -r requirements-book.txt")
    need("sphinx", "pip install -r requirements-book.txt")
    from babel.messages.pofile import read_po, write_po

    copy = tmp_path_factory.mktemp("course")
    skip = shutil.ignore_patterns("__pycache__", "_build", "runs", "checkpoints")
    for part in ("vitcourse", "notebooks", "locale"):
        shutil.copytree(ROOT / part, copy / part, ignore=skip)
    staged = shutil.ignore_patterns("_build", "notebooks", "docs", "__pycache__")
    shutil.copytree(ROOT / "book", copy / "book", ignore=staged)  # not the English build's staging
    for part in ("data", "docs"):
        (copy / part).symlink_to(ROOT / part)

    # 1. The language, in the package.
    language = copy / "vitcourse" / "language.py"
    assert SHIPPED in language.read_text(), "the recipe's first step edits this line: say how now"
    language.write_text(
        language.read_text().replace(SHIPPED, SHIPPED[:-1] + f', "{CODE}": "Esperanto"}}')
    )
    # 2. Its catalogs, from the templates.
    run([sys.executable, "-m", "vitcourse.translate", "merge", CODE], copy)
    # 3. Every entry translated.
    for path in sorted((copy / "locale" / CODE).glob("*.po")):
        with path.open("rb") as file:
            catalog = read_po(file, locale=CODE)
        for message in catalog:
            if message.id:
                message.string = pseudo(message)
        with path.open("wb") as file:
            write_po(file, catalog, width=100)
    if shutil.which("msgfmt"):  # what translators' tools check (tests/translation/test_catalogs)
        for path in sorted((copy / "locale" / CODE).glob("*.po")):
            run(["msgfmt", "--check", "-o", os.devnull, str(path)], copy)
    # 4. The edition: CODE/notebooks, CODE/student, the package's .mo.
    run([sys.executable, "-m", "vitcourse.translate", CODE], copy)
    # 5. The book: its words, its landing page, the build.
    words = copy / "book" / "words.py"
    words.write_text(
        words.read_text() + f'\nWORDS["{CODE}"] = {{**WORDS["es"], "edition": "{EDITION}"}}\n'
    )
    (copy / "book" / CODE).mkdir()
    (copy / "book" / CODE / "index.md").write_text(
        "# vitcourse\n\n{{ run_mode }}\n\n(en-tu-maquina)=\n## Instali\n\n"
        f"```{{toctree}}\n:maxdepth: 1\n\nnotebooks/{NOTEBOOK}\n```\n"
    )
    one = copy / "one-notebook"
    one.mkdir()
    shutil.copy(copy / CODE / "notebooks" / f"{NOTEBOOK}.ipynb", one)
    out = copy / "book-out"
    run(
        ["book/build", "--language", CODE, "-q"],
        copy,
        VITCOURSE_QUICK="1",
        VITCOURSE_BOOK_OUT=str(out),
        VITCOURSE_BOOK_NOTEBOOKS=str(one),
    )
    return {"copy": copy, "html": out / "html" / CODE}


def test_the_edition_is_written_in_the_new_language(course):
    copy = course["copy"]
    for folder in ("notebooks", "student"):
        written = sorted(p.name for p in (copy / CODE / folder).glob("*.ipynb"))
        assert written == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    notebook = json.loads((copy / CODE / "notebooks" / f"{NOTEBOOK}.ipynb").read_text())
    assert "".join(notebook["cells"][0]["source"]) == f"%env VITCOURSE_LANG={CODE}"
    assert notebook["metadata"]["vitcourse"]["language"] == CODE
    assert f"· [{CODE}] " in "".join(notebook["cells"][1]["source"]).partition("\n")[0]
    student = (copy / CODE / "student" / f"{NOTEBOOK}.ipynb").read_text()
    assert f"# {MARKED['YOUR CODE HERE']}" in student, "the stub is not in the new language"


def test_the_package_speaks_the_new_language(course):
    said = run(
        [
            sys.executable,
            "-c",
            "from vitcourse.language import _, set_language; "
            f"set_language({CODE!r}); print(_('passed'))",
        ],
        course["copy"],
    )
    assert said.strip() == MARKED["passed"]


def test_the_book_has_a_third_edition_linked_to_the_others(course):
    from bs4 import BeautifulSoup

    html = course["html"]
    page = BeautifulSoup((html / "notebooks" / f"{NOTEBOOK}.html").read_text(), "html.parser")
    assert page.html["lang"] == CODE
    assert f"[{CODE}]" in page.title.text
    assert page.select("img"), "the notebook's page shows no figure: was it executed?"
    links = {a["hreflang"]: a["href"] for a in page.select("nav.other-edition a[href]")}
    assert links == {
        "en": f"../../notebooks/{NOTEBOOK}.html",
        "es": f"../../es/notebooks/{NOTEBOOK}.html",
    }, links
    deck = (html / "slides" / f"{NOTEBOOK}.slides.html").read_text()
    assert f'<html lang="{CODE}"' in deck
    # The English and Spanish editions, built with these words, link to it in turn.
    sys.path.insert(0, str(course["copy"] / "book"))
    try:
        import words  # the copy's book/words.py

        assert (f"{CODE}/", CODE, EDITION) in words.other_editions("en")
        assert (f"../{CODE}/", CODE, EDITION) in words.other_editions("es")
    finally:
        sys.path.remove(str(course["copy"] / "book"))
        sys.modules.pop("words", None)
