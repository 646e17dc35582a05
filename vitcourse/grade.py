"""Grade a class: run every student's notebooks and check each exercise.

    python -m vitcourse.grade SUBMISSIONS --out OUT [--timeout SECONDS] [--jobs N]

SUBMISSIONS holds one folder per student, as a teacher collects them:
`SUBMISSIONS/<student>/01_patches.ipynb`, ... A file is matched to a course notebook by its name,
or by its two-digit number when a download renamed it (`01_patches (1).ipynb`); of several copies
the newest is graded.

Each notebook runs in a fresh kernel, in its own process with time limits (the notebook, each
cell, each check) and, on Linux, a memory limit, from a temporary folder: submissions are only
read. It runs in quick mode (small data, one epoch) on the CPU, like the tests: grading is about
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
import secrets
import shutil
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


# --- one notebook, in the worker process -------------------------------------------------------


def _defined(source: str, names: list[str]) -> list[str]:
    """The exercises a cell defines (`def name` or `class name`, also inside an `if` or `try`).
    A regular expression, not a parser, so that a cell with a syntax error still counts."""
    defined = re.findall(r"^[ \t]*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)", source, flags=re.M)
    return [name for name in names if name in defined]


def _error(cell) -> tuple[str, str] | None:
    """(name, message) of the error a cell ended in, if any."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return output["ename"], f"{output['ename']}: {output['evalue']}".strip()
    return None


def _limit_memory(gigabytes: float) -> None:
    """Cap this process's address space (and so its kernel's, which inherits it): Linux; a no-op
    where the OS does not offer it or refuses."""
    try:
        import resource

        cap = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, ValueError, OSError):
        pass


