"""vitcourse.classroom.sandbox_cgroup: where a sandbox's cgroup is made (read from made-up
/proc files and cgroup trees, for both versions), and, where this machine lets the grader make
one, what the kernel's count catches that the poll does not: memory held in sockets' buffers."""

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.classroom.hostile import HOLD_SOCKETS
from tests.conftest import need_sandbox
from vitcourse.classroom import sandbox, sandbox_cgroup
from vitcourse.classroom.sandbox_cgroup import FILES, Cgroup, hierarchies, make

V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
V1_MINE = "8:pids:/\n4:memory:/jobs/42\n0::/\n"
V1_FOLDERS = {"sys/fs/cgroup/memory/jobs/42": None, "sys/fs/cgroup/pids": None}
V2_MOUNTS = "29 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n"
V2_MINE = "0::/user.slice/grader.service\n"


def _tree(tmp_path: Path, mounts: str, mine: str, folders: dict[str, str]) -> dict:
    """The made-up /proc files, with their mount points moved under `tmp_path`, and the folders
    (path: subtree_control) made there."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    mounts = mounts.replace(" /sys/fs/cgroup", f" {tmp_path}/sys/fs/cgroup")
    (tmp_path / "mountinfo").write_text(mounts)
    (tmp_path / "cgroup").write_text(mine)
    for folder, handed in folders.items():
        (tmp_path / folder).mkdir(parents=True, exist_ok=True)
        if handed is not None:
            (tmp_path / folder / "cgroup.controllers").write_text("memory pids\n")
            (tmp_path / folder / "cgroup.subtree_control").write_text(handed)
    return hierarchies(tmp_path / "mountinfo", tmp_path / "cgroup")


def _kernel_fills(monkeypatch, version: int) -> None:
    """A folder made here is empty; the kernel fills a real cgroup's: make its files with it."""
    real_mkdir = Path.mkdir

    def mkdir(self, *a, **k):
        real_mkdir(self, *a, **k)
        for name in (*FILES[version][:2], "pids.max", "cgroup.procs"):
            (self / name).write_text("max\n")

    monkeypatch.setattr(Path, "mkdir", mkdir)


BOX = SimpleNamespace(memory_gb=1.5, processes=10)


def test_v1_its_own_memory_cgroup_and_the_pids_hierarchys(tmp_path, monkeypatch):
    found = _tree(tmp_path, V1_MOUNTS, V1_MINE, V1_FOLDERS)
    memory, pids = tmp_path / "sys/fs/cgroup/memory/jobs/42", tmp_path / "sys/fs/cgroup/pids"
    assert found["memory"] == (memory, tmp_path / "sys/fs/cgroup/memory")
    assert found["pids"][0] == pids
    _kernel_fills(monkeypatch, 1)
    made = make(BOX, found)
    assert made is not None and len(made.folders) == 2
    assert made.folders[0].parent == memory and made.folders[1].parent == pids
    assert (made.folders[0] / "memory.limit_in_bytes").read_text() == str(int(1.5 * 2**30))
    assert (made.folders[0] / "memory.memsw.limit_in_bytes").read_text() == str(int(1.5 * 2**30))
    assert int((made.folders[1] / "pids.max").read_text()) > BOX.processes  # threads too
    assert made.events == made.folders[0] / "memory.oom_control"
    made.events.write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert made.killed() == 2


def test_v2_its_own_cgroup_where_memory_is_handed_down_else_the_top(tmp_path, monkeypatch):
    own = "sys/fs/cgroup/user.slice/grader.service"
    _kernel_fills(monkeypatch, 2)
    # Delegated (systemd's Delegate=yes): in its own cgroup.
    found = _tree(tmp_path / "a", V2_MOUNTS, V2_MINE, {own: "memory pids\n"})
    made = make(BOX, found)
    assert made is not None and made.folders[0].parent == tmp_path / "a" / own
    assert (made.folders[0] / "memory.max").read_text() == str(int(1.5 * 2**30))
    assert (made.folders[0] / "memory.swap.max").read_text() == "0"
    assert made.events.name == "memory.events"
    made.events.write_text("low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n")
    assert made.killed() == 1
    # Not delegated: at the top, where root may.
    found = _tree(tmp_path / "b", V2_MOUNTS, V2_MINE, {own: "\n", "sys/fs/cgroup": "memory\n"})
    made = make(BOX, found)
    assert made is not None and made.folders[0].parent == tmp_path / "b" / "sys/fs/cgroup"
    # Memory handed down nowhere: none.
    found = _tree(tmp_path / "c", V2_MOUNTS, V2_MINE, {own: "\n", "sys/fs/cgroup": "cpu io\n"})
    assert make(BOX, found) is None


