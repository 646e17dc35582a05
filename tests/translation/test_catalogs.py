"""The catalogs in locale/ (vitcourse.translation.catalogs): extracted from the English as it is
now, complete in every language, merged so that a changed cell marks its entries only, and the
package's compiled as the language module reads it."""

import copy
import json
from pathlib import Path

import pytest

from tests.conftest import need
from vitcourse.language import LANGUAGES as SPOKEN
from vitcourse.translation import catalogs

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LANGUAGES = [code for code in SPOKEN if code != "en"]  # a new language is checked as it is added


@pytest.fixture(scope="module")
def templates():
    need("babel", "pip install -r requirements-book.txt")
    return catalogs.templates(NOTEBOOKS)


def test_the_templates_say_what_the_english_says_now(templates):
    """A change to an English notebook or message not extracted yet fails here: run
    python -m vitcourse.translate extract, then merge."""
    for stem, template in templates.items():
        path = catalogs.LOCALE / "templates" / f"{stem}.pot"
        assert path.read_text() == catalogs.text(template), f"{path.name} is out of date"
    assert set(templates) == {p.stem for p in (catalogs.LOCALE / "templates").glob("*.pot")}


@pytest.mark.parametrize("code", LANGUAGES)
def test_every_catalog_is_complete_and_nothing_is_fuzzy(templates, code):
    problems = []
    for stem, template in templates.items():
        path = catalogs.LOCALE / code / f"{stem}.po"
        assert path.is_file(), f"no {path}: python -m vitcourse.translate merge {code}"
        catalog = catalogs.read(path, code)  # Babel refuses a file it cannot read
        problems += [f"{path.name}: {p}" for p in catalogs.problems(catalog, template)]
    assert not problems, f"{len(problems)} entries to translate:\n" + "\n".join(problems[:20])


@pytest.mark.parametrize("code", LANGUAGES)
def test_no_entry_is_marked_printf_style_for_translators_tools_to_check(code):
    """Babel marks "86.7% on" python-format; msgfmt --check (and Poedit, Weblate) would then hold
    the translation to a printf format the course never uses: every such entry is written
    no-python-format instead (catalogs.text)."""
    marked = []
    for path in [
        *(catalogs.LOCALE / code).glob("*.po"),
        *(catalogs.LOCALE / "templates").glob("*.pot"),
    ]:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            flags = (
                line.removeprefix("#,").replace(",", " ").split() if line.startswith("#,") else []
            )
            if "python-format" in flags:
                marked.append(f"{path.name}:{number}")
    assert not marked, marked[:10]


def test_a_changed_cell_marks_its_own_entries_only(templates):
    notebook = json.loads(NOTEBOOKS[1].read_text())
    template = catalogs.notebook_template(notebook)
    done = catalogs.merged(template, None, "es")
    for message in done:
        if message.id:
            message.string = "ES " + message.id
    changed = copy.deepcopy(notebook)
    target = next(c for c in changed["cells"] if c["cell_type"] == "markdown" and
                  "".join(c["source"]).startswith("## 1."))  # fmt: skip
    target["source"] = "".join(target["source"]).replace("a real image", "one real image")
    again = catalogs.merged(catalogs.notebook_template(changed), done, "es")
    fuzzy = [m for m in again if m.id and m.fuzzy]
    assert [m.context for m in fuzzy] == [target["id"]]
    assert fuzzy[0].string.startswith("ES ## 1.")  # the old translation, kept for the translator
    assert len(catalogs.problems(again)) == 1  # that one entry, and nothing else, to do


@pytest.mark.parametrize("code", LANGUAGES)
def test_the_package_catalog_is_compiled_as_it_reads(code):
    need("babel", "pip install -r requirements-book.txt")
    mo = catalogs.COMPILED / code / "LC_MESSAGES" / f"{catalogs.DOMAIN}.mo"
    source = catalogs.read(catalogs.LOCALE / code / f"{catalogs.DOMAIN}.po", code)
    assert mo.read_bytes() == catalogs.compiled(source), f"run python -m vitcourse.translate {code}"