def run_and_check(
    path: Path, executed: Path | None, limits: Limits = Limits(), kernel_pid: Path | None = None
) -> dict:
    """Run one notebook in a fresh kernel and check its exercises: {exercise: [status, hint]}.

    `kernel_pid`: a file to write the kernel's process id to, so a parent can stop it."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    names = exercises_by_notebook()[match_notebook(path.name)]
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # noqa: BLE001 - not JSON, not a notebook: say so for every exercise
        return {name: ["error", f"the file is not a readable notebook: {e}"] for name in names}
    deadline = time.monotonic() + limits.notebook
    seconds: dict[int, float] = {}  # id(cell) -> its time limit, read by nbclient
    marker = f"VITCOURSE-GRADE-{secrets.token_hex(8)}"  # a student cannot print it in advance
    folder = tempfile.TemporaryDirectory(prefix="vitcourse-grade-")
    client = NotebookClient(
        nb,
        kernel_name="python3",
        allow_errors=True,
        interrupt_on_timeout=True,
        timeout_func=lambda cell: seconds.get(id(cell), limits.check),
        resources={"metadata": {"path": folder.name}},
    )
    definition: dict[str, str] = {}  # exercise -> "ok", "timeout" or the error its cell hit
    results: dict[str, list[str]] = {}
    extra: list = []  # the grader's own cells, removed before the notebook is saved

    def execute(cell, index: int, limit: float) -> bool:
        """Run one cell within `limit` seconds; whether it ran out of time."""
        seconds[id(cell)] = limit
        start = time.monotonic()
        client.execute_cell(cell, index)
        error = _error(cell)
        return time.monotonic() - start >= limit or bool(error and error[0] == "KeyboardInterrupt")

    def run(source: str) -> tuple[object, bool]:
        """Run the grader's own code in the kernel: (its cell, whether it ran out of time)."""
        cell = nbformat.v4.new_code_cell(source)
        nb.cells.append(cell)
        extra.append(cell)
        return cell, execute(cell, len(nb.cells) - 1, limits.check)

    cells = list(nb.cells)  # the student's cells, before the grader adds its own
    died = None  # where the kernel stopped, if it did
    client.reset_execution_trackers()
    try:
        with client.setup_kernel():
            if kernel_pid is not None:
                kernel_pid.write_text(str(client.km.provisioner.process.pid))
            run("__vitcourse_defs__ = {}")
            for index, cell in enumerate(cells):
                if cell.cell_type != "code" or time.monotonic() >= deadline:
                    continue
                where = f"cell {index + 1}"
                died = where  # until it returns
                timed_out = execute(cell, index, min(deadline - time.monotonic(), limits.cell))
                died = None
                defined = _defined(cell.source, names)
                error = _error(cell)
                for name in defined:
                    if timed_out:
                        definition[name] = f"timeout:{where}"
                    elif error and error[0] in ("SyntaxError", "IndentationError", "TabError"):
                        definition[name] = f"{error[1]} ({where})"
                    else:
                        definition[name] = "ok"
                if defined and not timed_out:  # keep them: a check cell may rebind the name
                    run(
                        "".join(
                            f"try:\n    __vitcourse_defs__[{n!r}] = {n}\nexcept NameError:\n"
                            "    pass\n"
                            for n in defined
                        )
                    )
            reached = time.monotonic() < deadline
            for name in names:
                if name not in definition:
                    results[name] = (
                        ["not attempted", f"no cell defines {name}"]
                        if reached
                        else [
                            "timeout",
                            f"the notebook did not reach {name} in {limits.notebook:.0f} s",
                        ]
                    )
                elif definition[name].startswith("timeout:"):
                    where = definition[name].split(":", 1)[1]
                    results[name] = [
                        "timeout",
                        f"the {where} defining {name} ran past {limits.cell:.0f} s",
                    ]
                elif definition[name] != "ok":
                    results[name] = ["error", definition[name]]
                else:
                    died = f"the check of {name}"
                    cell, timed_out = run(
                        "import builtins as _b, json as _json\n"
                        "from vitcourse.checks import grade as _grade\n"
                        f"_b.print({marker!r}, _json.dumps(_grade({name!r}, "
                        f"__vitcourse_defs__[{name!r}]) if {name!r} in __vitcourse_defs__ else "
                        f"['error', 'its cell ran but did not define {name}']))"
                    )
                    died = None
                    results[name] = _read_result(cell, marker, name, timed_out, limits.check)
    except DeadKernelError:
        for name in names:
            results.setdefault(
                name,
                ["error", f"the kernel stopped in {died} (exit(), a crash, or out of memory)"],
            )
    finally:
        folder.cleanup()
    if executed is not None:
        nb.cells = [cell for cell in nb.cells if not any(cell is e for e in extra)]
        executed.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, executed)
    return results


def _read_result(cell, marker: str, name: str, timed_out: bool, limit: float) -> list[str]:
    """The [status, hint] the grader's check cell printed."""
    if timed_out:
        return ["timeout", f"checking {name} took more than {limit:.0f} s: an endless loop?"]
    printed = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
    lines = [line for line in printed.splitlines() if line.startswith(marker + " ")]
    try:
        status, hint = json.loads(lines[-1][len(marker) + 1 :])
    except (IndexError, ValueError):
        error = _error(cell)
        return ["error", error[1] if error else "the check printed no result"]
    return [status, hint]


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
        command = [sys.executable, "-m", "vitcourse.grade", "--worker", str(path), str(result),
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


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:  # one notebook, in its own process (see grade_notebook)
        path, result, executed, kernel, limits = argv[1:]
        limits = Limits(**json.loads(limits))
        _limit_memory(limits.memory_gb)
        graded = run_and_check(Path(path), Path(executed), limits, Path(kernel))
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
    parser.add_argument("--check-timeout", type=float, default=30, help="seconds per check (30)")
    parser.add_argument("--memory", type=float, default=8, help="GB per notebook, Linux (8)")
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once (1)")
    parser.add_argument(
        "--notebooks",
        help="the notebooks handed out, e.g. 01_patches,03_attention (default: all handed in)",
    )
    parser.add_argument("--full", action="store_true", help="run in full mode, not quick mode")
    args = parser.parse_args(argv)
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
