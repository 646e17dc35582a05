"""Grading where schools grade: the course's grader as a Gradescope autograder and a PrairieLearn
external grader.

    python -m vitcourse.classroom.autograder gradescope --notebooks 01 03 --out autograder.zip
    python -m vitcourse.classroom.autograder prairielearn --notebooks 03 --out grader/

The first makes the zip Gradescope's "Autograder" upload takes (`setup.sh`, `run_autograder`); the
second a folder to build PrairieLearn's grader image from (`Dockerfile`, `entrypoint`) with an
example question for each notebook (`questions/`). Both hold the course itself at this edition
(its package, data, requirements and `constraints.txt`), `install.sh`, which installs it, and
`points.json`, the points of each exercise (1 by default), which a teacher may edit. Their scripts
are in `vitcourse/classroom/platform_files/`.

In the platform's container, for each submission, the scripts call

    python -m vitcourse.classroom.autograder grade-gradescope    # /autograder/submission/
    python -m vitcourse.classroom.autograder grade-prairielearn  # /grade/student/

which grade each notebook found as `python -m vitcourse.grade` does
(`vitcourse.classroom.grading.grade_notebook`) and write the platform's `results.json`
(`vitcourse.classroom.platforms`). The student's code runs in bubblewrap's sandbox where the
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
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

import vitcourse
from vitcourse.classroom import platforms, sandbox
from vitcourse.classroom.grade import notebooks_in, read_submission, speak
from vitcourse.classroom.gradebook import NOT_HANDED_IN, Grade
from vitcourse.classroom.grading import exercises_by_notebook, grade_notebook, match_notebook
from vitcourse.classroom.sandbox import Limits
from vitcourse.classroom.sandbox_bubblewrap import package_dir
from vitcourse.language import LANGUAGES, _

FILES = Path(__file__).resolve().parent / "platform_files"
COURSE = package_dir().parent  # the checkout the bundles copy the course from
SCRIPTS = ("install.sh", "setup.sh", "run_autograder", "entrypoint")  # executable in the bundles
COURSE_FILES = ("pyproject.toml", "README.md", "requirements.txt", "constraints.txt", "LICENSE")
PLATFORMS = {  # where each platform puts the submission, and the environment variable that moves it
    "gradescope": ("/autograder", "VITCOURSE_GRADESCOPE_ROOT"),
    "prairielearn": ("/grade", "VITCOURSE_PRAIRIELEARN_ROOT"),
}
# PrairieLearn kills a grading job after its question's timeout, at most 600 s, and then shows no
# results. The notebook's limits are shorter there, and the grader writes results.json itself when
# its budget is spent, 30 s before the timeout: what is not graded by then is a `timeout`.
PRAIRIELEARN_TIMEOUT = 600
PRAIRIELEARN_BUDGET = PRAIRIELEARN_TIMEOUT - 30
PRAIRIELEARN_LIMITS = Limits(notebook=240, cell=90, check=20)


# --- the bundles -------------------------------------------------------------------------------


def pick_notebooks(asked: list[str] | None) -> list[str]:
    """Course notebooks from names or numbers (`01`, `03_attention`); all with exercises if none."""
    if not asked:
        return list(exercises_by_notebook())
    found = {a: match_notebook(a if a.endswith(".ipynb") else a + ".ipynb") for a in asked}
    unknown = [a for a, notebook in found.items() if notebook is None]
    if unknown:
        raise ValueError(
            f"--notebooks: {', '.join(unknown)} is not a course notebook with exercises; "
            f"expected one of {', '.join(exercises_by_notebook())} (or its number)"
        )
    return list(dict.fromkeys(found.values()))


def copy_course(target: Path) -> dict:
    """The course at this edition into `target`: the package (no caches), the data, what installs
    it. Returns the edition: the package's version and, from a git checkout, its commit."""
    from vitcourse.environment import default_root

    missing = [n for n in ("pyproject.toml", "requirements.txt", "constraints.txt")
               if not (COURSE / n).exists()]  # fmt: skip
    if missing or not default_root().is_dir():
        raise FileNotFoundError(
            f"the bundles are made from a clone of the course (git clone "
            f"https://github.com/vitcourse/vitcourse), with its data; {COURSE} has no "
            f"{', '.join(missing) or 'data folder at ' + str(default_root())}"
        )
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(package_dir(), target / "vitcourse", ignore=ignore)
    shutil.copytree(default_root(), target / "data", ignore=ignore)
    for name in COURSE_FILES:
        if (COURSE / name).exists():
            shutil.copy2(COURSE / name, target / name)
    edition = {"version": vitcourse.__version__, "commit": None}
    git = ["git", "-C", str(COURSE)]
    try:
        commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()  # fmt: skip
        changed = subprocess.run([*git, "status", "--porcelain", "--", "vitcourse", "data"],
                                 capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
        edition["commit"] = commit + (" with local changes" if changed else "")
    except (OSError, subprocess.CalledProcessError):
        pass  # an installed course, not a checkout
    return edition


def _common(target: Path, notebooks: list[str]) -> None:
    """What both bundles hold: the course, install.sh, points.json and the edition."""
    edition = copy_course(target / "course")
    shutil.copy2(FILES / "install.sh", target / "install.sh")
    points = {nb: {name: 1 for name in exercises_by_notebook()[nb]} for nb in notebooks}
    (target / "points.json").write_text(json.dumps(points, indent=2) + "\n")
    (target / "edition.json").write_text(json.dumps(edition) + "\n")


def build_gradescope(notebooks: list[str], out: Path) -> Path:
    """The zip for Gradescope's autograder upload: setup.sh and run_autograder at its top."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _common(folder, notebooks)
        for name in ("setup.sh", "run_autograder"):
            shutil.copy2(FILES / "gradescope" / name, folder / name)
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    info = zipfile.ZipInfo.from_file(path, path.relative_to(folder).as_posix())
                    info.external_attr = (0o755 if path.name in SCRIPTS else 0o644) << 16
                    bundle.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    return out


def build_prairielearn(notebooks: list[str], out: Path, image: str) -> Path:
    """A folder to build the grader's image from, and an example question per notebook."""
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(
            f"--out: expected a new or empty folder, got {out}, which holds files"
        )
    out.mkdir(parents=True, exist_ok=True)
    _common(out, notebooks)
    for name in ("Dockerfile", "entrypoint"):
        shutil.copy2(FILES / "prairielearn" / name, out / name)
    for name in ("install.sh", "entrypoint"):
        (out / name).chmod(0o755)  # whatever the installed package's copies kept
    for notebook in notebooks:
        question = out / "questions" / f"vitcourse_{notebook}"
        (question / "tests").mkdir(parents=True)
        (question / "info.json").write_text(
            json.dumps(platforms.question_info(notebook, image, PRAIRIELEARN_TIMEOUT), indent=2)
            + "\n"
        )
        (question / "question.html").write_text(platforms.question_html(notebook))
        points = {notebook: {name: 1 for name in exercises_by_notebook()[notebook]}}
        (question / "tests" / "points.json").write_text(json.dumps(points, indent=2) + "\n")
    return out


# --- grading in the platform's container -------------------------------------------------------


def read_points(path: Path) -> dict[str, dict[str, float]]:
    """{notebook: {exercise: points}} from a points.json, checked: every notebook and exercise a
    course one, every value a number of points from 0 up."""
    try:
        points = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: expected a JSON file of points, could not read it ({e})") from e
    known = exercises_by_notebook()
    if not isinstance(points, dict) or not points:
        raise ValueError(f"{path}: expected {{notebook: {{exercise: points}}}}, got {points!r:.80}")
    for notebook, marks in points.items():
        if notebook not in known or not isinstance(marks, dict):
            raise ValueError(f"{path}: {notebook!r} is not a notebook with exercises "
                             f"({', '.join(known)}), or its value is not {{exercise: points}}")  # fmt: skip
        for name, value in marks.items():
            if name not in known[notebook]:
                raise ValueError(f"{path}: {notebook} has no exercise {name!r} "
                                 f"(it has {', '.join(known[notebook])})")  # fmt: skip
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"{path}: {notebook} {name}: expected points (0 or more), "
                                 f"got {value!r}")  # fmt: skip
    return points


