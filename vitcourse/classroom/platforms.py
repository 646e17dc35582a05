"""The grading platforms: what differs from one to the next (`PLATFORMS`), and one graded
submission as Gradescope's and PrairieLearn's results.json.

`vitcourse.classroom.autograder` grades a submission in the platform's container and hands the
grades here (`Run`). Each exercise becomes one test with its points from points.json, and its
output is what `python -m vitcourse.grade` writes in a student's feedback: the status, the check's
verdict and its hint. The whole run's output says which notebooks were graded, how the student's
code was kept apart (`ISOLATION`), and the course's edition.

- Gradescope (its autograder specification): `score`, `execution_time`, `output`, `visibility`,
  `stdout_visibility`, and `tests` with `name`, `number`, `score`, `max_score`, `status`
  ("passed" or "failed"), `output`, `tags` and `visibility`.
- PrairieLearn (its external grading results): `gradable`, `score` from 0 to 1, `message`,
  `output`, and `tests` with `name`, `description`, `points`, `max_points`, `message` and `output`;
  the file may hold at most 1 MB. A submission without the question's notebook is not gradable
  (the student loses no attempt), and neither is one the grader itself failed on.

What a student reads (the outputs, the messages, the question) is in the language chosen
(`vitcourse.language`, the autograder's `--language`); the results' keys and names are not.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import vitcourse
from vitcourse.classroom.gradebook import NOT_HANDED_IN, Grade, one_line, printable
from vitcourse.classroom.sandbox import Limits
from vitcourse.language import N_, _

ISOLATION = {  # shown through `_` (`vitcourse.classroom.autograder.choose_isolation`)
    "bubblewrap": N_(
        "each step ran in bubblewrap's sandbox: no network, none of the grader's "
        "files, its own /tmp, with limits on time, memory, processes and output"
    ),
    "own user": N_(
        "each step ran as a user of its own, without a sandbox (the container allows "
        "none): it could not read the grader's files nor write the results, and ran "
        "under the same limits on time, memory, processes and output; what it left "
        "running was killed. The network was not cut off by the grader"
    ),
    "none": N_("no isolation: the student's code ran with the grader's rights"),
}
OUTPUT_CHARS = 4_000  # of one test's output: PrairieLearn takes at most 1 MB for the whole file


@dataclass
class Run:
    """A graded submission: its grades, the points of each exercise, what was not graded, how it
    was isolated, what was closed to it, the course's edition, and the seconds it took; `failed`:
    why the grader itself could not grade it; `files`: the file graded for each notebook."""

    grades: list[Grade]
    points: dict[str, dict[str, float]]
    skipped: list[str]
    isolation: str
    closed: list[str]
    edition: dict
    seconds: float
    failed: str | None = None
    files: dict[str, str] = field(default_factory=dict)  # {notebook: the file graded as it}
    handed_in: list[str] = field(default_factory=list)

    def __post_init__(self):
        missing = _(NOT_HANDED_IN)
        self.handed_in = [
            nb
            for nb in self.points
            if any(g.notebook == nb and g.hint != missing for g in self.grades)
        ]


def points_of(run: Run, grade: Grade) -> tuple[float, float]:
    """(points earned, points possible) of one exercise or quiz (a quiz: its share right)."""
    possible = float(run.points.get(grade.notebook, {}).get(grade.exercise, 1))
    return round(possible * grade.earned, 4), possible


def feedback(grade: Grade) -> str:
    """A test's output: its status, then the verdict and the hint, as the student reads them."""
    text = _(grade.status) + (f": {one_line(grade.hint)}" if grade.hint else "")
    text = printable(text)
    return text if len(text) <= OUTPUT_CHARS else text[: OUTPUT_CHARS - 1] + "…"


def summary(run: Run) -> str:
    """The whole run in a few lines: score, notebooks, isolation, what was skipped, edition."""
    if run.failed:
        why = _(
            "The grader could not grade this submission (its fault, not yours): {why}. Your "
            "teacher has been shown this message."
        )
        return why.format(why=printable(run.failed)[:500])
    earned = sum(points_of(run, g)[0] for g in run.grades)
    possible = sum(points_of(run, g)[1] for g in run.grades)
    score = _(
        "{earned:g} of {possible:g} points: {passed} of {total} exercises passed in "
        "{seconds:.0f} s."
    )
    passed = sum(g.status == "passed" for g in run.grades)
    lines = [
        score.format(
            earned=earned,
            possible=possible,
            passed=passed,
            total=len(run.grades),
            seconds=run.seconds,
        )
    ]
    missing = [nb for nb in run.points if nb not in run.handed_in]
    graded = [printable(run.files.get(nb, f"{nb}.ipynb")) for nb in run.handed_in]
    graded = [
        f if f == f"{nb}.ipynb" else _("{file} (as {notebook})").format(file=f, notebook=nb)
        for f, nb in zip(graded, run.handed_in, strict=True)
    ]
    lines.append(_("Graded: {files}").format(files=", ".join(graded) or _("nothing")))
    if missing:
        where = _(
            "Not found in your submission: {files} (a file is matched by its name or its "
            "two-digit number)"
        )
        lines.append(where.format(files=", ".join(f"{nb}.ipynb" for nb in missing)))
    lines += [_("Not graded: {what}").format(what=printable(s)) for s in run.skipped[:20]]
    lines.append(_("Isolation: {isolation}.").format(isolation=run.isolation))
    if run.closed:
        closed = _("Closed to the student's code: {paths}.")
        lines.append(closed.format(paths=", ".join(run.closed)))
    version, commit = run.edition.get("version", "?"), run.edition.get("commit")
    by = (
        _("Graded by vitcourse {version}, commit {commit}.")
        if commit
        else _("Graded by vitcourse {version}.")
    )
    lines.append(by.format(version=version, commit=commit))
    return "\n".join(lines)


