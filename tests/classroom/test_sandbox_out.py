"""vitcourse.classroom.sandbox_out: where the grader may not mount a tmpfs (a teacher who is not
root), bubblewrap's sandbox holds the output folder in a tmpfs of its own and copies it out. Its
copy on folders made here (links at every level, a pipe, too many files); and, in bubblewrap's
sandbox as the teacher (the grader's own tmpfs and user of its own turned off), a burst refused
by the kernel, what a step leaves behind or running, and no way from the step to the grader's
folder."""

import csv
import errno
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from tests.classroom.test_sandbox_disk import BURST, _wrote
from tests.conftest import need_sandbox
from vitcourse.classroom import sandbox, sandbox_cgroup, sandbox_disk, sandbox_out, sandbox_user
from vitcourse.classroom.sandbox_disk import SLACK_MB
from vitcourse.classroom.sandbox_out import REPORT, Budget, copy_out

ROOT = Path(__file__).resolve().parents[2]
FOLDER = os.O_RDONLY | os.O_DIRECTORY


def _copy(source, target, entries: int = 100, size: int = 2**20) -> Budget:
    inside, outside = os.open(source, FOLDER), os.open(target, FOLDER)
    budget = Budget(entries, size)
    try:
        copy_out(inside, outside, budget)
        return budget
    finally:
        os.close(inside), os.close(outside)


def test_the_copy_takes_folders_and_files_and_follows_no_link(tmp_path):
    source, target, secret = tmp_path / "in", tmp_path / "out", tmp_path / "secret"
    (source / "defs" / "deep").mkdir(parents=True)
    target.mkdir(), secret.mkdir()
    (secret / "unpatchify.pkl").write_text("the solution")
    (source / "defs" / "patchify.pkl").write_text("an answer")
    (source / "defs" / "deep" / "notes.txt").write_text("deep")
    (source / "linked").symlink_to(secret)  # a link to a folder, at the top
    (source / "defs" / "unpatchify.pkl").symlink_to(secret / "unpatchify.pkl")  # to a file
    (source / "defs" / "deep" / "up").symlink_to(tmp_path)  # and deeper
    os.mkfifo(source / "pipe")  # read, it would block the copy
    (source / REPORT).write_text('{"broke": null}')  # only the copy's own is written
    left = _copy(source, target)
    assert left.entries == 100 - 8  # every entry looked at: the links and the pipe too
    assert left.size == 2**20 - len("an answer") - len("deep")
    found = sorted(str(p.relative_to(target)) for p in target.rglob("*"))
    assert found == ["defs", "defs/deep", "defs/deep/notes.txt", "defs/patchify.pkl"]
    assert (target / "defs" / "patchify.pkl").read_text() == "an answer"


def test_the_copy_stops_past_its_entries_bytes_and_depth(tmp_path, monkeypatch):
    source = tmp_path / "in"
    source.mkdir()
    for i in range(12):
        (source / f"f{i}").write_text("")
    (tmp_path / "out").mkdir()
    with pytest.raises(sandbox_out._TooMany):
        _copy(source, tmp_path / "out", entries=10)
    # a sparse file: 1 GB long, no room taken; a hard link: the same bytes twice
    linked = tmp_path / "linked"
    linked.mkdir()
    with open(linked / "sparse", "wb") as f:
        f.truncate(2**30)
    (tmp_path / "out1").mkdir()
    with pytest.raises(sandbox_out._TooMany):
        _copy(linked, tmp_path / "out1", size=2**20)
    (linked / "sparse").unlink()
    (linked / "a").write_bytes(b"x" * 600_000)
    os.link(linked / "a", linked / "b")
    (tmp_path / "out3").mkdir()
    with pytest.raises(sandbox_out._TooMany):
        _copy(linked, tmp_path / "out3", size=2**20)
    deep = tmp_path / "deep"
    (deep / "/".join("d" * 6)).mkdir(parents=True)
    monkeypatch.setattr(sandbox_out, "MAX_DEPTH", 5)
    (tmp_path / "out2").mkdir()
    with pytest.raises(sandbox_out._TooMany):
        _copy(deep, tmp_path / "out2")


@pytest.fixture
def as_the_teacher(monkeypatch):
    """bubblewrap's sandbox as a teacher who is not root gets it: no tmpfs of the grader's, no
    cgroup, no user of its own."""
    need_sandbox()
    monkeypatch.setattr(sandbox_disk, "hold", lambda *a, **k: False)
    monkeypatch.setattr(sandbox_cgroup, "make", lambda box: None)
    monkeypatch.setattr(sandbox_user, "sandbox_user", lambda: None)


