"""How long `python -m vitcourse.grade` takes for a class: 30 submissions of one notebook.

The class is written here from the teacher's notebook: a third hand in the reference answers, a
third an untouched student copy, a third a classic mistake (patches cut by a plain reshape). Each
submission runs in its own process and kernel, in quick mode, as the grader always does, in the
sandbox (then each answer in a second one) unless --no-sandbox.

    python benchmarks/grading.py                          # 30 students, notebook 01, --jobs 1 and 2
    python benchmarks/grading.py --students 10 --jobs 2 --keep runs/grading   # keep the reports
    python benchmarks/grading.py --students 6 --jobs 1 --compare 2   # sandboxed ÷ unsandboxed

`--compare ROUNDS` grades the class in the sandbox and with `--no-sandbox` in turns, ROUNDS times
each, on the same machine in one run, and prints the ratio of the medians (and each round's).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

from vitcourse.classroom.grade import grade_class
from vitcourse.classroom.sandbox import Limits
from vitcourse.classroom.student import student_notebook

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
WRONG_PATCHIFY = """def patchify(images, patch_size):
    B, C, H, W = images.shape
    return images.reshape(B, -1, patch_size * patch_size * C)
"""


def write_class(root: Path, students: int, notebook: str = "01_patches") -> None:
    teacher = json.loads((NOTEBOOKS / f"{notebook}.ipynb").read_text())
    untouched, _ = student_notebook(teacher, notebook)
    wrong = json.loads(json.dumps(teacher))
    for cell in wrong["cells"]:
        if re.search(r"^def patchify\b", "".join(cell["source"]), flags=re.M):
            cell["source"] = WRONG_PATCHIFY
    for n in range(students):
        folder = root / f"student{n:02d}"
        folder.mkdir(parents=True)
        (folder / f"{notebook}.ipynb").write_text(json.dumps((teacher, untouched, wrong)[n % 3]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--keep", type=Path, help="write the class and the grades here to read")
    parser.add_argument("--no-sandbox", action="store_true", help="grade without bubblewrap")
    parser.add_argument("--compare", type=int, metavar="ROUNDS", help="sandboxed vs unsandboxed")
    args = parser.parse_args()
    if args.compare:
        return compare(args.students, args.jobs[0], args.compare)
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or Path(scratch)
        submissions = Path(tmp) / "submissions"
        write_class(submissions, args.students)
        for jobs in args.jobs:
            start = time.perf_counter()
            out = Path(tmp) / f"out{jobs}"
            grades, _ = grade_class(
                submissions, out, Limits(), jobs, use_sandbox=not args.no_sandbox
            )
            seconds = time.perf_counter() - start
            counts = collections.Counter((g.exercise, g.status) for g in grades)
            print(
                f"{args.students} submissions of 01_patches, --jobs {jobs}"
                f"{' --no-sandbox' if args.no_sandbox else ''}: {seconds:.0f} s "
                f"({seconds / args.students:.1f} s a submission); {dict(counts)}",
                flush=True,
            )


def compare(students: int, jobs: int, rounds: int) -> None:
    """Sandboxed and unsandboxed grading of one class, in turns; the ratio of their medians."""
    seconds: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as tmp:
        write_class(Path(tmp) / "submissions", students)
        for n in range(rounds):
            for sandboxed in (True, False):
                start = time.perf_counter()
                out = Path(tmp) / f"out-{n}-{sandboxed}"
                grade_class(Path(tmp) / "submissions", out, Limits(), jobs, use_sandbox=sandboxed)
                seconds[sandboxed].append(time.perf_counter() - start)
                print(f"round {n + 1}, {'sandboxed' if sandboxed else 'unsandboxed'}: "
                      f"{seconds[sandboxed][-1]:.0f} s", flush=True)  # fmt: skip
    ratio = statistics.median(seconds[True]) / statistics.median(seconds[False])
    rounds_ratios = ", ".join(
        f"{a / b:.2f}" for a, b in zip(seconds[True], seconds[False], strict=True)
    )
    print(f"{students} submissions, --jobs {jobs}: sandboxed ÷ unsandboxed = {ratio:.2f} "
          f"(medians; per round {rounds_ratios})")  # fmt: skip


if __name__ == "__main__":
    main()