def choose_isolation(wanted: str = "auto") -> tuple[str, str]:
    """(mode, what it means, for the results). `auto`: bubblewrap's sandbox where it works here,
    else a user of its own (the grader is root); `bubblewrap`, `own-user` or `none` (a trial
    only): that one, or an error saying why it cannot run here."""
    why = sandbox.bubblewrap() if wanted in ("auto", "bubblewrap") else "not asked for"
    if why is None:
        return sandbox.BUBBLEWRAP, _(platforms.ISOLATION[sandbox.BUBBLEWRAP])
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
            return sandbox.OWN_USER, _(platforms.ISOLATION[sandbox.OWN_USER]) + note
        why = f"{why}; {refused}"
    elif wanted in ("auto", "own-user"):
        why = f"{why}; a user of its own needs a grader run as root"
    raise RuntimeError(_("the grader cannot keep the student's code apart here: {why}")
                       .format(why=why))  # fmt: skip


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
        warning = _("the course's package at {path} is a source checkout, left readable: an "
                    "answer could read the solutions there")  # fmt: skip
        warning = "; " + warning.format(path=installed)
    return closed, warning


def grade_submission(
    folder: Path, points: dict, limits: Limits, how: str,
    grades: list[Grade] | None = None, files: dict[str, str] | None = None,
) -> tuple[list[Grade], list[str], dict[str, str]]:  # fmt: skip
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
            names = exercises_by_notebook()[notebook]
            if notebook not in copies:
                grades += [
                    Grade("student", notebook, n, "not attempted", _(NOT_HANDED_IN)) for n in names
                ]
                continue
            newest = max(copies[notebook], key=lambda p: p.lstat().st_mtime)
            files[notebook] = str(newest.relative_to(folder))
            older = _("{path}: an older copy of {notebook}")
            skipped += [older.format(path=p.relative_to(folder), notebook=notebook)
                        for p in copies[notebook] if p != newest]  # fmt: skip
            try:
                data = read_submission(newest)
            except OSError as e:
                why = _("{file} could not be read: {error}").format(file=newest.name, error=e)
                grades += [Grade("student", notebook, n, "error", why) for n in names]
                continue
            grades += grade_notebook("student", notebook, data, work / "out", limits,
                                     isolation=how, work=work)  # fmt: skip
    finally:
        sandbox.remove_tree(work)
    return grades, skipped, files