def _run(tmp_path, code: str, output_mb: float = 8, *args: str) -> sandbox.Ran:
    box = sandbox.Box(seconds=60, memory_gb=2, output_mb=output_mb, tmp_mb=4)
    (tmp_path / "in").mkdir(exist_ok=True)
    command = [sys.executable, "-c", code, *args]
    return sandbox.run(command, tmp_path / "in", tmp_path / "out", box, sandbox.BUBBLEWRAP)


@pytest.mark.slow
def test_a_burst_is_refused_by_the_sandboxs_own_tmpfs(tmp_path, as_the_teacher):
    """The burst of test_sandbox_disk.py (40 MB, every other file deleted but kept open) under an
    8 MB limit: refused past the tmpfs's size, though the grader mounted nothing."""
    code = BURST.replace("sys.argv[1]", "'/grading/out'")
    done = _run(tmp_path, code)
    assert f"refused {errno.ENOSPC}" in done.stderr, done
    assert _wrote(done) <= 8 + SLACK_MB
    assert not (tmp_path / "out" / REPORT).exists()  # read and removed by the grader


STEP = r"""
import os, subprocess, sys
out = "/grading/out"
os.makedirs(out + "/defs", exist_ok=True)
with open(out + "/defs/answer.pkl", "w") as f:
    f.write("kept")
os.symlink("/etc/passwd", out + "/defs/linked.pkl")
# left running: it would write after the step ended, while the copy reads
subprocess.Popen([sys.executable, "-c",
    "import time; time.sleep(1.5); open('/grading/out/late', 'w').write('late')"],
    start_new_session=True)
# every descriptor the step can reach, and what each is
reached = []
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        reached.append(f"{st.st_dev}:{st.st_ino}")
print("reached", *reached, file=sys.stderr)
# and by ptrace, the copy's process (the step's parent; bubblewrap's first process, pid 1, has
# the same filter and no capabilities, and holds none of the grader's folders)
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
attached = libc.ptrace(16, os.getppid(), 0, 0) == 0  # PTRACE_ATTACH
if attached:
    libc.ptrace(17, os.getppid(), 0, 0)  # PTRACE_DETACH: let it go on
print("attached", attached, file=sys.stderr)
"""


@pytest.mark.slow
def test_a_step_reaches_no_folder_of_the_graders_and_nothing_runs_on(tmp_path, as_the_teacher):
    done = _run(tmp_path, STEP)
    out = tmp_path / "out"
    assert done.returncode == 0 and done.broke is None, done
    assert (out / "defs" / "answer.pkl").read_text() == "kept"
    assert not os.path.lexists(out / "defs" / "linked.pkl")  # a link is left behind
    reached = next(line for line in done.stderr.splitlines() if line.startswith("reached"))
    st = os.stat(out)
    assert f"{st.st_dev}:{st.st_ino}" not in reached.split()  # the copy's descriptor: unseen
    assert len(reached.split()) > 3  # it saw its own
    assert not (out / "late").exists()  # killed before the copy
    assert "attached False" in done.stderr.splitlines()


