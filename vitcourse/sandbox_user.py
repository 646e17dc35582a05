"""Who a sandbox runs as: never root.

Linux applies no process limit to root (`RLIMIT_NPROC` is not checked for it), and a process that
found its way out of a sandbox run by root would be root on the teacher's machine. So when the
grader runs as root, `vitcourse.sandbox` starts each sandbox as a user of its own
(`sandbox_user`): a number no account uses, whose processes and threads are counted apart from
everyone else's. bubblewrap, run by root, still makes the sandbox (so it can reach a course or an
interpreter in /root); its first command then becomes that user for good (`as_user`). A grader
run by a teacher without root starts its sandboxes as that teacher, in a user namespace.

That user needs what is bound to be readable by others: the grader's own copies are made so
(`readable_by_all`), and the interpreter, the virtual environment, the package and the data are
checked before a class is graded (`why_not`).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

# The users root's sandboxes run as: numbers far above any account's (and above the ranges
# /etc/subuid hands out by default), a fresh one for each sandbox.
SANDBOX_UIDS = range(1_800_000_000, 1_900_000_000)
# Tasks (processes and threads: Linux counts both) a sandbox may have beyond its allowed
# processes: torch starts a pool of threads per core in every process that uses it. The grader's
# poll counts processes exactly; this kernel limit only stops a fork or thread bomb at once.
TASK_ROOM = 64 + 4 * (os.cpu_count() or 2)

_sandboxes = itertools.count()


def sandbox_user() -> int | None:
    """The host user the next sandbox runs as: None (the teacher's own) unless the grader is
    root, then a fresh number from `SANDBOX_UIDS`."""
    if os.geteuid() != 0:
        return None
    return SANDBOX_UIDS.start + (os.getpid() * 10_000 + next(_sandboxes)) % len(SANDBOX_UIDS)


def why_not(needed: list[Path]) -> str | None:
    """Why a grader run as root could not run its sandboxes as `sandbox_user`: no `setpriv`, or
    one of `needed` that others may not read (a folder they may not list and enter, a file they
    may not read). None when it can, and always when the grader is not root."""
    if os.geteuid() != 0:
        return None
    if shutil.which("setpriv") is None:
        return "run as root, the grader needs util-linux's setpriv to run students as another user"
    for path in needed:
        wanted = 0o005 if path.is_dir() else 0o004
        if path.exists() and not path.is_symlink() and path.stat().st_mode & wanted != wanted:
            return (
                f"run as root, the grader runs students' code as a user of its own, who may not "
                f"read {path} (chmod -R o+rX it, or grade as a user other than root)"
            )
    return None


def as_user(user: int, command: list[str]) -> list[str]:
    """`command` run as `user`, with no groups, no capabilities and no way to gain any (util-linux's
    `setpriv`, the sandbox's first command: bubblewrap, run by root, lets it change user)."""
    ids = ["--reuid", str(user), "--regid", str(user), "--clear-groups"]
    return ["setpriv", *ids, "--inh-caps=-all", "--no-new-privs", "--", *command]


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
    uid, tasks = os.getuid(), 0
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and p.stat().st_uid == uid:
                tasks += len(os.listdir(p / "task"))
        except OSError:
            pass
    return tasks
