"""A notebook's quiz, graded: the answers its `quiz(...)` cells hold, read from the submitted file.

A learner hands in a quiz's answers by writing them in the call's dictionary
(`quiz("03_attention", {"sqrt_d": "b"})`, `vitcourse.quiz`). The grader reads them here, in its
own process, from the bytes handed in, before any sandbox runs the notebook: each code cell's
source is parsed (never run, so nothing the student wrote can print, write or fake a verdict), and
each answer must be a literal (a letter, a number, a shape); an answer written as code (a name, a
call) answers nothing. Where a question is answered more than once, the last answer counts, as the
notebook would show it when run from the top. The verdicts are `vitcourse.quiz.questions.judge`'s.

The quiz is one item of its notebook, as an exercise is (`QUIZ`): "passed" when every question is
answered right, "wrong" when some are not (its `score` the share answered right), "not attempted"
when none is answered.
"""

from __future__ import annotations

import json
import unicodedata

from vitcourse.classroom.gradebook import QUIZ, Grade
from vitcourse.language import _
from vitcourse.quiz.questions import (
    LETTERS,
    answers_in,
    judge,
    notebooks,
    questions,
    read_number,
    read_shape,
)

MAX_CELL_CHARS = 20_000  # a quiz cell is a few lines; a longer cell is not parsed
MAX_SHOWN_AXES, MAX_SHOWN_SIZE = 6, 100_000  # a wrong shape summary.md shows, at most
MAX_CELLS = 50  # the cells naming `quiz` that are parsed, at most (the course has 3 a notebook)


def has_quiz(notebook: str) -> bool:
    return notebook in notebooks()


def handed_in(data: bytes, notebook: str) -> dict:
    """{question: answer} as the submitted notebook's code cells hold them (the last one wins)."""
    try:
        cells = json.loads(data)["cells"]
        sources = [
            "".join(c["source"]) if isinstance(c["source"], list) else str(c["source"])
            for c in cells
            if isinstance(c, dict) and c.get("cell_type") == "code"
        ]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, MemoryError):
        return {}
    found: dict = {}
    # `ｑｕｉｚ` is `quiz` to Python (NFKC, PEP 3131), and to the parser; the literals keep their
    # own characters, as the notebook's run would read them.
    naming = [s for s in sources if len(s) <= MAX_CELL_CHARS and "quiz" in _nfkc(s)]
    for source in naming[:MAX_CELLS]:
        for called, answers in answers_in(source):
            if called == notebook:
                found.update(answers)
    return found


def _nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def grade_quiz(student: str, notebook: str, data: bytes) -> Grade:
    """The quiz's grade for one submitted notebook; never raises for what the student wrote
    (anything it cannot read is the quiz's "error", and the notebook's exercises are graded)."""
    try:
        return _graded(student, notebook, data)
    except Exception as e:  # noqa: BLE001 - one item's error, never the notebook's
        why = _("the quiz's answers could not be read ({error})").format(error=type(e).__name__)
        return Grade(student, notebook, QUIZ, "error", why)


def _graded(student: str, notebook: str, data: bytes) -> Grade:
    asked = questions(notebook)
    given = handed_in(data, notebook)
    verdicts = {name: judge(question, given.get(name)) for name, question in asked.items()}
    answered = [name for name, v in verdicts.items() if v.answered]
    right = [name for name, v in verdicts.items() if v.right]
    if not answered:
        why = _("none of the {count} questions is answered in the quiz's cells")
        return Grade(student, notebook, QUIZ, "not attempted", why.format(count=len(asked)))
    wrong = [name for name in answered if name not in right]
    missing = [name for name in asked if name not in answered]
    lines = [_("{right} of {total} answered right").format(right=len(right), total=len(asked))]
    if wrong:
        lines.append(_("not right: {names}").format(names=", ".join(wrong)))
    if missing:
        lines.append(_("not answered: {names}").format(names=", ".join(missing)))
    status = "passed" if len(right) == len(asked) else "wrong"
    # What summary.md counts: each wrong answer, by question, in the course's words (a letter).
    mistake = ", ".join(f"{name}: {_shown(asked[name], given[name])}" for name in wrong)
    return Grade(
        student,
        notebook,
        QUIZ,
        status,
        "; ".join(lines),
        mistake,
        score=round(len(right) / len(asked), 4),
    )


def _shown(question, answer) -> str:
    """A wrong answer as the course writes it (a letter, a number, a shape), or "?": never the
    student's own text, which summary.md would show."""
    if question.kind == "choice":
        letter = answer.strip().lower().rstrip(")").strip() if isinstance(answer, str) else ""
        return letter if len(letter) == 1 and letter in LETTERS else "?"
    read = read_number(answer) if question.kind == "number" else read_shape(answer)
    if read is None:
        return "?"
    if question.kind == "number":
        return f"{read:g}"
    if len(read) > MAX_SHOWN_AXES or any(abs(n) > MAX_SHOWN_SIZE for n in read):
        return "?"  # a student's own numbers, not a shape anyone would guess
    return "x".join(map(str, read))  # 2x4x50x50: no ", ", which separates the mistakes
