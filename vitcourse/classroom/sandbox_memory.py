"""Shared memory in a sandbox, held to the memory limit where no cgroup counts it.

A process's resident memory (what `vitcourse.classroom.sandbox` sums over a sandbox's processes)
leaves out files in memory-backed folders and memfd pages that were never mapped: a student could
hold gigabytes there under any limit. So a sandbox gets (see `sandbox_bubblewrap.command_line`):

- a read-only `/dev` (bubblewrap's own is a writable tmpfs of half the machine's memory) with a
  small `/dev/shm` of `SHM_MB`, and what its `/tmp` and `/dev/shm` hold counted as its memory
  (`tmpfs_bytes`);
- a seccomp filter that refuses `memfd_create` (`memfd_filter`): it answers ENOSYS, so a library
  falls back to a file it can see, in `/dev/shm` or `/tmp`.

A cgroup per sandbox would count all of it by itself, but only where the grader may make one
(root, or a delegated cgroup v2 tree); the grader does not use one yet: this route works for any
teacher, root or not.
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

SHM_MB = 64  # a sandbox's /dev/shm
# {machine: (its seccomp audit architecture, memfd_create's number there)}
MEMFD_CREATE = {"x86_64": (0xC000003E, 319), "aarch64": (0xC00000B7, 279)}


def memfd_filter() -> bytes | None:
    """The seccomp program (classic BPF, as bubblewrap's `--seccomp` reads it) that answers
    memfd_create with ENOSYS and allows the rest (x32's system calls on x86-64, which nothing
    here uses, are refused too), or None on another kind of processor: there only the small
    /dev/shm and the memory count hold shared memory."""
    known = MEMFD_CREATE.get(os.uname().machine)
    if known is None:
        return None
    arch, memfd_create = known
    program = [  # (code, jump if true, jump if false, operand)
        (0x20, 0, 0, 4),  # load the architecture
        (0x15, 0, 4, arch),  # another architecture: allow
        (0x20, 0, 0, 0),  # load the system call's number
        (0x15, 1, 0, memfd_create),  # memfd_create: refuse
        (0x35, 0, 1, 0x40000000),  # x32's numbers: refuse; the rest: allow
        (0x06, 0, 0, 0x00050000 | errno.ENOSYS),
        (0x06, 0, 0, 0x7FFF0000),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


def tmpfs_bytes(pids: list[int]) -> int:
    """What a sandbox holds in its /tmp and /dev/shm: memory too, though no process's resident
    memory counts it. Seen through a sandboxed process's root (the first is bubblewrap's, outside)."""
    total, host = 0, set()
    for folder in ("/", "/tmp", "/dev/shm"):  # while bubblewrap sets up, its root is still ours
        try:
            host.add(os.stat(folder).st_dev)
        except OSError:
            pass
    for pid in pids[1:2]:
        for folder in ("tmp", "dev/shm"):
            try:
                if os.stat(f"/proc/{pid}/root/{folder}").st_dev in host:
                    continue
                found = os.statvfs(f"/proc/{pid}/root/{folder}")
            except OSError:
                continue
            total += (found.f_blocks - found.f_bfree) * found.f_frsize
    return total


def resident_bytes(pids: list[int]) -> int:
    """The resident memory of the processes `pids`, summed (shared pages count in each)."""
    total, page = 0, os.sysconf("SC_PAGE_SIZE")
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            pass
    return total
