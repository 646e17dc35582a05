"""Shared memory in a sandbox, held to the memory limit where no cgroup counts it.

A process's resident memory (what `vitcourse.classroom.sandbox` sums over a sandbox's processes)
leaves out files in memory-backed folders and memfd pages that were never mapped: a student could
hold gigabytes there under any limit. So a sandbox gets (see `sandbox_bubblewrap.command_line`):

- a read-only `/dev` (bubblewrap's own is a writable tmpfs of half the machine's memory) with a
  small `/dev/shm` of `SHM_MB`, and what its `/tmp` and `/dev/shm` hold counted as its memory
  (`tmpfs_bytes`);
- a seccomp filter (`memfd_filter`) that refuses `memfd_create` and System V's `shmget` (ENOSYS:
  a library falls back to a file it can see, in `/dev/shm` or `/tmp`) and `fallocate`
  (EOPNOTSUPP: glibc's `posix_fallocate` then writes the bytes, which the file-size limit and the
  counts see; a `fallocate` that keeps the size would hold disk no size shows).

Outside bubblewrap (a user of its own, `vitcourse.classroom.sandbox_user`), the same filter is
installed by the sandbox's first process itself (`install_filter`).

A cgroup per sandbox would count all of it by itself, but only where the grader may make one
(root, or a delegated cgroup v2 tree); the grader does not use one yet: this route works for any
teacher, root or not.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from pathlib import Path

SHM_MB = 64  # a sandbox's /dev/shm
# {machine: (its seccomp audit architecture, the numbers of memfd_create, shmget and fallocate)}
REFUSED_CALLS = {"x86_64": (0xC000003E, 319, 29, 285), "aarch64": (0xC00000B7, 279, 194, 47)}


def memfd_filter() -> bytes | None:
    """The seccomp program (classic BPF, as bubblewrap's `--seccomp` reads it) that answers
    memfd_create and shmget with ENOSYS and fallocate with EOPNOTSUPP, and allows the rest (x32's
    system calls on x86-64, which nothing here uses, are refused too), or None on another kind
    of processor: there only the small /dev/shm and the memory count hold shared memory."""
    known = REFUSED_CALLS.get(os.uname().machine)
    if known is None:
        return None
    arch, memfd_create, shmget, fallocate = known
    program = [  # (code, jump if true, jump if false, operand); jumps count from the next one
        (0x20, 0, 0, 4),  # 0: load the architecture
        (0x15, 0, 7, arch),  # 1: another architecture: allow (9)
        (0x20, 0, 0, 0),  # 2: load the system call's number
        (0x15, 3, 0, memfd_create),  # 3: refuse (7)
        (0x15, 2, 0, shmget),  # 4: refuse (7)
        (0x15, 2, 0, fallocate),  # 5: not supported (8)
        (0x35, 0, 2, 0x40000000),  # 6: x32's numbers: refuse (7); the rest: allow (9)
        (0x06, 0, 0, 0x00050000 | errno.ENOSYS),  # 7
        (0x06, 0, 0, 0x00050000 | errno.EOPNOTSUPP),  # 8
        (0x06, 0, 0, 0x7FFF0000),  # 9
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


class _Program(ctypes.Structure):  # struct sock_fprog
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_filter(program: bytes):
    """A function that installs `program` in the process that calls it (after `no_new_privs`),
    for a child's `preexec_fn`; its structures are made here, in the parent."""
    libc = ctypes.CDLL(None, use_errno=True)
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _Program(len(program) // 8, ctypes.addressof(buffer))

    def install() -> None:
        if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "seccomp: PR_SET_NO_NEW_PRIVS or PR_SET_SECCOMP")

    install.keep = (buffer, fprog)  # alive as long as the function
    return install


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
