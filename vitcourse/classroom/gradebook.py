"""The class grader's records and reports: a journal written as it goes, then the files a teacher
reads and imports.

`vitcourse.classroom.grade` appends each graded notebook to `journal.jsonl` as soon as it is done
(flushed to disk), so a grader that is stopped loses nothing and `--resume` goes on from there; the
reports are built from the journal:

- `grades.csv`: a row per student and exercise (status, points, hint, flags);
- `gradebook.csv`: a row per student, a column per exercise (1 point for a pass) and the total,
  the shape a spreadsheet or a learning platform's gradebook import takes;
- `feedback/<student>.md`, `summary.md` (per exercise: how many passed, the most common mistakes
  from the checks' own hints) and `similar.md` (answers identical or nearly identical to another
  student's, or to the course's solution, for the teacher to read before trusting a grade).

Everything a student wrote (a folder's name, an error's text) is escaped: no spreadsheet formula
in a CSV file, no HTML or Markdown markup in a report. The reports are in the language chosen
(`vitcourse.language`, the grader's `--language`); a status stays English in the CSV files and the
journal (`STATUSES`), and a report shows it through `_`.
"""

from __future__ import annotations

import collections
import csv
import hashlib
import html
import inspect
import json
import os
import re
import unicodedata
from dataclasses import asdict, dataclass
from pathlib import Path

from vitcourse.checks.registry import exercises
from vitcourse.classroom.similarity import normalised
from vitcourse.language import N_, _

# A grade's status is kept in English (grades.csv, the journal); a report shows it through `_`.
STATUSES = (N_("passed"), N_("wrong"), N_("not attempted"), N_("error"), N_("timeout"))
NOT_HANDED_IN = N_("not handed in")  # the hint of the exercises of a notebook not handed in
QUIZ = "quiz"  # the item a notebook's questions are graded as (vitcourse.classroom.grade_quiz)
MARKS = {"passed": "✓", "wrong": "✗", "error": "✗", "timeout": "⏱", "not attempted": "·"}


@dataclass(frozen=True)
class Grade:
    """One row of grades.csv. `mistake` is the check's own hint (the catalogue's words, never the
    student's) that summary.md counts; `flags` are notes for the teacher. `score`: the share of
    the item earned where it can be partly earned (a quiz: the share of its questions answered
    right); None for an exercise, which earns all (passed) or nothing."""

    student: str
    notebook: str
    exercise: str
    status: str
    hint: str = ""
    mistake: str = ""
    flags: str = ""
    score: float | None = None

    @property
    def earned(self) -> float:
        """The share of the item's points earned, from 0 to 1."""
        return float(self.status == "passed") if self.score is None else float(self.score)


# --- the journal -------------------------------------------------------------------------------


def append(journal: Path, record: dict) -> None:
    """Add one graded notebook's record, on disk before this returns."""
    with open(journal, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read(journal: Path) -> list[dict]:
    """The records in a journal; a last line cut short by a stop is left out."""
    records = []
    if journal.exists():
        for line in journal.read_text(encoding="utf-8").splitlines():
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


# --- escaping ----------------------------------------------------------------------------------


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (a name from a Windows zip)
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: str) -> str:
    """`text` with every character a terminal or an editor would act on, or hide, written as an
    escape: control characters (ESC starts the sequences that rewrite a terminal), right-to-left
    and other invisible format marks, line breaks, and the bytes of a name that was not UTF-8."""
    return "".join(c if c.isprintable() else _escape(c) for c in str(text))


def student_name(raw: str) -> str:
    """A student folder's name (as the file system gave it: bytes that are not UTF-8 come as
    surrogates) as text that can be printed and written anywhere; two different names stay
    different (backslashes are doubled first)."""
    return printable(raw.replace("\\", "\\\\"))


def cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: one starting with =, +, -, @ would be read as a
    formula, so it gets a leading apostrophe. Control characters are escaped, and the CSV files
    quote every text cell, so a `;` or a tab inside one never starts another cell (`x;=1+2`)."""
    text = printable(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def markdown(text: str) -> str:
    """Text shown as itself in Markdown: HTML escaped, markup characters backslashed."""
    text = html.escape(printable(" ".join(str(text).split())), quote=False)
    return re.sub(r"([\\`*_\[\]|#!])", r"\\\1", text)


def file_name(student: str) -> str:
    """A file name of the student's own: readable, and distinct for every student even on a disk
    that ignores case or cuts names short (`ann smith`, `ann_smith` and `Ann_Smith` differ in the
    hash of the whole name)."""
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", student).lstrip(".") or "student"
    digest = hashlib.sha256(student.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{safe[:60]}-{digest}"


def one_line(text: str) -> str:
    """A check's message on one line: "...: problem. Hint: ..." (its "Hint:" in the language
    chosen too, as `CheckFailed` writes it)."""
    for label in dict.fromkeys(("Hint: ", _("Hint: {hint}").format(hint=""))):
        text = text.replace(f"\n{label}", f". {label}") if label.strip() else text
    return " ".join(text.split())


# --- the reports -------------------------------------------------------------------------------


def write_reports(grades: list[Grade], skipped: list[str], similar: list[str], out: Path) -> str:
    """Write grades.csv, gradebook.csv, feedback/, summary.md and similar.md; return the summary."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "grades.csv", "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        columns = ["student", "notebook", "exercise", "status", "points", "hint", "flags"]
        writer.writerow(columns)
        for g in grades:
            row = asdict(g) | {"points": _points(g.earned)}
            row["hint"] = one_line(row["hint"])
            writer.writerow([row[c] if c == "points" else cell(row[c]) for c in columns])
    write_gradebook(grades, out / "gradebook.csv")
    (out / "feedback").mkdir(exist_ok=True)
    for student in sorted({g.student for g in grades}):
        mine = [g for g in grades if g.student == student]
        passed = sum(g.status == "passed" for g in mine)
        lines = [
            "# " + _("Feedback for {student}").format(student=markdown(student)),
            "",
            _("{passed} of {total} exercises passed.").format(passed=passed, total=len(mine)),
        ]
        for notebook in dict.fromkeys(g.notebook for g in mine):
            lines += ["", f"## {notebook}", ""]
            for g in (g for g in mine if g.notebook == notebook):
                lines.append(f"- {MARKS[g.status]} **{g.exercise}**: {_(g.status)}")
                if g.hint:
                    lines.append(f"  - {markdown(one_line(g.hint))}")
        (out / "feedback" / f"{file_name(student)}.md").write_text(
            "\n".join(lines) + "\n", encoding="utf-8"
        )
    summary = summarise(grades, skipped)
    (out / "summary.md").write_text(summary, encoding="utf-8")
    text = ["# " + _("Similar answers"), ""]
    text += [f"- {line}" for line in similar] or [_("No two answers are alike beyond chance.")]
    (out / "similar.md").write_text("\n".join(text) + "\n", encoding="utf-8")
    return summary


def _points(earned: float) -> int | float:
    """1 point an item: a whole number where it is one, else two decimals (a quiz's 0.75)."""
    return int(earned) if earned == int(earned) else round(earned, 2)


def items(grades: list[Grade]) -> list[tuple[str, str]]:
    """The (notebook, item) pairs `grades` hold, in the course's order: each notebook's exercises
    in the registry's order, then its quiz."""
    known = {(g.notebook, g.exercise) for g in grades}
    order = [(e.notebook, e.name) for e in exercises().values()]
    order += [(notebook, QUIZ) for notebook in sorted({n for n, _ in known})]
    order.sort(key=lambda pair: pair[0])  # stable: exercises before the quiz
    return [pair for pair in dict.fromkeys(order) if pair in known]


def write_gradebook(grades: list[Grade], path: Path) -> None:
    """A row per student, a column per item (1 for a pass; a quiz its share) and the total."""
    order = items(grades)
    points = collections.defaultdict(dict)
    for g in grades:
        points[g.student][(g.notebook, g.exercise)] = _points(g.earned)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        writer.writerow(["student", *(f"{nb} {name}" for nb, name in order), "total"])
        for student in sorted(points):
            row = [points[student].get(pair, 0) for pair in order]
            writer.writerow([cell(student), *row, _points(sum(row))])


