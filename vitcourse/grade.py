"""Grade a class: run every student's notebooks and check each exercise.

    python -m vitcourse.grade SUBMISSIONS --out OUT [--timeout SECONDS] [--jobs N]

SUBMISSIONS holds one folder per student, as a teacher collects them:
`SUBMISSIONS/<student>/01_patches.ipynb`, ... A file is matched to a course notebook by its name,
or by its two-digit number when a download renamed it (`01_patches (1).ipynb`); of several copies
the newest is graded.

Each notebook runs in a fresh kernel, in its own process (`vitcourse.grade_worker`) with time
limits (the notebook, each cell, each check) and, on Linux, a memory limit, from a temporary
folder: submissions are only read. It runs in quick mode (small data, one epoch) on the CPU, like the tests: grading is about
the exercises. Exercises are found by what the student's cells define (`def patchify`,
`class MultiHeadSelfAttention`), not by cell ids, so a deleted, duplicated or moved cell does not
matter: after each defining cell the grader keeps what the name holds, and after the run it calls
each exercise's check (`vitcourse.checks.grade`) itself on that.

OUT receives `grades.csv` (student, notebook, exercise, status, hint), `feedback/<student>.md`,
`summary.md` (per exercise: how many passed, the most common mistakes) and `executed/`, each
notebook as it ran, outputs and all. Status is one of: passed, wrong, not attempted, error, timeout.

The grader runs student code: run it on submissions you trust, or inside a container."""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, astuple, dataclass, fields
from pathlib import Path

from tqdm.auto import tqdm

from vitcourse.checks import EXERCISES

STATUSES = ("passed", "wrong", "not attempted", "error", "timeout")
KERNEL_SECONDS = 60  # allowance for starting and stopping a kernel


@dataclass(frozen=True)
class Limits:
    """What one submitted notebook may take."""

    notebook: float = 600  # seconds for all its cells
    cell: float = 120  # seconds for one cell (an endless loop costs this, then the rest runs)
    check: float = 30  # seconds for one exercise's check when the grader calls it
    memory_gb: float = 8  # address space of its worker and of its kernel, each (Linux)


@dataclass(frozen=True)
class Grade:
    """One row of grades.csv."""

    student: str
    notebook: str
    exercise: str
    status: str
    hint: str = ""


def exercises_by_notebook() -> dict[str, list[str]]:
    """{notebook name (no .ipynb): [its exercises, in order]} for the notebooks with exercises."""
    notebooks: dict[str, list[str]] = {}
    for exercise in EXERCISES.values():
        notebooks.setdefault(exercise.notebook, []).append(exercise.name)
    return notebooks


def match_notebook(filename: str) -> str | None:
    """The course notebook (with exercises) a submitted file is, by name or by its number."""
    stem = Path(filename).stem
    notebooks = exercises_by_notebook()
    if stem in notebooks:
        return stem
    number = re.match(r"\d\d(?!\d)", stem)
    candidates = [name for name in notebooks if number and name.startswith(number.group() + "_")]
    return candidates[0] if len(candidates) == 1 else None


def _ignored(path: Path) -> bool:
    """Files no teacher means to hand in: hidden ones, macOS archive leftovers, checkpoints."""
    return any(
        part.startswith(".") or part in ("__MACOSX", ".ipynb_checkpoints") for part in path.parts
    )


def find_submissions(root: Path) -> tuple[dict[str, dict[str, Path]], list[str]]:
    """Walk SUBMISSIONS: ({student: {notebook: path}}, [what was skipped, and why]).

    Where a student's folder holds several copies of one notebook (`01_patches.ipynb`,
    `01_patches (1).ipynb`, an `old/` folder), the most recently modified one is graded and the
    others are reported."""
    if not root.is_dir():
        raise FileNotFoundError(f"expected a folder of student folders, got {root}")
    students: dict[str, dict[str, Path]] = {}
    skipped = []
    for entry in sorted(root.iterdir()):
        if _ignored(entry.relative_to(root)):
            continue
        if not entry.is_dir():
            skipped.append(f"{entry.name}: not a student folder (expected SUBMISSIONS/<student>/)")
            continue
        copies: dict[str, list[Path]] = {}
        for path in sorted(entry.rglob("*")):
            if not path.is_file() or _ignored(path.relative_to(root)):
                continue
            notebook = match_notebook(path.name) if path.suffix == ".ipynb" else None
            if notebook is None:
                skipped.append(f"{path.relative_to(root)}: not a course notebook with exercises")
            else:
                copies.setdefault(notebook, []).append(path)
        students[entry.name] = {}
        for notebook, paths in sorted(copies.items()):
            newest = max(paths, key=lambda p: p.stat().st_mtime)
            students[entry.name][notebook] = newest
            for other in paths:
                if other != newest:
                    skipped.append(
                        f"{other.relative_to(root)}: an older copy of {notebook}; graded "
                        f"{newest.relative_to(root)}"
                    )
    return students, skipped


