"""Run a student's code where it can harm nothing: a bubblewrap sandbox with limits.

`vitcourse.classroom.grading` runs each submitted notebook, and then each exercise's answer,
through `run`:

- **The sandbox** (Linux, Debian's `bubblewrap`): namespaces of its own (no network, its own
  process ids), no capabilities, a cleared environment (but for the grader's language,
  `VITCOURSE_LANG`, and a few settings), its own session, and killed with the grader
  (`--die-with-parent`). It sees, read-only, only the Python interpreter, the virtual environment,
  the `vitcourse` package (or a copy of it, see `vitcourse.classroom.grade_solutions`), the course's
  `data/` when asked, the files it is given, and a made-up `/etc/passwd`; it writes only to a
  private, size-limited `/tmp` (its HOME too) and to the one folder it is given, which the grader
  reads afterwards. Never the teacher's home, the solutions, or the other submissions.
- **Limits**, for all its processes together, watched from outside every 0.2 s
  (`vitcourse.classroom.sandbox_watch`): wall time, memory
  (resident, summed over its processes, plus what its /tmp and /dev/shm hold: see
  `vitcourse.classroom.sandbox_memory`), number of processes, and its output folder's size (with
  what its files deleted but kept open hold) and number of files and folders, and its error
  stream's size. Each process also gets kernel limits
  that stop a single runaway at once: address space (the memory limit plus `VIRTUAL_ROOM_GB`), file
  size, no core files, and a number of processes and threads (`TASK_ROOM`). Where the grader may
  make one (root, or a delegated cgroup v2 tree), the sandbox also gets a cgroup: the kernel then
  counts and limits all its memory, what sockets and pipes hold included, and its tasks
  (`vitcourse.classroom.sandbox_cgroup`); elsewhere the grader says the poll is the only count.
  As root, where it may mount, the output folder (and a user of its own's home) is a tmpfs of
  its own, its size the limit plus 1 MB: the kernel refuses what a step writes past it between
  two polls, files deleted but kept open included (`vitcourse.classroom.sandbox_disk`). Run by a
  teacher who is not root, bubblewrap's sandbox mounts such a tmpfs itself, and its files are
  copied into the output folder after the step (`vitcourse.classroom.sandbox_out`).
- **Never root**: run as root, the grader starts each sandbox's command as a user of its own
  (see `vitcourse.classroom.sandbox_user`); run by a teacher, as that teacher in a user namespace.
- **Without bubblewrap, as root** (`OWN_USER`: a container that forbids user namespaces, as on
  Gradescope and PrairieLearn), the same command runs as a user of its own with the same limits,
  counted over every process of that user, and a private home; it can read only what any user
  may, write only its output folder, its home and the shared temporary folders (their files
  count towards its memory and are removed after), and what it leaves running is killed. The
  network is not cut off (`vitcourse.classroom.sandbox_user`).
- **Without either** (`sandbox=False`, the grader's `--no-sandbox`), the same command runs as
  the teacher with the same limits and nothing else: see `EXPOSED`.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from vitcourse.classroom import sandbox_bubblewrap as bubblewrap_sandbox
from vitcourse.classroom import sandbox_cgroup as cgroups
from vitcourse.classroom import sandbox_disk as disk
from vitcourse.classroom import sandbox_out
from vitcourse.classroom import sandbox_user as users
from vitcourse.classroom.sandbox_bubblewrap import INSIDE
from vitcourse.classroom.sandbox_watch import watch
from vitcourse.language import language

EXPOSED = (
    "without a sandbox the students' code runs as you: it can read and change your files (your "
    "home, the solutions, the other submissions, the installed vitcourse package), use the "
    "network, and leave processes behind; only the time, memory and output limits apply"
)
# How a command is isolated: `run`'s `sandbox` is one of these (True and False name the first and
# the last).
BUBBLEWRAP, OWN_USER, NO_SANDBOX = "bubblewrap", "own user", "none"
# Address space a process may map beyond the memory limit: torch's libraries reserve gigabytes
# they never use. The memory limit itself is on resident memory, summed over the processes.
VIRTUAL_ROOM_GB = 8
# Allowance for starting Python and importing torch, matplotlib and the package: on a cold or busy
# machine that alone can take a minute, and it is no student's time (the grader's imports in a
# notebook's kernel and its cells before the first exercise get it too: see `grade_worker`).
STARTUP_SECONDS = 120


@dataclass(frozen=True)
class Limits:
    """What one submitted notebook may take."""

    notebook: float = 600  # seconds for all its cells
    cell: float = 120  # seconds for one cell (an endless loop costs this, then the rest runs)
    check: float = 30  # seconds for one exercise's answer to run on the check's inputs
    memory_gb: float = 8  # resident memory of all its processes together
    processes: int = 64
    output_mb: float = 256  # what its sandbox may write
    cell_output_bytes: int = 1_000_000  # outputs kept per cell in the executed notebook


@dataclass(frozen=True)
class Box:
    """What one sandboxed command may use."""

    seconds: float  # wall time
    memory_gb: float = 8  # resident memory of all its processes together
    processes: int = 64
    output_mb: float = 256  # its output folder, and any one file it writes
    tmp_mb: float = 512  # its private /tmp (HOME included)
    data: bool = False  # read the course's data folder (a notebook does; an answer does not)
    package: Path | None = None  # a copy of `vitcourse` to use instead of the installed one
    startup: float = 0  # seconds for starting Python and its imports, until it writes `started`


@dataclass(frozen=True)
class Ran:
    """How a sandboxed command ended: its exit code, its last error lines, and the limit it
    broke, if any ("time", "memory", "processes" or "output")."""

    returncode: int
    stderr: str
    broke: str | None = None


@functools.cache
def bubblewrap() -> str | None:
    """Why the sandbox cannot run here, or None when it can: bubblewrap is installed, the user a
    sandbox runs as may use what it needs (`sandbox_user.why_not`), and a real sandbox, made as
    the grader makes them, starts Python. Asked once per process."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux and bubblewrap; this is {sys.platform}"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (Debian/Ubuntu: sudo apt install bubblewrap)"
    refused = users.why_not(_needed() + [bubblewrap_sandbox.package_dir()])
    return refused or _try(BUBBLEWRAP, "bubblewrap cannot make a sandbox here")


