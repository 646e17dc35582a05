"""Run one submitted notebook and keep what its cells define: the first of the grader's two steps.

    python -m vitcourse.classroom.grade_worker NOTEBOOK OUT LIMITS EXERCISES

`vitcourse.classroom.grading` starts this in a sandbox (`vitcourse.classroom.sandbox`), one per
notebook, with NOTEBOOK a copy of the submission and OUT the only folder it may write. It runs every
code cell in order in a fresh kernel, each within its time limit, until the notebook's. After each
cell that defines an exercise (`def patchify`, `class ...`, or `patchify = ...` other than a check
cell), it keeps what the name holds, written with cloudpickle to `OUT/defs/<exercise>.pkl` (the same
object again at the end, with the notebook's last globals, which a function may read). It writes
`OUT/run.json`, how each exercise's defining cell ran, and `OUT/executed.ipynb`, the notebook as it
ran (each cell's outputs capped in size).

It decides no verdict: everything here runs beside the student's code and could be forged. The
grader runs each kept answer in a second sandbox without the course's solution
(`vitcourse.classroom.grade_probe`) and judges what comes back in its own process. LIMITS is
`vitcourse.classroom.sandbox.Limits` as a JSON object, EXERCISES the notebook's exercises as a JSON
list.

It imports neither torch nor the checks (the notebook's kernel does what the notebook imports):
every second it spends starting is spent again for each notebook of a class. What it says of a
cell ("cell 3") is in the language the grader gave its sandbox (`VITCOURSE_LANG`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

# jsonschema, under nbformat, imports rfc3987_syntax when it is installed (it comes with
# JupyterLab), for URI formats that nbformat never checks; it builds a grammar as it loads, two
# seconds of every notebook's start here. Marked missing, jsonschema goes on without it.
sys.modules.setdefault("rfc3987_syntax", None)

import nbformat  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import DeadKernelError  # noqa: E402
from nbformat.v4 import output_from_msg  # noqa: E402

from vitcourse.classroom.sandbox import STARTUP_SECONDS, Limits  # noqa: E402
from vitcourse.language import N_, _  # noqa: E402

# The errors of a cell that never ran: what it defines is an error, not a wrong answer.
COMPILE_ERRORS = ("SyntaxError", "IndentationError", "TabError")
INTERRUPT_GRACE = 5  # seconds a cell gets to stop after its interrupt before its kernel is killed
# What the grader imports in the kernel before the student's first cell, within the start-up
# allowance: a student's `import torch` then takes no time, wherever it sits (above or below an
# exercise), and no cell's limit depends on how fast this machine loads torch. Only the modules
# are loaded; the student's names are the student's own (a missing import still fails).
WARM_UP = (
    "def __vitcourse_warm_up__():\n"
    "    import importlib\n"
    "    for name in ('torch', 'matplotlib.pyplot', 'vitcourse.checks'):\n"
    "        try:\n"
    "            importlib.import_module(name)\n"
    "        except Exception:\n"
    "            pass\n"
    "__vitcourse_warm_up__()\n"
    "del __vitcourse_warm_up__\n"
)


class CappedClient(NotebookClient):
    """nbclient, keeping at most `limit` bytes of each cell's outputs (a 200 MB print would
    otherwise be held in memory and saved)."""

    limit = 1_000_000
    NOTE = N_("[the grader kept only the first {mb:.0f} MB of this cell's outputs]")  # a line

    def output(self, outs, msg, display_id, cell_index):
        count = len(outs)
        out = super().output(outs, msg, display_id, cell_index)  # appends it to outs
        if out is None or len(outs) == count:
            return out
        sizes = self.__dict__.setdefault("_sizes", {})
        sizes[cell_index] = sizes.get(cell_index, 0) + len(json.dumps(out))
        if sizes[cell_index] <= self.limit:
            return out
        outs.pop()
        note = _(self.NOTE).format(mb=self.limit / 1e6) + "\n"
        if not any(o.get("text") == note for o in outs):
            outs.append(nbformat.v4.new_output("stream", name="stderr", text=note))
        return None

    def _update_display_id(self, display_id, msg):
        """An `update_display` writes its data into every output shown with that display id
        (nbclient's own method, which this one replaces): 120 tiny outputs and one 1 MB update
        would be 120 MB in the executed notebook. In a cell where the update would pass the
        limit, the outputs get the note instead."""
        if msg["header"]["msg_type"] == "update_display_data":
            msg["header"]["msg_type"] = "display_data"
        try:
            out = output_from_msg(msg)
        except ValueError:
            return
        size = len(json.dumps({"data": out["data"], "metadata": out["metadata"]}))
        note = {"text/plain": _(self.NOTE).format(mb=self.limit / 1e6) + "\n"}
        sizes = self.__dict__.setdefault("_sizes", {})
        for cell_index, where in self._display_id_map.get(display_id, {}).items():
            outputs = self.nb["cells"][cell_index]["outputs"]
            rest = len(json.dumps([o for i, o in enumerate(outputs) if i not in where]))
            fits = rest + len(where) * size <= self.limit
            for i in where:
                outputs[i]["data"] = out["data"] if fits else note
                outputs[i]["metadata"] = out["metadata"] if fits else {}
            sizes[cell_index] = len(json.dumps(outputs))


class Kernel:
    """The notebook's kernel, and the cells the grader runs in it, each within a time limit."""

    def __init__(self, nb, limits: Limits, folder: str, out_limit: int):
        self.nb = nb
        self.limits = limits
        self.seconds: dict[int, float] = {}  # id(cell) -> its time limit, read by nbclient
        self.extra: list = []  # the grader's own cells, removed before the notebook is saved
        self.where: str | None = None  # what is running, named if the kernel stops there
        self.killed = False  # whether a cell that ignored its interrupt had its kernel killed
        self.client = CappedClient(
            nb,
            kernel_name="python3",
            allow_errors=True,
            interrupt_on_timeout=True,
            startup_timeout=STARTUP_SECONDS,  # a kernel starts slowly on a busy machine
            shutdown_kernel="immediate",  # nothing in it to save: a polite stop waits seconds
            timeout_func=lambda cell: self.seconds.get(id(cell), limits.check),
            resources={"metadata": {"path": folder}},
        )
        self.client.limit = out_limit

    def execute(self, cell, index: int, limit: float) -> bool:
        """Run one cell within `limit` seconds; whether it ran out of time. A kernel that ignores
        the interrupt is killed `INTERRUPT_GRACE` seconds later (DeadKernelError follows)."""
        self.seconds[id(cell)] = limit
        start = time.monotonic()
        watchdog = threading.Timer(limit + INTERRUPT_GRACE, self.kill)
        watchdog.start()
        try:
            self.client.execute_cell(cell, index)
        finally:
            watchdog.cancel()
        error = _error(cell)
        return time.monotonic() - start >= limit or bool(error and error[0] == "KeyboardInterrupt")

    def kill(self) -> None:
        self.killed = True
        try:
            os.kill(self.client.km.provisioner.process.pid, signal.SIGKILL)
        except (AttributeError, ProcessLookupError, PermissionError):
            pass

    def run(self, source: str, limit: float | None = None) -> tuple[object, bool]:
        """Run the grader's own code in the kernel within `limit` seconds (the check's, unless
        given): (its cell, whether it ran out of time)."""
        cell = nbformat.v4.new_code_cell(source)
        self.nb.cells.append(cell)
        self.extra.append(cell)
        return cell, self.execute(cell, len(self.nb.cells) - 1, limit or self.limits.check)

    def remove_own_cells(self) -> None:
        """Leave the notebook as the student wrote it, with the outputs of its run."""
        self.nb.cells = [cell for cell in self.nb.cells if not any(cell is e for e in self.extra)]


def run_notebook(
    path: Path,
    out: Path,
    names: list[str],
    limits: Limits = Limits(),  # noqa: B008
) -> dict:
    """Run one notebook in a fresh kernel, keeping the definitions of its exercises (`names`) in
    `out/defs/`: {"definitions": {exercise: how its cell ran}, "reached": whether the cells ran
    before the notebook's deadline, "stopped": where the kernel died, or None}."""
    (out / "defs").mkdir(parents=True, exist_ok=True)
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as e:  # noqa: BLE001 - not JSON, not a notebook; never quote its contents
        why = _("the file is not a readable notebook ({error})").format(error=type(e).__name__)
        return {"unreadable": why}
    # Starting the kernel, the grader's imports (`WARM_UP`) and the cells before the first
    # exercise get the start-up allowance: how fast this machine imports torch is no student's doing.
    deadline = time.monotonic() + limits.notebook + STARTUP_SECONDS
    folder = tempfile.TemporaryDirectory(prefix="vitcourse-grade-")
    kernel = Kernel(nb, limits, folder.name, limits.cell_output_bytes)
    definitions: dict[str, str] = {}
    stopped, killed, reached = None, None, False
    kernel.client.reset_execution_trackers()
    try:
        with kernel.client.setup_kernel():
            kernel.where = _("the grader's imports, before the notebook's first cell")
            kernel.run(WARM_UP, STARTUP_SECONDS)
            deadline = run_student_cells(kernel, names, deadline, out / "defs", definitions)
            reached = time.monotonic() < deadline
            if reached:  # again, with the notebook's final globals
                kernel.where = _("keeping the definitions")
                kept = [n for n in names if n in definitions]
                kernel.run(_keep_source(kept, out / "defs", again=True))
    except DeadKernelError:
        stopped = kernel.where or _("a cell")
        killed = stopped if kernel.killed else None  # by the time limit, not by a crash
    finally:
        folder.cleanup()
    kernel.remove_own_cells()
    nbformat.write(nb, out / "executed.ipynb")
    return {"definitions": definitions, "reached": reached, "stopped": stopped, "killed": killed}


def run_student_cells(
    kernel: Kernel, names: list[str], deadline: float, defs: Path, definitions: dict[str, str]
) -> float:
    """Run the student's code cells in order until `deadline`, keeping what each exercise's
    name holds after its cell; fill `definitions`: {exercise: "ok", "timeout:cell N" or the error
    that kept its cell from running}. Exercises no cell defines are left out. Returns the
    deadline: the notebook's time counts from its first exercise on (start-up is allowed apart)."""
    cells = list(kernel.nb.cells)  # the student's cells, before the grader adds its own
    starting = True  # until the first cell that defines an exercise: the start-up allowance
    allowance = float(STARTUP_SECONDS)  # beyond the cell limit, once a notebook, not per cell
    for index, cell in enumerate(cells):
        if cell.cell_type != "code" or time.monotonic() >= deadline:
            continue
        where = _("cell {number}").format(number=index + 1)
        kernel.where = where  # until it returns
        defined = _defined(cell.source, names)
        if starting and defined:  # start-up is over: the notebook's own time begins
            starting, deadline = False, min(deadline, time.monotonic() + kernel.limits.notebook)
        extra = allowance if starting else 0.0
        began = time.monotonic()
        limit = min(deadline - began, kernel.limits.cell + extra)
        try:
            timed_out = kernel.execute(cell, index, limit)
        except DeadKernelError:
            if kernel.killed:  # it ignored the interrupt: a timeout for what it defines
                definitions.update({name: f"timeout:{where}" for name in defined})
            raise
        allowance -= min(extra, max(0.0, time.monotonic() - began - kernel.limits.cell))
        for name in defined:
            definitions[name] = _definition(cell, where, timed_out)
        if defined and not timed_out:  # keep them: a check cell may rebind the name
            kernel.where = _("keeping what {where} defines").format(where=where)
            kernel.run(_keep_source(defined, defs))
        kernel.where = None
    return deadline


def _keep_source(names: list[str], defs: Path, again: bool = False) -> str:
    """The grader's cell that keeps what each name holds now (or, `again`, what it kept before)
    and writes it to `defs/<name>.pkl` (by value, with what it uses from the notebook), or
    `defs/<name>.err` saying why it could not."""
    return (
        "def __vitcourse_keep__(names, folder, again):\n"
        "    import cloudpickle\n"
        "    kept = globals().setdefault('__vitcourse_kept__', {})\n"
        "    for name in names:\n"
        "        if not again and name in globals():\n"
        "            kept[name] = globals()[name]\n"
        "        if name not in kept:\n"
        "            continue\n"
        "        try:\n"
        "            data = cloudpickle.dumps(kept[name])\n"
        "        except Exception as e:\n"
        "            open(f'{folder}/{name}.err', 'w').write(type(e).__name__)\n"
        "            continue\n"
        "        open(f'{folder}/{name}.pkl', 'wb').write(data)\n"
        f"__vitcourse_keep__({names!r}, {str(defs)!r}, {again!r})\n"
        "del __vitcourse_keep__\n"
    )


def _defined(source: str, names: list[str]) -> list[str]:
    """The exercises a cell defines: `def name` or `class name` (also inside an `if` or `try`),
    or `name = ...` at the top level, except a check cell's `name = check_x(name)`. Regular
    expressions, not a parser, so that a cell with a syntax error still counts."""
    defined = re.findall(r"^[ \t]*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)", source, flags=re.M)
    defined += re.findall(r"^([A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)(?!\s*check_\w+\()", source, re.M)
    return [name for name in names if name in defined]


def _definition(cell, where: str, timed_out: bool) -> str:
    """How a cell that defines an exercise ran: "ok", "timeout:<where>", or its compile error."""
    if timed_out:
        return f"timeout:{where}"
    error = _error(cell)
    if error and error[0] in COMPILE_ERRORS:
        return f"{error[1]} ({where})"
    if error and error[0] == "UsesCourseSolution":  # subclassed or called the stubbed solution
        return "uses the course's solution"
    return "ok"


def _error(cell) -> tuple[str, str] | None:
    """(name, message) of the error a cell ended in, if any."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return output["ename"], f"{output['ename']}: {output['evalue']}".strip()
    return None


def main(argv: list[str] | None = None) -> None:
    """Run one notebook: NOTEBOOK OUT LIMITS EXERCISES (see the module's doc)."""
    path, out, limits, names = sys.argv[1:] if argv is None else argv
    ran = run_notebook(Path(path), Path(out), json.loads(names), Limits(**json.loads(limits)))
    (Path(out) / "run.json").write_text(json.dumps(ran))


if __name__ == "__main__":
    main()
