"""`python -m vitcourse.translate`: the course in another language, from the English notebooks and
the catalogs, in one command a step::

    python -m vitcourse.translate extract     # 1. locale/templates/: what the English says
    python -m vitcourse.translate merge es    # 2. locale/es/*.po brought up to the templates
    #                                           3. translate: the empty and fuzzy entries
    python -m vitcourse.translate es          # 4. es/notebooks, es/student, the package's .mo

Step 4 writes each English notebook with every piece (`cells.pieces`) in the language, and a first
cell that selects it (`%env VITCOURSE_LANG=es`: the package speaks it from its first import; not
on the slides, nor on the book's page: MyST-NB's remove-cell tag);
then the student copies, by `vitcourse.classroom.student`'s code; then the package's compiled
catalog. The same files every time: tests/translation/test_cli.py regenerates them and compares.
It refuses a catalog with an entry missing, empty or fuzzy, naming them.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from vitcourse import language
from vitcourse.classroom.student import make_student_copies
from vitcourse.language import LANGUAGES, known
from vitcourse.translation import catalogs
from vitcourse.translation.cells import pieces, translated

ROOT = catalogs.ROOT
NOTEBOOKS = ROOT / "notebooks"
LANGUAGE_CELL = "%env VITCOURSE_LANG={code}"


def english() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def extract(out: Path = catalogs.LOCALE / "templates") -> list[Path]:
    """Write every template (.pot): each notebook's and the package's."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, template in catalogs.templates(english()).items():
        written.append(_write(out / f"{stem}.pot", catalogs.text(template)))
    return written


def merge(code: str) -> list[Path]:
    """Bring each of the language's catalogs up to its template (a new one where there is none)."""
    written = []
    for template_path in sorted((catalogs.LOCALE / "templates").glob("*.pot")):
        path = catalogs.LOCALE / code / f"{template_path.stem}.po"
        existing = catalogs.read(path, code) if path.exists() else None
        merged = catalogs.merged(catalogs.read(template_path), existing, code)
        written.append(_write(path, catalogs.text(merged)))
    return written


def translated_notebook(notebook: dict, catalog, code: str, name: str) -> dict:
    """The notebook in the language: each piece looked up in its catalog, a first cell that
    selects the language. Raises ValueError naming every piece without a finished translation."""
    missing = []

    def lookup(piece):
        message = catalog.get(piece.text, context=cell["id"])
        if message is None or not message.string or message.fuzzy:
            state = "missing" if message is None else "fuzzy" if message.fuzzy else "empty"
            missing.append(f"{name} [{cell['id']}] {state}: {piece.text[:50]!r}")
            return piece.text
        return message.string

    cells = []
    for cell in notebook["cells"]:
        cells.append(translated(cell, lookup) if pieces(cell) else cell)
    if missing:
        shown = "\n  ".join(missing[:10])
        more = f"\n  ... and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise ValueError(f"not translated into {code} yet ({len(missing)}):\n  {shown}{more}")
    first = {
        "cell_type": "code",
        "execution_count": None,
        "id": "vitcourse-language",
        "metadata": {"slideshow": {"slide_type": "skip"}, "tags": ["remove-cell"]},
        "outputs": [],
        "source": LANGUAGE_CELL.format(code=code),
    }
    metadata = {
        **notebook["metadata"],
        "vitcourse": {**notebook["metadata"].get("vitcourse", {}), "language": code},
    }
    return {**notebook, "metadata": metadata, "cells": [first, *cells]}


def edition(code: str, out: Path | None = None) -> list[Path]:
    """Write the course in language `code`: out/notebooks, out/student, and the package's .mo."""
    import nbformat

    code = known(code)
    if code == "en":
        raise ValueError("English is the source: the edition to write is another language's")
    out = out or ROOT / code
    books = {}
    for path in english():
        catalog = catalogs.read(catalogs.LOCALE / code / f"{path.stem}.po", code)
        notebook = json.loads(path.read_text())
        books[path.name] = translated_notebook(notebook, catalog, code, path.name)
    written = []
    for name, notebook in books.items():
        text = nbformat.writes(nbformat.from_dict(notebook)) + "\n"
        written.append(_write(out / "notebooks" / name, text))
    package = catalogs.read(catalogs.LOCALE / code / f"{catalogs.DOMAIN}.po", code)
    mo = catalogs.COMPILED / code / "LC_MESSAGES" / f"{catalogs.DOMAIN}.mo"
    mo.parent.mkdir(parents=True, exist_ok=True)
    if not mo.exists() or mo.read_bytes() != catalogs.compiled(package):
        mo.write_bytes(catalogs.compiled(package))
        language.catalog.cache_clear()  # this process reads the new one
    # the student copies' "# YOUR CODE HERE" in the notebooks' language (their metadata's)
    written += list(make_student_copies(out / "notebooks", out / "student"))
    return [*written, mo]


def _write(path: Path, text: str) -> Path:
    """Write `text` only if it changed (a file's time then says when its content did)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m vitcourse.translate",
        description="The course in another language, from the English notebooks and the "
        "catalogs in locale/: extract, merge LANG, then LANG to write the edition.",
    )
    parser.add_argument(
        "step",
        help="extract | merge | a language to write: "
        + ", ".join(c for c in LANGUAGES if c != "en"),
    )
    parser.add_argument("language", nargs="?", help="merge's language")
    args = parser.parse_args(argv)
    try:
        if args.step == "extract":
            done = extract()
        elif args.step == "merge":
            if not args.language:
                parser.error("merge needs a language: python -m vitcourse.translate merge es")
            done = merge(known(args.language))
        else:
            done = edition(args.step)
    except (ValueError, FileNotFoundError) as error:
        raise SystemExit(f"python -m vitcourse.translate: {error}") from None
    print(f"{args.step}: {len(done)} files up to date")


if __name__ == "__main__":
    main()
