"""How many realistic wrong attempts each exercise's check catches.

    python benchmarks/check_attempts.py            # a table, then every attempt not caught
    python benchmarks/check_attempts.py --json out.json

Runs every attempt in `tests/learner_attempts.py` through `vitcourse.checks.grade` (the class
grader's quiet verdict) and counts, per exercise: the attempts tried, those that passed as
"correct" (the worst outcome), those judged "not attempted" although they hold written code, and
those caught ("wrong" or "error"), of which how many with the words the attempt expects the
check to say (the mistake named). Run it from a checkout of another commit (with this file and
the attempts copied in) to compare two versions of the checks on the same attempts.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.learner_attempts import ATTEMPTS  # noqa: E402
from vitcourse.checks import exercises, grade  # noqa: E402


def run() -> tuple[dict, list]:
    table: dict[str, Counter] = {name: Counter() for name in exercises()}
    misses = []
    for attempt in ATTEMPTS:
        status, hint = grade(attempt.exercise, attempt.code)
        row = table[attempt.exercise]
        row["tried"] += 1
        if status in ("wrong", "error"):
            row["caught"] += 1
            if attempt.says.lower() in hint.lower():
                row["named"] += 1
            else:
                misses.append((attempt, status, hint))
        else:
            row[status] += 1
            misses.append((attempt, status, hint))
    return table, misses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the counts here")
    args = parser.parse_args()
    table, misses = run()
    print("| exercise | tried | caught | mistake named | passed as correct | not attempted |")
    print("|---|---|---|---|---|---|")
    total = Counter()
    for name, row in table.items():
        total.update(row)
        print(
            f"| {name} | {row['tried']} | {row['caught']} | {row['named']} | "
            f"{row['passed']} | {row['not attempted']} |"
        )
    print(
        f"| all | {total['tried']} | {total['caught']} | {total['named']} | "
        f"{total['passed']} | {total['not attempted']} |"
    )
    print()
    for attempt, status, hint in misses:
        said = hint.replace("\n", " ")[:160]
        print(f"- {attempt.exercise}, {attempt.what}: {status}; expected {attempt.says!r}: {said}")
    if args.json:
        args.json.write_text(json.dumps({n: dict(r) for n, r in table.items()}, indent=1))


if __name__ == "__main__":
    main()
