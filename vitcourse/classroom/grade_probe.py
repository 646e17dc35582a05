"""Run one kept answer on a check's inputs: the second of the grader's two steps.

    python -m vitcourse.classroom.grade_probe EXERCISE MODULE IN OUT

`vitcourse.classroom.grading` starts this in a sandbox whose `vitcourse` package is a copy without
the course's solution to EXERCISE (`vitcourse.classroom.grade_solutions.package_without`): there, an
answer that calls, wraps or subclasses that solution meets `UsesCourseSolution`, however it reached
it. IN holds `answer.pkl` (what the student's notebook defined, kept by
`vitcourse.classroom.grade_worker`) and `inputs.pt` (the check's inputs, drawn by the grader with a
seed the student cannot know). It writes to OUT either `answer.json` and `answer.safetensors`, what
the answer returned as plain data (`vitcourse.checks.answers`), or `outcome.json`: why there is
nothing to judge. The verdict is the grader's, in its own process. MODULE is the exercise's check
module (`vitcourse.checks.patching`): only that one is imported (see `import_check`).
"""

from __future__ import annotations

import importlib
import json
import pickle
import sys
import traceback
from pathlib import Path

import torch

import vitcourse
from vitcourse.classroom.grade_solutions import WITHOUT_FILE


def import_check(module: str) -> None:
    """Import one check module (`vitcourse.checks.patching`), which registers its exercises. The
    others stay unimported (`vitcourse.checks` imports each check when it is first asked for):
    the training check's data layer would cost every answer of a class seconds more."""
    if not module.startswith("vitcourse.checks."):
        raise ValueError(f"expected a module of vitcourse.checks, got {module!r}")
    importlib.import_module(module)


def stubbed(name: str) -> bool:
    """Whether the `vitcourse` imported here is the grader's copy without `name`'s solution (an
    installed package found first, or a course under a hidden folder, would hold the solution)."""
    try:
        without = json.loads((Path(vitcourse.__file__).parent / WITHOUT_FILE).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(without, list) and name in without


def probe(name: str, module: str, given: Path, out: Path) -> None:
    import_check(module)
    from vitcourse.checks.harness import NotWritten, UsesCourseSolution, WeightsMismatch
    from vitcourse.checks.registry import EXERCISES

    exercise = EXERCISES[name]
    inputs = torch.load(given / "inputs.pt", weights_only=True)
    (out / "started").write_text("")  # the answer's time limit counts from here

    def outcome(kind: str, detail: str = "") -> None:
        (out / "outcome.json").write_text(json.dumps({"kind": kind, "detail": detail[:2000]}))

    if not stubbed(name):
        return outcome("no stub", str(Path(vitcourse.__file__).parent))

    try:
        learner = pickle.loads((given / "answer.pkl").read_bytes())
        structure, tensors = exercise.answer(learner, inputs)
    except NotWritten:
        return outcome("not written")
    except UsesCourseSolution:
        return outcome("uses the course's solution")
    except WeightsMismatch as e:
        return outcome("weights mismatch", e.detail)
    except BaseException as e:  # noqa: BLE001 - the student's code may raise anything
        if isinstance(e.__context__, UsesCourseSolution) or "UsesCourseSolution" in repr(e):
            return outcome("uses the course's solution")
        if not isinstance(e, Exception):  # SystemExit, KeyboardInterrupt: Python's own words
            return outcome("error", "".join(traceback.format_exception_only(type(e), e)).strip())
        return outcome("error", str(exercise.crashed(e)))  # the error, and the hint for its kind
    (out / "answer.safetensors").write_bytes(tensors)
    (out / "answer.json").write_bytes(structure)


def main(argv: list[str] | None = None) -> None:
    name, module, given, out = sys.argv[1:] if argv is None else argv
    probe(name, module, Path(given), Path(out))


if __name__ == "__main__":
    main()
