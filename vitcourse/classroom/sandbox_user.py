"""Who a sandbox runs as: never root.

Linux applies no process limit to root (`RLIMIT_NPROC` is not checked for it), and a process that
found its way out of a sandbox run by root would be root on the teacher's machine. So when the
grader runs as root, `vitcourse.classroom.sandbox` starts each sandbox as a user of its own
(`sandbox_user`): a number no account uses, whose processes and threads are counted apart from
everyone else's. bubblewrap, run by root, still makes the sandbox (so it can reach a course or an
interpreter in /root); its first command then becomes that user for good (`as_user`). A grader
run by a teacher without root starts its sandboxes as that teacher, in a user namespace.

That user needs what is bound to be readable by others: the grader's own copies are made so
(`readable_by_all`), and the interpreter, the virtual environment, the package and the data are
checked before a class is graded (`why_not`).

Where bubblewrap cannot make a sandbox (a container that forbids user namespaces, as on the
platforms where schools grade), the grader run as root still runs each command as such a user
(`sandbox.OWN_USER`), with a private home (`private_home`, `own_environment`). Its processes are
all the processes of that user (`pids_of`), its files in the folders every user may write
(`SHARED_TMP`) count as its memory (`shared_bytes`), and `clear_up` kills what it left running and
removes what it left there.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

from vitcourse.classroom.sandbox_memory import install_filter, seccomp_filter

# The users root's sandboxes run as: numbers no account has (above the ranges /etc/subuid hands out
# by default and systemd's container range, which ends at 1,879,048,191; below 2**31), a fresh
# one for each sandbox, so that two sandboxes never share a process limit.
SANDBOX_UIDS = range(2_000_000_000, 2_100_000_000)
# Tasks (processes and threads: Linux counts both) a sandbox may have beyond its allowed
# processes: torch starts a pool of threads per core in every process that uses it. The grader's
# poll counts processes exactly; this kernel limit only stops a fork or thread bomb at once.
TASK_ROOM = 64 + 4 * (os.cpu_count() or 2)
# Where the sandbox finds setpriv: it must lie in a folder bound into every sandbox (/usr).
SETPRIV_HOME = Path("/usr")
# How many files and folders `why_not` looks at before it trusts the rest.
WALK_LIMIT = 200_000
# The folders any user may write to, outside a sandbox: what a user of its own leaves there is its.
SHARED_TMP = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/run/lock"))
# What a user of its own may leave there, files and folders, before it breaks the output limit.
STRAY_ENTRIES = 10_000


ISSUED: set[int] = set()  # the users this process has given out (`clear_up_all`)


def sandbox_user() -> int | None:
    """The host user the next sandbox runs as: None (the teacher's own) unless the grader is
    root, then a number from `SANDBOX_UIDS` that no process has."""
    if os.geteuid() != 0:
        return None
    while True:
        user = SANDBOX_UIDS.start + secrets.randbelow(len(SANDBOX_UIDS))
        if tasks_of(user) == 0:
            ISSUED.add(user)
            return user


def clear_up_all() -> None:
    """`clear_up` every user this process gave out: for a grader about to end mid-step."""
    for user in list(ISSUED):
        clear_up(user)


def setpriv() -> Path | None:
    """util-linux's setpriv, where a sandbox can run it (under `SETPRIV_HOME`), or None."""
    found = shutil.which("setpriv", path="/usr/bin:/usr/sbin:/bin:/sbin")
    if found is None or not Path(found).resolve().is_relative_to(SETPRIV_HOME):
        return None
    return Path(found).resolve()


def why_not(needed: list[Path], passable: bool = False) -> str | None:
    """Why a grader run as root could not run its sandboxes as `sandbox_user`: no setpriv, or a
    file or folder under `needed` that others may not use (a folder they may not list and enter,
    a file they may not read, a program they may not run). None when it can, and always when
    the grader is not root. The folders are walked (up to `WALK_LIMIT` entries), so a private
    file deep in the virtual environment is found here, not by every student's notebook.
    `passable`: also the folders above them, which others must be able to pass through (outside
    bubblewrap, which makes them afresh: see `open_way`)."""
    if os.geteuid() != 0:
        return None
    if setpriv() is None:
        return (
            f"run as root, the grader needs util-linux's setpriv under {SETPRIV_HOME} to run "
            "students as another user (Debian/Ubuntu: sudo apt install util-linux)"
        )
    private = _first_private(needed)
    closed = [folder for folder in _above(needed) if not os.stat(folder).st_mode & 0o001]
    if private is None and passable and closed:
        private, fix = closed[0], f"chmod o+x {closed[0]}, or see sandbox_user.open_way"
    else:
        fix = f"chmod -R o+rX {private}, or grade as a user other than root"
    if private is not None:
        return (
            f"run as root, the grader runs students' code as a user of its own, who may not "
            f"use {private} ({fix})"
        )
    return None


def _above(paths: list[Path]) -> list[Path]:
    """The folders above `paths` (their real paths), from the top."""
    folders = {above for p in paths if p.exists() for above in p.resolve().parents}
    return sorted(folders, key=lambda f: len(f.parts))


def open_way(paths: list[Path]) -> list[Path]:
    """Let any user pass through (not list) every folder above `paths`, so that a command run as
    a user of its own outside bubblewrap reaches them (an interpreter under /root, say); return
    the folders changed. For a grader's own machine or container (the platforms' scripts run it
    in theirs); nothing below is made readable."""
    changed = []
    for folder in _above(paths):
        mode = os.stat(folder).st_mode
        if not mode & 0o001:
            os.chmod(folder, stat.S_IMODE(mode) | 0o001)
            changed.append(folder)
    return changed


def _first_private(roots: list[Path]) -> Path | None:
    todo, seen = [str(r) for r in roots if r.exists()], 0
    for root in list(todo):
        if not os.path.isdir(root) and _private(os.lstat(root).st_mode):
            return Path(root)
    todo = [r for r in todo if os.path.isdir(r)]
    while todo and seen < WALK_LIMIT:
        folder = todo.pop()
        try:
            if _private(os.lstat(folder).st_mode):
                return Path(folder)
            with os.scandir(folder) as entries:
                for entry in entries:
                    seen += 1
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
                    elif not entry.is_symlink() and _private(
                        entry.stat(follow_symlinks=False).st_mode
                    ):
                        return Path(entry.path)
        except OSError:
            return Path(folder)
    return None


def _private(mode: int) -> bool:
    """Whether others may not use a file or folder of this mode: list and enter a folder, read a
    file, and run a program."""
    if stat.S_ISDIR(mode):
        wanted = 0o005
    else:
        wanted = 0o004 | (0o001 if mode & 0o100 else 0)
    return mode & wanted != wanted


def as_user(user: int, command: list[str]) -> list[str]:
    """`command` run as `user`, with no groups and no capabilities, none left to gain either
    (`--bounding-set=-all`, `--no-new-privs`): util-linux's setpriv, the sandbox's first
    command (bubblewrap, run by root, leaves it the capabilities to do this, and nothing else)."""
    ids = ["--reuid", str(user), "--regid", str(user), "--clear-groups"]
    drop = ["--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
    return [str(setpriv() or "setpriv"), *ids, *drop, "--", *command]


def readable_by_all(path: Path) -> None:
    """Let any user read `path` (a file, or a folder and all it holds): the grader's own copies
    handed to a sandbox that runs as another user, whatever the teacher's umask."""
    if shutil.which("chmod"):
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run(["chmod", "-R", "a+rX", "--", str(path)], check=False, **quiet)
    else:
        path.chmod(path.stat().st_mode | (0o555 if path.is_dir() else 0o444))


def tasks_of_this_user() -> int:
    """Processes and threads of this process's real user, as Linux counts them against
    `RLIMIT_NPROC` (a teacher's browser alone may have hundreds of threads)."""
    return tasks_of(os.getuid())


def tasks_of(uid: int, proc: Path = Path("/proc")) -> int:
    """Processes and threads whose real user is `uid`, from each process's `status` in `proc`
    (its `Uid:` line's first number and its `Threads:` line: the folder's owner is the effective
    user, or root for a process that may not be inspected)."""
    return sum(threads for _, threads in _processes_of(uid, proc))


def pids_of(uid: int, proc: Path = Path("/proc")) -> list[int]:
    """Every live process whose real user is `uid`: with a user of its own, every process the
    command started, also one that left its process group and parent. Not the zombies such a
    process leaves where no one reaps them (they hold nothing, and nothing can kill them), but
    a zombie whose other threads still run is alive."""
    return [pid for pid, _ in _processes_of(uid, proc, zombies=False)]


def _processes_of(uid: int, proc: Path, zombies: bool = True) -> list[tuple[int, int]]:
    """[(pid, threads)] of the processes whose real user is `uid`."""
    found = []
    for p in proc.iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = dict(
                line.split(":", 1)
                for line in (p / "status").read_text().splitlines()
                if ":" in line
            )
            dead = "Z" in fields.get("State", "") and int(fields["Threads"]) <= 1
            if int(fields["Uid"].split()[0]) == uid and (zombies or not dead):
                found.append((int(p.name), int(fields["Threads"])))
        except (OSError, KeyError, ValueError, IndexError):
            pass
    return found


# --- a user of its own, without bubblewrap ---------------------------------------------------------


def private_home(user: int, folder: Path, readable: list[Path | None], reached: list[Path]) -> Path:
    """A home folder only `user` may use, in `folder` (the grader's, private: `user` may pass
    through it, not list it); `readable` (the command's files, its package) made readable by all,
    and their folders and those of `reached` (its output folder, its own) passable up to the
    system's temporary folder, where the grader makes its own."""
    home = folder / "home"
    home.mkdir()
    os.chown(home, user, user)
    home.chmod(0o700)
    top = Path(tempfile.gettempdir()).resolve()
    files = [p for p in readable if p is not None]
    for path in files:  # made by the grader, writable by no other user: `chmod -R` cannot race
        readable_by_all(path)
    for path in [folder, *files, *(p.parent for p in reached)]:  # `reached`: the user's own
        for above in [path.resolve(), *path.resolve().parents]:
            if above == top or not above.is_relative_to(top):
                break
            if above.is_dir():
                above.chmod(above.stat().st_mode | 0o001)
    return home


def launch(full, user, given, out, package, tmp: Path, env: dict, limit):
    """(command, cwd, environment, home, preexec) of a command run as a user of its own: its
    output folder its own (no other user, an earlier step's among them, can slip anything in),
    a private home, and the kernel limits then the seccomp filter set before it starts."""
    if user is None:
        raise PermissionError("a user of its own needs a grader run as root")
    os.chown(out, user, user)
    out.chmod(0o700)
    home = private_home(user, tmp, readable=[given, package], reached=[out])
    program = seccomp_filter()
    install = install_filter(program) if program is not None else None

    def preexec() -> None:
        limit()
        if install is not None:
            install()

    preexec.keep = install  # type: ignore[attr-defined]
    return as_user(user, full), str(home), own_environment(home, env), home, preexec


def own_environment(home: Path, env: dict) -> dict:
    """The environment of a command run as a user of its own: none of the grader's, a home and
    temporary folder of its own, the interpreter's folder first on PATH, and `env`."""
    base = {"HOME": str(home), "TMPDIR": str(home), "LANG": "C.UTF-8"}
    return base | {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"} | env


def _strays(uid: int, most: int = STRAY_ENTRIES) -> list[Path]:
    """What `uid` made directly in the shared temporary folders: at most `most` + 1 of them (the
    folders are read as they come, and no further once that many are found)."""
    found: list[Path] = []
    for folder in dict.fromkeys(p.resolve() for p in SHARED_TMP if p.is_dir()):
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.stat(follow_symlinks=False).st_uid == uid:
                        found.append(Path(entry.path))
                        if len(found) > most:
                            return found
        except OSError:
            continue
    return found


def stored_bytes(info: os.stat_result) -> int:
    """What a file holds on its disk or in memory: its size, or the blocks it was given when
    more (`fallocate` can give blocks and keep the size at 0)."""
    return max(info.st_size, info.st_blocks * 512)


def shared_bytes(uid: int, most: int = STRAY_ENTRIES) -> tuple[int, int]:
    """(bytes, entries) `uid` holds in the shared temporary folders (`/dev/shm` is memory; /tmp
    may be), links not followed, looking at no more than `most` + 1 entries."""
    total, todo = 0, _strays(uid, most)
    entries = len(todo)
    while todo and entries <= most:
        path = todo.pop()
        try:
            info = path.lstat()
            total += stored_bytes(info)
            if stat.S_ISDIR(info.st_mode):
                inside = list(path.iterdir())
                entries += len(inside)
                todo += inside
        except OSError:
            continue
    return total, entries


def clear_up(uid: int, tries: int = 20) -> None:
    """Kill every process of `uid` (its own `kill(-1)`: all it may signal, so all of its own, in
    one call; once at least, then until none is alive), and remove what it left in the shared
    temporary folders (one `find` a folder, however many files)."""
    for attempt in range(tries):
        if attempt and not pids_of(uid):
            break
        subprocess.run(  # `kill(-1)` between the change of user and the exec of `true`
            ["true"],
            user=uid,
            group=uid,
            extra_groups=[],
            check=False,
            preexec_fn=lambda: os.kill(-1, signal.SIGKILL),
        )
    for folder in dict.fromkeys(p.resolve() for p in SHARED_TMP if p.is_dir()):
        subprocess.run(
            [
                "find",
                str(folder),
                "-xdev",
                "-mindepth",
                "1",
                "-maxdepth",
                "1",
                "-uid",
                str(uid),
                "-exec",
                "rm",
                "-rf",
                "--",
                "{}",
                "+",
            ],
            check=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
