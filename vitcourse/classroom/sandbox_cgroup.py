"""A cgroup for each sandbox, where the grader may make one: the kernel then counts all the memory
its processes hold, and kills one of them when it is past the limit. That count sees what no poll
of /proc sees: sockets' and pipes' buffers, files in memory-backed folders, memory the kernel
keeps for them. It also holds their number of processes and threads (`pids.max`).

`make(box)` gives a `Cgroup`, or None where none can be made (`why_not` says why: a grader that
is not root, or a container whose cgroups are read-only): then the poll of
`vitcourse.classroom.sandbox_watch` is the only count of memory, and the grader says so. The
sandbox's first process joins it before anything else (`Cgroup.entering`); every process it
starts is in it from then on, and cannot leave it (the cgroup's files are root's).

Where it is made, in the first place that works:

- **cgroup v2** (`memory.max`, `memory.swap.max`, `pids.max`; kills counted in `memory.events`):
  in the grader's own cgroup where it hands the memory controller down to its children (the
  top one does; another cannot while the grader's own process is in it), else at the top of the
  hierarchy, as root;
- **cgroup v1** (`memory.limit_in_bytes`, `memory.memsw.limit_in_bytes`, `pids.max`; kills
  counted in `memory.oom_control`): in the grader's own cgroup of the memory and pids
  hierarchies, as root.

Everything is made with the sandbox and removed after it (its processes killed first). What a
grader killed before its clean-up left behind is removed by the next grader's first `make`
(`sweep`: each cgroup's name holds its grader's process id).
"""

from __future__ import annotations

import functools
import itertools
import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from vitcourse.classroom import sandbox_user as users
from vitcourse.language import N_, _

# {version: (the memory limit's file, the limit with swap's, the file that counts the kills)}
FILES = {
    1: ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.oom_control"),
    2: ("memory.max", "memory.swap.max", "memory.events"),
}
_names = itertools.count()
# What the results say of the memory limit (`note`).
KERNEL_COUNTS = N_(
    "the kernel counted and limited each step's memory (a cgroup), what sockets and pipes hold "
    "included"
)
POLL_ONLY = N_(
    "the grader could not make a cgroup here (it needs root, and cgroups it may write): each "
    "step's memory was counted by polling its processes, which does not see what "
    "sockets and pipes hold"
)


