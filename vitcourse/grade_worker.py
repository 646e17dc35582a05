"""Grade one notebook in a process of its own: run the student's cells, then check the exercises.

    python -m vitcourse.grade_worker NOTEBOOK RESULT EXECUTED KERNEL_PID LIMITS

`vitcourse.grade` starts one of these per submitted notebook, with a memory limit that its kernel
inherits, and stops it (and the kernel, whose process id it finds in KERNEL_PID) when it runs past
its time. It writes `{exercise: [status, hint]}` to RESULT as JSON, and EXECUTED, the notebook as
it ran. LIMITS is `vitcourse.grade.Limits` as a JSON object.

Two steps, one kernel:

1. `run_student_cells`: every code cell in order, each within its time limit, until the
   notebook's. After each cell that defines an exercise (`def patchify`, `class ...`), the grader
   keeps what the name holds, since a later check cell may rebind it.
2. `check_exercises`: for each exercise defined, the grader calls its check
   (`vitcourse.checks.grade`) in the kernel on what it kept, and reads the verdict the cell printed
   after a random marker that the student's code cannot know in advance.
"""

from __future__ import annotations

import json
import re
import secrets
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from vitcourse.grade import Limits, exercises_by_notebook, match_notebook

# The errors of a cell that never ran: what it defines is an error, not a wrong answer.
COMPILE_ERRORS = ("SyntaxError", "IndentationError", "TabError")


class Kernel:
    """The notebook's kernel, and the cells the grader runs in it, each within a time limit."""

    def __init__(self, nb, limits: Limits, folder: str):
        self.nb = nb
        self.limits = limits
        self.seconds: dict[int, float] = {}  # id(cell) -> its time limit, read by nbclient
        self.extra: list = []  # the grader's own cells, removed before the notebook is saved
        self.where: str | None = None  # what is running, named if the kernel stops there
        self.client = NotebookClient(
            nb,
            kernel_name="python3",
            allow_errors=True,
            interrupt_on_timeout=True,
            timeout_func=lambda cell: self.seconds.get(id(cell), limits.check),
            resources={"metadata": {"path": folder}},
        )

    def execute(self, cell, index: int, limit: float) -> bool:
        """Run one cell within `limit` seconds; whether it ran out of time."""
        self.seconds[id(cell)] = limit
        start = time.monotonic()
        self.client.execute_cell(cell, index)
        error = _error(cell)
        return time.monotonic() - start >= limit or bool(error and error[0] == "KeyboardInterrupt")

    def run(self, source: str) -> tuple[object, bool]:
        """Run the grader's own code in the kernel: (its cell, whether it ran out of time)."""
        cell = nbformat.v4.new_code_cell(source)
        self.nb.cells.append(cell)
        self.extra.append(cell)
        return cell, self.execute(cell, len(self.nb.cells) - 1, self.limits.check)

    def remove_own_cells(self) -> None:
        """Leave the notebook as the student wrote it, with the outputs of its run."""
        self.nb.cells = [cell for cell in self.nb.cells if not any(cell is e for e in self.extra)]


def run_and_check(
    path: Path,
    executed: Path | None,
    limits: Limits = Limits(),  # noqa: B008 - frozen, as in vitcourse.grade
    kernel_pid: Path | None = None,
) -> dict:
    """Run one notebook in a fresh kernel and check its exercises: {exercise: [status, hint]}.

    `kernel_pid`: a file to write the kernel's process id to, so a parent can stop it."""
    names = exercises_by_notebook()[match_notebook(path.name)]
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # noqa: BLE001 - not JSON, not a notebook: say so for every exercise
        return {name: ["error", f"the file is not a readable notebook: {e}"] for name in names}
    deadline = time.monotonic() + limits.notebook  # starting the kernel counts too
    folder = tempfile.TemporaryDirectory(prefix="vitcourse-grade-")
    kernel = Kernel(nb, limits, folder.name)
    results: dict[str, list[str]] = {}  # filled as the checks run: they stand if the kernel stops
    kernel.client.reset_execution_trackers()
    try:
        with kernel.client.setup_kernel():
            if kernel_pid is not None:
                kernel_pid.write_text(str(kernel.client.km.provisioner.process.pid))
            definitions = run_student_cells(kernel, names, deadline)
            reached = time.monotonic() < deadline
            check_exercises(kernel, names, definitions, reached, results)
    except DeadKernelError:
        why = f"the kernel stopped in {kernel.where} (exit(), a crash, or out of memory)"
        for name in names:
            results.setdefault(name, ["error", why])
    finally:
        folder.cleanup()
    if executed is not None:
        kernel.remove_own_cells()
        executed.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, executed)
    return results


# --- 1. run the student's cells ----------------------------------------------------------------