@pytest.mark.slow
def test_hard_links_copy_no_more_than_the_limit(tmp_path, as_the_teacher):
    """A 5 MB file linked 100 times takes 5 MB of an 8 MB tmpfs, and would be 500 MB copied."""
    code = (
        "import os\n"
        "open('/grading/out/a', 'wb').write(b'x' * 5 * 2**20)\n"
        "for i in range(100):\n"
        "    os.link('/grading/out/a', f'/grading/out/l{i}')\n"
    )
    done = _run(tmp_path, code)
    assert done.broke == "output", done
    copied = sum(p.stat().st_size for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert copied <= 8 * 2**20
    assert not (tmp_path / "out" / REPORT).exists()  # read and removed, whatever broke


@pytest.mark.slow
def test_too_many_files_break_the_output_limit(tmp_path, as_the_teacher):
    code = "for i in range(10_001):\n    open(f'/grading/out/f{i}', 'w').close()\n"
    done = _run(tmp_path, code, 64)
    assert done.broke == "output", done


def test_the_results_say_who_held_the_output(monkeypatch):
    monkeypatch.setattr(sandbox_disk, "why_not", lambda: sandbox_disk.POLLED)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert sandbox_disk.note(sandbox.BUBBLEWRAP) == sandbox_disk.SANDBOXED
    assert sandbox_disk.note(sandbox.OWN_USER) == sandbox_disk.POLLED
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # root that may not mount: the poll's
    assert sandbox_disk.note(sandbox.BUBBLEWRAP) == sandbox_disk.POLLED
    monkeypatch.setattr(sandbox_disk, "why_not", lambda: None)
    assert sandbox_disk.note(sandbox.BUBBLEWRAP) == sandbox_disk.HELD


@pytest.mark.slow
def test_the_step_starts_its_clock_in_the_sandboxs_own_folder(tmp_path, as_the_teacher):
    """`started`, written in the sandbox's own tmpfs, is seen: the step's 3 s count from there,
    not from its start plus the 1 s allowed for imports (2.5 s of them here)."""
    code = (
        "import time\ntime.sleep(2.5)\nopen('/grading/out/started', 'w').close()\ntime.sleep(2)\n"
    )
    box = sandbox.Box(seconds=3, memory_gb=2, output_mb=8, tmp_mb=4, startup=1)
    (tmp_path / "in").mkdir()
    command = [sys.executable, "-c", code]
    done = sandbox.run(command, tmp_path / "in", tmp_path / "out", box, sandbox.BUBBLEWRAP)
    assert done.broke is None and done.returncode == 0, done


@pytest.mark.slow
def test_what_the_sandboxs_own_folder_holds_is_memory(tmp_path, as_the_teacher):
    """350 MB written to the output folder (under a 400 MB output limit) are memory on the
    sandbox's tmpfs, and break a 0.3 GB memory limit, with no cgroup to count them: the poll
    counts them."""
    code = (
        "import time\n"
        "with open('/grading/out/big', 'wb') as f:\n"
        "    for i in range(350):\n"
        "        f.write(b'x' * 2**20)\n"
        "time.sleep(3)\n"
    )
    box = sandbox.Box(seconds=30, memory_gb=0.3, output_mb=400, tmp_mb=4)
    (tmp_path / "in").mkdir()
    command = [sys.executable, "-c", code]
    done = sandbox.run(command, tmp_path / "in", tmp_path / "out", box, sandbox.BUBBLEWRAP)
    assert done.broke == "memory", done


BURST_CELL = """import os
kept = []
try:
    for i in range(400):  # 400 MB past a 256 MB limit, each file deleted but kept open
        f = open(f"/grading/out/burst{i}", "wb")
        f.write(b"x" * 2**20)
        f.flush()
        os.unlink(f.name)
        kept.append(f)
except OSError as e:
    print("refused", e.errno)
"""


@pytest.fixture
def teachers_folder():
    """A folder of nobody's, in /tmp (pytest's own folders are root's alone)."""
    folder = Path(tempfile.mkdtemp(prefix="vitcourse-teacher-"))
    yield folder
    sandbox.remove_tree(folder)


@pytest.mark.slow
def test_a_teacher_who_is_not_root_grades_a_class(teachers_folder):
    """The grader run as a user who is not root (nobody, from root): no cgroup, no tmpfs of its
    own, so bubblewrap's sandbox holds the output and says so; an honest student passes and one
    who writes 400 MB in a burst is stopped for its output."""
    need_sandbox()
    tmp_path = teachers_folder
    if os.geteuid() != 0:
        pytest.skip("becoming a user who is not root needs root")
    environment = [ROOT, Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()]
    unusable = sandbox_user.why_not(environment, passable=True)
    if unusable:  # no setpriv, or a course in a private folder (a home of mode 700)
        pytest.skip(f"the grader cannot run as the user 'nobody' here: {unusable}")
    honest = json.loads((ROOT / "notebooks" / "01_patches.ipynb").read_text())
    burst = json.loads(json.dumps(honest))
    burst["cells"].insert(3, nbformat.v4.new_code_cell(BURST_CELL))
    for student, notebook in (("honest", honest), ("burst", burst)):
        (tmp_path / "submissions" / student).mkdir(parents=True)
        (tmp_path / "submissions" / student / "01_patches.ipynb").write_text(json.dumps(notebook))
    subprocess.run(["chown", "-R", "65534:65534", str(tmp_path)], check=True)
    teacher = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    command = [*teacher, sys.executable, "-m", "vitcourse.grade", "submissions", "--out", "out"]
    env = dict(os.environ, HOME=str(tmp_path), VITCOURSE_LANG="en")
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    if "bubblewrap cannot make a sandbox here" in done.stderr:
        pytest.skip(f"no sandbox for a user who is not root here: {done.stderr[-500:]}")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "bubblewrap's sandbox held each step's output folder" in done.stderr
    with open(tmp_path / "out" / "grades.csv", newline="") as f:
        grades = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    assert grades["honest", "patchify"]["status"] == "passed"
    assert grades["honest", "unpatchify"]["status"] == "passed"
    assert grades["burst", "patchify"]["status"] == "error"  # its notebook broke the output limit
    assert "wrote more than 256 MB" in grades["burst", "patchify"]["hint"]
