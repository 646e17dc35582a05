"""A notebook's questions, as data: read from `vitcourse/quiz/data/NN_name.json` (one file per
notebook), checked, and each answer judged, with the feedback a learner reads. The notebook's call
(`vitcourse.quiz.quiz`), the book's page and the grader (`vitcourse.classroom.grade_quiz`) all judge
with `judge`, here.

A question is one of three kinds::

    choice   one right option of several, a letter ("a", "b", ...); each option has its feedback
    number   a number (a count, a ratio), right within `tolerance`; classic wrong numbers have
             their own feedback (`mistakes`), any other gets `otherwise`
    shape    a tensor's shape, a list of whole numbers; feedback as for a number

A question's fields in its file: `id` (the key a learner answers under), `kind`, `ask`, `why` (it
asks why or what would happen if), `predict` and `after` (the id of the notebook's cell a
prediction follows); a choice's `options` (each `text`, `feedback`, one `right`); a number's or shape's `answer`, `tolerance`,
`right`, `mistakes` (each `answer`, `feedback`), `otherwise`; `verify`.

A "predict, then run" question (`predict`) asks what the next cell will print, before it runs.
Its `verify`, like every number's and shape's, is a small program whose last line computes the
answer the way the notebook does: `tests/quiz/test_questions.py` runs it. Every text goes through `_`, so the
questions speak the language chosen (`vitcourse.language`).
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from vitcourse.language import N_, _

QUIZZES = Path(__file__).resolve().parent / "data"
KINDS = ("choice", "number", "shape")
LETTERS = "abcdef"
# A wrong answer's feedback opens with these words, after a ✗; a right one with its own "Right:"
# (every right feedback says it: tests/quiz), after a ✓.
WRONG = N_("Not quite.")


@dataclass(frozen=True)
class Option:
    text: str
    feedback: str
    right: bool = False


@dataclass(frozen=True)
class Question:
    """One question, in English as its file has it (`_` translates it where it is shown)."""

    notebook: str
    id: str
    kind: str
    ask: str
    why: bool = False
    predict: bool = False
    after: str = ""  # predict: the id of the notebook's cell it follows
    options: tuple[Option, ...] = ()  # choice
    answer: object = None  # number: a float; shape: a tuple of ints
    tolerance: float = 0.0
    right: str = ""  # number, shape: why the answer is right
    mistakes: tuple[tuple[object, str], ...] = ()  # number, shape: (a classic wrong answer, why)
    otherwise: str = ""  # number, shape: any other wrong answer
    verify: str = ""

    @property
    def right_letter(self) -> str:
        return next(LETTERS[i] for i, o in enumerate(self.options) if o.right)

    def texts(self) -> list[str]:
        """Every text a learner reads in it, in English: what the catalog translates."""
        found = [self.ask]
        for option in self.options:
            found += [option.text, option.feedback]
        return found + [self.right, *(why for _, why in self.mistakes), self.otherwise]


@dataclass(frozen=True)
class Verdict:
    """What an answer earns: `answered` False for None (or blank), `right`, and the feedback."""

    answered: bool
    right: bool
    feedback: str


# --- reading the questions ---------------------------------------------------------------------


def notebooks() -> list[str]:
    """The notebooks with questions, in the course's order."""
    return sorted(path.stem for path in QUIZZES.glob("*.json"))


@cache
def questions(notebook: str) -> dict[str, Question]:
    """{id: question} of `notebook` (its name without .ipynb), in the file's order, checked."""
    path = QUIZZES / f"{notebook}.json"
    if not path.is_file():
        there = ", ".join(notebooks())
        raise ValueError(f"no questions for notebook {notebook!r}: there are questions for {there}")
    data = json.loads(path.read_text(encoding="utf-8"))
    found: dict[str, Question] = {}
    for raw in data["questions"]:
        question = _question(notebook, raw)
        if question.id in found:
            raise ValueError(f"{path.name}: two questions are called {question.id!r}")
        found[question.id] = question
    return found


def _question(notebook: str, raw: dict) -> Question:
    where = f"{notebook}.json, question {raw.get('id')!r}"
    if not re.fullmatch(r"[a-z][a-z0-9_]*", str(raw.get("id", ""))):
        raise ValueError(f"{where}: expected an id of lowercase letters, digits and _")
    if raw.get("kind") not in KINDS:
        raise ValueError(f"{where}: expected a kind of {KINDS}, got {raw.get('kind')!r}")
    options = tuple(
        Option(o["text"], o["feedback"], bool(o.get("right"))) for o in raw.get("options", [])
    )
    if raw["kind"] == "choice" and (
        not 2 <= len(options) <= len(LETTERS) or sum(o.right for o in options) != 1
    ):
        raise ValueError(f"{where}: expected 2 to {len(LETTERS)} options, exactly one right")
    exact = read_number if raw["kind"] == "number" else read_shape
    answer = None if raw["kind"] == "choice" else exact(raw["answer"])
    if raw["kind"] != "choice" and (
        answer is None or not raw.get("right") or not raw.get("otherwise")
    ):
        raise ValueError(f"{where}: expected an answer, its `right` and an `otherwise`")
    return Question(
        notebook=notebook,
        id=raw["id"],
        kind=raw["kind"],
        ask=raw["ask"],
        why=bool(raw.get("why")),
        predict=bool(raw.get("predict")),
        after=raw.get("after", ""),
        options=options,
        answer=answer,
        tolerance=float(raw.get("tolerance", 0)),
        right=raw.get("right", ""),
        mistakes=tuple((exact(m["answer"]), m["feedback"]) for m in raw.get("mistakes", [])),
        otherwise=raw.get("otherwise", ""),
        verify=raw.get("verify", ""),
    )


