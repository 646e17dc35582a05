"""vitcourse.quiz.questions: the questions as data, checked when read; answers judged as a learner writes
them; the answers a notebook's cells hold, read without running them; and the course's own
questions: enough in every notebook, a feedback for every wrong answer, answers that the code
gives (each `verify` run)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vitcourse.language import speaking
from vitcourse.quiz import questions as quiz_module
from vitcourse.quiz import quiz
from vitcourse.quiz.questions import LETTERS, Unreadable, answers_in, judge, notebooks, questions

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_a_choice_is_a_letter_and_each_option_has_its_feedback(sample):
    question = sample["sqrt_d"]
    assert judge(question, None).answered is False
    assert judge(question, "  ").answered is False
    assert judge(question, "b") == quiz_module.Verdict(True, True, "Right: variance d.")
    assert judge(question, "B)").right
    assert judge(question, "a").feedback == "That is the softmax's doing."
    assert judge(question, "c").feedback == "A division saves nothing."
    for wrong in ("d", "ab", 2, ["b"]):  # no option d; two letters; not a letter
        verdict = judge(question, wrong)
        assert (
            verdict.answered
            and not verdict.right
            and "expected one letter of a, b, c" in verdict.feedback
        )


def test_a_number_is_right_within_its_tolerance_and_a_classic_mistake_gets_its_feedback(sample):
    tokens, ratio = sample["tokens"], sample["ratio"]
    for right in (196, 196.0, "196", " 196 "):
        assert judge(tokens, right).right, right
    assert judge(tokens, 197).feedback == "No cls token yet."
    assert judge(tokens, 14).feedback == "Count one side first."
    assert not judge(tokens, True).right  # a bool is not a number
    assert "expected a number" in judge(tokens, "many").feedback
    assert judge(ratio, 0.505).right and judge(ratio, "0,5").right  # a decimal comma
    assert not judge(ratio, 0.52).right
    assert not judge(ratio, float("nan")).right


def test_a_shape_is_read_from_a_tuple_a_list_a_size_or_words(sample):
    import torch

    question = sample["scores"]
    for right in ((2, 5, 5), [2, 5, 5], torch.Size([2, 5, 5]), "(2, 5, 5)", "2 x 5 x 5", "2×5×5"):
        assert judge(question, right).right, right
    assert judge(question, (2, 5)).feedback == "One T short."
    assert judge(question, (5, 5, 2)).feedback == "Which axes?"
    assert "expected a shape" in judge(question, "B, T, T").feedback
    assert not judge(question, (2.5, 5, 5)).right


def test_the_answers_in_a_cell_are_read_not_run():
    source = textwrap.dedent(
        """
        import os
        quiz("03_attention", {"sqrt_d": "b", "tokens": 196, "scores": (2, 5, 5), "x": None})
        vitcourse.quiz.quiz("03_attention", {"sqrt_d": right_answer(), "tokens": b})
        quiz(NAME, {"a": "b"})                  # not a literal notebook: not read
        print("quiz('03_attention', {'sqrt_d': 'a'})")   # a string is not a call
        """
    )
    found = answers_in(source)
    assert [name for name, _ in found] == ["03_attention", "03_attention"]
    assert found[0][1] == {"sqrt_d": "b", "tokens": 196, "scores": (2, 5, 5), "x": None}
    code = found[1][1]
    assert all(isinstance(v, Unreadable) for v in code.values())
    assert answers_in("quiz(") == [] and answers_in("(" * 300 + ")" * 300) == []


def test_an_answer_written_as_code_answers_nothing(sample):
    # `b` as a name unparses to "b", the right letter: it must not count as one.
    verdict = judge(sample["sqrt_d"], Unreadable("b"))
    assert verdict.answered and not verdict.right and "is code, not an answer" in verdict.feedback


def test_a_bad_question_file_is_refused_with_what_was_expected(tmp_path, monkeypatch):
    monkeypatch.setattr(quiz_module, "QUIZZES", tmp_path)
    broken = {
        "two right": {
            "id": "x",
            "kind": "choice",
            "ask": "?",
            "options": [
                {"text": "a", "feedback": "f", "right": True},
                {"text": "b", "feedback": "g", "right": True},
            ],
        },
        "kind": {"id": "x", "kind": "essay", "ask": "?"},
        "id": {"id": "Has Space", "kind": "number", "ask": "?", "answer": 1},
        "otherwise": {"id": "x", "kind": "number", "ask": "?", "answer": 1, "right": "r"},
    }
    for n, question in enumerate(broken.values()):
        (tmp_path / f"9{n}_bad.json").write_text(json.dumps({"questions": [question]}))
        questions.cache_clear()
        with pytest.raises(ValueError, match="expected"):
            questions(f"9{n}_bad")
    questions.cache_clear()
    with pytest.raises(ValueError, match="no questions for notebook '42_none'"):
        questions("42_none")


def test_quiz_refuses_a_question_its_notebook_does_not_have(sample):
    with pytest.raises(
        ValueError, match="99_sample has no question nope: its questions are sqrt_d"
    ):
        quiz("99_sample", {"nope": None})
    with pytest.raises(TypeError, match="expected the answers as a dictionary"):
        quiz("99_sample", ["sqrt_d"])
    view = quiz("99_sample", {"tokens": 197})
    assert [q.id for q in view.questions] == ["tokens"]


# --- the course's questions --------------------------------------------------------------------


def test_every_notebook_has_its_questions_and_half_ask_why():
    assert notebooks() == NOTEBOOKS
    for notebook in NOTEBOOKS:
        asked = list(questions(notebook).values())
        least = 2 if notebook[:2] in ("00", "10") else 4
        assert len(asked) >= least, f"{notebook}: {len(asked)} questions, expected {least} or more"
        why = sum(q.why for q in asked)
        assert 2 * why >= len(asked), f"{notebook}: {why} of {len(asked)} ask why"


def test_every_wrong_answer_has_its_own_feedback_and_the_right_one_says_why():
    for notebook in NOTEBOOKS:
        for question in questions(notebook).values():
            where = f"{notebook} {question.id}"
            if question.kind == "choice":
                assert 3 <= len(question.options) <= 4, where
                said = [o.feedback.strip() for o in question.options]
                assert all(len(f) > 20 for f in said), f"{where}: a feedback too short to teach"
                assert len(set(said)) == len(said), f"{where}: two options share a feedback"
            else:
                assert question.right and question.otherwise, where
                assert question.mistakes, f"{where}: no classic mistake with its feedback"
                said = [question.right, question.otherwise, *(f for _, f in question.mistakes)]
                assert len(set(said)) == len(said), f"{where}: two answers share a feedback"
            rights = [o.feedback for o in question.options if o.right] or [question.right]
            assert rights[0].startswith("Right"), f"{where}: the page shows only a ✓ before it"
            for text in question.texts():
                assert "<" not in text and "$" not in text, f"{where}: markup in {text[:40]!r}"


@pytest.mark.parametrize("folder", ["notebooks", "student", "es/notebooks", "es/student"])
def test_each_notebook_asks_each_of_its_questions_once_and_a_prediction_before_its_cell(folder):
    """The notebooks' `quiz(...)` cells and the data agree: every question in one cell, once; a
    "predict, then run" question in a cell of its own, right after the cell its `after` names and
    right before a code cell (the one it predicts)."""
    for notebook in NOTEBOOKS:
        cells = json.loads((ROOT / folder / f"{notebook}.ipynb").read_text())["cells"]
        asked, where = [], {}
        for index, cell in enumerate(cells):
            source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
            for name, answers in answers_in(source):
                assert name == notebook, (folder, notebook, name)
                asked += list(answers)
                where.update(dict.fromkeys(answers, index))
        assert sorted(asked) == sorted(questions(notebook)), (folder, notebook)
        for question in questions(notebook).values():
            if question.predict:
                index = where[question.id]
                assert cells[index - 1]["id"] == question.after, (folder, question.id)
                assert cells[index + 1]["cell_type"] == "code", (folder, question.id)


def test_the_right_answers_are_spread_over_the_letters():
    letters = [
        q.right_letter for nb in NOTEBOOKS for q in questions(nb).values() if q.kind == "choice"
    ]
    for letter in "abc":
        assert letters.count(letter) >= len(letters) / 8, (
            f"{letter}: {letters.count(letter)} of {len(letters)}"
        )


# Runs each question's `verify` in a namespace of its own, in one process for a notebook's
# questions (torch is imported once), and prints {id: repr(the value of its last line)} as JSON.
VERIFY = """
import json, sys
programs, values = json.loads(sys.stdin.read()), {}
for name, program in programs.items():
    *body, last = program.strip().splitlines()
    space = {"__name__": "__verify__"}
    exec("\\n".join(body), space)
    values[name] = repr(eval(last, space))
