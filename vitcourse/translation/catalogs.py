"""The translation catalogs: gettext `.po` files that translators' tools (Poedit, Weblate) open::

    locale/templates/NN_name.pot    what each English notebook says (cells.pieces), extracted
    locale/templates/vitcourse.pot  what the package says: every message marked with _ or N_, and
                                    the notebooks' quizzes (vitcourse/quiz/data/*.json)
    locale/<code>/NN_name.po        its translation, one entry a piece
    locale/<code>/vitcourse.po      the package's, compiled into vitcourse/locale/<code>/ (.mo)

An entry's key is its English text and its place: the notebook cell's id (msgctxt). A change to
one English cell changes that cell's entries only; `merge` (Babel's `Catalog.update`, which is
msgmerge's) keeps their old translation, marked fuzzy, for a translator to check, and leaves every
other entry as it was. Babel reads, writes, merges and compiles the files; nothing here parses
one by hand.
"""

from __future__ import annotations

import datetime
import io
from pathlib import Path

from vitcourse.translation.cells import pieces

ROOT = Path(__file__).resolve().parents[2]
LOCALE = ROOT / "locale"
PACKAGE = ROOT / "vitcourse"
COMPILED = PACKAGE / "locale"
DOMAIN = "vitcourse"
FIXED_DATE = datetime.datetime(2026, 11, 27, tzinfo=datetime.timezone.utc)  # same file every time
ABOUT = {
    "markdown": "A markdown cell: keep its Markdown, code, links and equations as they are.",
    "comment": "A comment in code (lines as written; an inline one stays one line).",
    "string": "A string in code, between its quotes as written: keep each {...} as it is, and "
    'escape what the quotes need (\\", \\n).',
    "alt": "A figure's alt text: say what the figure shows.",
}


HEADER = """\
# vitcourse: {what}.
# Translators: read locale/es/GLOSSARY.md first; CONTRIBUTING.md ("Translating") says how an
# English change reaches this file. Open it in Poedit or Weblate, or in any editor.
#"""


def new_catalog(code: str | None = None, what: str = "the course's messages"):
    from babel.messages.catalog import Catalog

    return Catalog(
        header_comment=HEADER.format(what=what),
        locale=code,
        domain=DOMAIN,
        project="vitcourse",
        version="0.1",
        fuzzy=False,
        creation_date=FIXED_DATE,
        revision_date=FIXED_DATE,
        msgid_bugs_address="https://github.com/vitcourse/vitcourse/issues",
        language_team=None if code is None else f"vitcourse <{code}>",
        last_translator=None if code is None else "vitcourse",
    )


def notebook_template(notebook: dict, where: str = "notebook.ipynb"):
    """The catalog of what a notebook says: one message a piece, its context the cell's id, its
    reference the notebook `where` and the cell's number from 1 (`#: notebooks/01_patches.ipynb:7`:
    where a translator finds it in JupyterLab)."""
    catalog = new_catalog(what=f"what notebook {notebook_name(notebook)} says")
    for number, cell in enumerate(notebook["cells"], start=1):
        for piece in pieces(cell):
            if catalog.get(piece.text, context=cell["id"]) is None:
                catalog.add(
                    piece.text,
                    context=cell["id"],
                    locations=[(where, number)],
                    auto_comments=[ABOUT[piece.kind]],
                )
    return catalog


def notebook_name(notebook: dict) -> str:
    """A notebook's number and title, from its first line ("01 · Patches: ...")."""
    first = "".join(notebook["cells"][0]["source"]).partition("\n")[0]
    return first.lstrip("# ").strip()


