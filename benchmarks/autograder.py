"""How long one submission takes under the platforms' scripts: Gradescope's `run_autograder` and
PrairieLearn's `entrypoint`, run here on their folders laid out in a temporary folder.

Each round grades the teacher's notebook (every exercise passes) as one student's submission, in
bubblewrap's sandbox and as a user of its own (what the platforms' containers allow), in turns,
on the same machine in one run; it prints each round and the medians. Run as root (a user of its
own needs it, as in the platforms' containers).

    python benchmarks/autograder.py                        # notebook 01, 3 rounds
    python benchmarks/autograder.py --notebook 05 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from vitcourse.classroom import bundles
from vitcourse.environment import default_root

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def grade_once(bundle: Path, folder: Path, notebook: str, platform: str, isolation: str,
               tmp: Path) -> tuple[float, dict]:  # fmt: skip
    """Lay out the platform's folder with one submission, run its script; (seconds, results)."""
    root = Path(tempfile.mkdtemp(dir=tmp))
    if platform == "gradescope":
        with zipfile.ZipFile(bundle) as z:
            z.extractall(root / "source")
        script, variable, where = (
            root / "source" / "run_autograder",
            "VITCOURSE_GRADESCOPE_ROOT",
            "submission",
        )
    else:
        shutil.copytree(folder / "questions" / f"vitcourse_{notebook}" / "tests", root / "tests")
        script, variable, where = folder / "entrypoint", "VITCOURSE_PRAIRIELEARN_ROOT", "student"
    (root / where).mkdir()
    shutil.copy(NOTEBOOKS / f"{notebook}.ipynb", root / where)
    env = dict(os.environ, VITCOURSE_PYTHON=sys.executable, VITCOURSE_DATA=str(default_root()))
    env[variable] = str(root)
    start = time.perf_counter()
    subprocess.run(["bash", str(script), "--isolation", isolation], env=env, check=True,
                   stdout=subprocess.DEVNULL)  # fmt: skip
    seconds = time.perf_counter() - start
    return seconds, json.loads((root / "results" / "results.json").read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebook", default="01")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    (notebook,) = bundles.pick_notebooks([args.notebook])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        bundle = bundles.build_gradescope([notebook], tmp / "autograder.zip")
        folder = bundles.build_prairielearn([notebook], tmp / "grader", "bench")
        times: dict[tuple[str, str], list[float]] = {}
        for r in range(args.rounds):
            for platform in ("gradescope", "prairielearn"):
                for isolation in ("bubblewrap", "own-user"):
                    seconds, results = grade_once(
                        bundle, folder, notebook, platform, isolation, tmp
                    )
                    score = results["score"]
                    times.setdefault((platform, isolation), []).append(seconds)
                    print(
                        f"round {r + 1}: {platform:12} {isolation:10} {seconds:6.1f} s, score {score}"
                    )
    print(f"\n{notebook}, {args.rounds} rounds, medians (wall time of the whole script):")
    for (platform, isolation), found in times.items():
        print(f"  {platform:12} {isolation:10} {statistics.median(found):6.1f} s")


if __name__ == "__main__":
    main()
