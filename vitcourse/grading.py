"""One submitted notebook, graded: its two sandboxed steps, then the verdict, here.

`vitcourse.grade` (the class, the command line) calls `grade_notebook` for each submission:

1. `vitcourse.grade_worker`, in a sandbox with the course's data, runs the notebook and keeps
   what each exercise's name holds (`defs/<exercise>.pkl`) and how its cell ran (`run.json`);
2. for each exercise, `probe` draws the check's inputs with a fresh secret seed and runs the
   kept answer on them with `vitcourse.grade_probe`, in a sandbox whose `vitcourse` package is a
   copy without that exercise's solution (`package_without`);
3. the answer comes back as plain tensors and numbers, and the check's own `judge`
   (`Exercise.verdict`) decides here, in the grader's process, with the hint a learner sees.

Nothing the sandboxes write is trusted: files are read only if they are regular files (never a
link) under a size limit, and a forged or broken file is an error, never a pass.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
import shutil
import stat
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from vitcourse import gradebook, sandbox
from vitcourse.checks import EXERCISES
from vitcourse.checks.harness import CheckFailed, WeightsMismatch
from vitcourse.gradebook import Grade

KERNEL_SECONDS = 60  # allowance for starting and stopping a kernel
PROBE_SECONDS = 20  # allowance for starting Python and torch before an answer runs


@dataclass(frozen=True)
class Limits:
    """What one submitted notebook may take."""

    notebook: float = 600  # seconds for all its cells
    cell: float = 120  # seconds for one cell (an endless loop costs this, then the rest runs)
    check: float = 30  # seconds for one exercise's answer to run on the check's inputs
    memory_gb: float = 8  # resident memory of all its processes together
    processes: int = 64
    output_mb: float = 256  # what its sandbox may write
    cell_output_bytes: int = 1_000_000  # outputs kept per cell in the executed notebook


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


def _read_output(path: Path, limit: int) -> bytes | None:
    """A file a sandbox wrote: only a regular file (never a link), at most `limit` bytes."""
    try:
        info = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
        return None
    return path.read_bytes()


# --- the course's package, less one solution ---------------------------------------------------

_copies: dict[tuple[str, Path], Path] = {}  # (exercise, folder) -> the copy made there
_copies_lock = threading.Lock()


def package_without(name: str, folder: Path) -> Path:
    """A copy of the `vitcourse` package in which the course's solution to exercise `name` is a
    stub raising `UsesCourseSolution`: a class that cannot be built or subclassed, a function
    that cannot be called. The rest of the package is as it is."""
    with _copies_lock:
        if (name, folder) in _copies and _copies[name, folder].exists():
            return _copies[name, folder]
        reference = EXERCISES[name].reference
        copy = folder / f"without-{name}" / "vitcourse"
        shutil.copytree(
            sandbox.package_dir(),
            copy,
            ignore=shutil.ignore_patterns("__pycache__"),
            dirs_exist_ok=True,
        )
        module = copy.joinpath(*reference.__module__.split(".")[1:]).with_suffix(".py")
        lines = module.read_text().splitlines(keepends=True)
        (node,) = [
            n for n in ast.parse("".join(lines)).body
            if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == reference.__name__
        ]  # fmt: skip
        first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        module.write_text(
            "".join(lines[:first]) + _stub(node, reference) + "".join(lines[node.end_lineno :])
        )
        _copies[name, folder] = copy
        return copy


def _stub(node: ast.FunctionDef | ast.ClassDef, reference) -> str:
    where = f"{reference.__module__}.{reference.__name__}"
    refuse = (
        "        from vitcourse.checks.harness import UsesCourseSolution\n\n"
        f"        raise UsesCourseSolution({where!r})\n"
    )
    if isinstance(node, ast.FunctionDef):
        return f"def {node.name}(*args, **kwargs):\n" + refuse.replace("        ", "    ")
    # A subclass in the package itself (DistilledViT) may stay; one elsewhere is refused at once.
    # Either way nothing of the solution is left to inherit, and building one is refused.
    bases = ", ".join(ast.unparse(b) for b in node.bases)
    constants = "".join(  # class attributes the package reads (a model's `architecture` name)
        f"    {ast.unparse(n)}\n" for n in node.body
        if isinstance(n, ast.Assign | ast.AnnAssign) and isinstance(n.value, ast.Constant)
    )  # fmt: skip
    return (
        f"class {node.name}({bases}):\n" + constants +
        "    def __init_subclass__(cls, **kwargs):\n"
        "        if not cls.__module__.startswith('vitcourse.'):\n"
        + refuse.replace("        ", "            ") +
        "    def __init__(self, *args, **kwargs):\n" + refuse
    )  # fmt: skip


# --- one notebook ------------------------------------------------------------------------------


def grade_notebook(
    student: str,
    notebook: str,
    data: bytes,
    out: Path,
    limits: Limits = Limits(),
    quick: bool = True,
    use_sandbox: bool = True,
    work: Path | None = None,
) -> list[Grade]:
    """Grade one submitted notebook (its bytes); never raises for the student's faults."""
    names = exercises_by_notebook()[notebook]
    work = work or Path(tempfile.gettempdir())
    with tempfile.TemporaryDirectory(prefix="vitcourse-grade-", dir=work) as tmp:
        given, ran = Path(tmp) / "given", Path(tmp) / "ran"
        given.mkdir()
        (given / f"{notebook}.ipynb").write_bytes(data)
        box = sandbox.Box(
            seconds=limits.notebook + KERNEL_SECONDS, memory_gb=limits.memory_gb,
            processes=limits.processes, output_mb=limits.output_mb, data=True,
        )  # fmt: skip
        env = {"VITCOURSE_QUICK": "1" if quick else "0"}
        env["VITCOURSE_PROGRESS"] = "/tmp/home/progress.json" if use_sandbox else str(given / "p")
        inside = sandbox.INSIDE
        command = [sys.executable, "-m", "vitcourse.grade_worker", f"{inside}/in/{notebook}.ipynb",
                   f"{inside}/out", json.dumps(asdict(limits))]  # fmt: skip
        done = sandbox.run(command, given, ran, box, use_sandbox, env)
        executed = _read_output(ran / "executed.ipynb", int(limits.output_mb * 2**20))
        if executed is not None:
            target = out / "executed" / gradebook.file_name(student) / f"{notebook}.ipynb"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(executed)
        try:
            run = json.loads(_read_output(ran / "run.json", 2**20) or b"null")
        except ValueError:
            run = None
        if done.broke or not isinstance(run, dict):
            why = _broken(done, limits)
            status = "timeout" if done.broke == "time" else "error"
            return [Grade(student, notebook, name, status, why) for name in names]
        if "unreadable" in run:
            return [Grade(student, notebook, n, "error", str(run["unreadable"])) for n in names]
        return [
            Grade(student, notebook, name, *judge(name, run, ran / "defs", Path(tmp), limits, use_sandbox))
            for name in names
        ]  # fmt: skip


