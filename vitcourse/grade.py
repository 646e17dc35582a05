"""Grade a class: run every student's notebooks and check each exercise.

    python -m vitcourse.grade SUBMISSIONS --out OUT [--timeout SECONDS] [--jobs N]

SUBMISSIONS holds one folder per student, as a teacher collects them:
`SUBMISSIONS/<student>/01_patches.ipynb`, ... A file is matched to a course notebook by its name,
or by its two-digit number when a download renamed it (`01_patches (1).ipynb`).

Each notebook runs in a fresh kernel, in its own process with a time limit (and a memory limit
where the operating system offers one), from a temporary folder: submissions are only read. The
notebook runs in quick mode (small data, one epoch), like the tests: grading is about the
exercises. Exercises are found by what the student's cells define (`def patchify`,
`class MultiHeadSelfAttention`), not by cell ids, so a deleted, duplicated or moved cell does not
matter; after the run the grader calls each exercise's check (`vitcourse.checks.grade`) itself on
the student's last definition.

OUT receives `grades.csv` (student, notebook, exercise, status, hint), `feedback/<student>.md`,
`summary.md` (per exercise: how many passed, the most common mistakes) and `executed/`, each
notebook as it ran, outputs and all. Status is one of: passed, wrong, not attempted, error, timeout.

The grader runs student code: run it on submissions you trust, or inside a container.
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
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
    memory_gb: float = 8  # address space of its process and kernel, where the OS can cap it


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


def find_submissions(root: Path) -> tuple[list[tuple[str, str, Path]], list[str]]:
    """Walk SUBMISSIONS: ([(student, notebook, path)], [what was skipped, and why])."""
    if not root.is_dir():
        raise FileNotFoundError(f"expected a folder of student folders, got {root}")
    found, skipped = [], []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if not entry.is_dir():
            skipped.append(f"{entry.name}: not a student folder (expected SUBMISSIONS/<student>/)")
            continue
        chosen: dict[str, Path] = {}
        for path in sorted(entry.rglob("*")):
            if not path.is_file() or ".ipynb_checkpoints" in path.parts:
                continue
            where = f"{entry.name}/{path.relative_to(entry)}"
            notebook = match_notebook(path.name) if path.suffix == ".ipynb" else None
            if notebook is None:
                skipped.append(f"{where}: not a course notebook with exercises")
            elif notebook in chosen and path.stem != notebook:
                skipped.append(
                    f"{where}: a second copy of {notebook}; graded {chosen[notebook].name}"
                )
            else:
                if notebook in chosen:  # the exact name wins over a renamed copy
                    skipped.append(
                        f"{entry.name}/{chosen[notebook].name}: a second copy of {notebook}; "
                        f"graded {path.name}"
                    )
                chosen[notebook] = path
        if not chosen:
            skipped.append(f"{entry.name}/: no course notebook inside")
        found += [(entry.name, notebook, path) for notebook, path in sorted(chosen.items())]
    return found, skipped


# --- one notebook, in the worker process -------------------------------------------------------


def _defined(source: str, names: list[str]) -> list[str]:
    """The exercises a cell defines at its top level (`def name` or `class name`). A regular
    expression, not a parser, so that a cell with a syntax error still counts as the definition."""
    defined = re.findall(r"^(?:async\s+def|def|class)\s+([A-Za-z_]\w*)", source, flags=re.M)
    return [name for name in names if name in defined]


def _error(cell) -> str | None:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return f"{output['ename']}: {output['evalue']}".strip()
    return None


def run_and_check(path: Path, executed: Path | None, limits: Limits = Limits()) -> dict:
    """Run one notebook in a fresh kernel and check its exercises: {exercise: [status, hint]}."""
    import nbformat
    from nbclient import NotebookClient

    names = exercises_by_notebook()[match_notebook(path.name)]
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # noqa: BLE001 - not JSON, not a notebook: say so for every exercise
        return {name: ["error", f"the file is not a readable notebook: {e}"] for name in names}
    timeout, check_timeout = limits.notebook, limits.check
    deadline = time.monotonic() + timeout
    seconds: dict[int, float] = {}  # id(cell) -> its time limit, read by nbclient
    client = NotebookClient(
        nb,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=True,
        timeout_func=lambda cell: seconds.get(id(cell), check_timeout),
        resources={"metadata": {"path": tempfile.mkdtemp(prefix="vitcourse-grade-")}},
    )
    # Per exercise: the outcome of its last definition ("ok", "timeout" or an error message).
    definition: dict[str, str] = {}
    results: dict[str, list[str]] = {}
    extra: list = []  # the grader's own cells, removed before the notebook is saved

    def run(source: str) -> tuple[object, bool]:
        """Run extra code in the kernel: (the cell, whether it timed out)."""
        cell = nbformat.v4.new_code_cell(source)
        nb.cells.append(cell)
        extra.append(cell)
        seconds[id(cell)] = check_timeout
        start = time.monotonic()
        client.execute_cell(cell, len(nb.cells) - 1)
        return cell, time.monotonic() - start >= check_timeout - 1

    cells = list(nb.cells)  # the student's cells, before the grader adds its own
    client.reset_execution_trackers()
    with client.setup_kernel():
        run("__vitcourse_defs__ = {}")
        for index, cell in enumerate(cells):
            if cell.cell_type != "code":
                continue
            left = deadline - time.monotonic()
            if left <= 0:
                break
            seconds[id(cell)] = max(1.0, min(left, limits.cell))
            start = time.monotonic()
            client.execute_cell(cell, index)
            timed_out = time.monotonic() - start >= seconds[id(cell)] - 1
            defined = _defined(cell.source, names)
            error = _error(cell)
            for name in defined:
                if timed_out:
                    definition[name] = "timeout"
                elif error and error.startswith(("SyntaxError", "IndentationError")):
                    definition[name] = error
                else:
                    definition[name] = "ok"
            if defined and not timed_out:  # keep them: a check cell may rebind the name
                run(
                    "\n".join(
                        f"if {n!r} in dir(): __vitcourse_defs__[{n!r}] = {n}" for n in defined
                    )
                )
        for name in names:
            if name not in definition:
                reached = time.monotonic() < deadline
                results[name] = (
                    ["not attempted", f"no cell defines {name}"]
                    if reached
                    else ["timeout", f"the notebook did not reach {name} in {timeout:.0f} s"]
                )
            elif definition[name] == "timeout":
                results[name] = ["timeout", f"the cell defining {name} ran past its time limit"]
            elif definition[name] != "ok":
                results[name] = ["error", definition[name]]
            else:
                cell, timed_out = run(
                    "import json as _json\nfrom vitcourse.checks import grade as _grade\n"
                    f"_result = (_grade({name!r}, __vitcourse_defs__[{name!r}]) "
                    f"if {name!r} in __vitcourse_defs__ else "
                    f"('error', 'its cell ran but did not define {name}'))\n"
                    "print('VITCOURSE-GRADE', _json.dumps(_result))"
                )
                printed = "".join(o.get("text", "") for o in cell.outputs if "text" in o)
                found = re.search(r"VITCOURSE-GRADE (.*)", printed)
                if timed_out:
                    results[name] = [
                        "timeout",
                        f"checking {name} took more than {check_timeout:.0f} s: an endless loop?",
                    ]
                elif found:
                    results[name] = json.loads(found.group(1))
                else:
                    results[name] = ["error", _error(cell) or "the check printed no result"]
    if executed is not None:
        nb.cells = [cell for cell in nb.cells if not any(cell is e for e in extra)]
        executed.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, executed)
    return results


# --- the class, in the teacher's process -------------------------------------------------------


def _limit_memory(gigabytes: float):
    """A preexec_fn capping the child's address space (Linux, macOS); None where not offered."""
    try:
        import resource
    except ImportError:  # Windows: no limit; use a container for untrusted classes
        return None

    def limit() -> None:
        cap = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    return limit


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
        result = Path(tmp) / "result.json"
        executed = out / "executed" / student / f"{notebook}.ipynb"
        command = [sys.executable, "-m", "vitcourse.grade", "--worker", str(path), str(result),
                   str(executed), json.dumps(asdict(limits))]  # fmt: skip
        env = dict(os.environ, VITCOURSE_QUICK="1" if quick else "0", MPLBACKEND="Agg")
        env["VITCOURSE_PROGRESS"] = str(Path(tmp) / "progress.json")  # not the teacher's file
        process = subprocess.Popen(
            command,
            env=env,
            cwd=tmp,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_limit_memory(limits.memory_gb),
            start_new_session=True,  # its own process group: a timeout stops the kernel too
        )
        try:
            most = limits.notebook + KERNEL_SECONDS + limits.check * len(names)
            _, stderr = process.communicate(timeout=most)
        except subprocess.TimeoutExpired:
            _stop(process)
            why = f"the notebook ran past its {limits.notebook:.0f} s"
            return [Grade(student, notebook, name, "timeout", why) for name in names]
        _stop(process)  # a kernel left behind, if any
        if process.returncode != 0 or not result.exists():
            last = (stderr.strip().splitlines() or ["no message"])[-1]
            why = (
                f"the notebook's process failed ({last}); "
                f"out of memory (limit {limits.memory_gb:g} GB)?"
            )
            return [Grade(student, notebook, name, "error", why) for name in names]
        graded = json.loads(result.read_text())
    return [Grade(student, notebook, name, *graded[name]) for name in names]


