"""What `similar.md` costs on the submissions that once stalled it (issue 48): a notebook of many
cells that each define `patchify` with a long unused string, read in the grader's child process
(`vitcourse.classroom.similarity.read_apart`) and in the grader's own (`answers`), and two
colluders whose answers carry the same padding, compared (`vitcourse.classroom.gradebook.alike`).
Medians of --rounds runs, with `time.perf_counter`.

    python benchmarks/similarity_pass.py                 # 1,500 cells of about 19,600 characters
    python benchmarks/similarity_pass.py --cells 100 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from vitcourse.classroom import gradebook, similarity

NAMES = ["patchify", "unpatchify"]  # notebook 01's exercises


def _median_seconds(work, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1500)
    parser.add_argument("--pad", type=int, default=19_600, help="characters of unused string")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    pad = "".join(chr(97 + (i * 7919) % 26) for i in range(args.pad))
    cells = [
        f"def patchify(x, p):\n    unused = '{pad}'\n    return x * {i}\n"
        for i in range(args.cells)
    ]
    code = [{"cell_type": "code", "source": c, "metadata": {}, "outputs": []} for c in cells]
    notebook = json.dumps({"cells": code}).encode()
    one = f"def patchify(x, p):\n    unused = '{pad}'\n    return x.unfold(2, p, p)\n"
    two = one.replace("(x, p)", "(img, s)").replace("x.unfold(2, p, p)", "img.unfold(2, s, s)")
    answers = {
        (s, "patchify"): similarity.normalised(src, "patchify")
        for s, src in (("ann", one), ("ben", two))
    }
    found = {
        "notebook MB": round(len(notebook) / 2**20, 1),
        "read apart (s)": _median_seconds(
            lambda: similarity.read_apart(notebook, NAMES), args.rounds
        ),
        "read here (s)": _median_seconds(lambda: similarity.answers(notebook, NAMES), args.rounds),
        "two padded colluders compared (s)": _median_seconds(
            lambda: gradebook.alike(answers), args.rounds
        ),
        "grouped": gradebook.alike(answers),
    }
    for key, value in found.items():
        print(f"{key}: {round(value, 3) if isinstance(value, float) else value}")
    return found


if __name__ == "__main__":
    main()