@functools.cache
def own_user() -> str | None:
    """Why `OWN_USER` cannot run here, or None when it can: the grader is root, setpriv is
    there, the interpreter, the environment and the data may be used by any user (not the
    installed package: a copy without the solutions is what a command imports), and a command
    run so starts Python. Asked once per process."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "running students as a user of their own needs Linux and a grader run as root"
    refused = users.why_not(_needed(), passable=True)
    return refused or _try(OWN_USER, "a command run as a user of its own did not start")


def _needed() -> list[Path]:
    """What a sandbox's user must be able to read: the interpreter, its environment, the data."""
    from vitcourse.environment import default_root

    needed = [Path(os.__file__).resolve().parent, Path(sys.executable).resolve()]
    return needed + [Path(sys.prefix).resolve(), default_root().resolve()]


def _try(how: str, failed: str) -> str | None:
    with tempfile.TemporaryDirectory(prefix="vitcourse-sandbox-") as tmp:
        (Path(tmp) / "in").mkdir()
        try:
            tried = run(
                [sys.executable, "-c", "pass"],
                Path(tmp) / "in",
                Path(tmp) / "out",
                Box(seconds=60, memory_gb=1),
                how,
            )
        finally:
            remove_tree(Path(tmp) / "out")  # unmounted: the folder can go
    if tried.returncode != 0 or tried.broke:
        last = (tried.stderr.strip().splitlines() or [tried.broke or "no message"])[-1]
        return f"{failed} ({last})"
    return None


def mode(sandbox: bool | str) -> str:
    """`run`'s `sandbox` as a mode's name: True is `BUBBLEWRAP`, False `NO_SANDBOX`."""
    named = {True: BUBBLEWRAP, False: NO_SANDBOX}.get(sandbox, sandbox)  # type: ignore[call-overload]
    if named not in (BUBBLEWRAP, OWN_USER, NO_SANDBOX):
        raise ValueError(
            f"sandbox: expected True, False, {BUBBLEWRAP!r}, {OWN_USER!r} or "
            f"{NO_SANDBOX!r}, got {sandbox!r}"
        )
    return named


