"""What `similar.md` compares of a submitted notebook: each exercise's answer, read from its cells as
text (nothing of it runs), normalised, in a process of its own under limits (`read_apart`).

A submission is the student's: its bytes could make a parser slow or hungry (1,500 cells of 20,000
characters; code nested past Python's limits). So the grader reads them in a child process with
a memory limit, a CPU-time limit and a wall-clock timeout, and a child that breaks one gives no
answers to compare (the notebook is still graded). Then `vitcourse.classroom.gradebook.alike`
compares the answers by their fingerprints, in time linear in their length.

    python -m vitcourse.classroom.similarity NAME...    # the notebook's bytes on stdin, JSON out
"""

from __future__ import annotations

import ast
import json
import re
import resource
import subprocess
import sys
import unicodedata

MAX_ANSWER_CHARS = 20_000  # an answer's source compared with others (longer: not compared)
SECONDS, MEMORY_GB = 30, 2  # the child's limits: CPU time and wall time, address space


def answers(data: bytes, names: list[str]) -> dict[str, str]:
    """{exercise: its definition's normalised source} for each of `names` that a submission's
    cells define (in this process: `read_apart` is the grader's way)."""
    try:
        cells = json.loads(data)["cells"]
        sources = [
            "".join(c["source"]) if isinstance(c["source"], list) else str(c["source"])
            for c in cells
            if c.get("cell_type") == "code"
        ]
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError, MemoryError):
        return {}
    # Identifiers as Python reads them (NFKC: `def ｐatchify` defines `patchify`).
    sources = [unicodedata.normalize("NFKC", source) for source in sources]
    found = {}
    for name in names:
        defines = rf"^[ \t]*(?:def|class)\s+{re.escape(name)}\b|^{re.escape(name)}\s*=(?!\s*check_)"
        last = [source for source in sources if re.search(defines, source, re.M)][-1:]
        # Only the last cell that defines it, as the grader keeps it, is parsed: one per answer.
        source = _bounded(last[0], name) if last else None
        if source is not None and "raise NotImplementedError" not in source:
            found[name] = source  # an open exercise is not an answer to compare
    return found


def _bounded(source: str, name: str) -> str | None:
    """An answer's normalised source; None for one too long or too deeply nested to parse
    (`1+1+...` 5,000 times), which is then compared with nothing."""
    if len(source) > MAX_ANSWER_CHARS:
        return None
    try:
        found = normalised(source, name)
    except (RecursionError, MemoryError, ValueError, TypeError, SystemError):
        return None  # SystemError: CPython's "AST constructor recursion depth mismatch"
    return found if found is None or len(found) <= MAX_ANSWER_CHARS else None


def normalised(source: str, name: str) -> str | None:
    """The definition of `name` in `source` with names, docstrings, comments and layout made
    uniform (what stays is the structure and the calls), or None if there is none to read."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found = node if node.name == name else found
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            found = node.value
    if found is None:
        return None
    bound = {node.arg for node in ast.walk(found) if isinstance(node, ast.arg)}
    bound |= {
        n.id for n in ast.walk(found) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    renamed: dict[str, str] = {}  # the answer's own names, in order; torch, F, range stay

    def rename(old: str) -> str:
        return renamed.setdefault(old, f"v{len(renamed)}") if old in bound else old

    for node in ast.walk(found):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(getattr(body[0], "value", None), ast.Constant) and isinstance(
                body[0].value.value, str
            ):
                node.body = body[1:] or [ast.Pass()]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            node.name = "answer" if node is found else node.name
        elif isinstance(node, ast.Name):
            node.id = rename(node.id)
        elif isinstance(node, ast.arg):
            node.arg = rename(node.arg)
    return ast.unparse(found)


def _limits() -> None:  # the child's, set before it starts
    memory = int(MEMORY_GB * 2**30)
    for which, value in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, SECONDS)):
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


def read_apart(data: bytes, names: list[str]) -> dict[str, str]:
    """`answers`, read in a child process under limits (`SECONDS` of CPU and of wall time,
    `MEMORY_GB` of address space); {} when it breaks one or fails."""
    if not names:
        return {}
    command = [sys.executable, "-m", "vitcourse.classroom.similarity", *names]
    try:
        done = subprocess.run(
            command, input=data, capture_output=True, timeout=SECONDS, preexec_fn=_limits
        )
        found = json.loads(done.stdout) if done.returncode == 0 else {}
    except (subprocess.TimeoutExpired, ValueError, OSError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if k in names and isinstance(v, str)}


if __name__ == "__main__":
    print(json.dumps(answers(sys.stdin.buffer.read(), sys.argv[1:])))
