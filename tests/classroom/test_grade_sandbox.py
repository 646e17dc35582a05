"""The class grader against a hostile class: every kind of attack seen on the grader, one student
each, graded in bubblewrap's sandbox with a made-up HOME that holds a secret.

What must hold: no forged or borrowed answer passes; the secret is in nothing the grader writes;
nothing is written into HOME, the package or another submission; a listener on 127.0.0.1 hears
nothing; no student process outlives the grader; a link is skipped; names and errors are escaped.
`benchmarks/hostile_class.py` grades the same class with and without the sandbox and tables what
each defence stops (README, "Grading a class").
"""

import csv
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.classroom.hostile import (
    ROUND_TWO,
    SECRET,
    grade_command,
    planted_answer,
    processes_with,
    write_hostile_class,
    write_round_two,
)
from tests.conftest import need_sandbox
from vitcourse.classroom import gradebook, sandbox_cgroup, sandbox_disk

ROOT = Path(__file__).resolve().parents[2]


class Listener:
    """A TCP server on 127.0.0.1 that records whatever reaches it."""

    def __init__(self):
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.server.settimeout(0.5)
        self.port = self.server.getsockname()[1]
        self.heard: list[bytes] = []
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while self.running:
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            conn.settimeout(2)
            try:
                self.heard.append(conn.recv(65536) or b"(connected)")
            except OSError:
                self.heard.append(b"(connected)")
            conn.close()

    def stop(self):
        self.running = False
        self.thread.join()
        self.server.close()


