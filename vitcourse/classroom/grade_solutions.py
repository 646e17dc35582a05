"""The course's solutions, kept from what the class grader runs: a package without them, and
their compiled code, to recognise them however an answer carried them.

`vitcourse.classroom.grading` runs each submitted notebook, and then each exercise's answer, with a
copy of the `vitcourse` package in which the course's solutions are stubs (`package_without`): the
notebook cannot read, import, copy or pickle them, and an answer that calls, wraps or subclasses one
meets `UsesCourseSolution`. The copy says which solutions it lacks (`WITHOUT_FILE`), so the probe
can tell that it imported the stubbed copy and not an installed one.

`carries_solution` looks, in the grader's own process and without unpickling anything, for the
solutions' compiled code (bytecode) in a kept answer's bytes: cloudpickle writes a function's
bytecode as it is, so a solution sent by value (`register_pickle_by_value`, `__code__` copied,
`exec` of its source) is found there, whatever its names or line numbers.
"""

from __future__ import annotations

import ast
import json
import secrets
import shutil
import threading
import types
from pathlib import Path

from vitcourse.classroom.sandbox_bubblewrap import package_dir

WITHOUT_FILE = "_without.json"  # in a stubbed copy: the exercises whose solutions it lacks
MIN_CODE_BYTES = 24  # shorter bytecode (`return x`) could be anyone's

_copies: dict[tuple[tuple[str, ...], Path], Path] = {}  # (exercises, folder) -> the copy there
_copies_lock = threading.Lock()


def package_without(names: str | tuple[str, ...] | list[str], folder: Path) -> Path:
    """A copy of the `vitcourse` package in which the course's solution to each exercise in
    `names` is a stub raising `UsesCourseSolution`: a class that cannot be built or subclassed, a
    function that cannot be called. The rest of the package is as it is."""
    # imported here: the checker's sandbox imports this module for WITHOUT_FILE alone
    from vitcourse.checks.registry import exercises

    names = (names,) if isinstance(names, str) else tuple(names)
    with _copies_lock:
        if (names, folder) in _copies and _copies[names, folder].exists():
            return _copies[names, folder]
        # a name no student can guess: outside bubblewrap, other copies sit where it may pass
        copy = folder / f"without-{'-'.join(names)}-{secrets.token_hex(8)}" / "vitcourse"
        shutil.copytree(
            package_dir(),
            copy,
            ignore=shutil.ignore_patterns("__pycache__"),
            dirs_exist_ok=True,
        )
        for name in names:
            _stub_out(copy, exercises()[name].reference)
        (copy / WITHOUT_FILE).write_text(json.dumps(list(names)))
        _copies[names, folder] = copy
        return copy


def _stub_out(copy: Path, reference) -> None:
    """Replace `reference`'s definition in the copy's module by its stub."""
    module = copy.joinpath(*reference.__module__.split(".")[1:]).with_suffix(".py")
    lines = module.read_text().splitlines(keepends=True)
    (node,) = [
        n
        for n in ast.parse("".join(lines)).body
        if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == reference.__name__
    ]
    first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
    module.write_text(
        "".join(lines[:first]) + _stub(node, reference) + "".join(lines[node.end_lineno :])
    )


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
        f"    {ast.unparse(n)}\n"
        for n in node.body
        if isinstance(n, ast.Assign | ast.AnnAssign) and isinstance(n.value, ast.Constant)
    )
    return (
        f"class {node.name}({bases}):\n" + constants + "    def __init_subclass__(cls, **kwargs):\n"
        "        if not cls.__module__.startswith('vitcourse.'):\n"
        + refuse.replace("        ", "            ")
        + "    def __init__(self, *args, **kwargs):\n"
        + refuse
    )


# --- the solutions' compiled code --------------------------------------------------------------


def _codes(code: types.CodeType) -> list[types.CodeType]:
    """A code object and those nested in it (inner functions, comprehensions)."""
    found, todo = [], [code]
    while todo:
        code = todo.pop()
        found.append(code)
        todo += [c for c in code.co_consts if isinstance(c, types.CodeType)]
    return found


def solution_code(name: str) -> set[bytes]:
    """The bytecode of the course's solution to exercise `name`: its function's, or every method
    of its class, nested functions included (only pieces long enough to be its own)."""
    from vitcourse.checks.registry import exercises

    reference = exercises()[name].reference
    parts = [reference]
    if isinstance(reference, type):
        parts = [getattr(v, "__func__", v) for v in vars(reference).values()]
        parts += [p.fget for p in vars(reference).values() if isinstance(p, property)]
    codes = [c for part in parts if hasattr(part, "__code__") for c in _codes(part.__code__)]
    return {c.co_code for c in codes if len(c.co_code) >= MIN_CODE_BYTES}


def carries_solution(answer: bytes, names: list[str]) -> str | None:
    """The exercise among `names` whose solution's bytecode is in `answer` (a kept answer's
    pickle, read as bytes), or None."""
    for name in names:
        if any(code in answer for code in solution_code(name)):
            return name
    return None