def summarise(grades: list[Grade], skipped: list[str] = ()) -> str:
    """The class summary: per exercise, how many passed and the most common mistakes (the
    checks' own hints: nothing a student wrote)."""
    students = sorted({g.student for g in grades})
    lines = ["# " + _("Class summary: {count} students").format(count=len(students)), ""]
    columns = (N_("exercise"), N_("notebook"), *STATUSES)
    lines += ["| " + " | ".join(_(c) for c in columns) + " |", "|---|---|---|---|---|---|---|"]
    by_exercise = collections.defaultdict(list)
    for g in grades:
        by_exercise[(g.notebook, g.exercise)].append(g)
    order = items(grades)
    for notebook, name in order:
        counts = collections.Counter(g.status for g in by_exercise[(notebook, name)])
        passed = _("{passed} of {total}").format(
            passed=counts["passed"], total=len(by_exercise[(notebook, name)])
        )
        lines.append(
            f"| {name} | {notebook} | {passed} | "
            + " | ".join(str(counts[s]) for s in STATUSES[1:])
            + " |"
        )
    lines += ["", "## " + _("Most common mistakes"), ""]
    for notebook, name in order:
        # A quiz's mistake lists each wrong answer ("sqrt_d: a, tokens: 197"): counted one by one.
        mistakes = [m for g in by_exercise[(notebook, name)] for m in _mistakes(g)]
        for hint, count in collections.Counter(mistakes).most_common(3):
            who = _("{count} students") if count > 1 else _("{count} student")
            shown = f"{notebook} {name}" if name == QUIZ else name
            lines.append(f"- **{shown}** ({who.format(count=count)}): {hint}")
    if skipped:
        lines += ["", "## " + _("Skipped"), ""] + [f"- {markdown(s)}" for s in skipped]
    return "\n".join(lines) + "\n"


def _mistakes(grade: Grade) -> list[str]:
    if not grade.mistake:
        return []
    return grade.mistake.split(", ") if grade.exercise == QUIZ else [grade.mistake]


# --- alike answers -----------------------------------------------------------------------------


def reference_source(name: str) -> str | None:
    """The course's solution to exercise `name`, normalised (identifiers and all in NFKC, as the
    answers are: `grade._answers`)."""
    reference = exercises()[name].reference
    try:
        source = unicodedata.normalize("NFKC", inspect.getsource(reference))
        return normalised(source, reference.__name__)
    except (OSError, TypeError):
        return None


# copydetect's defaults: a shared piece shorter than 25 characters never counts, one of 30 or
# more always does.
NOISE, GUARANTEE = 25, 30


def fingerprints(source: str) -> set:
    """What `alike` compares of a normalised answer: the hashes that winnowing keeps of its
    25-character pieces (the method of MOSS, Schleimer, Wilkerson and Aiken 2003, as copydetect
    implements it), in time linear in its length. An answer shorter than one piece is its own
    fingerprint."""
    from copydetect.utils import get_document_fingerprints

    if len(source) < NOISE:
        return {source}
    hashes, _where = get_document_fingerprints(source, NOISE, GUARANTEE - NOISE + 1)
    return {int(h) for h in hashes}


def _shared(a: set, b: set) -> float:
    """How alike two answers' fingerprints are: 1 for the same, 0 for nothing in common."""
    return 2 * len(a & b) / (len(a) + len(b)) if a or b else 1.0


def _root(group: dict[str, str], s: str) -> str:
    while group[s] != s:
        s = group[s]
    return s


def alike(answers: dict[tuple[str, str], str], near: float = 0.9) -> list[str]:
    """Groups of students whose answers to one exercise are identical or nearly so (normalised
    source; at least `near` of their fingerprints shared, see `fingerprints`; linked in chains),
    and answers that are the course's solution word for word. `answers` maps (student, exercise)
    to the normalised source of what they handed in."""
    found = []
    by_exercise = collections.defaultdict(dict)
    for (student, name), source in answers.items():
        by_exercise[name][student] = source
    for name in (n for n in exercises() if n in by_exercise):
        sources, solution = by_exercise[name], reference_source(name)
        students = sorted(s for s in sources if sources[s] != solution)
        found += [
            f"{name}: "
            + _("{student}'s answer is the course's own solution, word for word").format(
                student=markdown(s)
            )
            for s in sorted(sources)
            if sources[s] == solution
        ]
        group = {s: s for s in students}  # union-find over "alike" pairs
        prints = {s: fingerprints(sources[s]) for s in students}
        for i, a in enumerate(students):
            for b in students[i + 1 :]:
                if _shared(prints[a], prints[b]) >= near:
                    group[_root(group, b)] = _root(group, a)
        clusters = collections.defaultdict(list)
        for s in students:
            clusters[_root(group, s)].append(s)
        for members in clusters.values():
            if len(members) > 1:
                same = len({sources[s] for s in members}) == 1
                kind = _("identical") if same else _("at least {near:.0%} alike, in a chain")
                kind = kind.format(near=near)
                found.append(f"{name}: {', '.join(markdown(s) for s in members)} ({kind})")
    return found