def _stop(process: subprocess.Popen) -> None:
    """Stop a worker and its kernel (its whole process group)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (AttributeError, ProcessLookupError, PermissionError):  # gone already, or not POSIX
        if process.poll() is None:
            process.kill()
    process.wait()


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
                    lines.append(f"  - {g.hint}")
            lines.append("")
        safe = re.sub(r"[^\w.-]+", "_", student)
        (out / "feedback" / f"{safe}.md").write_text("\n".join(lines))
    summary = summarise(grades, skipped)
    (out / "summary.md").write_text(summary)
    return summary


def summarise(grades: list[Grade], skipped: list[str] = ()) -> str:
    """The class summary: per exercise, how many passed and the most common mistakes."""
    students = sorted({g.student for g in grades})
    lines = [f"# Class summary: {len(students)} students, {len(grades)} exercises graded", ""]
    lines += ["| exercise | notebook | passed | wrong | not attempted | error | timeout |"]
    lines += ["|---|---|---|---|---|---|---|"]
    order = list(EXERCISES)
    by_exercise = collections.defaultdict(list)
    for g in grades:
        by_exercise[g.exercise].append(g)
    for name in sorted(by_exercise, key=order.index):
        counts = collections.Counter(g.status for g in by_exercise[name])
        handed_in = len(by_exercise[name])
        lines.append(
            f"| {name} | {EXERCISES[name].notebook} | {counts['passed']} of {handed_in} | "
            + " | ".join(str(counts[s]) for s in STATUSES[1:])
            + " |"
        )
    lines += ["", "## Most common mistakes", ""]
    for name in sorted(by_exercise, key=order.index):
        hints = collections.Counter(
            g.hint.split("Hint: ")[-1] for g in by_exercise[name] if g.status == "wrong"
        )
        for hint, count in hints.most_common(3):
            lines.append(f"- **{name}** ({count} student{'s' if count > 1 else ''}): {hint}")
    if skipped:
        lines += ["", "## Skipped", ""] + [f"- {s}" for s in skipped]
    return "\n".join(lines) + "\n"


def grade_class(
    submissions: Path, out: Path, limits: Limits = Limits(), jobs: int = 1, quick: bool = True
) -> tuple[list[Grade], list[str]]:
    """Grade every submission; write the reports; return (grades, skipped files)."""
    found, skipped = find_submissions(Path(submissions))
    for message in skipped:
        print(f"skipped {message}")
    grades: list[Grade] = []
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = [
            pool.submit(grade_notebook, student, notebook, path, Path(out), limits, quick)
            for student, notebook, path in found
        ]
        for future in tqdm(as_completed(futures), total=len(futures), desc="grading", unit="nb"):
            grades += future.result()
    order = list(EXERCISES)
    grades.sort(key=lambda g: (g.student, order.index(g.exercise)))
    write_reports(grades, skipped, Path(out))
    return grades, skipped


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:  # one notebook, in its own process (see grade_notebook)
        path, result, executed, limits = argv[1:]
        graded = run_and_check(Path(path), Path(executed), Limits(**json.loads(limits)))
        Path(result).write_text(json.dumps(graded))
        return
    parser = argparse.ArgumentParser(
        prog="python -m vitcourse.grade",
        description="Run every student's notebooks and check their exercises.",
    )
    parser.add_argument("submissions", type=Path, help="a folder with one folder per student")
    parser.add_argument("--out", type=Path, required=True, help="folder for grades and reports")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per notebook (600)")
    parser.add_argument("--cell-timeout", type=float, default=120, help="seconds per cell (120)")
    parser.add_argument("--memory", type=float, default=8, help="GB per notebook (8)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once (1)")
    parser.add_argument("--full", action="store_true", help="run in full mode, not quick mode")
    args = parser.parse_args(argv)
    limits = Limits(notebook=args.timeout, cell=args.cell_timeout, memory_gb=args.memory)
    try:
        grades, skipped = grade_class(args.submissions, args.out, limits, args.jobs, not args.full)
    except FileNotFoundError as e:
        parser.exit(2, f"error: {e}\n")
    print(summarise(grades, skipped))
    print(f"{len(grades)} grades in {args.out / 'grades.csv'}, feedback in {args.out / 'feedback'}")


if __name__ == "__main__":
    main()
