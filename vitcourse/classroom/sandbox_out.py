"""A step's output held by the kernel where the grader may not mount a tmpfs itself (a teacher who
is not root, in bubblewrap's sandbox): bubblewrap mounts one of the output limit's size (plus
`sandbox_disk.SLACK_MB`) at /grading/out inside the sandbox, and this program, the sandbox's
command, runs the step and then copies what the step left there into the grader's output folder.

    python -m vitcourse.classroom.sandbox_out FD LIMIT -- python -m vitcourse...

FD is the grader's output folder, open: no bind names it, so it is the only way out of the sandbox,
and only this program holds it. Before the step starts, this process is made non-dumpable (the step,
though the same user, can reach it neither through /proc/<pid>/fd nor by ptrace), and the step
starts without the descriptor. When the step ends, every other process in the sandbox is killed, so
that nothing writes while the copy reads. The copy takes folders and regular files only (a link, a
pipe or a device is left behind), opens nothing through a link, and stops past `MAX_ENTRIES`,
`MAX_DEPTH` or the output limit's bytes (a file's hard links and a sparse file's holes take no room
on the tmpfs, but would in the copy). Last it writes `REPORT` beside them, which `sandbox.run` reads
and removes: the bytes the tmpfs held, what was copied, and whether the step broke the output limit
("output"). A step that kills this program loses its output, and only its own. The tmpfs's pages are
memory: `sandbox_watch` counts them towards the step's memory, with its /tmp.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time

REPORT = ".vitcourse-out.json"  # written last, by this program only: the step's own is not copied
MAX_ENTRIES = 10_000  # files and folders copied out; more breaks the output limit
MAX_DEPTH = 64  # folders within folders
PR_SET_DUMPABLE = 4  # <linux/prctl.h>
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class _TooMany(Exception):
    pass


def _undumpable() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0) failed")


def _others() -> list[int]:
    """The sandbox's processes still running but for its first (bubblewrap's) and this one."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) not in (1, os.getpid()):
            try:
                with open(f"/proc/{name}/stat") as stat:
                    state = stat.read().rpartition(")")[2].split()[0]
            except (OSError, IndexError):
                continue  # gone meanwhile
            if state not in ("Z", "X"):  # a zombie writes nothing
                found.append(int(name))
    return found


def kill_the_rest(wait: float = 5.0) -> None:
    """Kill every other process of the sandbox and wait until none runs (at most `wait` s)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # every process this one may signal, but itself
        except ProcessLookupError:
            pass
        if not _others() or time.monotonic() > deadline:
            return
        time.sleep(0.01)


class Budget:
    """What a copy may still take: entries (files, folders, links and the rest, each looked at)
    and bytes (a file's every link, and a sparse file's holes, count in full)."""

    def __init__(self, entries: int, size: int):
        self.entries, self.size = entries, size

    def take(self, entries: int = 0, size: int = 0) -> None:
        self.entries, self.size = self.entries - entries, self.size - size
        if self.entries < 0 or self.size < 0:
            raise _TooMany


def copy_out(source: int, target: int, budget: Budget, depth: int = 0) -> None:
    """Copy the folders and regular files of the open folder `source` into the open folder
    `target`, following no link, within `budget` (`_TooMany` past it, or past `MAX_DEPTH`)."""
    with os.scandir(source) as entries:  # one at a time: a folder may hold millions of names
        for entry in entries:
            if depth == 0 and entry.name == REPORT:
                continue
            budget.take(entries=1)
            _copy_entry(entry, source, target, budget, depth)


def _copy_entry(entry: os.DirEntry, source: int, target: int, budget: Budget, depth: int) -> None:
    if entry.is_dir(follow_symlinks=False):
        if depth + 1 > MAX_DEPTH:
            raise _TooMany
        os.mkdir(entry.name, 0o755, dir_fd=target)
        inner = os.open(entry.name, _FOLDER, dir_fd=source)
        try:
            there = os.open(entry.name, _FOLDER, dir_fd=target)
            try:
                copy_out(inner, there, budget, depth + 1)
            finally:
                os.close(there)
        finally:
            os.close(inner)
    elif entry.is_file(follow_symlinks=False):
        _copy_file(entry.name, source, target, budget)


def _copy_file(name: str, source: int, target: int, budget: Budget) -> None:
    reading = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=source)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        writing = os.open(name, flags, 0o644, dir_fd=target)
        with open(reading, "rb", closefd=False) as src, open(writing, "wb") as dst:
            while chunk := src.read(2**20):
                budget.take(size=len(chunk))
                dst.write(chunk)
    finally:
        os.close(reading)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 4 or argv[2] != "--":
        print(
            "usage: python -m vitcourse.classroom.sandbox_out FD LIMIT -- command...",
            file=sys.stderr,
        )
        return 2
    target, limit, command = int(argv[0]), int(argv[1]), argv[3:]
    os.set_inheritable(target, False)
    _undumpable()
    step = subprocess.Popen(command)  # without FD: close_fds
    code = step.wait()
    kill_the_rest()
    counts = os.statvfs("/grading/out")  # as `sandbox_disk.used`, whose imports would be slower
    held = (counts.f_blocks - counts.f_bfree) * counts.f_frsize
    broke = "output" if held > limit else None
    source = os.open("/grading/out", _FOLDER)
    budget = Budget(MAX_ENTRIES, limit)
    try:
        copy_out(source, target, budget)
    except _TooMany:
        broke = "output"
    finally:
        os.close(source)
    report = os.open(
        REPORT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644, dir_fd=target
    )
    with open(report, "w") as file:
        copied = {"entries": MAX_ENTRIES - budget.entries, "bytes": limit - budget.size}
        json.dump({"held": held, "copied": copied, "broke": broke}, file)
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main())