@pytest.mark.parametrize("code", LANGUAGES)
def test_every_notebook_entry_names_its_notebook_and_cell(code):
    """A translator sees where an entry comes from: `#: notebooks/01_patches.ipynb:7`, the English
    notebook and its cell's number from 1, whose id is the entry's context."""
    need("babel", "pip install -r requirements-book.txt")
    for notebook in NOTEBOOKS:
        cells = json.loads(notebook.read_text())["cells"]
        for path in (catalogs.LOCALE / code / f"{notebook.stem}.po",
                     catalogs.LOCALE / "templates" / f"{notebook.stem}.pot"):  # fmt: skip
            for message in catalogs.read(path, code if path.suffix == ".po" else None):
                if not message.id:
                    continue
                assert len(message.locations) == 1, (path.name, message.id[:60])
                where, number = message.locations[0]
                assert where == f"notebooks/{notebook.name}", (path.name, where)
                assert cells[number - 1]["id"] == message.context, (path.name, number)


def test_gettext_msgfmt_check_accepts_every_catalog(tmp_path):
    """GNU gettext's own check (what Poedit and Weblate run): headers, formats, plural forms."""
    import os
    import shutil
    import subprocess

    if shutil.which("msgfmt") is None:
        if os.environ.get("CI"):
            pytest.fail("msgfmt is missing: under CI, apt-get install gettext")
        pytest.skip("needs GNU gettext's msgfmt (sudo apt-get install gettext)")
    paths = sorted(catalogs.LOCALE.glob("*/*.po")) + sorted(catalogs.LOCALE.glob("*/*.pot"))
    paths += sorted((ROOT / "book" / "_locale").glob("*/LC_MESSAGES/*.po"))  # the book's own
    assert paths
    for path in paths:
        done = subprocess.run(
            ["msgfmt", "--check", "-o", str(tmp_path / "out.mo"), str(path)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, f"{path.relative_to(ROOT)}: {done.stderr[-800:]}"


@pytest.mark.parametrize("code", LANGUAGES)
def test_no_old_msgid_is_left_behind_as_a_comment(code):
    """An old English text belongs in `#|` (previous msgid, which merge keeps for a fuzzy entry),
    never in a translator's comment (`# | msgid ...`), where no tool clears it."""
    need("babel", "pip install -r requirements-book.txt")
    left = [
        f"{path.name}: {message.id[:50]!r}"
        for path in sorted((catalogs.LOCALE / code).glob("*.po"))
        for message in catalogs.read(path, code)
        if any(c.lstrip().startswith(("|", "msgid")) for c in message.user_comments)
    ]
    assert not left, left


@pytest.mark.parametrize("code", [c for c in LANGUAGES if c == "es"])
def test_the_spanish_prose_writes_thousands_as_spanish_readers_read_them(code):
    """No "70,000" (a decimal comma to a Spanish reader) outside code: "70 000" with a no-break
    space, and "1024" (locale/es/GLOSSARY.md)."""
    import re

    comma = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?![\w]|[.,]\d)")
    code_or_math = re.compile(r"```.*?```|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$|\]\([^)]*\)", re.S)
    found = []
    for path in sorted((catalogs.LOCALE / code).glob("*.po")):
        for message in catalogs.read(path, code):
            prose = code_or_math.sub("", message.string or "")
            found += [f"{path.name} [{message.context}]: {n}" for n in comma.findall(prose)]
    assert not found, found


def test_every_message_the_package_marks_is_extracted():
    """Every literal passed to `_` or `N_` in the package, one inside an f-string's `{...}` too
    (which Babel's extraction does not read before Python 3.12), is in the package's template,
    and so in front of a translator; and every quiz's text is there."""
    import ast

    need("babel", "pip install -r requirements-book.txt")
    template = catalogs.package_template()
    missing = []
    for path in sorted(catalogs.PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) in ("_", "N_")
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
                and template.get(node.args[0].value) is None
            ):
                missing.append(f"{path.relative_to(catalogs.ROOT)}:{node.lineno}")
    assert not missing, missing
    from vitcourse.quiz.questions import notebooks, questions

    texts = [t for nb in notebooks() for q in questions(nb).values() for t in q.texts() if t]
    assert all(template.get(t) is not None for t in texts)
