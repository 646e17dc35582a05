"""Grade a class: run every student's notebooks, each in a sandbox, and judge each exercise.

    python -m vitcourse.grade SUBMISSIONS --out OUT [--jobs N] [--resume] [--no-sandbox]
                              [--language es]

SUBMISSIONS holds one folder per student, as a teacher collects them:
`SUBMISSIONS/<student>/01_patches.ipynb`, ... (`vitcourse.classroom.submissions` finds them: of
several copies the newest is graded; links are never followed; hidden files are reported).

Each notebook is graded in two steps, each in a sandbox (`vitcourse.classroom.sandbox`: no network,
no access to your files, limits on time, memory, processes and output):

1. `vitcourse.classroom.grade_worker` runs it in a fresh kernel in quick mode on the CPU, and
   keeps what each exercise's name holds after the cell that defines it (`def patchify`,
   `class ...`, `patchify = ...`), so a deleted, duplicated or moved cell does not matter.
2. For each exercise, `vitcourse.classroom.grade_probe` runs what was kept on inputs drawn with a
   seed the student cannot know, in a sandbox whose `vitcourse` has no solution to that exercise (an
   answer that calls, wraps or subclasses it is "not attempted"). What comes back is plain
   tensors and numbers (`vitcourse.checks.answers`); the verdict and the hint are decided here,
   in the grader's own process, by the same check a learner runs in the notebook.

Each graded notebook is appended to `OUT/journal.jsonl` at once, so a stopped grader loses nothing
(`--resume` goes on from it). OUT receives `grades.csv`, `gradebook.csv`, `feedback/<student>.md`,
`summary.md`, `similar.md` (`vitcourse.classroom.gradebook`) and `executed/`, each notebook as it
ran. Status is one of: passed, wrong, not attempted, error, timeout. `--language` (English by
default) is the language of the feedback and the reports, and of the sandboxes' checks.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

from tqdm.auto import tqdm

from vitcourse.classroom import gradebook, sandbox, similarity
from vitcourse.classroom import sandbox_cgroup as cgroups
from vitcourse.classroom import sandbox_disk as disk
from vitcourse.classroom.gradebook import NOT_HANDED_IN, Grade, summarise
from vitcourse.classroom.grading import exercises_by_notebook, grade_notebook, graded_by_notebook
from vitcourse.classroom.sandbox import Limits
from vitcourse.classroom.submissions import find_submissions, read_submission
from vitcourse.language import LANGUAGES, _, catalog, known, language, set_language

# --- the class ---------------------------------------------------------------------------------


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def grade_class(
    submissions: Path,
    out: Path,
    limits: Limits = Limits(),  # noqa: B008 - frozen
    jobs: int = 1,
    quick: bool = True,
    notebooks: list[str] | None = None,
    use_sandbox: bool = True,
    resume: bool = False,
) -> tuple[list[Grade], list[str]]:
    """Grade every submission; write the reports; return (grades, skipped files).

    `notebooks`: the notebooks handed out (default: every one any student handed in); a student
    without one gets its exercises as "not attempted", with the hint "not handed in". The grades'
    hints and the reports are in the language chosen (`vitcourse.language`).
    `resume`: keep what `out/journal.jsonl` holds of an earlier run on the same files."""
    submissions, out = Path(submissions).absolute(), Path(out).absolute()
    students, skipped = find_submissions(submissions)
    for message in skipped:
        print(_("skipped {what}").format(what=gradebook.printable(message)))
    expected = notebooks or sorted({nb for handed in students.values() for nb in handed})
    out.mkdir(parents=True, exist_ok=True)
    journal = out / "journal.jsonl"
    if not resume:
        if journal.exists():
            os.replace(journal, out / "journal.previous.jsonl")
        for folder in ("executed", "feedback"):  # the grader's own outputs of an earlier run
            sandbox.remove_tree(out / folder)
    done = {(r["student"], r["notebook"], r["sha256"]): r for r in gradebook.read(journal)}
    for stale in out.glob(".work-*"):  # left by a grader that was killed: never /tmp
        sandbox.remove_tree(stale)
    work = Path(tempfile.mkdtemp(prefix=".work-", dir=out))
    todo = [(s, nb, p) for s, handed in students.items() for nb, p in handed.items()]
    try:
        with (
            ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
            tqdm(total=len(todo), desc="grading", unit="notebook") as bar,
        ):
            futures = [
                pool.submit(_grade_one, s, nb, p, out, limits, quick, use_sandbox, work, done)
                for s, nb, p in todo
            ]
            for future in as_completed(futures):
                future.result()
                bar.update()
    finally:
        sandbox.remove_tree(work)
    return _report(students, expected, skipped, journal, out)


def _grade_one(student, notebook, path, out, limits, quick, use_sandbox, work, done) -> None:
    """Grade one notebook (unless the journal has it already, for these very bytes) and append
    it to the journal."""
    data, start = b"", time.monotonic()
    try:
        data = read_submission(path)
        if (student, notebook, _digest(data)) in done:
            return
        grades = grade_notebook(student, notebook, data, out, limits, quick, use_sandbox, work)
        answers = similarity.read_apart(data, exercises_by_notebook().get(notebook, []))
    except Exception as e:  # noqa: BLE001 - one notebook ends in a status, never stops the class
        why = gradebook.printable(" ".join(f"{type(e).__name__}: {e}".split()))[:300]
        why = _("the grader could not grade this notebook ({why})").format(why=why)
        grades = [Grade(student, notebook, n, "error", why) for n in graded_by_notebook()[notebook]]
        answers = {}
    record = {
        "student": student,
        "notebook": notebook,
        "sha256": _digest(data),
        "path": str(path),
        "grades": [asdict(g) for g in grades],
        "answers": answers,
        "seconds": round(time.monotonic() - start, 1),
    }
    gradebook.append(out / "journal.jsonl", record)


def _report(students, expected, skipped, journal: Path, out: Path):
    """The reports, from the journal's latest record of each (student, notebook)."""
    latest = {(r["student"], r["notebook"]): r for r in gradebook.read(journal)}
    grades, answers = [], {}
    for (student, notebook), record in latest.items():
        if student not in students or students[student].get(notebook) is None:
            continue
        try:
            now = _digest(read_submission(Path(record["path"])))
        except OSError:
            now = None
        grades += [Grade(**g) for g in record["grades"]]
        if now != record["sha256"]:
            skipped.append(
                _("{student}/{notebook}: changed while it was graded; grade it again").format(
                    student=student, notebook=notebook
                )
            )
        for name, source in record.get("answers", {}).items():
            answers[(student, name)] = source
    for student, handed in students.items():
        for notebook in expected:
            if notebook not in handed:
                grades += [
                    Grade(student, notebook, name, "not attempted", _(NOT_HANDED_IN))
                    for name in graded_by_notebook()[notebook]
                ]
    order = gradebook.items(grades)
    grades.sort(key=lambda g: (g.student, order.index((g.notebook, g.exercise))))
    similar = gradebook.alike(answers)
    copies = {
        key for key, source in answers.items() if source == gradebook.reference_source(key[1])
    }
    flag = {"flags": _("its source is the course's solution, word for word")}
    grades = [Grade(**asdict(g) | flag) if (g.student, g.exercise) in copies else g for g in grades]
    gradebook.write_reports(grades, skipped, similar, out)
    return grades, skipped


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vitcourse.grade",
        description="Run every student's notebooks in a sandbox and judge their exercises.",
    )
    parser.add_argument("submissions", type=Path, help="a folder with one folder per student")
    parser.add_argument("--out", type=Path, required=True, help="folder for grades and reports")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per notebook (600)")
    parser.add_argument("--cell-timeout", type=float, default=120, help="seconds per cell (120)")
    parser.add_argument("--check-timeout", type=float, default=30, help="seconds per answer (30)")
    parser.add_argument(
        "--memory", type=float, default=8, help="GB per notebook, all its processes (8)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="notebooks graded at once (1)")
    parser.add_argument(
        "--notebooks",
        help="the notebooks handed out, e.g. 01_patches,03_attention (default: all handed in)",
    )
    parser.add_argument("--full", action="store_true", help="run in full mode, not quick mode")
    parser.add_argument("--resume", action="store_true", help="go on from OUT/journal.jsonl")
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade without bubblewrap's sandbox (the students' code runs as you)",
    )
    parser.add_argument(
        "--language",
        help="the language of the feedback and the reports: "
        f"{' or '.join(LANGUAGES)} (default: VITCOURSE_LANG's, else en)",
    )
    return parser


