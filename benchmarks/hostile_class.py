"""What the grader's sandbox stops: the hostile class of tests/classroom/hostile.py, graded with
and without it.

    python benchmarks/hostile_class.py            # both, then a table of what each attack reached
    python benchmarks/hostile_class.py --only sandbox

Each run gets its own made-up HOME holding a secret, its own copy of the class and a listener on
127.0.0.1. Without the sandbox the attackers really act (they rewrite the made-up HOME, another
student's submission and the grades): run it on a machine you do not mind, as CI's is. The one
attack it leaves out there is writing into the installed package, which it only tests for
(`os.access`): in the sandbox the test suite does write (tests/classroom/test_grade_sandbox.py).
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.classroom.hostile import (  # noqa: E402
    SECRET,
    grade_command,
    processes_with,
    write_hostile_class,
)
from tests.classroom.test_grade_sandbox import Listener, _files_under  # noqa: E402


def grade(root: Path, sandboxed: bool) -> dict:
    home, out = root / "home", root / "out"
    listener = Listener()
    subs = write_hostile_class(root / "submissions", home, listener.port, out, write_package=False)
    before = _files_under(subs) | _files_under(home)
    start = time.monotonic()
    done = subprocess.run(grade_command(sandboxed), cwd=root, env=dict(os.environ, HOME=str(home)),
                          capture_output=True, text=True)  # fmt: skip
    seconds = time.monotonic() - start
    left_behind = len(processes_with("vitcourse-orphan"))
    listener.stop()
    try:
        rows = list(csv.DictReader((out / "grades.csv").open()))
    except (OSError, csv.Error):
        rows = []
    status = {(r.get("student"), r.get("exercise")): r.get("status") for r in rows}
    after = _files_under(subs) | _files_under(home)
    leaked = [p.name for p in out.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    forged = ("patch_checks", "patch_allclose", "fake_tensor", "memorised", "marker")
    return {
        "exit": done.returncode,
        "seconds": round(seconds),
        "forged answers that passed": [s for s in forged if status.get((s, "patchify")) == "passed"],
        "borrowed answers that passed": [s for s in ("wrapper", "hidden_import")
                                          if status.get((s, "patchify")) == "passed"]
        + (["subclass"] if status.get(("subclass", "MultiHeadSelfAttention")) == "passed" else []),
        "files of the secret's leak": sorted(set(leaked)),
        "listener heard": len(listener.heard),
        "HOME or submissions changed": sorted(str(p.relative_to(root)) for p in after
                                              if before.get(p) != after[p]),
        "student processes alive after the grader": left_behind,
        "a link graded": any(s == "links" and v != "not attempted" for (s, _), v in status.items()),
        "sockets' buffers past --memory (its grade)": status.get(("sockets", "patchify")),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["sandbox", "no-sandbox"])
    args = parser.parse_args()
    results = {}
    for mode in ("sandbox", "no-sandbox"):
        if args.only in (None, mode):
            with tempfile.TemporaryDirectory() as tmp:
                results[mode] = grade(Path(tmp), mode == "sandbox")
    for key in next(iter(results.values())):
        print(f"| {key} | " + " | ".join(f"{r[key]}" for r in results.values()) + " |")


if __name__ == "__main__":
    main()
