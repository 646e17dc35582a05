"""Hints in two tiers, and what a check says when the learner's own code raises inside it.

A good tutor nudges before telling. A failed check names what is wrong and gives the first tier:
which quantity, which axis, which equation of the paper. A learner who wants more asks for it,
`hint("attention")`, and gets the second tier, about the mistake the check found last. No tier
writes the solution's code: that is in the teacher's copy only.

    Hint("the weights are not scaled: ...", more="the spread of q·k grows like ...")

A `Hint` is a `str` (its first tier), so everything that reads a hint as text (the class
grader's table, `str(CheckFailed)`) works unchanged. Both tiers are written in English and marked
with `N_` (`Hint(N_("..."), more=N_("..."))`); each is translated where it is shown:
`CheckFailed.shown_hint` for the first, `further` (what `hint(name)` prints) for the second. The
few hints that name values (`count_parameters`' "did you leave out ...?") are written when the
check fails, through `_`; translated again where shown, they stay as they are.
"""

from __future__ import annotations

import linecache
import sys
from pathlib import Path

import torch

from vitcourse.checks.harness import CheckFailed
from vitcourse.language import _

_PACKAGE = str(Path(__file__).resolve().parents[1])  # vitcourse/: its frames are never shown
_LAST: dict[str, str] = {}  # exercise -> the second tier for the failure its check found last
_MORE: dict[str, str] = {}  # exercise -> its second tier before any failure (the check's `more`)


class Hint(str):
    """A first-tier hint (the text) that carries a more specific second tier, `more`."""

    more: str

    def __new__(cls, first: str, more: str = "") -> Hint:
        hint = super().__new__(cls, first)
        hint.more = more
        return hint


def second_tier(failed: CheckFailed) -> str:
    """The second tier for a failure: its hint's `more`, or the exercise's own."""
    return getattr(failed.hint, "more", "") or _MORE.get(failed.exercise, "")


def remember(name: str, more: str = "", failed: CheckFailed | None = None) -> None:
    """Note exercise `name`'s second tier (`more`), or the one for the failure it just had."""
    if failed is None:
        _MORE[name] = more
    else:
        _LAST[name] = second_tier(failed)


def forget(name: str) -> None:
    """Exercise `name` no longer fails: `hint(name)` goes back to its general second tier."""
    _LAST.pop(name, None)


def further(name: str) -> str | None:
    """Exercise `name`'s second tier now, as `hint(name)` prints it: about the mistake its check
    found last, or the general one, in the language chosen now; None for a name no imported check
    has registered."""
    if name not in _MORE:
        return None
    return _(_LAST.get(name) or _MORE[name])


class LearnerRaised(CheckFailed):
    """The learner's code raised inside a check: said in a few lines (which error, on which
    inputs, at which line of theirs), with the exercise's hint for it and no frames."""

    def __init__(self, error: BaseException, called: str, hint: str):
        where = _their_line(error)
        message = str(error).strip().splitlines()[0][:200] if str(error).strip() else ""
        problem = (
            _("your code raised {error}").format(error=type(error).__name__)
            + (f" ({message})" if message else "")  # the error's own words, as Python said them
            + (" " + _("at `{line}`").format(line=where) if where else "")
            + (_(", called with {inputs}").format(inputs=_(called)) if called else "")
        )
        super().__init__(problem, hint)


def _their_line(error: BaseException) -> str:
    """The last line of the learner's own code in the error's traceback (not the package's, not
    torch's), as written."""
    line, tb = "", error.__traceback__
    libraries = (_PACKAGE, sys.prefix, sys.base_prefix)
    while tb is not None:
        code = tb.tb_frame.f_code
        if not code.co_filename.startswith(libraries) and not code.co_filename.startswith(
            "<frozen"
        ):
            line = linecache.getline(code.co_filename, tb.tb_lineno).strip() or line
        tb = tb.tb_next
    return line[:120]


def raised_hint(error: BaseException, raised: list[tuple[str, Hint]], fallback: Hint) -> Hint:
    """The hint for an error: the first of `raised` whose text occurs in "Type: message"."""
    said = f"{type(error).__name__}: {error}"
    return next((h for text, h in raised if text in said), fallback)


def describe(inputs: dict) -> str:
    """The inputs' shapes, for a message: "x (2, 4, 6), weight (6,)"."""
    parts = []
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor):
            parts.append(f"{key} {tuple(value.shape)}")
    return ", ".join(parts)
