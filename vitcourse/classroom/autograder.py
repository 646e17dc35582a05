"""Grading where schools grade: the course's grader as a Gradescope autograder and a PrairieLearn
external grader.

    python -m vitcourse.classroom.autograder gradescope --notebooks 01 03 --out autograder.zip
    python -m vitcourse.classroom.autograder prairielearn --notebooks 03 --out grader/

make the bundle a teacher uploads (`vitcourse.classroom.bundles`). What differs from one platform
to the next is one entry of `vitcourse.classroom.platforms.PLATFORMS`: where a submission is, the
points file, the results' shape, the time limits and budget.

In the platform's container, for each submission, the scripts call

    python -m vitcourse.classroom.autograder grade-gradescope    # /autograder/submission/
    python -m vitcourse.classroom.autograder grade-prairielearn  # /grade/student/

which grade each notebook found as `python -m vitcourse.grade` does
(`vitcourse.classroom.grading.grade_notebook`) and write the platform's `results.json`
(`PLATFORMS[name].results`). The student's code runs in bubblewrap's sandbox where the
container allows it, else as a user of its own (`vitcourse.classroom.sandbox.OWN_USER`), and the
results say which. Before any of it runs, the platform's folder (the grader's files, the results)
is closed to every user but root, and so, for a user of its own, is the installed package with
its solutions (in the sandbox a copy without them is mounted over it). A budget (`--budget`,
PrairieLearn's by default) makes sure results.json is written before the platform stops the job.
What the student reads is in the language of `--language` (English by default), as the sandboxes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from vitcourse.classroom import bundles, platforms, sandbox
from vitcourse.classroom import sandbox_cgroup as cgroups
from vitcourse.classroom import sandbox_disk as disk
from vitcourse.classroom.grade import speak
from vitcourse.classroom.gradebook import NOT_HANDED_IN, Grade
from vitcourse.classroom.grading import grade_notebook, graded_by_notebook
from vitcourse.classroom.platforms import PLATFORMS
from vitcourse.classroom.sandbox import Limits
from vitcourse.classroom.sandbox_bubblewrap import package_dir
from vitcourse.classroom.submissions import notebooks_in, read_submission
from vitcourse.language import LANGUAGES, _

# --- grading in the platform's container -------------------------------------------------------


def read_points(path: Path) -> dict[str, dict[str, float]]:
    """{notebook: {exercise: points}} from a points.json, checked: every notebook and exercise a
    course one, every value a number of points from 0 up."""
    try:
        points = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: expected a JSON file of points, could not read it ({e})") from e
    known = graded_by_notebook()
    if not isinstance(points, dict) or not points:
        raise ValueError(f"{path}: expected {{notebook: {{exercise: points}}}}, got {points!r:.80}")
    for notebook, marks in points.items():
        if notebook not in known or not isinstance(marks, dict):
            raise ValueError(
                f"{path}: {notebook!r} is not a notebook with exercises or a quiz "
                f"({', '.join(known)}), or its value is not {{exercise: points}}"
            )
        for name, value in marks.items():
            if name not in known[notebook]:
                raise ValueError(
                    f"{path}: {notebook} has no exercise or quiz {name!r} "
                    f"(it has {', '.join(known[notebook])})"
                )
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(
                    f"{path}: {notebook} {name}: expected points (0 or more), got {value!r}"
                )
    return points


def counted(how: str | None = None) -> str:
    """How the sandboxes' memory and output were counted here (the kernel's, or the poll's), in
    the isolation mode `how`."""
    return f"{cgroups.note()}; {disk.note(how)}"


def choose_isolation(wanted: str = "auto") -> tuple[str, str]:
    """(mode, what it means, for the results). `auto`: bubblewrap's sandbox where it works here,
    else a user of its own (the grader is root); `bubblewrap`, `own-user` or `none` (a trial
    only): that one, or an error saying why it cannot run here."""
    why = sandbox.bubblewrap() if wanted in ("auto", "bubblewrap") else "not asked for"
    if why is None:
        isolation = _(platforms.ISOLATION[sandbox.BUBBLEWRAP])
        return sandbox.BUBBLEWRAP, f"{isolation}; {counted(sandbox.BUBBLEWRAP)}"
    if wanted == "none":
        return sandbox.NO_SANDBOX, _(platforms.ISOLATION[sandbox.NO_SANDBOX])
    if wanted in ("auto", "own-user") and os.geteuid() == 0:
        # The platforms' containers: let any user pass through to the interpreter (which may
        # sit under /root) and the data, nothing more.
        from vitcourse.classroom.sandbox_user import open_way
        from vitcourse.environment import default_root

        open_way([Path(sys.executable), Path(sys.prefix), Path(os.__file__), default_root()])
        sandbox.own_user.cache_clear()
        refused = sandbox.own_user()
        if refused is None:
            note = f" (bubblewrap: {why})" if wanted == "auto" else ""
            said = f"{_(platforms.ISOLATION[sandbox.OWN_USER])}{note}; {counted(sandbox.OWN_USER)}"
            return sandbox.OWN_USER, said
        why = f"{why}; {refused}"
    elif wanted in ("auto", "own-user"):
        why = f"{why}; a user of its own needs a grader run as root"
    raise RuntimeError(
        _("the grader cannot keep the student's code apart here: {why}").format(why=why)
    )


def close_grader_files(root: Path, how: str) -> tuple[list[str], str]:
    """Keep the student's code from the platform's folder (the grader's files, the results) and,
    run as a user of its own, from the installed package's solutions (in bubblewrap's sandbox a
    copy without them is mounted over it): (what was closed, a warning or "")."""
    closed, warning = [], ""
    if os.geteuid() == 0:
        root.chmod(0o700)
        closed.append(str(root))
    installed = package_dir()
    if how == sandbox.OWN_USER and installed.parent.name in ("site-packages", "dist-packages"):
        installed.chmod(0o700)  # a copy without the solutions is what a command imports
        closed.append(_("{path} (the course's solutions)").format(path=installed))
    elif how == sandbox.OWN_USER:
        warning = _(
            "the course's package at {path} is a source checkout, left readable: an "
            "answer could read the solutions there"
        )
        warning = "; " + warning.format(path=installed)
    return closed, warning


def grade_submission(
    folder: Path,
    points: dict,
    limits: Limits,
    how: str,
    grades: list[Grade] | None = None,
    files: dict[str, str] | None = None,
) -> tuple[list[Grade], list[str], dict[str, str]]:
    """Grade the notebooks of `points` found in one student's `folder`: (grades, what was not
    graded and why, {notebook: the file graded as it}). `grades` and `files`, when given, are
    filled as each notebook is done (what a deadline finds there is graded)."""
    skipped: list[str] = []
    copies = notebooks_in(folder, folder.parent, skipped) if folder.is_dir() else {}
    grades = [] if grades is None else grades
    files = {} if files is None else files
    work = Path(tempfile.mkdtemp(prefix="vitcourse-autograder-"))
    try:
        for notebook in points:
            names = [n for n in graded_by_notebook()[notebook] if n in points[notebook]]
            if notebook not in copies:
                grades += [
                    Grade("student", notebook, n, "not attempted", _(NOT_HANDED_IN)) for n in names
                ]
                continue
            newest = max(copies[notebook], key=lambda p: p.lstat().st_mtime)
            files[notebook] = str(newest.relative_to(folder))
            older = _("{path}: an older copy of {notebook}")
            skipped += [
                older.format(path=p.relative_to(folder), notebook=notebook)
                for p in copies[notebook]
                if p != newest
            ]
            try:
                data = read_submission(newest)
            except OSError as e:
                why = _("{file} could not be read: {error}").format(file=newest.name, error=e)
                grades += [Grade("student", notebook, n, "error", why) for n in names]
                continue
            graded = grade_notebook(
                "student", notebook, data, work / "out", limits, isolation=how, work=work
            )
            grades += [g for g in graded if g.exercise in names]  # what points.json grades
    finally:
        sandbox.remove_tree(work)
    return grades, skipped, files


def not_graded(grades: list[Grade], points: dict, budget: float) -> list[Grade]:
    """The exercises of `points` that `grades` do not hold yet, each a `timeout` of the budget."""
    done = {(g.notebook, g.exercise) for g in grades}
    why = _("the grading ran past the {seconds:.0f} s the platform gives it")
    why = why.format(seconds=budget)
    return [
        Grade("student", notebook, name, "timeout", why)
        for notebook in points
        for name in graded_by_notebook()[notebook]
        if name in points[notebook] and (notebook, name) not in done
    ]


def grade_on(
    platform: str,
    root: Path,
    points_path: Path,
    limits: Limits,
    isolation: str = "auto",
    budget: float | None = None,
) -> int:
    """Grade one submission in the platform's layout under `root` and write its results.json,
    whatever happens; 0 when the grading ran, 1 when the grader itself failed. `budget`: the
    seconds the platform gives the job; when they run out, the exercises not yet graded are a
    `timeout`, results.json is written, and the process ends (its sandboxes die with it)."""
    start, lock = time.monotonic(), threading.Lock()
    results, written = root / "results", []
    now = {"grades": [], "points": {}, "skipped": [], "isolation": "", "closed": [], "files": {}}

    def so_far(**changes) -> platforms.Run:  # the run as it stands now, with `changes`
        seconds = time.monotonic() - start
        return platforms.Run(
            **(now | {"edition": platforms.edition(), "seconds": seconds} | changes)
        )

    def finish(ran: platforms.Run) -> bool:  # the first to come writes results.json
        with lock:
            if written:
                return False
            written.append(ran)
        platforms.write_json(PLATFORMS[platform].results(ran), results / "results.json")
        print(platforms.summary(ran), flush=True)
        return True

    def out_of_time() -> None:
        grades = list(now["grades"]) + not_graded(now["grades"], now["points"], budget)
        files = dict(now["files"])
        if finish(so_far(grades=grades, skipped=[], files=files)):
            from vitcourse.classroom.sandbox_user import clear_up_all

            clear_up_all()  # bubblewrap's sandboxes die with the grader; a user of its own does not
            os._exit(0)

    if budget:
        timer = threading.Timer(budget, out_of_time)
        timer.daemon = True
        timer.start()
    try:
        results.mkdir(parents=True, exist_ok=True)
        now["points"] = points = read_points(points_path)
        how, isolation = choose_isolation(isolation)
        closed, warning = close_grader_files(root, how)
        now["isolation"], now["closed"] = isolation + warning, closed
        folder = root / PLATFORMS[platform].submission
        _, now["skipped"], _ = grade_submission(
            folder, points, limits, how, now["grades"], now["files"]
        )
        ran, status = so_far(), 0
    except Exception as e:  # noqa: BLE001 - the grader's fault, said in the results
        failed = f"{type(e).__name__}: {e}"
        ran = platforms.Run([], {}, [], "", [], {}, time.monotonic() - start, failed=failed)
        status = 1
    finish(ran)
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vitcourse.classroom.autograder",
        description="The course's grader for Gradescope and PrairieLearn.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, platform in PLATFORMS.items():
        build = commands.add_parser(name, help=f"make {platform.about}")
        build.add_argument("--notebooks", nargs="*", help="names or numbers (default: all)")
        build.add_argument("--out", type=Path, default=Path(platform.bundle), help=platform.bundle)
        if platform.image:
            build.add_argument(
                "--image", default=platform.image, help="the image's name as the platform pulls it"
            )
    for name, platform in PLATFORMS.items():
        grade = commands.add_parser(
            f"grade-{name}", help=f"grade one submission in {platform.root}"
        )
        root = os.environ.get(platform.variable, platform.root)
        grade.add_argument("--root", type=Path, default=Path(root))
        grade.add_argument("--default-points", type=Path, help="points.json if the root has none")
        grade.add_argument("--timeout", type=float, help="seconds per notebook")
        budget = f" ({platform.budget:.0f})" if platform.budget else ""
        grade.add_argument(
            "--budget",
            type=float,
            help="seconds the platform gives the job: then results.json is written, what is not "
            f"graded a timeout{budget}",
        )
        grade.add_argument(
            "--isolation",
            default="auto",
            choices=("auto", "bubblewrap", "own-user", "none"),
            help="auto: bubblewrap's sandbox, else a user of its own (root only); none: a trial on "
            "your own files only",
        )
        grade.add_argument(
            "--language",
            help=f"the language of the results: {' or '.join(LANGUAGES)} (default: "
            "VITCOURSE_LANG's, else en)",
        )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command in PLATFORMS:
        notebooks = bundles.pick_notebooks(args.notebooks)
        options = {"image": args.image} if PLATFORMS[args.command].image else {}
        made = bundles.BUILDERS[args.command](notebooks, args.out, **options)
        print(f"{made}: {', '.join(notebooks)} (next steps: docs/teachers.md)")
        return 0
    speak(parser, args.language)  # the results, and the sandboxes, in that language
    platform = PLATFORMS[args.command.removeprefix("grade-")]
    own = args.root / platform.points
    points = own if own.exists() or args.default_points is None else args.default_points
    limits = platform.limits
    if args.timeout:
        limits = Limits(args.timeout, limits.cell, limits.check, limits.memory_gb)
    budget = args.budget or platform.budget
    return grade_on(
        args.command.removeprefix("grade-"), args.root, points, limits, args.isolation, budget
    )


if __name__ == "__main__":
    sys.exit(main())
