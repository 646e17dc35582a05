"""The student copies of the course notebooks run top to bottom under nbmake, every exercise
still open: each check must say so and lend the reference, or the rest of the notebook breaks."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXTRAS, NEEDS_EXTRAS, need
from vitcourse.classroom.student import make_student_copies

ROOT = Path(__file__).resolve().parent.parent
TEACHER = sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("student")
    make_student_copies(ROOT / "notebooks", out)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("teacher", TEACHER, ids=lambda p: p.name)
def test_student_copy_runs_with_every_exercise_open(teacher, student_dir):
    if teacher.name in NEEDS_EXTRAS:
        for module in EXTRAS:
            need(module)
    path = student_dir / teacher.name
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--nbmake",
            "--nbmake-timeout=300",
            "--overwrite",
            "-p",
            "no:cacheprovider",
            "-q",
            "--rootdir",
            str(student_dir),
            str(path),
        ],
        cwd=student_dir,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    executed = json.loads(path.read_text())
    printed = "".join(
        "".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", [])
    )
    exercises = teacher.read_text().count("### BEGIN SOLUTION")
    assert printed.count("not written yet") == exercises
    assert "correct, it matches the reference" not in printed
