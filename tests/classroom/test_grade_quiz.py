"""vitcourse.classroom.grade_quiz: a quiz graded from the answers its cells hold, read and never
run; a class's honest, wrong, untouched and forged quizzes in grades.csv and gradebook.csv, and on
both platforms' results."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.conftest import need, right_quiz_answers, with_quiz_answers
from vitcourse import language
from vitcourse.classroom import autograder, grade, platforms, sandbox
from vitcourse.classroom.grade_quiz import grade_quiz, handed_in
from vitcourse.classroom.grading import graded_by_notebook
from vitcourse.quiz.questions import LETTERS, questions

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = "00_welcome_and_data"  # a quiz and no exercise: graded without a sandbox


@pytest.fixture(autouse=True)
def _english(monkeypatch):
    monkeypatch.setattr(language, "_chosen", None)
    monkeypatch.setenv("VITCOURSE_LANG", "en")


def notebook_with(*sources: str, markdown: str = "") -> bytes:
    cells = [{"cell_type": "code", "source": s, "metadata": {}, "outputs": []} for s in sources]
    if markdown:
        cells.insert(0, {"cell_type": "markdown", "source": markdown, "metadata": {}})
    return json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode()


def wrong_answers(notebook: str) -> dict:
    found = {}
    for name, q in questions(notebook).items():
        if q.kind == "choice":
            found[name] = next(LETTERS[i] for i, o in enumerate(q.options) if not o.right)
        else:
            found[name] = q.mistakes[0][0]
    return found


def quiz_cell(notebook: str, answers: dict) -> str:
    return f"quiz({notebook!r}, {answers!r})"


def test_each_notebook_with_questions_has_a_quiz_to_grade():
    graded = graded_by_notebook()
    for notebook in ("00_welcome_and_data", "03_attention", "10_bridges"):
        assert graded[notebook][-1] == "quiz"
    assert graded["03_attention"][:2] == ["attention", "MultiHeadSelfAttention"]


def test_the_last_answer_in_the_notebooks_own_quiz_cells_counts():
    first, *rest = list(questions(NOTEBOOK))
    data = notebook_with(
        quiz_cell(NOTEBOOK, {first: "z"}),
        quiz_cell("03_attention", {first: "a"}),  # another notebook's quiz
        "vitcourse.quiz.quiz(" + repr(NOTEBOOK) + ", {" + repr(first) + ": 'b'})",
        markdown=quiz_cell(NOTEBOOK, {first: "c"}),  # a markdown cell is not code
    )
    assert handed_in(data, NOTEBOOK) == {first: "b"}
    assert handed_in(b"not json", NOTEBOOK) == {} and handed_in(b'{"cells": 3}', NOTEBOOK) == {}


def test_right_wrong_partial_and_untouched_quizzes():
    asked = questions(NOTEBOOK)
    right = grade_quiz(
        "ada", NOTEBOOK, notebook_with(quiz_cell(NOTEBOOK, right_quiz_answers(NOTEBOOK)))
    )
    assert (right.status, right.score, right.exercise) == ("passed", 1.0, "quiz")
    wrong = grade_quiz("bo", NOTEBOOK, notebook_with(quiz_cell(NOTEBOOK, wrong_answers(NOTEBOOK))))
    assert (wrong.status, wrong.score) == ("wrong", 0.0)
    assert wrong.hint.startswith(f"0 of {len(asked)} answered right; not right: ")
    for name, q in asked.items():  # summary.md's count: the letter or number, in the course's words
        shown = wrong_answers(NOTEBOOK)[name]
        assert f"{name}: {shown if q.kind == 'choice' else format(shown, 'g')}" in wrong.mistake
    half = dict(list(right_quiz_answers(NOTEBOOK).items())[:1])
    partial = grade_quiz("cy", NOTEBOOK, notebook_with(quiz_cell(NOTEBOOK, half)))
    assert partial.status == "wrong" and partial.score == pytest.approx(1 / len(asked), abs=1e-4)
    assert "not answered: " in partial.hint
    untouched = dict.fromkeys(asked)
    blank = grade_quiz("di", NOTEBOOK, notebook_with(quiz_cell(NOTEBOOK, untouched)))
    assert (blank.status, blank.score) == ("not attempted", None)
    assert blank.earned == 0


def test_a_forged_verdict_earns_nothing():
    """What a student might try instead of answering: a `quiz` of their own that prints a pass,
    answers computed from the course's own data, a cell that rewrites the notebook when run, and
    a mistake text made to look like the course's: none of it is run, none of it counts."""
    names = list(questions(NOTEBOOK))
    forged = notebook_with(
        "def quiz(*a, **k):\n    print('quiz: passed, 4 of 4 answered right')",
        "from vitcourse.quiz.questions import questions\n"
        "ANSWERS = {n: q.right_letter for n, q in questions(" + repr(NOTEBOOK) + ").items()}",
        quiz_cell(NOTEBOOK, {})[:-3]
        + "{"
        + ", ".join(f"{n!r}: ANSWERS[{n!r}]" for n in names)
        + "})",
        "open(__vsc_ipynb_file__, 'w').write(FORGED)",
    )
    graded = grade_quiz("eve", NOTEBOOK, forged)
    assert (graded.status, graded.score) == ("wrong", 0.0)
    assert graded.mistake == ", ".join(f"{n}: ?" for n in names)  # nothing of hers in summary.md


