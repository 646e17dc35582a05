"""One submitted notebook, graded: its two sandboxed steps, then the verdict, here.

`vitcourse.classroom.grade` (the class, the command line) calls `grade_notebook` for each
submission:

1. `vitcourse.classroom.grade_worker`, in a sandbox with the course's data, runs the notebook and
   keeps what each exercise's name holds (`defs/<exercise>.pkl`) and how its cell ran (`run.json`);
2. for each exercise, `probe` draws the check's inputs with a fresh secret seed and runs the
   kept answer on them with `vitcourse.classroom.grade_probe`, in a sandbox whose `vitcourse`
   package is a copy without the solutions to that notebook's exercises (`package_without`: an
   answer to one cannot be built from the course's solution to another, `unpatchify` undoing
   into `patchify`);
3. the answer comes back as plain tensors and numbers, and the check's own `judge`
   (`Exercise.verdict`) decides here, in the grader's process, with the hint a learner sees.

A notebook's quiz is graded here too, from the bytes handed in and before anything runs
(`vitcourse.classroom.grade_quiz`: its answers are literals in its cells, read, never run); a
notebook with a quiz and no exercise (00, 10) runs in no sandbox at all.

Nothing the sandboxes write is trusted: files are read only if they are regular files (never a
link) under a size limit, and a forged or broken file is an error, never a pass. The hints are
written in the language chosen (`vitcourse.language`), which the sandboxes speak too.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

import torch

from vitcourse.checks.harness import CheckFailed, NotWritten, PartlyWritten, WeightsMismatch
from vitcourse.checks.registry import exercises
from vitcourse.classroom import gradebook, sandbox, sandbox_watch
from vitcourse.classroom.grade_quiz import grade_quiz, has_quiz
from vitcourse.classroom.grade_solutions import carries_solution, package_without
from vitcourse.classroom.gradebook import QUIZ, Grade
from vitcourse.classroom.sandbox import STARTUP_SECONDS, Limits
from vitcourse.classroom.sandbox_bubblewrap import INSIDE
from vitcourse.language import N_, _, number
from vitcourse.quiz.questions import notebooks as quiz_notebooks

KERNEL_SECONDS = 60  # allowance for starting and stopping a kernel
GRADER_FAULT = N_(
    "the checker's sandbox did not import the course's package without the solution "
    "(the grader's set-up, not the student: is the course or its environment hidden there?)"
)


def exercises_by_notebook() -> dict[str, list[str]]:
    """{notebook name (no .ipynb): [its exercises, in order]} for the notebooks with exercises."""
    notebooks: dict[str, list[str]] = {}
    for exercise in exercises().values():
        notebooks.setdefault(exercise.notebook, []).append(exercise.name)
    return notebooks


def graded_by_notebook() -> dict[str, list[str]]:
    """{notebook: what is graded in it, in order: its exercises, then its quiz}, for every
    notebook with either, in the course's order."""
    found = {notebook: [*names] for notebook, names in exercises_by_notebook().items()}
    for notebook in quiz_notebooks():
        found.setdefault(notebook, []).append(QUIZ)
    return dict(sorted(found.items()))


def match_notebook(filename: str) -> str | None:
    """The course notebook (with exercises or a quiz) a submitted file is, by name or number."""
    stem = Path(filename).stem
    notebooks = graded_by_notebook()
    if stem in notebooks:
        return stem
    number = re.match(r"\d\d(?!\d)", stem)
    candidates = [name for name in notebooks if number and name.startswith(number.group() + "_")]
    return candidates[0] if len(candidates) == 1 else None


def _read_output(path: Path, limit: int, within: Path | None = None) -> bytes | None:
    """A file a sandbox wrote: only a regular file (never a link, a FIFO or a folder), at most
    `limit` bytes, or None (also when it cannot be read: a student may chmod it to 000). It is
    reached from `within` (the sandbox's output folder; default, the file's own folder) one folder
    at a time, following no link at any level: a sandbox may replace a folder it wrote with a link
    to one of the grader's, which `O_NOFOLLOW` on the file alone would follow."""
    root = path.parent if within is None else within
    try:
        parts = path.relative_to(root).parts
    except ValueError:
        return None
    if not parts or ".." in parts:
        return None
    opened: list[int] = []
    try:
        opened.append(os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW))
        for part in parts[:-1]:
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
            opened.append(os.open(part, flags, dir_fd=opened[-1]))
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = os.open(parts[-1], flags, dir_fd=opened[-1])
    except OSError:
        return None
    finally:
        for folder in opened:
            os.close(folder)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder named run.json, a FIFO
            return None
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def _read_json(path: Path, limit: int, within: Path | None = None) -> object:
    """The JSON value in a file a sandbox wrote, or None: unreadable, not JSON, or nested too deep
    for Python's parser (a RecursionError is the student's doing, not the grader's)."""
    data = _read_output(path, limit, within)
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError, MemoryError):
        return None


# --- one notebook ------------------------------------------------------------------------------