def _broken(done: sandbox.Ran, limits: Limits) -> str:
    return {
        "time": f"the notebook ran past its {limits.notebook:.0f} s",
        "memory": f"the notebook used more than {limits.memory_gb:g} GB of memory",
        "processes": f"the notebook started more than {limits.processes} processes",
        "output": f"the notebook wrote more than {limits.output_mb:g} MB",
        None: "the grader's process for this notebook failed: "
        + (done.stderr.strip().splitlines() or ["no message"])[-1][:300],
    }[done.broke]


def judge(
    name: str, run: dict, defs: Path, work: Path, limits: Limits, use_sandbox: bool
) -> tuple[str, str, str]:
    """(status, hint, mistake) of one exercise, from how its cell ran and what its answer gives."""
    definitions = run.get("definitions") or {}
    definition = definitions.get(name) if isinstance(definitions, dict) else None
    if definition is None:
        if run.get("stopped"):
            return (
                "error",
                f"the kernel stopped in {str(run['stopped'])[:80]} before {name} was defined",
                "",
            )
        if run.get("reached"):
            return "not attempted", f"no cell defines {name}", ""
        return "timeout", f"the notebook did not reach {name} in {limits.notebook:.0f} s", ""
    definition = str(definition)[:300]
    if definition.startswith("timeout:"):
        where = definition.split(":", 1)[1]
        return "timeout", f"the {where} defining {name} ran past {limits.cell:.0f} s", ""
    if definition != "ok":
        return "error", definition, ""
    answer = _read_output(defs / f"{name}.pkl", int(limits.output_mb * 2**20))
    if answer is None:
        if _read_output(defs / f"{name}.err", 200) is not None:
            return (
                "error",
                f"what {name} holds cannot be handed to the checker (it could not be pickled)",
                "",
            )
        return "error", f"its cell ran but did not define {name}", ""
    return probe(name, answer, work, limits, use_sandbox)