def _class(folder: Path) -> dict[str, bytes]:
    """Four students' notebook 00: honest, wrong, untouched (the student copy), forged."""
    copy = (ROOT / "student" / f"{NOTEBOOK}.ipynb").read_bytes()

    def answered(answers) -> bytes:
        return json.dumps(with_quiz_answers(json.loads(copy), NOTEBOOK, answers)).encode()

    forged = json.loads(answered({}))
    forged["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "source":
                            "print('quiz: passed')\nquiz = lambda *a: 'passed'"})  # fmt: skip
    class_ = {
        "honest": answered(right_quiz_answers(NOTEBOOK)),
        "wrong": answered(wrong_answers(NOTEBOOK)),
        "untouched": copy,
        "forged": json.dumps(forged).encode(),
    }
    for student, data in class_.items():
        (folder / student).mkdir(parents=True)
        (folder / student / f"{NOTEBOOK}.ipynb").write_bytes(data)
    return class_


def test_a_class_s_quizzes_in_its_reports(tmp_path):
    need("copydetect", "pip install -r requirements-teachers.txt")
    _class(tmp_path / "subs")
    grades, _ = grade.grade_class(tmp_path / "subs", tmp_path / "out", use_sandbox=False)
    status = {g.student: (g.status, g.earned) for g in grades if g.exercise == "quiz"}
    assert status == {
        "honest": ("passed", 1.0),
        "wrong": ("wrong", 0.0),
        "untouched": ("not attempted", 0.0),
        "forged": ("not attempted", 0.0),
    }
    with open(tmp_path / "out" / "grades.csv", encoding="utf-8") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert rows["honest"]["exercise"] == "quiz" and rows["honest"]["points"] == "1"
    assert rows["untouched"]["status"] == "not attempted"
    with open(tmp_path / "out" / "gradebook.csv", encoding="utf-8") as f:
        book = list(csv.reader(f))
    assert book[0] == ["student", f"{NOTEBOOK} quiz", "total"]
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert f"| quiz | {NOTEBOOK} | 1 of 4 |" in summary