def grade_notebook(
    student: str,
    notebook: str,
    data: bytes,
    out: Path,
    limits: Limits = Limits(),  # noqa: B008 - frozen
    quick: bool = True,
    isolation: bool | str = True,
    work: Path | None = None,
) -> list[Grade]:
    """Grade one submitted notebook (its bytes); never raises for the student's faults.
    `isolation`: how its code is kept apart (`vitcourse.classroom.sandbox.run`'s `sandbox`: True,
    bubblewrap's sandbox). `work`: the class's private folder, in the system's temporary folder
    (the stubbed packages are made there once); default, a new one."""
    own = work is None
    work = Path(tempfile.mkdtemp(prefix="vitcourse-class-")) if own else work
    tmp = Path(tempfile.mkdtemp(prefix="grade-", dir=work))
    try:
        return _grade_in(student, notebook, data, out, limits, quick, isolation, tmp)
    finally:  # whatever the sandbox left there, however deep or locked
        sandbox.remove_tree(work if own else tmp)


def _grade_in(student, notebook, data, out, limits, quick, isolation, tmp: Path) -> list[Grade]:
    quiz = [grade_quiz(student, notebook, data)] if has_quiz(notebook) else []
    names = exercises_by_notebook().get(notebook, [])
    if not names:
        return quiz
    return _exercises(student, notebook, data, out, limits, quick, isolation, tmp, names) + quiz


def _exercises(student, notebook, data, out, limits, quick, isolation, tmp, names) -> list[Grade]:
    """The notebook's exercises: its code run in one sandbox, each answer probed in another."""
    given, ran = tmp / "given", tmp / "ran"
    given.mkdir()
    (given / f"{notebook}.ipynb").write_bytes(data)
    box = sandbox.Box(
        seconds=limits.notebook + KERNEL_SECONDS + STARTUP_SECONDS,
        memory_gb=limits.memory_gb,
        processes=limits.processes,
        output_mb=limits.output_mb,
        data=True,
        package=package_without(names, tmp.parent),  # nothing of the solutions to pickle
    )
    env = {"VITCOURSE_QUICK": "1" if quick else "0"}
    how = sandbox.mode(isolation)  # the checks' record: in the home it has, else beside the copy
    if how != sandbox.OWN_USER:
        env["VITCOURSE_PROGRESS"] = (
            "/tmp/home/progress.json" if how == sandbox.BUBBLEWRAP else str(given / "p")
        )
    inside = INSIDE
    command = [
        sys.executable,
        "-m",
        "vitcourse.classroom.grade_worker",
        f"{inside}/in/{notebook}.ipynb",
        f"{inside}/out",
        json.dumps(asdict(limits)),
        json.dumps(names),
    ]
    done = sandbox.run(command, given, ran, box, isolation, env)
    executed = _read_output(ran / "executed.ipynb", int(limits.output_mb * 2**20), ran)
    if executed is not None:
        target = out / "executed" / gradebook.file_name(student) / f"{notebook}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(executed)
    run = _read_json(ran / "run.json", 2**20, ran)
    if done.broke or not isinstance(run, dict):
        why = _broken(done, limits)
        status = "timeout" if done.broke == "time" else "error"
        return [Grade(student, notebook, name, status, why) for name in names]
    if "unreadable" in run:
        return [Grade(student, notebook, n, "error", str(run["unreadable"])[:300]) for n in names]
    return [
        Grade(student, notebook, name, *judge(name, run, ran / "defs", tmp, limits, isolation))
        for name in names
    ]


# The limit a sandbox's command broke: said of the notebook, and of one exercise's answer.
BROKEN = {
    "time": (
        N_("the notebook ran past its {seconds:.0f} s"),
        N_("{name} ran past its {seconds:.0f} s"),
    ),
    "memory": (
        N_("the notebook used more than {gb:g} GB of memory"),
        N_("{name} used more than {gb:g} GB of memory"),
    ),
    "processes": (
        N_("the notebook started more than {processes} processes"),
        N_("{name} started more than {processes} processes"),
    ),
    "output": (
        N_(
            "the notebook wrote more than {mb:g} MB, more than {entries} files and "
            "folders, or more than {errors} MB of errors"
        ),
        N_(
            "{name} wrote more than {mb:g} MB, more than {entries} files and folders, "
            "or more than {errors} MB of errors"
        ),
    ),
}


def _broken(done: sandbox.Ran, limits: Limits, name: str | None = None) -> str:
    """Why the notebook's sandbox (or, `name`, the sandbox of that exercise's answer) stopped."""
    if done.broke is None:
        last = (done.stderr.strip().splitlines() or [_("no message")])[-1][:300]
        return _("the grader's process for this notebook failed: {last}").format(last=last)
    notebook, answer = BROKEN[done.broke]
    return _(notebook if name is None else answer).format(
        name=name,
        seconds=limits.notebook,
        gb=limits.memory_gb,
        processes=limits.processes,
        mb=limits.output_mb,
        entries=number(sandbox_watch.MAX_ENTRIES),
        errors=sandbox_watch.STDERR_BYTES // 2**20,
    )


