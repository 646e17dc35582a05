"""The sandbox's limits, watched from outside every `POLL_SECONDS` while its command runs: wall
time, memory (resident, summed over its processes, plus what its /tmp and /dev/shm hold:
`vitcourse.classroom.sandbox_memory`; and the kernel's count, where the sandbox has a cgroup:
`vitcourse.classroom.sandbox_cgroup`), its number of processes, and its output (the folder's size,
with what its deleted but open files hold, and its number of entries, and the error stream's
size). The first limit broken kills the command and everything it started, and is named.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from vitcourse.classroom import sandbox_user as users
from vitcourse.classroom.sandbox_memory import deleted_bytes, resident_bytes, tmpfs_bytes

POLL_SECONDS = 0.2
MAX_ENTRIES = 10_000  # files and folders an output folder may hold
STDERR_BYTES = 4 * 2**20  # what a sandbox may write to its error stream (kept in a file here)


def process_tree(root: int) -> list[int]:
    """`root` and every process descended from it, from /proc."""
    parents: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            stat = (p / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(parent, []).append(int(p.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += parents.get(pid, [])
    return found


def folder_usage(folder: Path, most: int = MAX_ENTRIES) -> tuple[int, int]:
    """(bytes, entries) under `folder`, links not followed: files, folders and anything else each
    count as an entry (300,000 empty files are not "nothing"). The walk keeps its own list, not
    Python's recursion, so a folder chain 1,500 deep costs nothing special, and it stops counting
    once past `most` entries."""
    total, entries, todo = 0, 0, [str(folder)]
    while todo and entries <= most:
        try:
            with os.scandir(todo.pop()) as found:
                for entry in found:
                    entries += 1
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            todo.append(entry.path)
                        else:
                            total += users.stored_bytes(entry.stat(follow_symlinks=False))
                    except OSError:
                        pass
        except OSError:
            continue
    return total, entries


def kill(process: subprocess.Popen) -> None:
    """Stop the command and everything it started (in a sandbox, killing bubblewrap ends its
    process namespace, and so every process in it)."""
    for pid in reversed(process_tree(process.pid)):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    process.wait()


def _started(out: Path, pids: list[int], inside: bool) -> bool:
    """Whether the step wrote `started` in its output folder (in the sandbox's own, seen through
    its first process's root, where the folder is `inside`)."""
    if inside:
        return any(os.path.lexists(f"/proc/{pid}/root/grading/out/started") for pid in pids[1:2])
    return os.path.lexists(out / "started")


def watch(
    process: subprocess.Popen,
    box,
    out: Path,
    errors,
    bubblewrap: bool = True,
    own_user: int | None = None,
    home: Path | None = None,
    group=None,
    inside: bool = False,
) -> str | None:
    """Poll the command until it ends; kill it all when it breaks a limit of `box` (the sandbox's
    `Box`), and say which. The wall time counts from when it starts, plus `box.startup` until its
    first process writes `out/started` (Python and torch imported), so a slow start is not the
    student's time. As a
    user of its own (`own_user`, its uid), every process of that user counts (one that left its
    process group too), and so do its files in the shared temporary folders (as memory) and its
    home (as output). In bubblewrap's sandbox (`bubblewrap`), its private /tmp is memory. In a
    cgroup (`group`, `vitcourse.classroom.sandbox_cgroup`), the kernel limits the memory too: a
    process it killed for memory breaks the limit, even after the command ended. Where the output
    folder is the sandbox's own tmpfs (`inside`: `vitcourse.classroom.sandbox_out`), `started` is
    looked for there, and what it holds is memory too (the kernel holds it to its size)."""
    start = time.monotonic()
    started = None
    while process.poll() is None:
        pids = process_tree(process.pid)
        shared = strays = 0
        if own_user is not None:
            pids = sorted(set(pids) | set(users.pids_of(own_user)))
            shared, strays = users.shared_bytes(own_user)
        broke = None
        now = time.monotonic()
        if started is None and box.startup and _started(out, pids, inside):
            started = now
        used, entries = folder_usage(out)
        used += deleted_bytes(pids)  # deleted, kept open: in no folder
        if home is not None:
            home_used, home_entries = folder_usage(home)
            used, entries = used + home_used, entries + home_entries
        if bubblewrap:
            shared = tmpfs_bytes(pids, ("tmp", "dev/shm", *(("grading/out",) if inside else ())))
        if now > (started or start + box.startup) + box.seconds:
            broke = "time"
        elif group is not None and group.killed():
            broke = "memory"
        elif resident_bytes(pids) + shared > box.memory_gb * 2**30:
            broke = "memory"
        elif len(pids) > box.processes:
            broke = "processes"
        elif used > box.output_mb * 2**20 or entries > MAX_ENTRIES or strays > users.STRAY_ENTRIES:
            broke = "output"
        elif os.fstat(errors.fileno()).st_size > STDERR_BYTES:
            broke = "output"
        if broke:
            kill(process)
            return broke
        time.sleep(POLL_SECONDS)
    kill(process)  # anything it left behind (without a sandbox; with one, nothing is left)
    return "memory" if group is not None and group.killed() else None
