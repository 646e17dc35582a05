"""The course's exercises: a registry, the learner's progress, and grading.

`@exercise(name, notebook, reference)` registers a check under the name the learner defines
(and the notebook's check cell rebinds). The check itself only compares: it returns on a right
answer, raises `CheckFailed` on a wrong one, and `NotWritten` while the exercise is open. What
the learner sees, written once here for every check:

- "✓ name: correct", and the learner's own object back, so the notebook goes on with their code;
- "… name: not written yet", and the course's solution (`reference`) in its place, so the rest of
  the notebook runs;
- a failed check's message and first-tier hint, with no frames of the checks' code
  (`CheckFailed`), then where to ask for more (`hint(name)`) and which version the notebook goes
  on with; an error raised by the learner's own code inside the check, in a few lines too
  (`hints.LearnerRaised`: the error, the learner's line, the inputs' shapes, a hint);
- the result recorded in `progress_file()`, so `progress()` in any notebook lists what you
  have passed. `grade(name, learner)` runs a check quietly for the class grader
  (`vitcourse.classroom.grade`).
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import io
import json
import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from vitcourse.checks.exercise import Exercise
from vitcourse.checks.harness import CheckFailed, PartlyWritten
from vitcourse.checks.hints import forget, further, remember
from vitcourse.language import N_, _

# A pass in a teacher's copy (the book executes those): shown by `progress()`, never counted.
TEACHERS = N_("correct with the teacher's solution (not counted)")
# The results the progress file records, in English; `progress()` shows each through `_`.
_RESULTS = (
    N_("passed"),
    N_("wrong"),
    N_("error"),
    N_("not attempted"),
    N_("not run yet"),
    TEACHERS,
)
EXERCISES: dict[str, Exercise] = {}  # filled by @exercise as each check module is imported
# The check modules, in the course's order: `exercises()` imports them all.
CHECK_MODULES = (
    "patching",
    "embedding",
    "attention",
    "block",
    "vit",
    "training",
    "analysis",
    "mae",
    "distillation",
    "scrambling",
)
_MODULE_OF: dict[str, str] = {}  # exercise -> the check module that registered it


def exercises() -> dict[str, Exercise]:
    """Every exercise, in the course's order (`EXERCISES`, completed). A notebook imports only the
    checks it uses; `progress()` and the grader need them all, whichever was imported first."""
    for module in CHECK_MODULES:
        importlib.import_module(f"vitcourse.checks.{module}")
    rank = {module: i for i, module in enumerate(CHECK_MODULES)}
    ordered = sorted(EXERCISES, key=lambda n: rank.get(_MODULE_OF.get(n, ""), len(rank)))
    if list(EXERCISES) != ordered:  # reordered in place: every holder of the dict sees the order
        items = {name: EXERCISES[name] for name in ordered}
        EXERCISES.clear()
        EXERCISES.update(items)
    return EXERCISES


def progress_file() -> Path:
    """Where the checks record each exercise's latest result: `$VITCOURSE_PROGRESS`, or
    `~/.vitcourse/progress.json`."""
    return Path(
        os.environ.get("VITCOURSE_PROGRESS") or Path.home() / ".vitcourse" / "progress.json"
    )


def _read_progress() -> dict:
    try:
        return json.loads(progress_file().read_text())
    except (OSError, ValueError):  # no file yet, or one we cannot read: start afresh
        return {}


def _record(name: str, status: str, keep_learners: bool = False) -> None:
    """Note an exercise's result for `progress()`; a notebook never fails for want of a file.
    With `keep_learners`, a result of the learner's own attempt stays as it is."""
    try:
        path = progress_file()
        results = _read_progress()
        if keep_learners and results.get(name, {}).get("status") in ("passed", "wrong", "error"):
            return
        results[name] = {"status": status, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(results, indent=1))
        os.replace(partial, path)  # atomic: a reader sees the old file or the new one
    except OSError:
        pass