def probe(
    name: str, answer: bytes, work: Path, limits: Limits, use_sandbox: bool = True
) -> tuple[str, str, str]:
    """Run a kept answer on fresh inputs in a sandbox without the solution; judge it here."""
    exercise = EXERCISES[name]
    inputs = exercise.inputs(secrets.randbelow(2**31))
    given, ran = work / f"probe-{name}" / "in", work / f"probe-{name}" / "out"
    given.mkdir(parents=True)
    (given / "answer.pkl").write_bytes(answer)
    torch.save(inputs, given / "inputs.pt")
    box = sandbox.Box(
        seconds=limits.check + PROBE_SECONDS, memory_gb=limits.memory_gb,
        processes=limits.processes, output_mb=limits.output_mb,
        package=package_without(name, work.parent),
    )  # fmt: skip
    command = [sys.executable, "-m", "vitcourse.grade_probe", name, f"{sandbox.INSIDE}/in",
               f"{sandbox.INSIDE}/out"]  # fmt: skip
    done = sandbox.run(command, given, ran, box, use_sandbox)
    if done.broke == "time":
        return (
            "timeout",
            f"running {name} on the check's inputs took more than {limits.check:.0f} s: an endless loop?",
            "",
        )
    if done.broke:
        return "error", _broken(done, limits).replace("the notebook", f"{name}"), ""
    try:
        outcome = json.loads(_read_output(ran / "outcome.json", 2**16) or b"null")
        packed = (
            _read_output(ran / "answer.json", 2**20),
            _read_output(ran / "answer.safetensors", 2**30),
        )
    except ValueError:
        outcome, packed = None, (None, None)
    if isinstance(outcome, dict):
        return _outcome(name, str(outcome.get("kind")), str(outcome.get("detail", ""))[:2000])
    if None in packed:
        return (
            "error",
            f"{name} stopped the checker's process (exit(), a crash, or out of memory)",
            "",
        )
    try:
        exercise.verdict(packed, inputs)
    except CheckFailed as failed:
        return "wrong", str(failed), failed.hint
    except Exception:  # noqa: BLE001 - an answer file the sandbox forged or broke
        return "error", f"what {name} returned could not be read back", ""
    return "passed", "", ""


def _outcome(name: str, kind: str, detail: str) -> tuple[str, str, str]:
    if kind == "not written":
        return "not attempted", "", ""
    if kind == "uses the course's solution":
        why = f"{name} uses the course's own solution (called, wrapped or subclassed), not yours"
        return "not attempted", why, ""
    if kind == "weights mismatch":
        failed = WeightsMismatch(detail)
        failed.exercise = name
        return "wrong", str(failed), failed.hint
    return "error", detail or f"{name} failed", ""
