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

MAX_CELL_CHARS = 100_000  # a quiz cell is a line or two; a longer cell is not parsed


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
    for source in sources:
        if "quiz" not in source or len(source) > MAX_CELL_CHARS:
            continue
        source = unicodedata.normalize("NFKC", source)  # names as Python reads them
        for called, answers in answers_in(source):
            if called == notebook:
                found.update(answers)
    return found


def grade_quiz(student: str, notebook: str, data: bytes) -> Grade:
    """The quiz's grade for one submitted notebook."""
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
    return f"{read:g}" if question.kind == "number" else str(read)
