"""Hints in three tiers, and what a check says when the learner's own code raises inside it.

A good tutor nudges before telling. A failed check names what is wrong and gives the first tier:
which quantity, which axis, which equation of the paper. A learner who wants more asks for it,
`hint("attention")`, and gets the second tier, about the mistake the check found last. Asked
again, `hint` gives the third: a smaller case worked by hand (a 4 × 4 image cut into 2 × 2
patches, every number written out), or the shapes to expect at each step, for the learner to
compare with their own. No tier writes the solution's code: that is in the teacher's copy only.

    Hint("the weights are not scaled: ...", more="the spread of q·k grows like ...")

A `Hint` (`checks.harness`) is a `str` (its first tier), so everything that reads a hint as text
(the class grader's table, `str(CheckFailed)`) works unchanged. The tiers are written in English
and marked with `N_` (`Hint(N_("..."), more=N_("..."))`, a check's `worked = N_("...")`); each is
translated where it is shown: `CheckFailed.shown_hint` for the first, `further` (what `hint(name)`
prints) for the others. The few hints that name values (`count_parameters`' "did you leave out
...?") are written when the check fails, through `_`; translated again where shown, they stay as
they are.
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
_WORKED: dict[str, str] = {}  # exercise -> its third tier, a case worked by hand (`worked`)
_ASKED: dict[str, int] = {}  # exercise -> how often hint(name) was asked since its last failure


def second_tier(failed: CheckFailed) -> str:
    """The second tier for a failure: its hint's `more`, or the exercise's own."""
    return getattr(failed.hint, "more", "") or _MORE.get(failed.exercise, "")


def remember(
    name: str, more: str = "", failed: CheckFailed | None = None, worked: str = ""
) -> None:
    """Note exercise `name`'s second and third tiers (`more`, `worked`), or the second tier for
    the failure it just had; `hint(name)` then starts again from the second tier."""
    if failed is None:
        _MORE[name], _WORKED[name] = more, worked
    else:
        _LAST[name] = second_tier(failed)
    _ASKED.pop(name, None)


def forget(name: str) -> None:
    """Exercise `name` no longer fails: `hint(name)` goes back to its general second tier."""
    _LAST.pop(name, None)
    _ASKED.pop(name, None)


def further(name: str) -> tuple[int, str] | None:
    """The next tier of exercise `name`'s hints, as `hint(name)` prints it, and its number: the
    second (about the mistake its check found last, or the general one) the first time it is asked,
    the third (`worked`) after that, in the language chosen now; None for a name no imported check
    has registered."""
    if name not in _MORE:
        return None
    asked = _ASKED.get(name, 0)
    _ASKED[name] = asked + 1
    if asked == 0 or not _WORKED.get(name):
        return 2, _(_LAST.get(name) or _MORE[name])
    return 3, _(_WORKED[name])


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


def describe(inputs: dict) -> str:
    """The inputs' shapes, for a message: "x (2, 4, 6), weight (6,)"."""
    parts = []
    for key, value in inputs.items():
        if isinstance(value, torch.Tensor):
            parts.append(f"{key} {tuple(value.shape)}")
    return ", ".join(parts)
