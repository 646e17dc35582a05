"""Disk the kernel counts: a size-limited tmpfs mounted on a sandbox's output folder (and, as a
user of its own, on its home), where the grader may mount one: as root, with the right to mount
(a teacher's machine with sudo; not a container without `CAP_SYS_ADMIN`).

A teacher who is not root gets the same from bubblewrap's sandbox, which mounts a tmpfs of its
own and copies its files out after the step (`vitcourse.classroom.sandbox_out`). Elsewhere (a
user of its own, or bubblewrap's sandbox as root, where the grader may not mount) the output
folder is a folder on the grader's disk, measured by the poll of
`vitcourse.classroom.sandbox_watch` every 0.2 s (with what the sandbox's files deleted but kept
open hold): a step can write past the limit between two polls, as much as the disk takes in that
time. With a tmpfs, the kernel refuses every write past its size, files deleted but still open
included. The size is the limit plus `SLACK_MB`, so that the poll still sees the limit broken and
names it ("output"). A tmpfs's pages are memory: where the sandbox has a cgroup
(`vitcourse.classroom.sandbox_cgroup`), what it writes there counts towards its memory too.

`hold(folder, mb)` mounts one on a new, empty folder; it stays mounted, for the grader to read
what the step wrote, until `release` (which `sandbox.remove_tree` calls before removing a folder).
Each mount's source names the grader's process (`vitcourse-<pid>`): `sweep` unmounts those a
grader killed before its clean-up left behind.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import re
import sys
import tempfile
from pathlib import Path

from vitcourse.classroom.sandbox_cgroup import alive
from vitcourse.language import N_, _

MS_NOSUID, MS_NODEV = 2, 4  # <sys/mount.h>: no set-user-id programs, no device files
MNT_DETACH = 2  # unmounted at once, freed when nothing in it is open any more
SLACK_MB = 1  # the tmpfs's size above the output limit: the poll sees the limit broken
# What the results say of the output limit (`note`).
HELD = N_(
    "the kernel held each step's output folder to its size (a tmpfs), files deleted but still "
    "open included"
)
POLLED = N_(
    "the grader could not mount a tmpfs here (it needs root, and the right to mount): each "
    "step's output folder was measured by polling it every 0.2 s, and a step could write past "
    "the limit between two polls"
)
SANDBOXED = N_(
    "the grader could not mount a tmpfs here (it is not root), so bubblewrap's sandbox held each "
    "step's output folder to its size in a tmpfs of its own, files deleted but still open "
    "included, and its files were copied out after the step"
)


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _mount(folder: Path, size: int, options: str, source: str) -> bool:
    flags = MS_NOSUID | MS_NODEV
    done = _libc().mount(
        source.encode(), os.fsencode(folder), b"tmpfs", flags, f"size={size},{options}".encode()
    )
    return done == 0


def hold(folder: Path, megabytes: float, owner: int | None = None, mode: int = 0o777) -> bool:
    """Mount a tmpfs of `megabytes` (plus `SLACK_MB`) on `folder`, which must be empty, its root
    owned by `owner` (default root) with `mode`. False where it cannot be mounted here."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0 or any(folder.iterdir()):
        return False
    sweep()
    size = int((megabytes + SLACK_MB) * 2**20)
    options = f"mode={mode:o}" + (f",uid={owner},gid={owner}" if owner is not None else "")
    return _mount(folder, size, options, f"vitcourse-{os.getpid()}")


def used(folder: Path) -> int:
    """Bytes the filesystem at `folder` holds (its files, deleted but open ones too)."""
    counts = os.statvfs(folder)
    return (counts.f_blocks - counts.f_bfree) * counts.f_frsize


def _unescape(field: str) -> str:
    """A path as /proc/self/mountinfo writes it (a space is \\040) as it is."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mounts(mountinfo: Path = Path("/proc/self/mountinfo")) -> list[tuple[Path, str]]:
    """(mount point, source) of every tmpfs mounted here whose source is a grader's."""
    found = []
    for line in mountinfo.read_text().splitlines():
        fields, _, rest = line.partition(" - ")
        mount, kind = fields.split(), rest.split()
        if len(mount) >= 5 and len(kind) >= 2 and kind[0] == "tmpfs":
            if re.fullmatch(r"vitcourse-\d+", kind[1]):
                found.append((Path(_unescape(mount[4])), kind[1]))
    return found


def release(folder: Path) -> None:
    """Unmount every grader's tmpfs at or under `folder`, the deepest first."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return
    top = Path(os.path.realpath(folder))
    try:
        inside = [point for point, _ in mounts() if point == top or top in point.parents]
    except OSError:
        return
    for point in sorted(inside, key=lambda p: len(p.parts), reverse=True):
        _libc().umount2(os.fsencode(point), MNT_DETACH)


@functools.cache
def sweep() -> None:
    """Unmount the tmpfs a grader killed before its clean-up left (its process is gone); once
    per process."""
    try:
        left = [p for p, source in mounts() if not alive(int(source.split("-")[1]))]
    except OSError:
        return
    for point in left:
        _libc().umount2(os.fsencode(point), MNT_DETACH)


@functools.cache
def why_not() -> str | None:
    """Why the grader cannot hold its sandboxes' output to a tmpfs here, or None when it can
    (asked once per process, by mounting one and unmounting it)."""
    with tempfile.TemporaryDirectory(prefix="vitcourse-disk-") as tmp:
        if not hold(Path(tmp), 1):
            return POLLED
        release(Path(tmp))
    return None


def note(how: str | None = None) -> str:
    """How the sandboxes' output is held here, in a sentence for the results; `how`, the
    isolation mode: a teacher's bubblewrap sandbox holds it in a tmpfs of its own where the
    grader cannot mount one (`vitcourse.classroom.sandbox_out`)."""
    if why_not() and how == "bubblewrap" and os.geteuid() != 0:
        return _(SANDBOXED)
    return _(why_not() or HELD)