# --- the class, in the teacher's process -------------------------------------------------------


def grade_notebook(
    student: str,
    notebook: str,
    path: Path,
    out: Path,
    limits: Limits = Limits(),
    quick: bool = True,
) -> list[Grade]:
    """Grade one submitted notebook in its own process; never raises for the student's faults."""
    names = exercises_by_notebook()[notebook]
    with tempfile.TemporaryDirectory(prefix="vitcourse-grade-") as tmp:
        result, kernel = Path(tmp) / "result.json", Path(tmp) / "kernel.pid"
        executed = out / "executed" / student / f"{notebook}.ipynb"
        command = [sys.executable, "-m", "vitcourse.grade_worker", str(path), str(result),
                   str(executed), str(kernel), json.dumps(asdict(limits))]  # fmt: skip
        env = dict(os.environ, VITCOURSE_QUICK="1" if quick else "0", MPLBACKEND="Agg")
        env["VITCOURSE_PROGRESS"] = str(Path(tmp) / "progress.json")  # not the teacher's file
        env["CUDA_VISIBLE_DEVICES"] = ""  # grade on the CPU: the same everywhere, and capped
        process = subprocess.Popen(
            command,
            env=env,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, stopped as one
        )
        try:
            most = limits.notebook + KERNEL_SECONDS + limits.check * len(names)
            _, stderr = process.communicate(timeout=most)
        except subprocess.TimeoutExpired:
            _stop(process, kernel)
            why = f"the notebook ran past its {limits.notebook:.0f} s"
            return [Grade(student, notebook, name, "timeout", why) for name in names]
        _stop(process, kernel)  # a kernel left behind, if any
        if process.returncode != 0 or not result.exists():
            last = (stderr.strip().splitlines() or ["no message"])[-1]
            why = f"the grader's process for this notebook failed: {last}"
            return [Grade(student, notebook, name, "error", why) for name in names]
        graded = json.loads(result.read_text())
    return [Grade(student, notebook, name, *graded[name]) for name in names]


def _stop(process: subprocess.Popen, kernel: Path) -> None:
    """Stop a worker, its process group, and its kernel (which runs in a session of its own)."""
    pids = [int(kernel.read_text())] if kernel.exists() and kernel.read_text().isdigit() else []
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (AttributeError, ProcessLookupError, PermissionError):  # gone already, or not POSIX
        if process.poll() is None:
            process.kill()
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    process.wait()


def _one_line(text: str) -> str:
    """A check's message on one line, for a Markdown list: "...: problem. Hint: ..."."""
    return " ".join(text.replace("\nHint: ", ". Hint: ").split())