def exercise(name: str, notebook: str, reference):
    """Register the check below (a class holding `inputs`, `run` and `judge`, see
    `checks.harness`) as exercise `name` of `notebook`, lending `reference` while it is open.

    Returns what the notebook's check cell calls: it prints the verdict, records it for
    `progress()` and returns the object the notebook goes on with. The course's own solution
    (lent while the exercise is open) is never the learner's work: running the check cell again
    after it was lent does not count as a pass.
    """

    def register(check: type) -> Callable:
        # what a check may add for the notebook: the hints for errors the learner's code raises
        # inside it, what it calls the learner's code with, its second and third tiers
        registered = Exercise.of(name, notebook, reference, check)
        remember(name, registered.more, worked=registered.worked)

        def check_cell(learner):
            if learner is reference:
                _record(name, "not attempted")
                print(
                    _(
                        "… {name}: this is the course's solution, which the check lent you, not "
                        "yours. Run your exercise's cell again, then this one."
                    ).format(name=name)
                )
                return reference
            try:
                with warnings.catch_warnings():  # PyTorch's own advice here would be the fix
                    warnings.filterwarnings("ignore", message="The use of `x.T`")
                    result = registered.check(learner)
            except PartlyWritten as partly:
                _record(name, "not attempted")
                print(_partly(name, partly))
                return reference
            except CheckFailed as failed:
                _record(name, "wrong")
                remember(name, failed=failed)
                raise
            except Exception as error:  # noqa: BLE001 - the learner's code may raise anything
                _record(name, "error")
                failed = registered.crashed(error)
                remember(name, failed=failed)
                raise failed from None  # said in a few lines, without the check's frames
            forget(name)
            _say_verdict(name, learner, lent=result is reference)
            return result

        check_cell.__name__ = check_cell.__qualname__ = check.__name__
        check_cell.__module__, check_cell.__doc__ = check.__module__, check.__doc__
        check_cell.__wrapped__ = check
        check_cell.exercise = name
        EXERCISES[name] = registered
        _MODULE_OF[name] = check.__module__.rpartition(".")[2]
        return check_cell

    return register


def _partly(name: str, partly: PartlyWritten) -> str:
    return _(
        "… {name}: {said}. The reference solution stands in until every part is written, so the "
        "rest of the notebook runs."
    ).format(name=name, said=partly.said())


def _say_verdict(name: str, learner, lent: bool) -> None:
    """Record and print the verdict of a check that did not fail: open (`lent`: the course's
    solution stands in), passed with the teacher's solution, or passed."""
    if lent:
        _record(name, "not attempted")
        print(
            _(
                "… {name}: not written yet (it raises NotImplementedError). The reference "
                "solution stands in for now, so the rest of the notebook runs. Come back to it!"
            ).format(name=name)
        )
    elif is_teachers_solution(learner):
        _record(name, TEACHERS, keep_learners=True)
        print(
            _("✓ {name}: correct (the solution in the teacher's copy: not your progress)").format(
                name=name
            )
        )
    else:
        _record(name, "passed")
        print(_("✓ {name}: correct, it matches the reference. Well done!").format(name=name))


def hint(name: str) -> None:
    """Print a further hint for exercise `name` (as its check cell calls it: "attention",
    "MultiHeadSelfAttention"): about the mistake its check found last, or a general one."""
    every = exercises()  # its check may not be imported yet in this kernel
    if name not in every:
        raise KeyError(_unknown(name, every))
    tier = further(name)  # (its number, its text in the language chosen)
    if tier is None or not tier[1]:
        print(_("No further hint for {name}, sorry.").format(name=name))
    elif tier[0] == 2:
        print(_("Hint for {name}: {text}").format(name=name, text=tier[1]))
    else:
        print(
            _(
                "Worked by hand, for {name}: {text}\n(That is the last hint. Compare each step of "
                "yours with it, on the same small inputs.)"
            ).format(name=name, text=tier[1])
        )


def _unknown(name: str, every: dict) -> str:
    return _("no exercise named {name}; the exercises are {exercises}").format(
        name=repr(name), exercises=", ".join(every)
    )


def is_teachers_solution(learner) -> bool:
    """Whether `learner` was written in a teacher's copy of a notebook: its source still holds the
    solution markers that student copies replace (`vitcourse.classroom.student`). Its pass is the
    course's work, not the learner's, so it is not recorded in the learner's progress."""
    if isinstance(learner, type):  # a class: its methods hold the solution
        parts = [v for v in vars(learner).values() if inspect.isfunction(v)]
    else:
        parts = [learner]
    for part in parts:
        try:
            if "### BEGIN SOLUTION" in inspect.getsource(part):
                return True
        except (OSError, TypeError):  # no source to read (a builtin, a lambda typed elsewhere)
            continue
    return False