def judge(
    name: str, run: dict, defs: Path, work: Path, limits: Limits, isolation: bool | str
) -> tuple[str, str, str]:
    """(status, hint, mistake) of one exercise, from how its cell ran and what its answer gives."""
    definitions = run.get("definitions") or {}
    definition = definitions.get(name) if isinstance(definitions, dict) else None
    if definition is None:
        if run.get("killed"):  # the time limit's kill, not a crash
            where = str(run["killed"])[:80]
            why = _("{where} ran past its time limit before {name} was defined")
            return "timeout", why.format(where=where, name=name), ""
        if run.get("stopped"):
            where = str(run["stopped"])[:80]
            why = _("the kernel stopped in {where} before {name} was defined")
            return "error", why.format(where=where, name=name), ""
        if run.get("reached"):
            return "not attempted", _("no cell defines {name}").format(name=name), ""
        why = _("the notebook did not reach {name} in {seconds:.0f} s")
        return "timeout", why.format(name=name, seconds=limits.notebook), ""
    definition = str(definition)[:300]
    if definition.startswith("timeout:"):
        where = definition.split(":", 1)[1]
        why = _("the {where} defining {name} ran past {seconds:.0f} s")
        return "timeout", why.format(where=where, name=name, seconds=limits.cell), ""
    if definition == "uses the course's solution":
        return _outcome(name, definition, "")
    if definition != "ok":
        return "error", definition, ""
    answer = _read_output(defs / f"{name}.pkl", int(limits.output_mb * 2**20), defs.parent)
    if answer is None:
        if _read_output(defs / f"{name}.err", 200, defs.parent) is not None:
            why = _("what {name} holds cannot be handed to the checker (it could not be pickled)")
            return "error", why.format(name=name), ""
        return "error", _("its cell ran but did not define {name}").format(name=name), ""
    if carries_solution(answer, [name]):
        why = _("{name} carries the course's own solution's code, not yours")
        return "not attempted", why.format(name=name), ""
    return probe(name, answer, work, limits, isolation)


def probe(
    name: str, answer: bytes, work: Path, limits: Limits, isolation: bool | str = True
) -> tuple[str, str, str]:
    """Run a kept answer on fresh inputs in a sandbox without the solution; judge it here."""
    exercise = exercises()[name]
    inputs = exercise.inputs(secrets.randbelow(2**31))
    given, ran = work / f"probe-{name}" / "in", work / f"probe-{name}" / "out"
    given.mkdir(parents=True)
    (given / "answer.pkl").write_bytes(answer)
    torch.save(inputs, given / "inputs.pt")
    box = sandbox.Box(  # the answer's time counts once Python and torch are in (`started`)
        seconds=limits.check,
        memory_gb=limits.memory_gb,
        startup=STARTUP_SECONDS,
        processes=limits.processes,
        output_mb=limits.output_mb,
        package=package_without(exercises_by_notebook()[exercise.notebook], work.parent),
    )
    command = [
        sys.executable,
        "-m",
        "vitcourse.classroom.grade_probe",
        name,
        exercise.run.__module__,
        f"{INSIDE}/in",
        f"{INSIDE}/out",
    ]
    done = sandbox.run(command, given, ran, box, isolation)
    if done.broke == "time":
        why = _(
            "running {name} on the check's inputs took more than {seconds:.0f} s: an endless loop?"
        )
        return "timeout", why.format(name=name, seconds=limits.check), ""
    if done.broke:
        return "error", _broken(done, limits, name), ""
    outcome = _read_json(ran / "outcome.json", 2**16, ran)
    packed = (
        _read_output(ran / "answer.json", 2**20, ran),
        _read_output(ran / "answer.safetensors", 2**30, ran),
    )
    if isinstance(outcome, dict):
        return _outcome(name, str(outcome.get("kind")), str(outcome.get("detail", ""))[:300])
    if None in packed:
        why = _("{name} stopped the checker's process (exit(), a crash, or out of memory)")
        return "error", why.format(name=name), ""
    try:
        exercise.verdict(packed, inputs)
    except PartlyWritten as partly:  # the written part is right; another still raises
        return "not attempted", partly.said(), ""
    except NotWritten:  # every part still raises NotImplementedError
        return "not attempted", "", ""
    except CheckFailed as failed:  # the check's message and hint, in the language chosen
        return "wrong", str(failed), getattr(failed, "shown_hint", failed.hint)
    except Exception:  # noqa: BLE001 - an answer file the sandbox forged or broke
        return "error", _("what {name} returned could not be read back").format(name=name), ""
    return "passed", "", ""


def _outcome(name: str, kind: str, detail: str) -> tuple[str, str, str]:
    if kind == "not written":
        return "not attempted", "", ""
    if kind == "uses the course's solution":
        why = _("{name} uses the course's own solution (called, wrapped or subclassed), not yours")
        return "not attempted", why.format(name=name), ""
    if kind == "weights mismatch":
        failed = WeightsMismatch(detail)
        failed.exercise = name
        return "wrong", str(failed), getattr(failed, "shown_hint", failed.hint)
    if kind == "no stub":
        return "error", _(GRADER_FAULT), ""
    return "error", gradebook.printable(detail) or _("{name} failed").format(name=name), ""