def write_reports(grades: list[Grade], skipped: list[str], out: Path) -> str:
    """Write grades.csv, feedback/<student>.md and summary.md; return the summary's text."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "grades.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([field.name for field in fields(Grade)])
        writer.writerows(astuple(g) for g in grades)
    marks = {"passed": "✓", "wrong": "✗", "error": "✗", "timeout": "⏱", "not attempted": "·"}
    (out / "feedback").mkdir(exist_ok=True)
    for student in sorted({g.student for g in grades}):
        mine = [g for g in grades if g.student == student]
        passed = sum(g.status == "passed" for g in mine)
        lines = [f"# Feedback for {student}", "", f"{passed} of {len(mine)} exercises passed.", ""]
        for notebook in dict.fromkeys(g.notebook for g in mine):
            lines += [f"## {notebook}", ""]
            for g in (g for g in mine if g.notebook == notebook):
                lines.append(f"- {marks[g.status]} **{g.exercise}**: {g.status}")
                if g.hint:
                    lines.append(f"  - {_one_line(g.hint)}")
            lines.append("")
        (out / "feedback" / f"{student}.md").write_text("\n".join(lines))
    summary = summarise(grades, skipped)
    (out / "summary.md").write_text(summary)
    return summary


def summarise(grades: list[Grade], skipped: list[str] = ()) -> str:
    """The class summary: per exercise, how many passed and the most common mistakes."""
    students = sorted({g.student for g in grades})
    lines = [f"# Class summary: {len(students)} students", ""]
    lines += ["| exercise | notebook | passed | wrong | not attempted | error | timeout |"]
    lines += ["|---|---|---|---|---|---|---|"]
    order = list(EXERCISES)
    by_exercise = collections.defaultdict(list)
    for g in grades:
        by_exercise[g.exercise].append(g)
    for name in sorted(by_exercise, key=order.index):
        counts = collections.Counter(g.status for g in by_exercise[name])
        lines.append(
            f"| {name} | {EXERCISES[name].notebook} | {counts['passed']} of "
            f"{len(by_exercise[name])} | " + " | ".join(str(counts[s]) for s in STATUSES[1:]) + " |"
        )
    lines += ["", "## Most common mistakes", ""]
    for name in sorted(by_exercise, key=order.index):
        hints = collections.Counter(
            _one_line(g.hint.split("Hint: ")[-1]) for g in by_exercise[name] if g.status == "wrong"
        )
        for hint, count in hints.most_common(3):
            lines.append(f"- **{name}** ({count} student{'s' if count > 1 else ''}): {hint}")
    if skipped:
        lines += ["", "## Skipped", ""] + [f"- {s}" for s in skipped]
    return "\n".join(lines) + "\n"


def grade_class(
    submissions: Path,
    out: Path,
    limits: Limits = Limits(),
    jobs: int = 1,
    quick: bool = True,
    notebooks: list[str] | None = None,
) -> tuple[list[Grade], list[str]]:
    """Grade every submission; write the reports; return (grades, skipped files).

    `notebooks`: the notebooks handed out (default: every one any student handed in); a student
    without one gets its exercises as "not attempted", with the hint "not handed in"."""
    submissions, out = Path(submissions).resolve(), Path(out).resolve()  # the workers run elsewhere
    students, skipped = find_submissions(submissions)
    for message in skipped:
        print(f"skipped {message}")
    expected = notebooks or sorted({nb for handed in students.values() for nb in handed})
    for folder in ("executed", "feedback"):  # the grader's own outputs of an earlier run
        shutil.rmtree(out / folder, ignore_errors=True)
    grades: list[Grade] = []
    left = {student: len(handed) for student, handed in students.items()}
    with (
        ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
        tqdm(total=len(students), desc="grading", unit="student") as bar,
    ):
        futures = {
            pool.submit(grade_notebook, student, notebook, path, out, limits, quick): student
            for student, handed in students.items()
            for notebook, path in handed.items()
        }
        bar.update(sum(1 for n in left.values() if n == 0))  # students with nothing to run
        for future in as_completed(futures):
            grades += future.result()
            left[futures[future]] -= 1
            bar.update(left[futures[future]] == 0)
    for student, handed in students.items():
        for notebook in expected:
            if notebook not in handed:
                grades += [
                    Grade(student, notebook, name, "not attempted", "not handed in")
                    for name in exercises_by_notebook()[notebook]
                ]
    order = list(EXERCISES)
    grades.sort(key=lambda g: (g.student, order.index(g.exercise)))
    write_reports(grades, skipped, out)
    return grades, skipped


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vitcourse.grade",
        description="Run every student's notebooks and check their exercises.",
    )
    parser.add_argument("submissions", type=Path, help="a folder with one folder per student")
    parser.add_argument("--out", type=Path, required=True, help="folder for grades and reports")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per notebook (600)")
    parser.add_argument("--cell-timeout", type=float, default=120, help="seconds per cell (120)")
    parser.add_argument("--check-timeout", type=float, default=30, help="seconds per check (30)")
    parser.add_argument("--memory", type=float, default=8, help="GB per notebook, Linux (8)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once (1)")
    parser.add_argument(
        "--notebooks",
        help="the notebooks handed out, e.g. 01_patches,03_attention (default: all handed in)",
    )
    parser.add_argument("--full", action="store_true", help="run in full mode, not quick mode")
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    limits = Limits(args.timeout, args.cell_timeout, args.check_timeout, args.memory)
    notebooks = args.notebooks.split(",") if args.notebooks else None
    unknown = [n for n in notebooks or [] if n not in exercises_by_notebook()]
    if unknown:
        parser.error(
            f"--notebooks: {', '.join(unknown)} not among the notebooks with exercises "
            f"({', '.join(exercises_by_notebook())})"
        )
    try:
        grades, skipped = grade_class(
            args.submissions, args.out, limits, args.jobs, not args.full, notebooks
        )
    except FileNotFoundError as e:
        parser.exit(2, f"error: {e}\n")
    print(summarise(grades, skipped))
    print(f"{len(grades)} grades in {args.out / 'grades.csv'}, feedback in {args.out / 'feedback'}")


if __name__ == "__main__":
    main()