def test_none_where_the_folders_cannot_be_written(tmp_path, monkeypatch):
    found = _tree(tmp_path, V1_MOUNTS, V1_MINE, V1_FOLDERS)
    monkeypatch.setattr(os, "access", lambda *a, **k: False)  # a teacher who is not root
    assert make(BOX, found) is None
    assert make(BOX, {}) is None  # no cgroup mounted at all


def test_removing_kills_what_is_left_and_leaves_nothing(tmp_path):
    """A folder the kernel would not let go while a process is in it: removed once it is empty."""
    group = Cgroup((tmp_path / "g",), tmp_path / "g" / "memory.events")
    group.folders[0].mkdir()
    group.remove()
    assert not group.folders[0].exists()
    assert group.killed() == 0  # no events file left: nothing counted


def _dead_pid() -> int:
    """The process id of a process that has ended."""
    import subprocess

    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(ended.stdout)


def test_a_dead_graders_cgroups_are_swept_a_live_ones_kept(tmp_path):
    """Made-up folders (a real cgroup's files are the kernel's, and go with it)."""
    dead, live = _dead_pid(), os.getpid()
    for name in (f"vitcourse-{dead}-0", f"vitcourse-{dead}-7", f"vitcourse-{live}-1", "other-1"):
        (tmp_path / name).mkdir()
    swept = sandbox_cgroup.sweep.__wrapped__((tmp_path,))
    assert [p.name for p in swept] == [f"vitcourse-{dead}-0", f"vitcourse-{dead}-7"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["other-1", f"vitcourse-{live}-1"]


def test_a_real_cgroup_left_by_a_killed_grader_is_swept():
    _need_cgroup()
    made = make(SimpleNamespace(memory_gb=1, processes=1))
    assert made is not None
    left = tuple(f.with_name(f"vitcourse-{_dead_pid()}-0") for f in made.folders)
    made.remove()
    for folder in left:
        folder.mkdir()  # as a grader killed with SIGKILL leaves it
    parents = tuple(f.parent for f in left)
    assert set(sandbox_cgroup.sweep.__wrapped__(parents)) == set(left)
    assert not any(folder.exists() for folder in left)


# 1.5 GB held in socket pairs' buffers (`HOLD_SOCKETS`), then kept for 20 s.
SOCKETS = (
    HOLD_SOCKETS
    + """
import sys, time
held = _hold(1536 * 2**20)
open(sys.argv[1] + "/held", "w").write(str(held))
time.sleep(20)
"""
)


def _need_cgroup() -> None:
    why = sandbox_cgroup.why_not()
    if why is not None:
        pytest.skip(why)


@pytest.mark.slow
@pytest.mark.parametrize("how", [sandbox.BUBBLEWRAP, sandbox.OWN_USER])
def test_sockets_buffers_count_where_a_cgroup_is_made(tmp_path, monkeypatch, how):
    """1.5 GB held in sockets' buffers under a 1 GB limit: the kernel's count kills the sandbox
    ("memory"). The control, the same sandbox without a cgroup: the poll alone lets it hold
    them all (what a grader that cannot make a cgroup says it does not see)."""
    need_sandbox()
    _need_cgroup()
    if how == sandbox.OWN_USER and sandbox.own_user() is not None:
        pytest.skip(sandbox.own_user())
    command = [sys.executable, "-c", SOCKETS, "/grading/out"]
    box = sandbox.Box(seconds=60, memory_gb=1.0)
    (tmp_path / "in").mkdir()
    done = sandbox.run(command, tmp_path / "in", tmp_path / "out", box, how)
    assert done.broke == "memory", done
    assert not (tmp_path / "out" / "held").exists()  # killed before it had them all
    monkeypatch.setattr(sandbox_cgroup, "make", lambda box, found=None: None)
    done = sandbox.run(command, tmp_path / "in", tmp_path / "control", box, how)
    held = int((tmp_path / "control" / "held").read_text())
    if held < 1.2 * 2**30:
        pytest.skip(f"this machine let the sockets hold only {held / 2**20:.0f} MB: no control")
    assert done.broke is None, done  # what the poll alone does not see
