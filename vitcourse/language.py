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
"""

from __future__ import annotations

import gettext
import os
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


def language() -> str:
    """The language chosen: `set_language`'s, else `VITCOURSE_LANG`'s, else English."""
    if _chosen is not None:
        return _chosen
    return known(os.environ["VITCOURSE_LANG"]) if os.environ.get("VITCOURSE_LANG") else "en"


@cache
def catalog(code: str) -> gettext.NullTranslations:
    """The compiled catalog of language `code` (none for English, the language of the code)."""
    if code == "en":
        return gettext.NullTranslations()
    try:
        return gettext.translation(DOMAIN, LOCALE, languages=[code])
    except FileNotFoundError as error:
        raise FileNotFoundError(
            f"no catalog for {code!r} in {LOCALE}: run python -m vitcourse.translate {code}"
        ) from error


def _(message: str) -> str:
    """`message` in the language chosen (the English where its catalog has no translation)."""
    return catalog(language()).gettext(message) if message else message


def N_(message: str) -> str:  # noqa: N802 (gettext's name for it)
    """Mark `message` for the catalog without translating it yet (it is shown later, through `_`)."""
    return message
