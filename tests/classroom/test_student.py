"""vitcourse.classroom.student: student copies keep everything but the solutions, and refuse bad
markers."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from vitcourse.classroom.student import (
    BEGIN,
    END,
    MarkerError,
    main,
    make_student_copies,
    strip_solutions,
    student_notebook,
)

ROOT = Path(__file__).resolve().parents[2]


def notebook(*sources, kind="code"):
    cells = [
        {
            "cell_type": kind,
            "metadata": {},
            "source": s,
            "outputs": [{"x": 1}],
            "execution_count": 3,
        }
        for s in sources
    ]
    for c in cells:
        if kind != "code":
            del c["outputs"], c["execution_count"]
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


EXERCISE = f"""def patchify(images, patch_size):
    B, C, H, W = images.shape
    {BEGIN}
    x = images.reshape(B, C, H // patch_size, patch_size, W // patch_size, patch_size)
    return x.secret_answer()
    {END}
"""


def test_solution_is_replaced_at_its_indentation():
    source, blocks = strip_solutions(EXERCISE, "nb, cell 0")
    assert blocks == 1
    assert source.splitlines() == [
        "def patchify(images, patch_size):",
        "    B, C, H, W = images.shape",
        "    # YOUR CODE HERE",
        "    raise NotImplementedError()",
    ]
    compile(source, "exercise", "exec")  # still valid Python


def test_the_stub_speaks_the_notebooks_language_not_the_learners(monkeypatch):
    """A Spanish notebook (metadata vitcourse.language: es) gets the Spanish stub; an English one
    the English stub, whatever VITCOURSE_LANG says in the process that writes the copies."""
    monkeypatch.setenv("VITCOURSE_LANG", "es")
    teacher = notebook(EXERCISE, "patchify = check_patchify(patchify)")
    english, _ = student_notebook(teacher, "01.ipynb")
    assert "    # YOUR CODE HERE" in english["cells"][0]["source"]
    teacher["metadata"]["vitcourse"] = {"language": "es"}
    spanish, _ = student_notebook(teacher, "01.ipynb")
    assert "    # TU CÓDIGO AQUÍ" in spanish["cells"][0]["source"]


def test_student_notebook_clears_outputs_and_keeps_the_rest():
    teacher = notebook(EXERCISE, "patchify = check_patchify(patchify)")
    copy, exercises = student_notebook(teacher, "01.ipynb")
    assert exercises == 1
    assert "secret_answer" not in json.dumps(copy)
    assert copy["cells"][1]["source"] == "patchify = check_patchify(patchify)"
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in copy["cells"])
    assert "secret_answer" in json.dumps(teacher), "the teacher's notebook is not modified"


def test_markdown_answers_are_removed_too():
    teacher = notebook(
        f"Why scale?\n{BEGIN}\nBecause the softmax saturates.\n{END}", kind="markdown"
    )
    copy, exercises = student_notebook(teacher, "03.ipynb")
    assert exercises == 1 and copy["cells"][0]["source"] == "Why scale?\nYOUR ANSWER HERE"


@pytest.mark.parametrize(
    "source, message",
    [
        (
            f"x = 1\n{BEGIN}\ny = 2\n",
            r"02.ipynb, cell 1: the ### BEGIN SOLUTION on line 2 is never closed",
        ),
        (
            f"x = 1\n{END}\n",
            r"02.ipynb, cell 1, line 2: ### END SOLUTION without a ### BEGIN SOLUTION",
        ),
        (
            f"{BEGIN}\n{BEGIN}\n{END}\n",
            r"02.ipynb, cell 1, line 2: ### BEGIN SOLUTION inside the solution opened on line 1",
        ),
    ],
)
def test_unbalanced_markers_name_the_notebook_and_cell(source, message):
    with pytest.raises(MarkerError, match=message):
        student_notebook(notebook("print('hello')", source), "02.ipynb")


def test_cli_refuses_bad_markers_and_writes_nothing(tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    (src / "01.ipynb").write_text(json.dumps(notebook(EXERCISE)))
    (src / "02.ipynb").write_text(json.dumps(notebook(f"{BEGIN}\nx = 1\n")))
    with pytest.raises(SystemExit) as exit_info:
        main([str(src), str(tmp_path / "out")])
    assert exit_info.value.code == 2
    assert "02.ipynb, cell 0" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
    with pytest.raises(SystemExit):
        main([str(src), str(src)])


def _solution_lines(nb: dict) -> tuple[set, set]:
    """Lines inside solution blocks, and lines outside them, over a notebook's code cells."""
    inside, outside = set(), set()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        opened = False
        for line in "".join(cell["source"]).splitlines():
            if line.strip().startswith(BEGIN):
                opened = True
            elif line.strip().startswith(END):
                opened = False
            elif line.strip():
                (inside if opened else outside).add(line.strip())
    return inside, outside


def test_course_student_copies_hold_nothing_of_the_solutions(tmp_path, capsys):
    main([str(ROOT / "notebooks"), str(tmp_path)])
    assert "student notebooks" in capsys.readouterr().out
    teacher_paths = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert sorted(p.name for p in tmp_path.glob("*.ipynb")) == [p.name for p in teacher_paths]
    for path in teacher_paths:
        teacher = json.loads(path.read_text())
        student = json.loads((tmp_path / path.name).read_text())
        inside, outside = _solution_lines(teacher)
        student_lines = {
            line.strip()
            for c in student["cells"]
            if c["cell_type"] == "code"
            for line in "".join(c["source"]).splitlines()
        }
        leaked = (inside - outside) & student_lines
        assert not leaked, f"{path.name}: solution lines left in the student copy: {leaked}"
        text = json.dumps(student)
        assert not re.search("BEGIN SOLUTION|END SOLUTION", text)
        exercises = json.dumps(teacher).count(BEGIN)
        assert text.count("raise NotImplementedError()") >= exercises


def test_student_copies_carry_nbgrader_metadata(tmp_path):
    """Each exercise's cell is an nbgrader solution cell named after the exercise; each check cell
    a locked autograder test worth a point; nothing else is marked."""
    from vitcourse.checks import EXERCISES

    main([str(ROOT / "notebooks"), str(tmp_path)])
    for path in sorted(tmp_path.glob("*.ipynb")):
        names = [e.name for e in EXERCISES.values() if e.notebook == path.stem]
        marked = [c["metadata"]["nbgrader"] for c in json.loads(path.read_text())["cells"]
                  if "nbgrader" in c["metadata"]]  # fmt: skip
        expected = []
        for name in names:
            expected += [
                {"schema_version": 3, "task": False, "grade": False, "grade_id": name,
                 "locked": False, "solution": True},
                {"schema_version": 3, "task": False, "grade": True, "grade_id": f"check_{name}",
                 "locked": True, "points": 1, "solution": False},
            ]  # fmt: skip
        assert marked == expected, path.name


def test_nbgrader_source_versions_keep_the_solutions(tmp_path):
    main([str(ROOT / "notebooks"), str(tmp_path), "--nbgrader-source"])
    source = json.loads((tmp_path / "01_patches.ipynb").read_text())
    text = json.dumps(source)
    assert BEGIN in text and "# YOUR CODE HERE" not in text
    assert not source["metadata"]["vitcourse"]["student_copy"]
    assert all(c.get("outputs", []) == [] for c in source["cells"])
    assert any(c["metadata"].get("nbgrader", {}).get("solution") for c in source["cells"])


def _nbgrader_or_skip():
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail("nbgrader is missing: under CI, pip install -r requirements-teachers.txt")
        pytest.skip("needs nbgrader: pip install -r requirements-teachers.txt")


def _nbgrader(course, *args):
    """Run one nbgrader command on the course folder `course`; fail with its error output."""
    done = subprocess.run(
        [sys.executable, "-m", "nbgrader", *args, f"--CourseDirectory.root={course}"],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow  # runs nbgrader in a subprocess
def test_nbgrader_accepts_the_copies(tmp_path):
    """nbgrader's own metadata validator accepts the student copies and the source versions, and
    its generate_assignment, given our source version of notebook 01, releases a copy with the
    same cells as our student copy."""
    _nbgrader_or_skip()
    from nbgrader.nbgraderformat import MetadataValidator, ValidationError, read

    main([str(ROOT / "notebooks"), str(tmp_path / "student")])
    main([str(ROOT / "notebooks"), str(tmp_path / "source" / "ps1"), "--nbgrader-source"])
    validator = MetadataValidator()
    for path in sorted(tmp_path.rglob("*.ipynb")):
        validator.validate_nb(read(str(path), as_version=4))
    broken = read(str(tmp_path / "student" / "01_patches.ipynb"), as_version=4)
    next(c for c in broken.cells if c.metadata.get("nbgrader", {}).get("grade")).metadata[
        "nbgrader"
    ].pop("points")
    with pytest.raises(ValidationError, match="does not have points"):
        validator.validate_nb(broken)  # the validator can say no

    for path in (tmp_path / "source" / "ps1").glob("*.ipynb"):
        if path.name != "01_patches.ipynb":
            path.unlink()
    _nbgrader(tmp_path, "generate_assignment", "ps1")
    released = json.loads((tmp_path / "release" / "ps1" / "01_patches.ipynb").read_text())
    ours = json.loads((tmp_path / "student" / "01_patches.ipynb").read_text())
    assert ["".join(c["source"]) for c in released["cells"]] == [
        "".join(c["source"]) for c in ours["cells"]
    ]

    # nbgrader's autograder: the solved copy scores both points, the untouched copy none (the
    # hidden tests fail where the check lent the course's solution).
    teacher = json.loads((ROOT / "notebooks" / "01_patches.ipynb").read_text())
    solved = json.loads(json.dumps(released))
    for mine, answer in zip(solved["cells"], teacher["cells"], strict=True):
        if mine["metadata"].get("nbgrader", {}).get("solution"):
            mine["source"] = answer["source"]
    for student, nb in (("ada", solved), ("bob", released)):
        folder = tmp_path / "submitted" / student / "ps1"
        folder.mkdir(parents=True)
        (folder / "01_patches.ipynb").write_text(json.dumps(nb))
    _nbgrader(tmp_path, "autograde", "ps1", "--create")
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        scores = {s: gradebook.find_submission("ps1", s).score for s in ("ada", "bob")}
    assert scores == {"ada": 2, "bob": 0}


def test_the_committed_student_copies_are_up_to_date(tmp_path):
    """student/ holds the copies the README's Open-in-Colab links hand to a class: they must be
    what `python -m vitcourse.student notebooks/ student/` makes of today's notebooks."""
    make_student_copies(ROOT / "notebooks", tmp_path)
    made = {p.name: p.read_bytes() for p in tmp_path.glob("*.ipynb")}
    committed = {p.name: p.read_bytes() for p in (ROOT / "student").glob("*.ipynb")}
    stale = sorted(
        name for name in made.keys() | committed.keys() if made.get(name) != committed.get(name)
    )
    assert not stale, (
        f"student/ is out of date ({', '.join(stale)}): run "
        "`python -m vitcourse.student notebooks/ student/` and commit the result"
    )
