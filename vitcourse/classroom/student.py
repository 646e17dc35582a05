"""Student copies: the teacher's notebooks with every solution taken out.

    python -m vitcourse.student notebooks/ OUT/
    python -m vitcourse.student notebooks/ SOURCE/ --nbgrader-source   # for nbgrader users

In the committed (teacher's) notebooks each exercise's solution sits between the nbgrader-style
markers `### BEGIN SOLUTION` and `### END SOLUTION`. A student copy replaces each such block with
`# YOUR CODE HERE` and `raise NotImplementedError()` at the block's indentation, and clears all
outputs. The check cell after each exercise sees the NotImplementedError, says the exercise is open
and lends the reference, so a student copy still runs top to bottom. Copies are generated, never
edited by hand.

Each copy also carries nbgrader's cell metadata (schema version 3), so a teacher already on nbgrader
can use them: an exercise's cell is a solution cell (`grade_id` = the exercise's name), its check
cell a locked autograder test worth one point (`grade_id` = `"check_"` + the name). With
`--nbgrader-source` the solutions stay in: the notebooks for nbgrader's `source/` folder, from
which `nbgrader generate_assignment` makes its own release copies; their check cells carry a hidden
test (`HIDDEN_TEST`) so that nbgrader's autograder gives no point for an exercise left open.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from vitcourse.language import N_, in_language

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
# What a student copy puts where a solution was, in the notebook's language (its metadata's
# `vitcourse.language`, which the Spanish notebooks carry; English otherwise).
CODE_HERE = N_("YOUR CODE HERE")
ANSWER_HERE = N_("YOUR ANSWER HERE")


class MarkerError(ValueError):
    """Solution markers that do not pair up."""


def strip_solutions(
    source: str, where: str, markdown: bool = False, language: str = "en"
) -> tuple[str, int]:
    """Replace each solution block in one cell's source; returns (new source, blocks replaced).
    The stub is written in `language` (a notebook of the Spanish edition: "es")."""
    out: list[str] = []
    opened = None  # line number of the BEGIN marker we are inside, if any
    blocks = 0
    for number, line in enumerate(source.splitlines(), start=1):
        marker = line.strip()
        if marker.startswith(BEGIN):
            if opened is not None:
                raise MarkerError(
                    f"{where}, line {number}: {BEGIN} inside the solution opened on line {opened}"
                )
            opened, blocks = number, blocks + 1
            indent = line[: len(line) - len(line.lstrip())]
            if markdown:
                out.append(indent + in_language(language, ANSWER_HERE))
            else:
                stub = "# " + in_language(language, CODE_HERE)
                out += [indent + stub, indent + "raise NotImplementedError()"]
        elif marker.startswith(END):
            if opened is None:
                raise MarkerError(f"{where}, line {number}: {END} without a {BEGIN} before it")
            opened = None
        elif opened is None:
            out.append(line)
    if opened is not None:
        raise MarkerError(f"{where}: the {BEGIN} on line {opened} is never closed by {END}")
    return "\n".join(out), blocks


# In nbgrader's source versions, each check cell also holds a hidden test: nbgrader removes it
# from the copies it releases and runs it when it autogrades, so that an open exercise (for which
# the check lends the course's solution instead of failing) scores no point.
HIDDEN_TEST = """### BEGIN HIDDEN TESTS
from vitcourse.checks import assert_written
assert_written({name!r}, {name})
### END HIDDEN TESTS"""


def nbgrader_metadata(source: str, has_solution: bool, index: int) -> dict | None:
    """nbgrader's metadata for a cell of a teacher's notebook, or None for an ordinary cell."""
    base = {"schema_version": 3, "task": False}
    check = re.match(r"\s*(\w+) = check_\w+\(\1\)\s*$", source)
    if check:  # an autograder test: locked, one point
        grade_id = f"check_{check.group(1)}"
        return {
            **base,
            "grade": True,
            "grade_id": grade_id,
            "locked": True,
            "points": 1,
            "solution": False,
        }
    if has_solution:
        defined = re.search(r"^(?:def|class)\s+(\w+)", source, flags=re.M)
        grade_id = defined.group(1) if defined else f"answer_{index}"
        return {**base, "grade": False, "grade_id": grade_id, "locked": False, "solution": True}
    return None