def _files_under(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and not p.is_symlink()}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    need_sandbox()
    root = tmp_path_factory.mktemp("hostile")
    home = root / "home"
    listener = Listener()
    subs = write_hostile_class(root / "submissions", home, listener.port, root / "out")
    package = _files_under(ROOT / "vitcourse")
    before = {**_files_under(subs), **_files_under(home)}
    env = dict(os.environ, HOME=str(home))
    start = time.monotonic()
    done = subprocess.run(
        grade_command(), cwd=root, env=env, capture_output=True, text=True, timeout=3000
    )
    seconds = time.monotonic() - start
    listener.stop()
    with open(root / "out" / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {
        "root": root, "done": done, "seconds": seconds, "listener": listener,
        "grades": {(r["student"], r["exercise"]): r for r in rows}, "before": before,
        "after": {**_files_under(subs), **_files_under(home)}, "package": package,
    }  # fmt: skip


@pytest.mark.slow
def test_no_forged_or_borrowed_answer_passes(hostile):
    assert hostile["done"].returncode == 0, hostile["done"].stderr[-3000:]
    grades = hostile["grades"]
    status = {key: row["status"] for key, row in grades.items()}
    assert status[("honest", "patchify")] == status[("honest", "unpatchify")] == "passed"
    assert status[("lambda", "patchify")] == "passed"  # a lambda the check accepts
    for student in ("patch_checks", "patch_allclose", "fake_tensor", "memorised", "marker"):
        assert status[(student, "patchify")] != "passed", (student, grades[(student, "patchify")])
    for student in ("wrapper", "hidden_import"):
        assert status[(student, "patchify")] == "not attempted", grades[(student, "patchify")]
        assert "course's own solution" in grades[(student, "patchify")]["hint"]
    assert status[("subclass", "MultiHeadSelfAttention")] == "not attempted"
    assert "course's own solution" in grades[("subclass", "MultiHeadSelfAttention")]["hint"]
    assert status[("subclass", "attention")] == "passed"


@pytest.mark.slow
def test_the_secret_and_the_files_stay_where_they_were(hostile):
    for path in (hostile["root"] / "out").rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    after = {p: data for p, data in hostile["after"].items() if ".cache/matplotlib" not in str(p)}
    assert after == hostile["before"], "a submission or HOME changed"  # (the grader's own
    # process keeps matplotlib's font cache in HOME, as any matplotlib program does)
    assert _files_under(ROOT / "vitcourse") == hostile["package"], "the package changed"
    assert hostile["listener"].heard == []
    assert processes_with("vitcourse-orphan") == []
    assert not (hostile["root"] / "out" / "owned").exists()


@pytest.mark.slow
def test_limits_and_links(hostile):
    grades = hostile["grades"]
    assert grades[("hog", "patchify")]["status"] == "error"
    assert "memory" in grades[("hog", "patchify")]["hint"]
    assert grades[("deaf", "patchify")]["status"] == "timeout"
    if sandbox_cgroup.why_not() is None:  # the kernel counts sockets' buffers: 3.5 GB over 3
        assert grades[("sockets", "patchify")]["status"] == "error", grades[("sockets", "patchify")]
        assert "memory" in grades[("sockets", "patchify")]["hint"]
    else:  # the poll alone: the grader says what it cannot see
        assert "sockets and pipes" in hostile["done"].stderr
    executed = (
        hostile["root"] / "out" / "executed" / gradebook.file_name("loud") / "01_patches.ipynb"
    )
    assert executed.stat().st_size < 3_000_000  # a 20 MB print, kept to its first MB
    assert "the grader kept only the first 1 MB" in executed.read_text()
    summary = (hostile["root"] / "out" / "summary.md").read_text()
    assert "links/01\\_patches.ipynb: a link, not followed" in summary  # Markdown-escaped
    assert ".hidden: hidden" in summary
    assert not any(key[0] == "links" and row["status"] == "passed" for key, row in grades.items())
    # defs/ made a link to the teacher's folder of answer files after the cells ran: not followed
    # (the answer planted there is right: read through the link, it would pass)
    import cloudpickle

    from vitcourse import checks

    checks.check_unpatchify(cloudpickle.loads(planted_answer()))
    assert grades[("defs_link", "unpatchify")]["status"] != "passed", grades[
        ("defs_link", "unpatchify")
    ]


@pytest.mark.slow
def test_names_and_errors_are_escaped(hostile):
    out = hostile["root"] / "out"
    text = (out / "grades.csv").read_text()
    assert '\n"\'=1+2",' in text
    assert grades_of(hostile, "'=1+2")["patchify"] == "passed"  # the CSV's escaped name
    feedback = (out / "feedback" / f"{gradebook.file_name('html')}.md").read_text()
    assert "<script>" not in feedback and "&lt;script&gt;" in feedback
    assert "script" not in (out / "summary.md").read_text()
    table = list(csv.reader((out / "gradebook.csv").open()))
    assert table[0][:3] == ["student", "01_patches patchify", "01_patches unpatchify"]
    assert ["'=1+2", "1", "1"] == table[[r[0] for r in table].index("'=1+2")][:3]


def grades_of(hostile, student):
    return {key[1]: row["status"] for key, row in hostile["grades"].items() if key[0] == student}


@pytest.mark.slow
def test_a_stopped_grader_loses_nothing_and_resumes(tmp_path):
    """Killed mid-class, the grader leaves the notebooks graded so far in its journal; `--resume`
    grades only the rest."""
    need_sandbox()
    subs = tmp_path / "submissions"
    honest = json.loads((ROOT / "notebooks" / "01_patches.ipynb").read_text())
    for student in ("a", "b", "c"):
        (subs / student).mkdir(parents=True)
        (subs / student / "01_patches.ipynb").write_text(json.dumps(honest))
    command = [sys.executable, "-m", "vitcourse.grade", "submissions", "--out", "out"]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)  # fmt: skip
    journal = tmp_path / "out" / "journal.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not (journal.exists() and journal.read_text().strip()):
        time.sleep(0.5)
    process.kill()
    process.wait()
    kept = [json.loads(line) for line in journal.read_text().splitlines()]
    exercises = [
        g for r in kept for g in r["grades"] if g["exercise"] != "quiz"
    ]  # quiz: unanswered
    assert len(kept) >= 1 and all(g["status"] == "passed" for g in exercises)
    left = time.monotonic() + 15  # the sandboxes die with it (SIGKILL: a moment to be reaped)
    while processes_with("vitcourse.classroom.grade_worker") and time.monotonic() < left:
        time.sleep(0.5)
    assert processes_with("vitcourse.classroom.grade_worker") == []
    done = subprocess.run(command + ["--resume"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in journal.read_text().splitlines()]
    assert sorted(r["student"] for r in records) == ["a", "b", "c"]  # none graded twice
    rows = list(csv.DictReader((tmp_path / "out" / "grades.csv").open()))
    assert [r["status"] for r in rows if r["exercise"] != "quiz"] == ["passed"] * 6


@pytest.fixture(scope="module")
def round_two(tmp_path_factory):
    """The second round's class (issue 38) beside honest students, graded as the hostile class is,
    with the grader's own /tmp in a folder of its own, which must be left empty."""
    need_sandbox()
    root = tmp_path_factory.mktemp("round_two")
    subs = root / "submissions"
    honest = json.loads((ROOT / "notebooks" / "01_patches.ipynb").read_text())
    (subs / "honest").mkdir(parents=True)
    (subs / "honest" / "01_patches.ipynb").write_text(json.dumps(honest))
    write_round_two(subs)
    (root / "tmp").mkdir()
    env = dict(os.environ, TMPDIR=str(root / "tmp"))
    done = subprocess.run(
        grade_command(), cwd=root, env=env, capture_output=True, text=True, timeout=3000
    )
    with open(root / "out" / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {"root": root, "done": done, "grades": {(r["student"], r["exercise"]): r for r in rows}}


@pytest.mark.slow
def test_no_submission_stops_the_class_or_borrows_the_solution(round_two):
    """Issue 38: every student is graded and reported, beside submissions that once stopped the
    whole class; none of them passes; the solution sent by value is not attempted."""
    hostile = round_two
    assert hostile["done"].returncode == 0, hostile["done"].stderr[-3000:]
    out, grades = hostile["root"] / "out", hostile["grades"]
    students = {gradebook.student_name(os.fsdecode(p.name)) for p in _students(hostile)}
    assert {key[0].removeprefix("'") for key in grades} == {s.removeprefix("'") for s in students}
    with open(out / "gradebook.csv", newline="") as f:
        assert {row["student"].removeprefix("'") for row in csv.DictReader(f)} == {
            s.removeprefix("'") for s in students
        }
    status = {key: row["status"] for key, row in grades.items()}
    for student in [*ROUND_TWO, "pasted", "deep_notebook"]:
        assert status[(student, "patchify")] != "passed", (student, grades[(student, "patchify")])
    for student in ("by_value", "code_swap", "exec_source", "pasted"):
        assert status[(student, "patchify")] == "not attempted", grades[(student, "patchify")]
        assert "course's own solution" in grades[(student, "patchify")]["hint"]
    for student in ("honest", "ann smith", "caf\\xe9", "\\x1b]0;owned\\x07\\x1b[31mred"):
        assert status[(student, "patchify")] == status[(student, "unpatchify")] == "passed"
    assert status[("ann_smith", "patchify")] == "wrong"
    assert "cannot be read" not in grades[("deep_notebook", "patchify")]["hint"]
    # Distinct feedback files, each with its own student's counts.
    ann = (out / "feedback" / f"{gradebook.file_name('ann smith')}.md").read_text()
    ann_ = (out / "feedback" / f"{gradebook.file_name('ann_smith')}.md").read_text()
    assert "2 of 3 exercises passed" in ann and "1 of 3 exercises passed" in ann_  # and the quiz
    assert len(list((out / "feedback").iterdir())) == len(students)
    # No raw control character in the terminal or the reports; nothing left in /tmp.
    raw = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
    for name in ("grades.csv", "gradebook.csv", "summary.md", "similar.md"):
        assert not raw.search((out / name).read_text()), name
    for path in (out / "feedback").iterdir():
        assert not raw.search(path.read_text()), path
    assert not raw.search(hostile["done"].stdout.replace("\r", "")), hostile["done"].stdout[-2000:]
    assert "\\x1b]0;owned" in hostile["done"].stdout  # the skipped file, escaped
    assert list((hostile["root"] / "tmp").iterdir()) == []
    assert list(out.glob(".work-*")) == []
    # The burst to disk: where the grader mounts a tmpfs, the kernel refused what went past the
    # 256 MB limit (and its 1 MB of slack), whether or not the poll looked in time.
    burst = out / "executed" / gradebook.file_name("disk_burst") / "01_patches.ipynb"
    wrote = re.search(r"burst: (\d+) MB written", burst.read_text()) if burst.exists() else None
    if wrote is None:  # stopped by the poll, which names the limit broken
        assert "wrote more than 256 MB" in grades[("disk_burst", "patchify")]["hint"]
    elif sandbox_disk.why_not() is None:  # (without a tmpfs, what the grader's note says)
        assert int(wrote.group(1)) <= 256 + sandbox_disk.SLACK_MB, wrote.group()
    flood = out / "executed" / gradebook.file_name("display_flood") / "01_patches.ipynb"
    assert flood.stat().st_size < 3_000_000  # not 120 copies of the 1 MB update
    assert "the grader kept only the first 1 MB" in flood.read_text()


def _students(hostile) -> list[Path]:
    subs = hostile["root"] / "submissions"
    return [p for p in subs.iterdir() if p.is_dir() and not p.is_symlink() and p.name[0] != "."]


@pytest.mark.slow
def test_a_course_and_its_environment_under_tmp(tmp_path):
    """The course and its virtual environment under /tmp (a CI clone, a scratch set-up) stay
    visible in the sandbox, whose private /tmp is mounted first: the honest student passes."""
    need_sandbox()
    assert str(tmp_path).startswith("/tmp/"), tmp_path
    venv, course = tmp_path / "venv", tmp_path / "course"
    subprocess.run(["cp", "-al", sys.prefix, str(venv)], check=True)  # links: no copying 6 GB
    shutil.copytree(
        ROOT / "vitcourse", course / "vitcourse", ignore=shutil.ignore_patterns("__pycache__")
    )
    (course / "data").symlink_to(ROOT / "data")
    site = next((venv / "lib").glob("python3*/site-packages"))
    for finder in site.glob("__editable__*vitcourse*finder.py"):  # point the install at the copy
        text = finder.read_text().replace(str(ROOT / "vitcourse"), str(course / "vitcourse"))
        finder.unlink()  # a link to the real environment's file: replace, never write through
        finder.write_text(text)
    subs = tmp_path / "submissions"
    teacher = json.loads((ROOT / "notebooks" / "01_patches.ipynb").read_text())
    for student in ("ada", "bo"):
        (subs / student).mkdir(parents=True)
        (subs / student / "01_patches.ipynb").write_text(json.dumps(teacher))
    command = [
        str(venv / "bin" / "python"),
        "-m",
        "vitcourse.grade",
        "submissions",
        "--out",
        "out",
    ]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert str(course / "vitcourse") in subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import vitcourse; print(vitcourse.__file__)"],
        cwd="/", capture_output=True, text=True,
    ).stdout  # fmt: skip
    rows = list(csv.DictReader((tmp_path / "out" / "grades.csv").open()))
    assert [r["status"] for r in rows if r["exercise"] != "quiz"] == ["passed"] * 4, rows
