"""vitcourse.classroom.sandbox_disk: the graders' tmpfs read from a made-up mountinfo, and, where
this machine lets the grader mount one (root, with the right to mount), the kernel holding a
folder to its size, files deleted but still open included, in every isolation mode; the burst
between two polls that only the kernel stops; nothing left mounted."""

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import need_sandbox
from vitcourse.classroom import sandbox, sandbox_cgroup, sandbox_disk
from vitcourse.classroom.sandbox_disk import SLACK_MB, hold, mounts, release

MOUNTINFO = """\
22 1 0:21 / /proc rw,nosuid - proc proc rw
40 22 0:40 / /tmp/a\\040class/out rw,nosuid,nodev - tmpfs vitcourse-4242 rw,size=9216k
41 22 0:41 / /dev/shm rw,nosuid,nodev - tmpfs tmpfs rw
42 22 0:42 / /tmp/b rw - tmpfs vitcourse-x rw
"""


def test_only_a_graders_tmpfs_is_read_from_mountinfo(tmp_path):
    (tmp_path / "mountinfo").write_text(MOUNTINFO)
    assert mounts(tmp_path / "mountinfo") == [(Path("/tmp/a class/out"), "vitcourse-4242")]


def test_a_folder_with_files_is_never_mounted_over(tmp_path):
    (tmp_path / "kept").write_text("the grader's")
    assert not hold(tmp_path, 1)
    assert (tmp_path / "kept").read_text() == "the grader's"


def _need_tmpfs() -> None:
    why = sandbox_disk.why_not()
    if why is not None:
        pytest.skip(f"the kernel's hold cannot be tried here: {why}")


def _mounted(folder: Path) -> bool:
    return any(point == folder.resolve() for point, _ in mounts())


def test_the_kernel_holds_a_folder_to_its_size_deleted_files_included(tmp_path):
    _need_tmpfs()
    folder = tmp_path / "out"
    folder.mkdir()
    assert hold(folder, 2) and _mounted(folder)
    kept = open(folder / "kept", "wb")  # noqa: SIM115 - held open past its deletion
    kept.write(b"x" * 2**21)
    kept.flush()
    os.unlink(folder / "kept")  # in no folder now, still on the tmpfs
    with pytest.raises(OSError) as refused, open(folder / "more", "wb") as more:
        more.write(b"x" * 2**21)
        more.flush()
    assert refused.value.errno == errno.ENOSPC
    assert sandbox_disk.used(folder) <= (2 + SLACK_MB) * 2**20
    kept.close()
    release(folder)
    assert not _mounted(folder) and not any(folder.iterdir())


def test_remove_tree_unmounts_before_it_removes(tmp_path):
    _need_tmpfs()
    out = tmp_path / "step" / "out"
    out.mkdir(parents=True)
    assert hold(out, 1)
    (out / "written").write_text("by a step")
    sandbox.remove_tree(tmp_path / "step")
    assert not _mounted(out) and not (tmp_path / "step").exists()


def test_a_dead_graders_tmpfs_is_swept_a_live_ones_kept(tmp_path):
    _need_tmpfs()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    dead, live = tmp_path / "dead", tmp_path / "live"
    dead.mkdir(), live.mkdir()
    assert sandbox_disk._mount(dead, 2**20, "mode=700", f"vitcourse-{gone.stdout.strip()}")
    assert sandbox_disk._mount(live, 2**20, "mode=700", f"vitcourse-{os.getpid()}")
    sandbox_disk.sweep.__wrapped__()  # what the first `hold` of a grader's process does
    assert not _mounted(dead) and _mounted(live)
    release(live)
    assert not _mounted(live)


# Writes 40 files of 1 MB as fast as it can (every other one deleted at once but kept open), then
# deletes them all: done between two of the poll's looks, 0.2 s apart, the poll may never see it.
BURST = """
import os, sys
folder, wrote, kept = sys.argv[1], 0, []
try:
    for i in range(40):
        f = open(os.path.join(folder, f"f{i}"), "wb")
        f.write(b"x" * 2**20)
        f.flush()
        wrote += 1
        if i % 2:
            os.unlink(f.name)
            kept.append(f)
        else:
            f.close()
    print("all written", file=sys.stderr)
except OSError as e:
    print("refused", e.errno, file=sys.stderr)
for name in os.listdir(folder):
    os.unlink(os.path.join(folder, name))
print("wrote", wrote, file=sys.stderr, flush=True)
"""


def _wrote(done: sandbox.Ran) -> int:
    lines = [line for line in done.stderr.splitlines() if line.startswith("wrote ")]
    assert lines, done
    return int(lines[-1].split()[1])


@pytest.mark.slow
@pytest.mark.parametrize(
    "how, where",
    [
        (sandbox.BUBBLEWRAP, "out"),
        (sandbox.OWN_USER, "out"),
        (sandbox.OWN_USER, "home"),
        (sandbox.NO_SANDBOX, "out"),
    ],
)
def test_a_burst_between_two_polls_is_held_by_the_kernel(tmp_path, monkeypatch, how, where):
    """40 MB written in a burst under an 8 MB output limit (and a 4 MB home): the kernel refuses
    the writes past the tmpfs's size, in every mode. The control, bubblewrap's sandbox without
    the tmpfs: the burst is done and deleted before the poll looks (tried three times: it may
    look in the middle of one)."""
    _need_tmpfs()
    if how == sandbox.BUBBLEWRAP:
        need_sandbox()
    if how == sandbox.OWN_USER and sandbox.own_user() is not None:
        pytest.skip(f"no user of its own here: {sandbox.own_user()}")
    folder = "/grading/out" if where == "out" else "$HOME"
    code = BURST.replace("sys.argv[1]", "os.path.expandvars(sys.argv[1])")
    box = sandbox.Box(seconds=60, memory_gb=2, output_mb=8, tmp_mb=4)
    (tmp_path / "in").mkdir()
    done = sandbox.run(
        [sys.executable, "-c", code, folder], tmp_path / "in", tmp_path / "out", box, how
    )
    held = box.output_mb if where == "out" else box.tmp_mb
    assert f"refused {errno.ENOSPC}" in done.stderr, done
    assert _wrote(done) <= held + SLACK_MB
    if how != sandbox.BUBBLEWRAP:
        return
    monkeypatch.setattr(sandbox_disk, "hold", lambda *a, **k: False)
    for attempt in range(3):
        control = tmp_path / f"control{attempt}"
        done = sandbox.run([sys.executable, "-c", code, folder], tmp_path / "in", control, box)
        if done.broke is None and _wrote(done) == 40:
            break
    assert done.broke is None and _wrote(done) == 40, done  # 40 MB, unseen by the poll


def test_what_a_step_writes_to_its_tmpfs_counts_as_its_memory(tmp_path):
    """The tmpfs's pages are memory: in a cgroup, 700 MB written to the output folder (under an
    800 MB output limit) break a 0.5 GB memory limit."""
    need_sandbox()
    _need_tmpfs()
    if sandbox_cgroup.why_not() is not None:
        pytest.skip(f"no cgroup here to count it: {sandbox_cgroup.why_not()}")
    code = (
        "import sys\n"
        "with open(sys.argv[1] + '/big', 'wb') as f:\n"
        "    for i in range(700):\n"
        "        f.write(b'x' * 2**20)\n"
    )
    box = sandbox.Box(seconds=60, memory_gb=0.5, output_mb=800)
    (tmp_path / "in").mkdir()
    done = sandbox.run([sys.executable, "-c", code, "/grading/out"], tmp_path / "in",
                       tmp_path / "out", box)  # fmt: skip
    assert done.broke == "memory", done
