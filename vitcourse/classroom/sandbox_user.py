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
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import subprocess
from pathlib import Path

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


def sandbox_user() -> int | None:
    """The host user the next sandbox runs as: None (the teacher's own) unless the grader is
    root, then a number from `SANDBOX_UIDS` that no process has."""
    if os.geteuid() != 0:
        return None
    while True:
        user = SANDBOX_UIDS.start + secrets.randbelow(len(SANDBOX_UIDS))
        if tasks_of(user) == 0:
            return user


def setpriv() -> Path | None:
    """util-linux's setpriv, where a sandbox can run it (under `SETPRIV_HOME`), or None."""
    found = shutil.which("setpriv", path="/usr/bin:/usr/sbin:/bin:/sbin")
    if found is None or not Path(found).resolve().is_relative_to(SETPRIV_HOME):
        return None
    return Path(found).resolve()


def why_not(needed: list[Path]) -> str | None:
    """Why a grader run as root could not run its sandboxes as `sandbox_user`: no setpriv, or a
    file or folder under `needed` that others may not use (a folder they may not list and enter,
    a file they may not read, a program they may not run). None when it can, and always when
    the grader is not root. The folders are walked (up to `WALK_LIMIT` entries), so a private
    file deep in the virtual environment is found here, not by every student's notebook."""
    if os.geteuid() != 0:
        return None
    if setpriv() is None:
        return (
            f"run as root, the grader needs util-linux's setpriv under {SETPRIV_HOME} to run "
            "students as another user (Debian/Ubuntu: sudo apt install util-linux)"
        )
    private = _first_private(needed)
    if private is not None:
        return (
            f"run as root, the grader runs students' code as a user of its own, who may not "
            f"use {private} (chmod -R o+rX it, or grade as a user other than root)"
        )
    return None


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
    tasks = 0
    for p in proc.iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = dict(
                line.split(":", 1)
                for line in (p / "status").read_text().splitlines()
                if ":" in line
            )
            if int(fields["Uid"].split()[0]) == uid:
                tasks += int(fields["Threads"])
        except (OSError, KeyError, ValueError, IndexError):
            pass
    return tasks