# --- judging an answer -------------------------------------------------------------------------


def read_number(given) -> float | None:
    """A number from what a learner wrote: 196, 0.5, "196", "0,5" (a decimal comma); else None."""
    if isinstance(given, bool):
        return None
    if isinstance(given, (int, float)):
        try:
            value = float(given)  # a whole number past float's range: OverflowError
        except OverflowError:
            return None
        return value if math.isfinite(value) else None
    if isinstance(given, str):
        text = given.strip().replace(" ", "").replace("\u00a0", "")
        text = text.replace(",", ".") if text.count(",") == 1 and "." not in text else text
        text = text.replace(",", "")  # 70,000
        try:
            value = float(text)
        except ValueError:
            return None
        return value if math.isfinite(value) else None
    return None


def read_shape(given) -> tuple[int, ...] | None:
    """A shape from what a learner wrote: (2, 5, 5), [2, 5, 5], torch.Size, "2 x 5 x 5"; else None."""
    if isinstance(given, str):
        found = re.findall(r"-?\d+(?:\.\d+)?", given)
        if not found or re.search(r"[^\d\s,x×*()\[\].\-]", given.lower().replace("torch.size", "")):
            return None
        given = [float(n) for n in found]
    if isinstance(given, (list, tuple)) and given:
        values = [read_number(n) for n in given]
        if all(v is not None and v == int(v) for v in values):
            return tuple(int(v) for v in values)
    return None


def judge(question: Question, given) -> Verdict:
    """How `given` (what a learner wrote, or chose in a widget) answers `question`, with the
    feedback in the language chosen."""
    if given is None or (isinstance(given, str) and not given.strip()):
        return Verdict(False, False, "")
    if isinstance(given, Unreadable):
        said = _("{given} is code, not an answer: write the answer itself (a letter, a number)")
        return Verdict(True, False, said.format(given=given.code))
    if question.kind == "choice":
        letter = given.strip().lower().rstrip(")").strip() if isinstance(given, str) else None
        letters = LETTERS[: len(question.options)]
        if letter is None or len(letter) != 1 or letter not in letters:
            said = _("expected one letter of {letters}, got {given}")
            return Verdict(
                True, False, said.format(letters=", ".join(letters), given=_shown(given))
            )
        option = question.options[letters.index(letter)]
        return Verdict(True, option.right, _(option.feedback))
    read = read_number(given) if question.kind == "number" else read_shape(given)
    if read is None:
        said = (
            _("expected a number, got {given}")
            if question.kind == "number"
            else _("expected a shape such as (2, 5, 5), got {given}")
        )
        return Verdict(True, False, said.format(given=_shown(given)))
    if _same(question, read, question.answer):
        return Verdict(True, True, _(question.right))
    for wrong, why in question.mistakes:
        if _same(question, read, wrong):
            return Verdict(True, False, _(why))
    return Verdict(True, False, _(question.otherwise))


def _same(question: Question, a, b) -> bool:
    if question.kind == "number":
        return abs(a - b) <= question.tolerance + 1e-9 * max(1.0, abs(b))
    return a == b


def _shown(given) -> str:
    return repr(given)[:40]


# --- the answers a notebook holds --------------------------------------------------------------


def answers_in(source: str) -> list[tuple[str, dict]]:
    """The `quiz("NN_name", {...})` calls of a code cell, in the order they run: (notebook,
    answers). Read, never run, and only the calls a run of the cell makes for sure: a statement
    of its own at the cell's top level (not one inside an `if`, a loop or a function). An answer
    is a literal (a string, a number, a tuple or list of numbers, None); anything else (a name, a
    call) is kept as the `Unreadable` marker, which no question takes as an answer."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found = []
    for statement in tree.body:
        node = statement.value if isinstance(statement, ast.Expr) else None
        if not (isinstance(node, ast.Call) and _called(node.func) == "quiz" and node.args):
            continue
        first = node.args[0]
        if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
            continue
        given = node.args[1] if len(node.args) > 1 else None
        if not isinstance(given, ast.Dict):
            continue
        answers = {}
        for key, value in zip(given.keys, given.values, strict=True):
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                answers[key.value] = _literal(value, source)
        found.append((first.value, answers))
    return found


class Unreadable:
    """An answer written as code (a name, a call), not as a literal: it answers nothing."""

    def __init__(self, code: str):
        self.code = code

    def __repr__(self) -> str:
        return self.code


def _literal(node: ast.AST, source: str):
    """The answer `node` writes, or `Unreadable` with its first characters as written (never
    `ast.unparse`, which recurses as deep as the code is nested)."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return Unreadable((ast.get_source_segment(source, node) or "")[:40])
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(v, (int, float)) for v in value):
        return tuple(value)
    return Unreadable((ast.get_source_segment(source, node) or "")[:40])


def _called(func: ast.AST) -> str:
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
