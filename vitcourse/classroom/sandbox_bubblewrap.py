"""What a bubblewrap sandbox sees: its command line (`command_line`) and how it is started (`launch`).

`vitcourse.classroom.sandbox` runs each command of the grader through `launch` when bubblewrap is
there. The sandbox sees the interpreter and its environment read-only (`read_only_roots`), the
`vitcourse` package (or the copy without the solutions it is given) at the installed package's
path (`package_dir`), the course's data when asked, its files at `/grading/in` and its output
folder at `/grading/out` (`INSIDE`), a private /tmp and /dev/shm of a set size, and a made-up
/etc/passwd. Run by root, its first command becomes a user of its own
(`vitcourse.classroom.sandbox_user`); its /dev/shm and memfd rules are
`vitcourse.classroom.sandbox_memory`'s.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import vitcourse
from vitcourse.classroom import sandbox_user as users
from vitcourse.classroom.sandbox_disk import SLACK_MB
from vitcourse.classroom.sandbox_memory import SHM_MB, seccomp_filter

INSIDE = Path("/grading")  # where a sandbox finds its files (`in/`) and its output folder (`out/`)


def read_only_roots() -> list[Path]:
    """The interpreter and the virtual environment: what `python -m vitcourse...` needs."""
    roots = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    roots |= {Path(p) for p in ("/usr", "/lib", "/lib64", "/bin", "/etc/ld.so.cache", "/etc/fonts")}
    return sorted(p for p in roots if p.exists())


def package_dir() -> Path:
    return Path(vitcourse.__file__).resolve().parent


def command_line(
    command: list[str],
    box,
    given: Path,
    out: Path,
    passwd: Path,
    env: dict,
    seccomp: int | None = None,
    user: int | None = None,
    copied: tuple[int, int] | None = None,
) -> list[str]:
    """bubblewrap's command line. `user`: the host user the command becomes (the grader is root,
    see `vitcourse.classroom.sandbox_user`); None: the teacher, as uid 1000 of a user namespace.
    `copied`: (the descriptor of `out`, the output limit in bytes): /grading/out is then a tmpfs
    of the sandbox's own, and `vitcourse.classroom.sandbox_out` copies it into `out` after the
    command (where the grader could not mount a tmpfs on `out` itself)."""
    args = ["bwrap", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    if user is None:
        args += ["--unshare-all", "--uid", "1000", "--gid", "1000"]
    else:  # every namespace but the user's: its first command may change user, then drops all
        args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        args += ["--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        args += ["--cap-add", "CAP_SETPCAP"]  # to empty the bounding set
        command = users.as_user(user, command)
    args += ["--clearenv", "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev"]
    # /dev's own tmpfs may hold half the machine's memory, unaccounted: read-only, with a small
    # /dev/shm of its own (its use, and /tmp's, count towards the memory limit: see `sandbox_watch`).
    args += ["--perms", "1777", "--size", str(SHM_MB * 2**20), "--tmpfs", "/dev/shm"]
    if seccomp is not None:  # memfd_create refused: pages never mapped escape any count
        args += ["--seccomp", str(seccomp)]
    # The private /tmp first, then the binds: a later tmpfs would hide a course or a virtual
    # environment that lives under /tmp (every student would get "No module named vitcourse").
    args += ["--perms", "1777", "--size", str(int(box.tmp_mb * 2**20)), "--tmpfs", "/tmp"]
    args += ["--perms", "0777", "--dir", "/tmp/home", "--perms", "0777", "--dir", "/tmp/work"]
    binds = [(str(root), str(root)) for root in read_only_roots() if not root.is_symlink()]
    binds += [(str(box.package or package_dir()), str(package_dir()))]
    if box.data:
        from vitcourse.environment import default_root

        binds += [(str(default_root().resolve()), str(default_root().resolve()))]
    binds += [(str(passwd), "/etc/passwd"), (str(given), str(INSIDE / "in"))]
    # bubblewrap makes the folders above a bind private to itself: open them to all users.
    for folder in sorted({str(p) for _, d in binds for p in Path(d).parents} - {"/", "/tmp"}):
        args += ["--perms", "0755", "--dir", folder]
    for root in read_only_roots():
        if root.is_symlink():
            args += ["--symlink", os.readlink(root), str(root)]
    for source, destination in binds:
        args += ["--ro-bind", source, destination]
    if copied is None:
        args += ["--bind", str(out), str(INSIDE / "out")]
    else:  # the limit plus the slack, as on the grader's tmpfs: breaking the limit shows
        size = copied[1] + SLACK_MB * 2**20
        args += ["--perms", "0777", "--size", str(size), "--tmpfs", str(INSIDE / "out")]
        here = [sys.executable, "-m", "vitcourse.classroom.sandbox_out"]
        command = [*here, str(copied[0]), str(copied[1]), "--", *command]
    env = dict(env, HOME="/tmp/home", PATH=f"{Path(sys.executable).parent}:/usr/bin:/bin")
    env |= {"TMPDIR": "/tmp", "LANG": "C.UTF-8"}
    for name, value in env.items():
        args += ["--setenv", name, value]
    return args + ["--chdir", "/tmp/work", "--", *command]


def launch(
    command, given, out, box, env, tmp: Path, user, held: bool = True
) -> tuple[list[str], tuple]:
    """The command that starts bubblewrap: its options in a file (`tmp/args`, with the seccomp
    filter beside it), and the descriptors of those files, to pass to it and close after. Where
    `out` is not `held` to its size by the grader's tmpfs and the sandbox is the teacher's (no
    `user`), the sandbox holds it in a tmpfs of its own and copies it out (`sandbox_out`)."""
    passwd = tmp / "passwd"
    passwd.write_text(f"student:x:{user or 1000}:{user or 1000}::/tmp/home:/bin/false\n")
    for path in (given, box.package, passwd) if user else ():  # for a user of no group
        if path is not None:
            users.readable_by_all(path)
    keep: tuple[int, ...] = ()
    program = seccomp_filter()
    if program is not None:
        (tmp / "seccomp").write_bytes(program)
        keep = (os.open(tmp / "seccomp", os.O_RDONLY),)
    copied = None
    if not held and user is None:
        copied = (
            os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW),
            int(box.output_mb * 2**20),
        )
    seccomp = keep[0] if keep else None
    full = command_line(command, box, given, out, passwd, env, seccomp, user, copied)
    keep += (copied[0],) if copied else ()
    # Its arguments (the host paths it binds) from a file, not its command line, and no
    # environment of the teacher's: the sandbox's /proc/1 shows neither.
    options = full[1 : full.index("--")]
    (tmp / "args").write_bytes(b"".join(os.fsencode(a) + b"\0" for a in options))
    keep += (os.open(tmp / "args", os.O_RDONLY),)
    bwrap = shutil.which("bwrap") or "bwrap"
    return [bwrap, "--args", str(keep[-1]), *full[full.index("--") :]], keep