def run_student_cells(kernel: Kernel, names: list[str], deadline: float) -> dict[str, str]:
    """Run the student's code cells in order until `deadline`, keeping what each exercise's
    name holds after its cell: {exercise: "ok", "timeout:cell N" or the error that kept its
    cell from running}. Exercises no cell defines are left out."""
    cells = list(kernel.nb.cells)  # the student's cells, before the grader adds its own
    definitions: dict[str, str] = {}
    kernel.run("__vitcourse_defs__ = {}")
    for index, cell in enumerate(cells):
        if cell.cell_type != "code" or time.monotonic() >= deadline:
            continue
        where = f"cell {index + 1}"
        kernel.where = where  # until it returns
        limit = min(deadline - time.monotonic(), kernel.limits.cell)
        timed_out = kernel.execute(cell, index, limit)
        kernel.where = None
        defined = _defined(cell.source, names)
        for name in defined:
            definitions[name] = _definition(cell, where, timed_out)
        if defined and not timed_out:  # keep them: a check cell may rebind the name
            kernel.run(
                "".join(
                    f"try:\n    __vitcourse_defs__[{n!r}] = {n}\nexcept NameError:\n    pass\n"
                    for n in defined
                )
            )
    return definitions


def _defined(source: str, names: list[str]) -> list[str]:
    """The exercises a cell defines (`def name` or `class name`, also inside an `if` or `try`).
    A regular expression, not a parser, so that a cell with a syntax error still counts."""
    defined = re.findall(r"^[ \t]*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)", source, flags=re.M)
    return [name for name in names if name in defined]


def _definition(cell, where: str, timed_out: bool) -> str:
    """How a cell that defines an exercise ran: "ok", "timeout:<where>", or its compile error."""
    if timed_out:
        return f"timeout:{where}"
    error = _error(cell)
    if error and error[0] in COMPILE_ERRORS:
        return f"{error[1]} ({where})"
    return "ok"


def _error(cell) -> tuple[str, str] | None:
    """(name, message) of the error a cell ended in, if any."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return output["ename"], f"{output['ename']}: {output['evalue']}".strip()
    return None


# --- 2. check the exercises --------------------------------------------------------------------


def check_exercises(
    kernel: Kernel,
    names: list[str],
    definitions: dict[str, str],
    reached: bool,
    results: dict[str, list[str]],
) -> None:
    """Fill `results` with each exercise's [status, hint], calling the check in the kernel for
    those the student's cells defined. `reached`: whether the cells ran before the deadline."""
    marker = f"VITCOURSE-GRADE-{secrets.token_hex(8)}"  # a student cannot print it in advance
    for name in names:
        unchecked = _unchecked(name, definitions.get(name), reached, kernel.limits)
        if unchecked is not None:
            results[name] = unchecked
            continue
        kernel.where = f"the check of {name}"
        cell, timed_out = kernel.run(
            "import builtins as _b, json as _json\n"
            "from vitcourse.checks import grade as _grade\n"
            f"_b.print({marker!r}, _json.dumps(_grade({name!r}, "
            f"__vitcourse_defs__[{name!r}]) if {name!r} in __vitcourse_defs__ else "
            f"['error', 'its cell ran but did not define {name}']))"
        )
        kernel.where = None
        results[name] = _read_result(cell, marker, name, timed_out, kernel.limits.check)


def _unchecked(name: str, definition: str | None, reached: bool, limits: Limits) -> list | None:
    """The [status, hint] of an exercise there is nothing to check for (no cell defines it, or
    its cell timed out or did not compile); None when its check should run."""
    if definition is None:
        if reached:
            return ["not attempted", f"no cell defines {name}"]
        return ["timeout", f"the notebook did not reach {name} in {limits.notebook:.0f} s"]
    if definition.startswith("timeout:"):
        where = definition.split(":", 1)[1]
        return ["timeout", f"the {where} defining {name} ran past {limits.cell:.0f} s"]
    if definition != "ok":
        return ["error", definition]
    return None


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


# --- the process -------------------------------------------------------------------------------


def _limit_memory(gigabytes: float) -> None:
    """Cap this process's address space (and so its kernel's, which inherits it): Linux; a no-op
    where the OS does not offer it or refuses."""
    try:
        import resource

        cap = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    except (ImportError, ValueError, OSError):
        pass


def main(argv: list[str] | None = None) -> None:
    """Grade one notebook: NOTEBOOK RESULT EXECUTED KERNEL_PID LIMITS (see the module's doc)."""
    path, result, executed, kernel, limits = sys.argv[1:] if argv is None else argv
    limits = Limits(**json.loads(limits))
    _limit_memory(limits.memory_gb)
    graded = run_and_check(Path(path), Path(executed), limits, Path(kernel))
    Path(result).write_text(json.dumps(graded))


if __name__ == "__main__":
    main()