print(json.dumps(values))
"""


@pytest.mark.slow
@pytest.mark.parametrize("notebook", NOTEBOOKS)
def test_each_answer_is_what_the_code_gives(notebook):
    """Every number, shape and "predict, then run" question's `verify` (the notebook's own
    computation) gives its answer, run in a fresh process."""
    import torch

    checked = [
        q for q in questions(notebook).values() if q.kind != "choice" or q.predict or q.verify
    ]
    for question in checked:
        assert question.verify, f"{notebook} {question.id}: no verify program"
    programs = json.dumps({q.id: q.verify for q in checked})
    done = subprocess.run([sys.executable, "-c", VERIFY], input=programs, capture_output=True,
                          text=True, cwd=ROOT, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-1500:]
    values = json.loads(done.stdout.strip().splitlines()[-1])
    for question in checked:
        got = eval(values[question.id], {"torch": torch, "np": __import__("numpy")})  # noqa: S307
        if question.kind == "choice":
            assert got == question.right_letter, f"{notebook} {question.id}: verify gives {got!r}"
        else:
            assert judge(question, got if question.kind == "number" else tuple(got)).right, (
                f"{notebook} {question.id}: verify gives {got!r}, the answer is {question.answer}"
            )


def test_the_questions_speak_spanish():
    """Every text of every question has its Spanish (the catalog; tests/translation checks that
    nothing is missing or fuzzy), and it is what a Spanish learner reads."""
    question = next(iter(questions("03_attention").values()))
    with speaking("es"):
        shown = quiz_module._(question.ask)
    assert shown != question.ask


def test_the_letters_cover_every_option():
    most = max(len(q.options) for nb in NOTEBOOKS for q in questions(nb).values())
    assert most <= len(LETTERS)