def package_template():
    """The catalog of what the package says: the strings passed to `_` or `N_` in vitcourse/."""
    from babel.messages.extract import extract_from_file

    catalog = new_catalog(what="what the package says (checks, hints, errors, figures, feedback)")
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(ROOT).as_posix()
        found = extract_from_file("python", path, keywords={"_": None, "N_": None})
        for _lineno, message, comments, context in found:
            existing = catalog.get(message, context=context)
            if existing is None:
                catalog.add(
                    message, context=context, locations=[(where, None)], auto_comments=comments
                )
            elif (where, None) not in existing.locations:
                existing.locations.append((where, None))
    for message, where in _quiz_texts():
        existing = catalog.get(message)
        if existing is None:
            about = (
                "A notebook's quiz (a question, an option or its feedback): `code` stays as it is."
            )
            catalog.add(message, locations=[(where, None)], auto_comments=[about])
        elif (where, None) not in existing.locations:
            existing.locations.append((where, None))
    for message in _class_names():
        if catalog.get(message) is None:
            about = "A class name of a built-in dataset: short, it titles images."
            catalog.add(
                message, locations=[("vitcourse/data/datasets.py", None)], auto_comments=[about]
            )
    return catalog


def _quiz_texts() -> list[tuple[str, str]]:
    """Every text of the notebooks' quizzes (`vitcourse/quiz/data/*.json`), with its file."""
    from vitcourse.quiz.questions import QUIZZES, notebooks, questions

    found = []
    for notebook in notebooks():
        where = (QUIZZES / f"{notebook}.json").relative_to(ROOT).as_posix()
        for question in questions(notebook).values():
            found += [(text, where) for text in question.texts() if text]
    return found


def _class_names() -> list[str]:
    """The built-in datasets' class names (`dataset_info` shows them translated), digits aside."""
    from vitcourse.data.datasets import DATASETS

    names = {name for info in DATASETS.values() for name in info.classes}
    return sorted(name for name in names if not name.isdigit())


def templates(notebooks: list[Path]) -> dict[str, object]:
    """Every template by its file's stem: each notebook's, and the package's."""
    import nbformat

    found = {
        p.stem: notebook_template(nbformat.read(p, as_version=4), f"notebooks/{p.name}")
        for p in notebooks
    }
    found[DOMAIN] = package_template()
    return found


def text(catalog) -> str:
    """A catalog as its .po or .pot file says it, the same every time."""
    from babel.messages.pofile import write_po

    for message in catalog:
        # Babel calls any "%" before a letter printf-style ("86.7% on"), and msgfmt --check then
        # holds the translation to it. The course formats its strings with str.format only.
        if "python-format" in message.flags:
            message.flags.discard("python-format")
            message.flags.add("no-python-format")
    out = io.BytesIO()
    write_po(out, catalog, width=100, include_previous=True)
    return out.getvalue().decode()


def read(path: Path, code: str | None = None):
    from babel.messages.pofile import read_po

    with path.open("rb") as file:
        return read_po(file, locale=code, abort_invalid=True)


def merged(template, existing=None, code: str = "es"):
    """`existing` (a language's catalog, or None: a new one) updated to `template`: new entries
    empty, changed ones fuzzy with their old translation, gone ones obsolete."""
    what = template.header_comment.partition("\n")[0].removeprefix("# vitcourse: ").rstrip(".")
    catalog = existing if existing is not None else new_catalog(code, what)
    catalog.update(template, update_creation_date=False)
    catalog.revision_date = FIXED_DATE
    return catalog


def problems(catalog, template=None) -> list[str]:
    """What keeps `catalog` from being complete: untranslated or fuzzy entries, and (given its
    template) entries the template has and it lacks."""
    found = []
    for message in catalog:
        if not message.id:
            continue
        where = f"[{message.context}] " if message.context else ""
        if not message.string:
            found.append(f"untranslated: {where}{message.id[:60]!r}")
        elif message.fuzzy:
            found.append(f"fuzzy: {where}{message.id[:60]!r}")
    if template is not None:
        for message in template:
            if message.id and catalog.get(message.id, context=message.context) is None:
                found.append(f"missing: [{message.context}] {message.id[:60]!r}")
    return found


def compiled(catalog) -> bytes:
    """The catalog as gettext's .mo file, which `vitcourse.language` reads."""
    from babel.messages.mofile import write_mo

    out = io.BytesIO()
    write_mo(out, catalog, use_fuzzy=False)
    return out.getvalue()