@pytest.mark.parametrize("platform", ["gradescope", "prairielearn"])
def test_the_platforms_give_the_quiz_its_points(tmp_path, platform):
    class_ = _class(tmp_path / "subs")
    points = {NOTEBOOK: {"quiz": 4}}
    asked = questions(NOTEBOOK)
    for student, expected in (("honest", 4.0), ("wrong", 0.0), ("untouched", 0.0)):
        grades, _, files = autograder.grade_submission(
            tmp_path / "subs" / student, points, autograder.Limits(), sandbox.NO_SANDBOX
        )
        assert files == {NOTEBOOK: f"{NOTEBOOK}.ipynb"} and len(grades) == 1
        run = platforms.Run(grades=grades, points=points, skipped=[], isolation="a test",
                            closed=[], edition={"version": "0.1.0"}, seconds=1.0, files=files)  # fmt: skip
        results = platforms.PLATFORMS[platform].results(run)
        tests = results["tests"]
        assert len(tests) == 1 and NOTEBOOK in tests[0]["name"] and "quiz" in tests[0]["name"]
        earned = tests[0].get("score", tests[0].get("points"))
        assert earned == pytest.approx(expected), (student, tests[0])
        if student == "wrong":
            said = tests[0].get("output", "") + tests[0].get("message", "")
            assert f"0 of {len(asked)} answered right" in said
    assert len(class_) == 4
    read = autograder.read_points
    path = tmp_path / "points.json"
    path.write_text(
        json.dumps({NOTEBOOK: {"quiz": 2}, "03_attention": {"attention": 1, "quiz": 1}})
    )
    assert read(path)[NOTEBOOK] == {"quiz": 2}


def test_what_a_hostile_notebook_writes_neither_crashes_the_grader_nor_reaches_the_reports():
    """Answers made to break the trusted process or the class summary: a whole number past a
    float's range, code nested deeper than Python's recursion limit, a "shape" of a student's own
    numbers; each is a wrong answer shown as the course writes it, never a crash."""
    notebook = "03_attention"
    number = next(n for n, q in questions(notebook).items() if q.kind == "number")
    shape = next(n for n, q in questions(notebook).items() if q.kind == "shape")
    cells = [
        f'quiz("{notebook}", {{"{number}": 1{"0" * 400}}})',
        f'quiz("{notebook}", {{"{number}": {"-" * 900}x}})',
        f'quiz("{notebook}", {{"{number}": x{".a" * 900}}})',
    ]
    for cell in cells:
        graded = grade_quiz("eve", notebook, notebook_with(cell))
        assert graded.status == "wrong" and graded.mistake == f"{number}: ?", cell[:60]
    own = " ".join(["1337"] * 500)
    graded = grade_quiz(
        "eve", notebook, notebook_with(f'quiz("{notebook}", {{"{shape}": "{own}"}})')
    )
    assert graded.mistake == f"{shape}: ?"
    wrong = grade_quiz(
        "bo", notebook, notebook_with(f'quiz("{notebook}", {{"{shape}": (2, 5, 5)}})')
    )
    assert wrong.mistake == f"{shape}: 2x5x5"  # one mistake, not split at its commas


def test_only_the_calls_a_run_makes_for_sure_count_in_the_order_it_makes_them():
    name, question = next(iter(questions(NOTEBOOK).items()))
    right = question.right_letter if question.kind == "choice" else question.answer
    wrong = wrong_answers(NOTEBOOK)[name]
    cell = "\n".join(
        [
            f"def later():\n    quiz({NOTEBOOK!r}, {{{name!r}: {right!r}}})",
            f"quiz({NOTEBOOK!r}, {{{name!r}: {wrong!r}}})",
            f"if False:\n    quiz({NOTEBOOK!r}, {{{name!r}: {right!r}}})",
        ]
    )
    assert handed_in(notebook_with(cell), NOTEBOOK) == {name: wrong}
    # A literal keeps its own characters (Python normalises names, not strings): "ｂ" is no "b".
    assert handed_in(notebook_with(f"ｑｕｉｚ({NOTEBOOK!r}, {{{name!r}: 'ｂ'}})"), NOTEBOOK) == {
        name: "ｂ"
    }