def grade(name: str, learner) -> tuple[str, str]:
    """Run exercise `name`'s check on the learner's definition, quietly.

    Returns (status, hint): status is "passed", "wrong" (the hint is the check's message, naming
    the likely mistake), "not attempted" (it still raises NotImplementedError, wholly or in a
    part, which the hint names; or it is the course's own solution) or "error" (the learner's code
    raised something else; the hint says what, and what to try). Used by
    `vitcourse.classroom.grade`.
    """
    every = exercises()
    if name not in every:
        raise KeyError(_unknown(name, every))
    if learner is every[name].reference:
        why = _("{name} is the course's own solution (lent or imported), not yours")
        return "not attempted", why.format(name=name)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            result = every[name].check(learner)
    except PartlyWritten as partly:
        return "not attempted", partly.said()
    except CheckFailed as e:
        return "wrong", str(e)
    except Exception as e:  # noqa: BLE001 - the learner's code may raise anything
        return "error", str(every[name].crashed(e))
    return ("passed", "") if result is learner else ("not attempted", "")


def assert_written(name: str, learner) -> None:
    """Fail if the learner's `name` is still the course's solution that the check lent: for
    nbgrader's hidden tests (`python -m vitcourse.student --nbgrader-source`), so that an open
    exercise scores no point there."""
    if learner is exercises()[name].reference:
        raise AssertionError(
            _("{name} is not written yet: the course's solution stands in for it").format(name=name)
        )


def exercise_results() -> dict[str, str]:
    """{exercise: the latest result of its check here}; "not run yet" where it never ran."""
    recorded = _read_progress()
    return {name: recorded.get(name, {}).get("status", "not run yet") for name in exercises()}


def passed(name: str) -> bool:
    """Whether exercise `name`'s latest check here passed (the teacher's solution included): a
    notebook shows the package's own code for an exercise only after that, never before the
    learner has tried."""
    return exercise_results()[name] in ("passed", TEACHERS)


def progress(notebook: str = "") -> None:
    """Print the exercises you have passed, from the checks you ran in any notebook (each check
    records its latest result in `progress_file()`).

    With `notebook` (its number, "01", or its name), that notebook's exercises one a line and the
    rest of the course in one line; without, every exercise.
    """
    results, every = exercise_results(), exercises()
    marks = {"passed": "✓", "wrong": "✗", "error": "✗", TEACHERS: "✓"}
    here = [n for n in results if every[n].notebook.startswith(notebook)] if notebook else []
    if notebook and not here:
        notebooks = sorted({e.notebook for e in every.values()})
        raise ValueError(
            _("no exercises in notebook {notebook}: expected one of {notebooks}").format(
                notebook=repr(notebook), notebooks=notebooks
            )
        )
    shown = here or list(results)
    current = None
    for name in shown:
        if every[name].notebook != current:
            current = every[name].notebook
            print(current)
        print(f"  {marks.get(results[name], '·')} {name}: {_(results[name])}")
    if here:
        rest = [results[n] for n in results if n not in here]
        print(_summary(rest.count("passed"), len(rest), rest.count(TEACHERS), whole=False))
    else:
        statuses = list(results.values())
        print(
            _summary(statuses.count("passed"), len(statuses), statuses.count(TEACHERS), whole=True)
        )


def _summary(passed: int, total: int, teachers: int, whole: bool) -> str:
    """`progress()`'s last line: of the whole course, or of the rest of it (one notebook shown)."""
    numbers = {"passed": passed, "total": total, "teachers": teachers}
    if whole and teachers:
        said = _(
            "{passed} of {total} exercises passed ({teachers} more with the teacher's solutions) "
            "(recorded in {file})"
        )
    elif whole:
        said = _("{passed} of {total} exercises passed (recorded in {file})")
    elif teachers:
        said = _(
            "the rest of the course: {passed} of {total} exercises passed ({teachers} more with "
            "the teacher's solutions) (progress() lists them all)"
        )
    else:
        said = _(
            "the rest of the course: {passed} of {total} exercises passed (progress() lists them "
            "all)"
        )
    return said.format(**numbers, file=progress_file())