def student_notebook(notebook: dict, name: str, keep_solutions: bool = False) -> tuple[dict, int]:
    """A student copy of one notebook (as loaded from JSON); returns (copy, exercises found).

    `keep_solutions`: only add nbgrader's metadata and clear outputs (nbgrader's source version).
    """
    copy = json.loads(json.dumps(notebook))  # a deep copy; the teacher's stays untouched
    language = copy["metadata"].get("vitcourse", {}).get("language", "en")
    exercises = 0
    for index, cell in enumerate(copy["cells"]):
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        where = f"{name}, cell {index}"
        original = source
        if cell["cell_type"] == "code":
            source, blocks = strip_solutions(source, where, language=language)
            cell["outputs"], cell["execution_count"] = [], None
        elif cell["cell_type"] == "markdown":
            source, blocks = strip_solutions(source, where, markdown=True, language=language)
        else:
            blocks = 0
        metadata = nbgrader_metadata(original, blocks > 0, index)
        if metadata is not None:
            if cell["cell_type"] == "markdown" and metadata["solution"]:  # a written answer
                metadata.update(grade=True, points=1)
            cell["metadata"]["nbgrader"] = metadata
            if keep_solutions and metadata["grade"] and cell["cell_type"] == "code":
                original = (
                    original.rstrip("\n")
                    + "\n"
                    + HIDDEN_TEST.format(name=metadata["grade_id"].removeprefix("check_"))
                )
        cell["source"] = original if keep_solutions else source
        exercises += blocks
    copy["metadata"].setdefault("vitcourse", {})["student_copy"] = not keep_solutions
    return copy, exercises


def make_student_copies(
    source_dir: str | Path, out_dir: str | Path, keep_solutions: bool = False
) -> dict[Path, int]:
    """Write a student copy of every notebook in `source_dir` to `out_dir`
    (`keep_solutions`: nbgrader source versions instead).

    Returns {written path: exercises in it}. Every notebook is checked before any is written, so a
    bad marker leaves nothing half-done.
    """
    source_dir, out_dir = Path(source_dir), Path(out_dir)
    notebooks = sorted(source_dir.glob("*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"no notebooks (*.ipynb) in {source_dir}")
    if out_dir.resolve() == source_dir.resolve():
        raise ValueError(
            "the output folder must differ from the source: it would overwrite the "
            "teacher's notebooks"
        )
    copies = {
        path: student_notebook(json.loads(path.read_text()), path.name, keep_solutions)
        for path in notebooks
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for path, (copy, exercises) in copies.items():
        target = out_dir / path.name
        target.write_text(json.dumps(copy, indent=1, ensure_ascii=False) + "\n")
        written[target] = exercises
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m vitcourse.student",
        description="Write student copies of the course notebooks, solutions removed.",
    )
    parser.add_argument("source", help="folder of teacher notebooks, e.g. notebooks/")
    parser.add_argument("out", help="folder for the student copies")
    parser.add_argument(
        "--nbgrader-source",
        action="store_true",
        help="keep the solutions: nbgrader source versions (cell metadata added, outputs cleared)",
    )
    args = parser.parse_args(argv)
    try:
        written = make_student_copies(args.source, args.out, args.nbgrader_source)
    except (MarkerError, ValueError, FileNotFoundError) as e:
        parser.exit(2, f"error: {e}\n")
    for path, exercises in written.items():
        print(f"{path}: {exercises} exercise{'s' if exercises != 1 else ''}")
    kind = "nbgrader source" if args.nbgrader_source else "student"
    print(f"wrote {len(written)} {kind} notebooks to {args.out}")


if __name__ == "__main__":
    main()