def speak(parser: argparse.ArgumentParser, code: str | None) -> None:
    """Grade in language `code` (`--language`; without it, `VITCOURSE_LANG`'s, else English): the
    feedback, the reports and the sandboxes' checks (`VITCOURSE_LANG`). One the course does not
    speak, or has no catalog for, is a one-line error."""
    try:
        code = known(code) if code else language()
        catalog(code)
    except (ValueError, FileNotFoundError) as e:
        parser.exit(2, f"error: --language: {e}\n")
    set_language(code)


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    speak(parser, args.language)
    limits = Limits(args.timeout, args.cell_timeout, args.check_timeout, args.memory)
    notebooks = args.notebooks.split(",") if args.notebooks else None
    unknown = [n for n in notebooks or [] if n not in graded_by_notebook()]
    if unknown:
        parser.error(
            f"--notebooks: {', '.join(unknown)} not among the notebooks with exercises or a quiz "
            f"({', '.join(graded_by_notebook())})"
        )
    for needed in ("cloudpickle", "copydetect"):  # answers between sandboxes; similar.md
        if importlib.util.find_spec(needed) is None:
            parser.exit(
                2, f"error: the grader needs {needed}: pip install -r requirements-teachers.txt\n"
            )
    missing = sandbox.bubblewrap()
    if missing and not args.no_sandbox:
        instead = (  # run as root, grading without a sandbox would run the students as root
            "Fix that, or grade as a user other than root: --no-sandbox would run the students' "
            "code as root"
            if os.geteuid() == 0
            else f"--no-sandbox grades without one, and then {sandbox.EXPOSED}"
        )
        parser.exit(
            2, f"error: {missing}.\nThe grader runs students' code only in a sandbox. {instead}.\n"
        )
    if args.no_sandbox:
        print(f"warning: no sandbox: {sandbox.EXPOSED}.", file=sys.stderr)
    else:  # where the poll alone counts: say what it misses
        if cgroups.why_not():
            print(f"note: {cgroups.note()}.", file=sys.stderr)
        if disk.why_not():  # or held by a teacher's sandbox itself: `sandbox_out`
            print(f"note: {disk.note(sandbox.BUBBLEWRAP)}.", file=sys.stderr)
    try:
        grades, skipped = grade_class(
            args.submissions,
            args.out,
            limits,
            args.jobs,
            not args.full,
            notebooks,
            not args.no_sandbox,
            args.resume,
        )
    except FileNotFoundError as e:
        parser.exit(2, f"error: {e}\n")
    print(summarise(grades, skipped))
    print(
        _("{count} grades in {grades}, feedback in {feedback}").format(
            count=len(grades), grades=args.out / "grades.csv", feedback=args.out / "feedback"
        )
    )
    failure = same_failure(grades)
    if failure:
        parser.exit(
            3,
            f"error: every notebook failed the same way ({failure}): that is the "
            "grader's set-up, not the students' work; fix it and grade again\n",
        )


def same_failure(grades: list[Grade]) -> str | None:
    """The one reason every graded notebook of the class is an error for, where there are at
    least two notebooks and one reason (a package the sandbox cannot see, a broken install)."""
    graded = [g for g in grades if g.hint != _(NOT_HANDED_IN)]
    notebooks = {(g.student, g.notebook) for g in graded}
    reasons = {g.hint for g in graded}
    if len(notebooks) >= 2 and len(reasons) == 1 and all(g.status == "error" for g in graded):
        return gradebook.printable(reasons.pop())[:300]
    return None


if __name__ == "__main__":
    main()