# Run `python -m MODULE ARGS` with the package at PATH found before any installed one (an editable
# install's finder comes before PYTHONPATH, so the path finder goes first).
_PRELUDE = (
    "import importlib.machinery, runpy, sys\n"
    "sys.path.insert(0, sys.argv.pop(1))\n"
    "sys.meta_path.insert(0, importlib.machinery.PathFinder)\n"
    "module = sys.argv.pop(1)\n"
    "runpy.run_module(module, run_name='__main__', alter_sys=True)\n"
)


def with_package(command: list[str], package: Path) -> list[str]:
    """`[python, "-m", module, *args]` run with the `vitcourse` copy at `package` in place of the
    installed one (without a sandbox, where nothing can be mounted over it)."""
    python, flag, module, *args = command
    assert flag == "-m", command
    return [python, "-c", _PRELUDE, str(package.parent), module, *args]


def _outside(arg: str, given: Path, out: Path) -> str:
    """An argument naming /grading/in or /grading/out (or a file in them), with their real paths."""
    for inside, real in ((INSIDE / "in", given), (INSIDE / "out", out)):
        if arg == str(inside) or arg.startswith(f"{inside}/"):
            return str(real) + arg[len(str(inside)) :]
    return arg


def _limit(box: Box, tasks: int):
    """Kernel limits for the sandbox's first process, inherited by all it starts. `tasks`: the
    processes and threads its user has already (none for a user of its own)."""

    def apply() -> None:
        memory = int((box.memory_gb + VIRTUAL_ROOM_GB) * 2**30)
        size = int(box.output_mb * 2**20)
        for which, value in (
            (resource.RLIMIT_AS, memory),
            (resource.RLIMIT_FSIZE, size),
            (resource.RLIMIT_CORE, 0),
            (resource.RLIMIT_NPROC, tasks + box.processes + users.TASK_ROOM),
        ):
            try:
                resource.setrlimit(which, (value, value))
            except (ValueError, OSError):
                pass

    return apply


def remove_tree(folder: Path) -> None:
    """Remove a folder a sandbox wrote, however deep or locked: `chmod -R` and `rm -rf` walk
    without recursion limits (Python's `shutil.rmtree` stops at about 1,000 levels), and any
    mode the student's code set (a folder chmodded to 000) is undone first."""
    if not os.path.lexists(folder):
        return
    disk.release(folder)  # the sandboxes' tmpfs in it: unmounted, not emptied through
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    if shutil.which("rm") and shutil.which("chmod"):
        subprocess.run(["chmod", "-R", "u+rwX", "--", str(folder)], check=False, **quiet)
        subprocess.run(["rm", "-rf", "--", str(folder)], check=False, **quiet)
    shutil.rmtree(folder, ignore_errors=True)


def _environment(env: dict | None, box: Box) -> dict:
    """The command's environment: `env`, the grader's language (`VITCOURSE_LANG`, unless `env`
    names one), the data folder when `box.data`, and settings that keep it off the GPU and quiet."""
    env = dict(env or {}, MPLBACKEND="Agg", CUDA_VISIBLE_DEVICES="", PYTHONDONTWRITEBYTECODE="1")
    env.setdefault("VITCOURSE_LANG", language())  # the grader's `--language`, in every mode
    if box.data:  # the grader's data folder, wherever `$VITCOURSE_DATA` put it
        from vitcourse.environment import DATA_ENV, default_root

        env[DATA_ENV] = str(default_root().resolve())
    return env


