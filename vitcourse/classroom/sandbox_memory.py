"""Shared memory in a sandbox, held to the memory limit where no cgroup counts it.

A process's resident memory (what `vitcourse.classroom.sandbox_watch` sums over a sandbox's processes)
leaves out files in memory-backed folders and memfd pages that were never mapped: a student could
hold gigabytes there under any limit. So a sandbox gets (see `sandbox_bubblewrap.command_line`):

- a read-only `/dev` (bubblewrap's own is a writable tmpfs of half the machine's memory) with a
  small `/dev/shm` of `SHM_MB`, and what its `/tmp` and `/dev/shm` hold counted as its memory
  (`tmpfs_bytes`);
- a seccomp filter (`seccomp_filter`) that refuses `memfd_create` and System V's `shmget` (ENOSYS:
  a library falls back to a file it can see, in `/dev/shm` or `/tmp`) and `fallocate`
  (EOPNOTSUPP: glibc's `posix_fallocate` then writes the bytes, which the file-size limit and the
  counts see; a `fallocate` that keeps the size would hold disk no size shows), any mount (a
  tmpfs of a process's own, in a namespace of its own), and another architecture's system calls
  (the i386 entry has a memfd_create of its own);
- files a sandbox deleted but keeps open, counted as its output (`deleted_bytes`): no folder
  shows them.

Outside bubblewrap (a user of its own, `vitcourse.classroom.sandbox_user`), the same filter is
installed by the sandbox's first process itself (`install_filter`).

Where the grader may make one (root, or a delegated cgroup v2 tree), each sandbox also gets a
cgroup (`vitcourse.classroom.sandbox_cgroup`), whose count by the kernel sees all of this and what
no poll sees (sockets' and pipes' buffers); this route works for any teacher, root or not.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
import struct
from pathlib import Path

SHM_MB = 64  # a sandbox's /dev/shm
# {machine: (its seccomp audit architecture, the numbers of memfd_create, shmget and fallocate,
# and of the calls that mount a file system: mount, umount2, pivot_root, open_tree, move_mount,
# fsopen, fsconfig, fsmount, mount_setattr)}
REFUSED_CALLS = {
    "x86_64": (0xC000003E, 319, 29, 285, (165, 166, 155, 428, 429, 430, 431, 432, 442)),
    "aarch64": (0xC00000B7, 279, 194, 47, (40, 39, 41, 428, 429, 430, 431, 432, 442)),
}
X32 = 0x40000000  # x86-64's x32 system calls are numbered from here
ALLOW, ERRNO = 0x7FFF0000, 0x00050000  # seccomp's return values


def seccomp_filter() -> bytes | None:
    """The seccomp program (classic BPF, as bubblewrap's `--seccomp` reads it), or None on another
    kind of processor (there only the small /dev/shm and the memory count hold shared memory).
    It answers:

    - memfd_create and shmget with ENOSYS, fallocate with EOPNOTSUPP (the module's docstring);
    - a mount of any kind with EPERM: a child in a user and mount namespace of its own could
      otherwise mount a tmpfs of its own and fill it, memory that no count sees;
    - every call through another architecture's entry (on x86-64, the i386 one, `int 0x80`, and
      x32's numbers) with ENOSYS: its memfd_create and shmget have other numbers, which the rest
      of the program would let through.

    Everything else is allowed."""
    known = REFUSED_CALLS.get(os.uname().machine)
    if known is None:
        return None
    arch, memfd_create, shmget, fallocate, mounts = known
    answers = {
        "enosys": ERRNO | errno.ENOSYS,
        "eopnotsupp": ERRNO | errno.EOPNOTSUPP,
        "eperm": ERRNO | errno.EPERM,
        "allow": ALLOW,
    }
    checks = [(memfd_create, "enosys"), (shmget, "enosys"), (fallocate, "eopnotsupp")]
    checks += [(number, "eperm") for number in mounts]
    # (code, where to go if true, if false, operand); a place is an index or an answer's name
    steps = [(0x20, None, None, 4), (0x15, None, "enosys", arch), (0x20, None, None, 0)]
    steps += [(0x15, answer, None, number) for number, answer in checks]
    steps += [(0x35, "enosys", "allow", X32)]
    at = {name: len(steps) + i for i, name in enumerate(answers)}
    program = b""
    for i, (code, true, false, operand) in enumerate(steps):  # jumps count from the next step
        jump = [0 if place is None else at[place] - i - 1 for place in (true, false)]
        program += struct.pack("=HBBI", code, *jump, operand)
    for value in answers.values():
        program += struct.pack("=HBBI", 0x06, 0, 0, value)
    return program


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


def tmpfs_bytes(pids: list[int], folders: tuple[str, ...] = ("tmp", "dev/shm")) -> int:
    """What a sandbox holds in its /tmp and /dev/shm (and other `folders` of its own, such as the
    output tmpfs of `vitcourse.classroom.sandbox_out`): memory too, though no process's resident
    memory counts it. Seen through a sandboxed process's root (the first is bubblewrap's, outside)."""
    total, host = 0, set()
    for folder in ("/", "/tmp", "/dev/shm"):  # while bubblewrap sets up, its root is still ours
        try:
            host.add(os.stat(folder).st_dev)
        except OSError:
            pass
    for pid in pids[1:2]:
        for folder in folders:
            try:
                if os.stat(f"/proc/{pid}/root/{folder}").st_dev in host:
                    continue
                found = os.statvfs(f"/proc/{pid}/root/{folder}")
            except OSError:
                continue
            total += (found.f_blocks - found.f_bfree) * found.f_frsize
    return total


def deleted_bytes(pids: list[int]) -> int:
    """What the files that the processes `pids` deleted but still hold open take (on disk, or in
    a memory-backed folder): no folder's size shows them. Each file counted once, wherever it was.
    The grader counts them as output (`sandbox_watch.watch`); one in /tmp is memory there too."""
    seen, total = set(), 0
    for pid in pids:
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            path = f"/proc/{pid}/fd/{descriptor}"
            try:
                if not os.readlink(path).endswith(" (deleted)"):
                    continue
                found = os.stat(path)  # the open file itself, through its descriptor
            except OSError:
                continue
            if stat.S_ISREG(found.st_mode) and (found.st_dev, found.st_ino) not in seen:
                seen.add((found.st_dev, found.st_ino))
                total += found.st_blocks * 512
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