def gradescope(run: Run) -> dict:
    """Gradescope's results.json."""
    tests, notebooks = [], list(dict.fromkeys(g.notebook for g in run.grades))
    for g in run.grades:
        earned, possible = points_of(run, g)
        same = [h for h in run.grades if h.notebook == g.notebook]
        tests.append(
            {
                "name": f"{g.notebook}: {g.exercise}",
                "number": f"{notebooks.index(g.notebook) + 1}.{same.index(g) + 1}",
                "score": earned,
                "max_score": possible,
                "status": "passed" if g.status == "passed" else "failed",
                "output": feedback(g),
                "tags": [g.notebook],
                "visibility": "visible",
            }
        )
    return {
        "score": sum(t["score"] for t in tests),
        "execution_time": round(run.seconds),
        "output": summary(run),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }


def prairielearn(run: Run) -> dict:
    """PrairieLearn's results.json."""
    if run.failed or not run.handed_in:
        why = summary(run)
        return {"gradable": False, "message": why.splitlines()[0], "format_errors": [why]}
    tests = []
    for g in run.grades:
        earned, possible = points_of(run, g)
        tests.append(
            {
                "name": f"{g.notebook}: {g.exercise}",
                "description": _(
                    "{exercise}, the exercise of {notebook}.ipynb, on the check's inputs"
                ).format(exercise=g.exercise, notebook=g.notebook),
                "points": earned,
                "max_points": possible,
                "message": _(g.status),
                "output": feedback(g),
            }
        )
    possible = sum(t["max_points"] for t in tests)
    text = summary(run)
    return {
        "gradable": True,
        "score": sum(t["points"] for t in tests) / possible if possible else 0.0,
        "message": text.splitlines()[0],
        "output": text,
        "tests": tests,
    }


def edition() -> dict:
    """The course's edition the bundle was made from (install.sh leaves it in the data folder),
    else this package's version."""
    from vitcourse.environment import default_root

    try:
        return json.loads((default_root() / "edition.json").read_text())
    except (OSError, ValueError):
        return {"version": vitcourse.__version__, "commit": None}


def write_json(results: dict, path: Path) -> None:
    """Write `results` whole or not at all (a file beside it, then renamed). Each test's output
    is at most `OUTPUT_CHARS`, so the file stays far below PrairieLearn's 1 MB (tested)."""
    temporary = path.with_name(path.name + ".partial")
    temporary.write_text(json.dumps(results, indent=1), encoding="utf-8")
    os.replace(temporary, path)


# --- what differs from one platform to the next ---------------------------------------------


@dataclass(frozen=True)
class Platform:
    """One grading platform: where its container holds a submission, the results it reads, the
    time it gives a job, and the bundle a teacher uploads (`vitcourse.classroom.bundles`). A third
    platform is one more entry in `PLATFORMS`, its results' shape and its bundle."""

    root: str  # where the platform puts a submission's folder in its container
    variable: str  # the environment variable that moves the root (trials, tests)
    submission: str  # the student's files, under the root
    points: str  # the points file the bundle installs, under the root
    results: Callable[[Run], dict]  # results.json in the platform's shape
    limits: Limits  # a notebook's time limits there
    # The seconds the platform gives a job before it kills it and shows no results; the grader
    # writes results.json itself 30 s before (`budget`). None: no such deadline.
    timeout: int | None
    bundle: str  # the bundle's default name
    about: str  # what the bundle is, for --help
    image: str | None = None  # the grader image's default name, where the bundle names one

    @property
    def budget(self) -> float | None:
        return None if self.timeout is None else self.timeout - 30


PLATFORMS = {
    "gradescope": Platform(
        root="/autograder",
        variable="VITCOURSE_GRADESCOPE_ROOT",
        submission="submission",
        points="source/points.json",
        results=gradescope,
        limits=Limits(),
        timeout=None,
        bundle="autograder.zip",
        about="the zip for Gradescope's autograder upload",
    ),
    # PrairieLearn kills a grading job after its question's timeout, at most 600 s: the notebook's
    # limits are shorter there.
    "prairielearn": Platform(
        root="/grade",
        variable="VITCOURSE_PRAIRIELEARN_ROOT",
        submission="student",
        points="tests/points.json",
        results=prairielearn,
        limits=Limits(notebook=240, cell=90, check=20),
        timeout=600,
        bundle="grader",
        about="PrairieLearn's grader image folder and questions",
        image=f"vitcourse-grader:{vitcourse.__version__}",
    ),
}