def run(
    command: list[str],
    given: Path,
    out: Path,
    box: Box,
    sandbox: bool | str = True,
    env: dict | None = None,
) -> Ran:
    """Run `command` (a `python -m ...` line) with `given` readable and `out` writable, under
    `box`'s limits, isolated as `sandbox` says (`mode`). In bubblewrap's sandbox they are
    `/grading/in` and `/grading/out`; otherwise the command gets their real paths in place of
    those two (it should take them as arguments). Its environment is `env`, with the grader's
    language (`VITCOURSE_LANG`, unless `env` names one) and a few settings. Where the grader
    mounts a tmpfs on `out` (`sandbox_disk.hold`), it stays there for the grader to read until
    `remove_tree` removes `out` or a folder above it."""
    how = mode(sandbox)
    out.mkdir(parents=True, exist_ok=True)
    held = disk.hold(out, box.output_mb)  # the kernel's limit on its size, where one can be had
    out.chmod(0o777)  # the sandbox's user is not the folder's owner (its parent is private)
    env = _environment(env, box)
    # Beside `out`, in the grader's own work folder: nothing is left in /tmp if the grader dies.
    # Removed with `remove_tree`: what the command left there may be nested past any recursion.
    tmp = Path(tempfile.mkdtemp(prefix="box-", dir=out.parent))
    user = users.sandbox_user() if how != NO_SANDBOX else None
    inside = how == BUBBLEWRAP and not held and user is None  # the sandbox's tmpfs: `sandbox_out`
    keep: tuple[int, ...] = ()
    group = None
    home, preexec = None, _limit(box, 0 if user else users.tasks_of_this_user())
    try:
        if how == BUBBLEWRAP:
            full, keep = bubblewrap_sandbox.launch(command, given, out, box, env, tmp, user, held)
            cwd, process_env = "/", {"PATH": "/usr/bin:/bin"}
        else:
            full = [_outside(a, given, out) for a in command]
            if box.package is not None:  # the copy found first: no protection, only the same code
                full = with_package(full, box.package)
            cwd, process_env = str(tmp), dict(os.environ, **env)
            if how == OWN_USER:
                full, cwd, process_env, home, preexec = users.launch(
                    full, user, given, out, box.package, tmp, env, preexec
                )
                disk.hold(home, box.tmp_mb, owner=user, mode=0o700)
        group = cgroups.make(box)  # the kernel's count and limit, where one can be made
        preexec = group.entering(preexec) if group is not None else preexec
        with open(tmp / "stderr", "w+b") as errors:  # a file: a pipe could fill and block
            process = _start(full, cwd, process_env, errors, preexec, keep)
            try:
                own = user if how == OWN_USER else None
                wrapped = how == BUBBLEWRAP
                broke = watch(process, box, out, errors, wrapped, own, home, group, inside)
            finally:
                if how == OWN_USER:  # whatever it left running or in the shared folders
                    users.clear_up(user)
            if held and broke is None and disk.used(out) > box.output_mb * 2**20:
                broke = "output"  # past the limit, within the tmpfs's slack, between two polls
            if inside:  # the sandbox's tmpfs, copied out: its report read and removed always
                copied = copied_out(out)
                broke = broke or copied
            errors.seek(max(0, errors.seek(0, os.SEEK_END) - 20_000))
            stderr = errors.read().decode(errors="replace")
    finally:
        if group is not None:  # what is left in it killed, and it removed
            group.remove()
        remove_tree(tmp)
    return Ran(process.returncode, stderr, broke)


def copied_out(out: Path) -> str | None:
    """ "output" where the step broke the output limit in the sandbox's own tmpfs, by the report
    `sandbox_out` wrote beside what it copied into `out` (read and removed here); a step that
    left no report (it killed the copy) wrote nothing out either."""
    report = out / sandbox_out.REPORT
    try:
        with open(report, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW)) as file:
            said = json.loads(file.read(1000))
    except (OSError, ValueError):
        return None
    finally:
        report.unlink(missing_ok=True)
    return "output" if isinstance(said, dict) and said.get("broke") == "output" else None


def _start(full, cwd, env, errors, preexec, keep: tuple[int, ...]) -> subprocess.Popen:
    """Start the command in a session of its own (its process group is killed as one), its error
    stream to `errors`, the descriptors `keep` passed to it and closed here."""
    try:
        return subprocess.Popen(
            full,
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,
            preexec_fn=preexec,
            pass_fds=keep,
        )
    finally:
        for fd in keep:
            os.close(fd)