def grade_on(
    platform: str, root: Path, points_path: Path, limits: Limits, isolation: str = "auto",
    budget: float | None = None,
) -> int:  # fmt: skip
    """Grade one submission in the platform's layout under `root` and write its results.json,
    whatever happens; 0 when the grading ran, 1 when the grader itself failed. `budget`: the
    seconds the platform gives the job; when they run out, the exercises not yet graded are a
    `timeout`, results.json is written, and the process ends (its sandboxes die with it)."""
    start, lock = time.monotonic(), threading.Lock()
    results, written = root / "results", []
    now = {"grades": [], "files": {}, "points": {}, "isolation": "", "closed": []}

    def finish(ran: platforms.Run) -> bool:  # the first to come writes results.json
        with lock:
            if written:
                return False
            written.append(ran)
        made = (
            platforms.gradescope(ran) if platform == "gradescope" else platforms.prairielearn(ran)
        )
        platforms.write_json(made, results / "results.json")
        print(platforms.summary(ran), flush=True)
        return True

    def out_of_time() -> None:
        done = {(g.notebook, g.exercise) for g in now["grades"]}
        why = _("the grading ran past the {seconds:.0f} s the platform gives it")
        why = why.format(seconds=budget)
        pending = [Grade("student", nb, name, "timeout", why) for nb in now["points"]
                   for name in exercises_by_notebook()[nb] if (nb, name) not in done]  # fmt: skip
        if finish(platforms.Run(list(now["grades"]) + pending, now["points"], [], now["isolation"],
                                now["closed"], platforms.edition(), time.monotonic() - start,
                                files=dict(now["files"]))):  # fmt: skip
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
        folder = root / ("submission" if platform == "gradescope" else "student")
        grades, skipped, files = grade_submission(folder, points, limits, how, now["grades"],
                                                  now["files"])  # fmt: skip
        ran = platforms.Run(grades, points, skipped, isolation + warning, closed, platforms.edition(),
                            time.monotonic() - start, files=files)  # fmt: skip
        status = 0
    except Exception as e:  # noqa: BLE001 - the grader's fault, said in the results
        ran = platforms.Run([], {}, [], "", [], {}, time.monotonic() - start,
                            failed=f"{type(e).__name__}: {e}")  # fmt: skip
        status = 1
    finish(ran)
    return status


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vitcourse.classroom.autograder",
        description="The course's grader for Gradescope and PrairieLearn.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, what in (("gradescope", "the zip for Gradescope's autograder upload"),
                       ("prairielearn", "PrairieLearn's grader image folder and questions")):  # fmt: skip
        build = commands.add_parser(name, help=f"make {what}")
        build.add_argument("--notebooks", nargs="*", help="names or numbers (default: all)")
        default = "autograder.zip" if name == "gradescope" else "grader"
        build.add_argument("--out", type=Path, default=Path(default), help=f"({default})")
        if name == "prairielearn":
            build.add_argument("--image", default=f"vitcourse-grader:{vitcourse.__version__}",
                               help="the image's name as PrairieLearn will pull it")  # fmt: skip
    for name, (where, variable) in PLATFORMS.items():
        grade = commands.add_parser(f"grade-{name}", help=f"grade one submission in {where}")
        grade.add_argument("--root", type=Path, default=Path(os.environ.get(variable, where)))
        grade.add_argument("--default-points", type=Path, help="points.json if the root has none")
        grade.add_argument("--timeout", type=float, help="seconds per notebook")
        grade.add_argument("--budget", type=float, help="seconds the platform gives the job: then "
                           "results.json is written, what is not graded a timeout"
                           + (f" ({PRAIRIELEARN_BUDGET:.0f})" if name == "prairielearn" else ""))  # fmt: skip
        grade.add_argument("--isolation", default="auto",
                           choices=("auto", "bubblewrap", "own-user", "none"),
                           help="auto: bubblewrap's sandbox, else a user of its own (root only); "
                           "none: a trial on your own files only")  # fmt: skip
        grade.add_argument("--language", help="the language of the results: "
                           f"{' or '.join(LANGUAGES)} (default: VITCOURSE_LANG's, else en)")  # fmt: skip
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.command in ("gradescope", "prairielearn"):
        notebooks = pick_notebooks(args.notebooks)
        if args.command == "gradescope":
            made = build_gradescope(notebooks, args.out)
        else:
            made = build_prairielearn(notebooks, args.out, args.image)
        print(f"{made}: {', '.join(notebooks)} (next steps: docs/teachers.md)")
        return 0
    speak(parser, args.language)  # the results, and the sandboxes, in that language
    platform = args.command.removeprefix("grade-")
    root = args.root
    own = root / ("source/points.json" if platform == "gradescope" else "tests/points.json")
    points = own if own.exists() or args.default_points is None else args.default_points
    limits = Limits() if platform == "gradescope" else PRAIRIELEARN_LIMITS
    if args.timeout:
        limits = Limits(args.timeout, limits.cell, limits.check, limits.memory_gb)
    budget = args.budget or (PRAIRIELEARN_BUDGET if platform == "prairielearn" else None)
    return grade_on(platform, root, points, limits, args.isolation, budget)


if __name__ == "__main__":
    sys.exit(main())
