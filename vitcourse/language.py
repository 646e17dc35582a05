"""The language the course speaks: English, or Spanish (`VITCOURSE_LANG=es`, `set_language("es")`).

Every message the package shows a learner or a teacher (a check's verdict and hints, `progress()`,
a dataset's or the trainer's errors, the live figure's and the explorers' labels, the grader's
feedback) is written in English in the code and goes through `_` when it is shown. `_` looks the
English up in the language's catalog, `vitcourse/locale/<code>/LC_MESSAGES/vitcourse.mo`
(compiled from `locale/<code>/vitcourse.po` by `python -m vitcourse.translate`), and gives the
English back where the catalog has no translation::

    set_language("es")
    print(_("{name}: passed").format(name="patchify"))     # patchify: correcto

A message written once, when a module is imported (a check's hint), is marked with `N_`, which
only lets the extraction find it; it goes through `_` where it is shown, so that a language
chosen after the import still applies. A message with values is a template: `_` first, then
`.format` (an f-string cannot be looked up).

The tables the notebooks print (`print_table`) take each column's width from its words, not from
a number in the code, so that they read as well in Spanish, whose headers run longer::

    print_table(["patch", "N tokens"], [["4x4", 49], ["7x7", 16]])

    patch  N tokens
    4x4          49
    7x7          16
"""

from __future__ import annotations

import gettext
import os
from collections.abc import Sequence
from contextlib import contextmanager
from functools import cache
from pathlib import Path

LANGUAGES = {"en": "English", "es": "español"}
DOMAIN = "vitcourse"
LOCALE = Path(__file__).resolve().parent / "locale"
_chosen: str | None = None


def known(code: str) -> str:
    """`code` as the course knows it ("es", "ES", "es_ES.UTF-8": "es"); a one-line error naming
    the languages there are for any other."""
    short = code.strip().lower().replace("-", "_").split(".")[0].split("_")[0]
    if short not in LANGUAGES:
        there = ", ".join(f"{c} ({name})" for c, name in LANGUAGES.items())
        raise ValueError(f"the course speaks no language {code!r}: it speaks {there}")
    return short


def set_language(code: str) -> None:
    """Speak `code` from now on ("en" or "es"), in this process and the ones it starts."""
    global _chosen
    _chosen = known(code)
    os.environ["VITCOURSE_LANG"] = _chosen


@contextmanager
def speaking(code: str):
    """Speak `code` inside a `with` block, then the language chosen before (`set_language`'s
    choice and `VITCOURSE_LANG` both put back as they were)."""
    global _chosen
    before, variable = _chosen, os.environ.get("VITCOURSE_LANG")
    set_language(code)
    try:
        yield
    finally:
        _chosen = before
        if variable is None:
            os.environ.pop("VITCOURSE_LANG", None)
        else:
            os.environ["VITCOURSE_LANG"] = variable


def language() -> str:
    """The language chosen: `set_language`'s, else `VITCOURSE_LANG`'s, else English."""
    if _chosen is not None:
        return _chosen
    return known(os.environ["VITCOURSE_LANG"]) if os.environ.get("VITCOURSE_LANG") else "en"


@cache
def catalog(code: str) -> gettext.NullTranslations:
    """The compiled catalog of language `code` (none for English, the language of the code), read
    from its file (not through `gettext.translation`, which keeps its own copy of a file once
    read: `catalog.cache_clear()` then reads a catalog written since)."""
    if code == "en":
        return gettext.NullTranslations()
    path = LOCALE / code / "LC_MESSAGES" / f"{DOMAIN}.mo"
    try:
        with path.open("rb") as file:
            return gettext.GNUTranslations(file)
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"no catalog for {code!r} in {LOCALE}: run python -m vitcourse.translate {code}"
        ) from error


def in_language(code: str, message: str) -> str:
    """`message` in language `code`, whatever the language chosen (the English where the
    catalog has no translation)."""
    return catalog(known(code)).gettext(message) if message else message


def _(message: str) -> str:
    """`message` in the language chosen (the English where its catalog has no translation)."""
    return in_language(language(), message)


def N_(message: str) -> str:  # noqa: N802 (gettext's name for it)
    """Mark `message` for the catalog without translating it yet (it is shown later, through `_`)."""
    return message


# --- numbers and tables, in any language ---------------------------------------------------------

# How a language writes a whole number's thousands: the separator, and the fewest digits that take
# one. English: 1,024 and 70,000. Spanish (the RAE's and ISO's rule): no comma, which a Spanish
# reader takes for a decimal one, but a space that does not break a line, and none in a number of
# four digits: 1024 and 70 000. Decimals keep the point in every language, as the code prints them.
THOUSANDS = {"en": (",", 4), "es": ("\u00a0", 5)}


def number(value: int) -> str:
    """A whole number as the language chosen writes it (`THOUSANDS`): number(70000) is "70,000"
    in English, "70 000" in Spanish (a no-break space); a float is rounded first."""
    separator, fewest = THOUSANDS.get(language(), THOUSANDS["en"])
    digits = f"{round(value):,}"
    if len(digits.replace(",", "").lstrip("-")) < fewest:
        return digits.replace(",", "")
    return digits.replace(",", separator)


def table(header: Sequence[str], rows: Sequence[Sequence]) -> str:
    """The text of `rows` under `header`, one line each, columns two spaces apart, each as wide as
    its widest entry: the first (the rows' names) aligned left, the others right. A whole number
    is written as the language writes it (`number`: 12,345 in English), anything else as `str`
    gives it (format a float before)."""
    lines = [list(header)] + [[_cell(value) for value in row] for row in rows]
    for row in lines:
        if len(row) != len(header):
            raise ValueError(
                _("a table row has {cells} cells, its header {header}: {row}").format(
                    cells=len(row), header=len(header), row=row
                )
            )
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in lines
    )


def print_table(header: Sequence[str], rows: Sequence[Sequence]) -> None:
    """Print `rows` under `header` (see `table`)."""
    print(table(header, rows))


def _cell(value) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return number(value)
    return str(value)