@dataclass(frozen=True)
class Cgroup:
    """One sandbox's cgroup: its folders (one in v2; the memory and the pids hierarchy's in v1),
    and the file in which the kernel counts the processes it killed for memory."""

    folders: tuple[Path, ...]
    events: Path

    def entering(self, then=None):
        """A `preexec_fn`: the new process joins the cgroup, then runs `then` (the limits, the
        seccomp filter). The paths are made here, in the parent."""
        procs = [os.fsencode(folder / "cgroup.procs") for folder in self.folders]

        def enter() -> None:
            for path in procs:
                fd = os.open(path, os.O_WRONLY)
                try:
                    os.write(fd, str(os.getpid()).encode())
                finally:
                    os.close(fd)
            if then is not None:
                then()

        enter.keep = then  # type: ignore[attr-defined]
        return enter

    def killed(self) -> int:
        """How many of its processes the kernel killed for going past the memory limit."""
        try:
            for line in self.events.read_text().splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def remove(self, seconds: float = 10) -> None:
        """Kill every process still in it, then remove its folders."""
        deadline = time.monotonic() + seconds
        for folder in self.folders:
            while True:
                try:
                    pids = [int(p) for p in (folder / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    pids = []
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:  # still busy: its last processes are dying
                    if time.monotonic() > deadline:
                        break
                    time.sleep(0.05)


def hierarchies(
    mountinfo: Path = Path("/proc/self/mountinfo"), mine: Path = Path("/proc/self/cgroup")
) -> dict[str, tuple[Path, Path]]:
    """{"unified", "memory", "pids": (this process's own cgroup's folder, the hierarchy's top)}
    for those mounted here (v2's is "unified"; "memory" and "pids" are v1's)."""
    points: dict[str, tuple[Path, str]] = {}
    for line in mountinfo.read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        mount, kind = fields.split(), rest.split()
        if len(mount) < 5 or len(kind) < 3:
            continue
        root, point = mount[3], Path(mount[4].replace("\\040", " "))
        if kind[0] == "cgroup2":
            points.setdefault("unified", (point, root))
        elif kind[0] == "cgroup":
            for name in set(kind[2].split(",")) & {"memory", "pids"}:
                points.setdefault(name, (point, root))
    found = {}
    for line in mine.read_text().splitlines():
        number, controllers, path = line.split(":", 2)
        for name in set(["unified"] if number == "0" else controllers.split(",")) & set(points):
            point, root = points[name]
            own = point / os.path.relpath(path, root) if Path(path).is_relative_to(root) else point
            found[name] = (own if own.is_dir() else point, point)
    return found


def _parents(found: dict[str, tuple[Path, Path]]) -> tuple[int, tuple[Path, ...]] | None:
    """(the version, the folders to make a sandbox's cgroup in), or None where there are none."""
    for parent in dict.fromkeys(found.get("unified", ())):  # its own cgroup, then the top
        handed = parent / "cgroup.subtree_control"
        if handed.exists() and "memory" in handed.read_text().split():
            if os.access(parent, os.W_OK):
                return 2, (parent,)
    memory, pids = found.get("memory", (None,))[0], found.get("pids", (None,))[0]
    if memory is not None and os.access(memory, os.W_OK):
        return 1, (memory,) + ((pids,) if pids is not None and os.access(pids, os.W_OK) else ())
    return None


def alive(pid: int) -> bool:
    """Whether a process `pid` is running (one of another user's included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@functools.cache
def sweep(parents: tuple[Path, ...]) -> list[Path]:
    """Remove the cgroups in `parents` that a grader killed before its clean-up left (its
    process is gone: what is in them is killed), once per process; say which."""
    removed = []
    for parent in parents:
        for folder in sorted(parent.glob("vitcourse-*-*")):
            made_by = re.fullmatch(r"vitcourse-(\d+)-\d+", folder.name)
            if made_by and folder.is_dir() and not alive(int(made_by.group(1))):
                Cgroup((folder,), folder / "none").remove(seconds=1)
                removed.append(folder)
    return removed


def make(box, found: dict[str, Path] | None = None) -> Cgroup | None:
    """A cgroup for a sandbox with `box`'s limits (`sandbox.Box`: memory, processes), or None
    where none can be made here. `found`: the hierarchies (default, this process's own)."""
    try:
        place = _parents(hierarchies() if found is None else found)
    except (OSError, ValueError):
        return None
    if place is None:
        return None
    version, parents = place
    sweep(parents)
    limit, swap, events = FILES[version]
    name = f"vitcourse-{os.getpid()}-{next(_names)}"
    folders = tuple(parent / name for parent in parents)
    made = Cgroup(folders, folders[0] / events)
    memory = str(int(box.memory_gb * 2**30))
    tasks = str(box.processes + users.TASK_ROOM)  # threads count too, as RLIMIT_NPROC's do
    try:
        for folder in folders:
            folder.mkdir()
        (folders[0] / limit).write_text(memory)
        if (folders[0] / swap).exists():  # no swap beyond the limit ("0" in v2: none at all)
            (folders[0] / swap).write_text(memory if version == 1 else "0")
        if (folders[-1] / "pids.max").exists():
            (folders[-1] / "pids.max").write_text(tasks)
    except OSError:
        made.remove()
        return None
    return made


@functools.cache
def why_not() -> str | None:
    """Why the grader cannot make a cgroup for its sandboxes here, or None when it can (asked
    once per process, by making one and removing it)."""
    from types import SimpleNamespace

    tried = make(SimpleNamespace(memory_gb=1, processes=1))
    if tried is not None:
        tried.remove()
        return None
    return POLL_ONLY


def note() -> str:
    """How the sandboxes' memory is counted here, in a sentence for the results."""
    return _(why_not() or KERNEL_COUNTS)
