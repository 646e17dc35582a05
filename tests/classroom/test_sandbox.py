"""vitcourse.classroom.sandbox on its own: what a sandboxed command may hold, count and leave
behind.

Each test runs a small Python command in bubblewrap's sandbox, as the grader runs a student's
notebook, and asserts the limit it meets (issue 38: shared memory, files counted, the error
stream, the mount order that keeps a course under /tmp, a user of its own when the grader is
root)."""

import os
import stat
import sys
from pathlib import Path

import pytest

from tests.classroom.hostile import processes_with
from tests.conftest import need_root, need_sandbox
from vitcourse import language
from vitcourse.classroom import (
    sandbox,
    sandbox_bubblewrap,
    sandbox_disk,
    sandbox_user,
    sandbox_watch,
)
from vitcourse.classroom.sandbox_bubblewrap import INSIDE
from vitcourse.classroom.sandbox_memory import REFUSED_CALLS, SHM_MB, seccomp_filter


def _run(tmp_path: Path, code: str, **box) -> sandbox.Ran:
    given, out = tmp_path / "in", tmp_path / "out"
    given.mkdir(parents=True, exist_ok=True)
    limits = sandbox.Box(**{"seconds": 60, "memory_gb": 1.0, **box})
    return sandbox.run([sys.executable, "-c", code], given, out, limits)


@pytest.mark.slow
def test_shared_memory_is_held_to_the_limit(tmp_path):
    """/dev/shm is small, memfd_create is refused, /dev is read-only, and what /tmp holds counts
    as memory: 1.6 GB there breaks a 1 GB limit."""
    need_sandbox()
    probe = (
        "import os\n"
        "said = []\n"
        "try:\n"
        "    os.memfd_create('x'); said.append('memfd')\n"
        "except OSError as e:\n"
        "    said.append(f'no memfd {e.errno}')\n"
        "for where in ('/dev/big', '/dev/shm/big'):\n"
        "    try:\n"
        "        with open(where, 'wb') as f:\n"
        "            for _ in range(200): f.write(b'x' * 2**20)\n"
        "        said.append(where + ' 200 MB')\n"
        "    except OSError as e:\n"
        "        said.append(f'{where} {e.errno}')\n"
        "open('/grading/out/said', 'w').write(' | '.join(said))\n"
    )
    done = _run(tmp_path, probe)
    assert done.broke is None, done.stderr[-2000:]
    said = (tmp_path / "out" / "said").read_text().split(" | ")
    assert said[0] == ("no memfd 38" if seccomp_filter() else said[0])
    assert said[1] == "/dev/big 30"  # EROFS
    assert said[2] == "/dev/shm/big 28", (said, SHM_MB)  # ENOSPC at SHM_MB
    hog = "import time\nfor i in range(8):\n    open(f'/tmp/{i}', 'wb').write(b'x' * 200 * 2**20)\n"
    done = _run(tmp_path / "hog", hog + "time.sleep(30)\n", tmp_mb=2048)
    assert done.broke == "memory", done


# Two ways past the memory count that only the kernel can close (the seccomp filter): a memfd made
# through x86-64's i386 entry (`int 0x80` from a page below 4 GB: its memfd_create has another
# number), and a tmpfs of a process's own, mounted in a user and mount namespace of its own.
KERNEL_ROUTES = """\
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
said = []
if os.uname().machine == "x86_64":
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    page = libc.mmap(None, 4096, 7, 0x02 | 0x20 | 0x40, -1, 0)  # rwx, private, anonymous, 32-bit
    name = page + 64
    ctypes.memmove(name, b"x\\0", 2)
    # push rbx; mov eax, 356 (i386 memfd_create); mov ebx, name; xor ecx, ecx; int 0x80; pop rbx
    code = b"\\x53\\xb8\\x64\\x01\\x00\\x00\\xbb" + name.to_bytes(4, "little")
    code += b"\\x31\\xc9\\xcd\\x80\\x5b\\xc3"
    ctypes.memmove(page, code, len(code))
    said.append(f"i386 memfd {ctypes.CFUNCTYPE(ctypes.c_int)(page)()}")
if libc.unshare(0x10000000 | 0x00020000) != 0:  # CLONE_NEWUSER | CLONE_NEWNS
    said.append(f"unshare {errno.errorcode[ctypes.get_errno()]}")
elif libc.mount(b"none", sys.argv[1].encode(), b"tmpfs", 0, None) != 0:
    said.append(f"mount {errno.errorcode[ctypes.get_errno()]}")
else:
    said.append("mounted")
print(" | ".join(said))
"""


def _need_filter() -> None:
    if seccomp_filter() is None:
        known = " and ".join(REFUSED_CALLS)
        why = f"the sandbox's seccomp filter knows the system calls of {known} only"
        pytest.skip(f"{why} (sandbox_memory.REFUSED_CALLS): this is {os.uname().machine}")


def test_the_filter_closes_the_i386_entry_and_every_mount(tmp_path):
    """The seccomp filter alone, on a child process: what got past it before (the control, with
    no filter, where this kernel allows it) is refused with it."""
    import subprocess

    from vitcourse.classroom.sandbox_memory import install_filter

    _need_filter()
    (tmp_path / "mine").mkdir()
    command = [sys.executable, "-c", KERNEL_ROUTES, str(tmp_path / "mine")]
    control = subprocess.run(command, capture_output=True, text=True, timeout=60)
    program = install_filter(seccomp_filter())
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, preexec_fn=program)
    assert done.returncode == 0, done.stderr[-2000:]
    said = done.stdout.split()
    if os.uname().machine == "x86_64":
        assert "i386 memfd -38" in done.stdout, done.stdout  # ENOSYS
        if control.returncode == 0:  # the kernel has an i386 entry: without the filter, a memfd
            assert int(control.stdout.split(" | ")[0].split()[-1]) >= 0, control.stdout
    assert "mounted" not in said, done.stdout
    assert done.stdout.strip().endswith(("mount EPERM", "unshare EPERM")), done.stdout


@pytest.mark.slow
def test_a_sandbox_refuses_the_i386_entry_and_every_mount(tmp_path):
    """The same, inside the grader's sandbox (bubblewrap's, with the filter)."""
    need_sandbox()
    _need_filter()
    code = KERNEL_ROUTES.replace("sys.argv[1]", "'/tmp'").replace(
        'print(" | ".join(said))', "open('/grading/out/said', 'w').write(' | '.join(said))"
    )
    done = _run(tmp_path, code)
    assert done.broke is None and done.returncode == 0, done.stderr[-2000:]
    said = (tmp_path / "out" / "said").read_text()
    if os.uname().machine == "x86_64":
        assert "i386 memfd -38" in said, said
    assert "mounted" not in said and said.endswith(("mount EPERM", "unshare EPERM")), said


@pytest.mark.slow
@pytest.mark.parametrize("tmpfs", [False, True], ids=["poll", "tmpfs"])
def test_files_deleted_but_kept_open_count_as_output(tmp_path, monkeypatch, tmpfs):
    """Three 40 MB files written to the output folder, each deleted and kept open: the folder
    shows at most the one being written, 120 MB are held on disk, over a 64 MB output limit
    (each file is under it). Where the grader mounts a tmpfs on the folder (`sandbox_disk`), the
    kernel may refuse the third file's writes first: the step then fails with its error."""
    need_sandbox()
    if not tmpfs:  # the poll alone, as where no tmpfs can be mounted
        monkeypatch.setattr(sandbox_disk, "hold", lambda *a, **k: False)
    elif sandbox_disk.why_not() is not None:
        pytest.skip(f"the kernel's hold cannot be tried here: {sandbox_disk.why_not()}")
    held = (
        "import os, time\n"
        "kept = []\n"
        "for i in range(3):\n"
        "    f = open(f'/grading/out/{i}', 'wb')\n"
        "    f.write(os.urandom(40 * 2**20)); f.flush()\n"
        "    os.unlink(f'/grading/out/{i}'); kept.append(f)\n"
        "time.sleep(30)\n"
    )
    done = _run(tmp_path, held, output_mb=64)
    if tmpfs and done.broke is None:
        assert done.returncode != 0 and "No space left on device" in done.stderr, done
    else:
        assert done.broke == "output", done
    shown, _ = sandbox_watch.folder_usage(tmp_path / "out")
    assert shown < 64 * 2**20, shown  # what the folder shows is under the limit: the rest was held


@pytest.mark.slow
def test_files_and_the_error_stream_are_counted(tmp_path):
    need_sandbox()
    many = "for i in range(20_000):\n    open(f'/grading/out/{i}', 'w').close()\nimport time\ntime.sleep(30)\n"
    assert _run(tmp_path / "many", many).broke == "output"
    flood = "import os, time\nfor _ in range(8):\n    os.write(2, b'x' * 2**20)\ntime.sleep(30)\n"
    done = _run(tmp_path / "flood", flood)
    assert done.broke == "output" and len(done.stderr) <= 20_000


def test_tmp_is_mounted_before_the_binds(tmp_path):
    """A course or an environment under /tmp stays visible: the private /tmp comes first."""
    args = sandbox_bubblewrap.command_line(
        ["python"], sandbox.Box(seconds=1), tmp_path, tmp_path, tmp_path, {}
    )
    tmpfs = args.index("/tmp", args.index("--tmpfs"))
    binds = [i for i, a in enumerate(args) if a in ("--ro-bind", "--bind", "--symlink")]
    assert tmpfs < min(binds)
    assert args[args.index("--remount-ro") + 1] == "/dev"


@pytest.mark.slow
def test_the_sandbox_shows_no_host_paths_or_environment(tmp_path, monkeypatch):
    """bubblewrap's own process (pid 1 inside) takes its arguments from a file: its command line
    names none of the folders it binds, and neither its environment nor the student's is the
    teacher's (run as root, the student may not read pid 1's at all)."""
    need_sandbox()
    monkeypatch.setenv("TEACHERS_SECRET", "s3cret")
    look = (
        "open('/grading/out/own', 'wb').write(open('/proc/self/environ', 'rb').read())\n"
        "cmdline = open('/proc/1/cmdline', 'rb').read()\n"
        "try:\n"
        "    environ = open('/proc/1/environ', 'rb').read()\n"
        "except PermissionError:\n"  # run as root, the student is not pid 1's user
        "    environ = b'refused'\n"
        "open('/grading/out/cmdline', 'wb').write(cmdline)\n"
        "open('/grading/out/environ', 'wb').write(environ)\n"
    )
    done = _run(tmp_path, look)
    assert done.broke is None and done.returncode == 0, done.stderr[-2000:]
    seen = (tmp_path / "out" / "cmdline").read_bytes()
    assert b"--ro-bind" not in seen and str(tmp_path).encode() not in seen, seen
    environ = (tmp_path / "out" / "environ").read_bytes()
    own = (tmp_path / "out" / "own").read_bytes()
    assert b"s3cret" not in own and b"HOME=/tmp/home" in own and b"s3cret" not in environ
    if os.geteuid() == 0:
        assert environ == b"refused", environ
    else:
        assert b"PATH=/usr/bin:/bin" in environ and b"HOME" not in environ, environ


@pytest.mark.slow
def test_a_thread_or_fork_bomb_meets_the_kernels_limit(tmp_path):
    """The kernel stops a thread bomb at once (the grader's poll counts processes, not threads):
    root's sandboxes run as a user of their own, so the limit applies and counts only them."""
    need_sandbox()
    bomb = (
        "import os, threading, time\n"
        "started = 0\n"
        "try:\n"
        "    while started < 5000:\n"
        "        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n"
        "        started += 1\n"
        "except RuntimeError:\n"
        "    pass\n"
        "status = dict(l.split(':\\t') for l in open('/proc/self/status').read().splitlines())\n"
        "caps = ' '.join(status[k].strip() for k in ('CapBnd', 'CapEff', 'CapPrm', 'NoNewPrivs'))\n"
        "open('/grading/out/seen', 'w').write(f'{started} {os.getuid()}')\n"
        "open('/grading/out/caps', 'w').write(caps)\n"
    )
    done = _run(tmp_path, bomb, processes=8)
    assert done.broke is None and done.returncode == 0, done.stderr[-2000:]
    started, uid = map(int, (tmp_path / "out" / "seen").read_text().split())
    owner = (tmp_path / "out" / "seen").stat().st_uid
    bounding, effective, permitted, no_new_privs = (tmp_path / "out" / "caps").read_text().split()
    assert int(effective, 16) == int(permitted, 16) == 0 and no_new_privs == "1"
    if os.geteuid() == 0:  # a user of its own: the limit counts this sandbox's tasks alone
        assert owner in sandbox_user.SANDBOX_UIDS and uid == owner
        assert int(bounding, 16) == 0  # nothing left to gain, even through a setuid program
        assert started < 8 + sandbox_user.TASK_ROOM
    else:  # the teacher: the limit counts the teacher's other tasks too
        assert owner == os.getuid() and uid == 1000
        assert started < 8 + sandbox_user.TASK_ROOM + sandbox_user.tasks_of_this_user()


def test_tasks_are_counted_by_real_user_with_their_threads(tmp_path):
    """Linux counts a user's processes and threads against its process limit, by real user: a
    teacher's browser of 300 threads counts 300, and so does a process whose effective user
    (the owner of its /proc folder) differs."""
    for pid, uid, threads in ((10, "1000\t1000", 300), (11, "1000\t0", 2), (12, "0\t0", 50)):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "status").write_text(
            f"Name:\tx\nUid:\t{uid}\t0\t0\nThreads:\t{threads}\n"
        )
    (tmp_path / "self").mkdir()
    assert sandbox_user.tasks_of(1000, tmp_path) == 302
    assert sandbox_user.tasks_of(0, tmp_path) == 50 and sandbox_user.tasks_of(7, tmp_path) == 0


def test_root_is_told_what_its_sandbox_user_cannot_read(tmp_path, monkeypatch):
    """Run as root, the grader refuses at once, naming the folder, when the sandbox's user could
    not read the course (or finds no setpriv); a teacher without root is never refused."""
    course = tmp_path / "course"
    (course / "deep" / "er").mkdir(parents=True)
    (course / "deep" / "er" / "ok.py").write_text("")
    course.chmod(0o755)
    monkeypatch.setattr(sandbox_user.os, "geteuid", lambda: 0)
    assert sandbox_user.why_not([course, tmp_path / "missing"]) is None
    (course / "deep" / "er" / "secret.py").write_text("")
    (course / "deep" / "er" / "secret.py").chmod(0o600)  # a private file, three folders down
    assert str(course / "deep" / "er" / "secret.py") in sandbox_user.why_not([course])
    (course / "deep" / "er" / "secret.py").chmod(0o644)
    (course / "deep" / "er" / "tool").write_text("")
    (course / "deep" / "er" / "tool").chmod(0o744)  # a program others may read but not run
    assert str(course / "deep" / "er" / "tool") in sandbox_user.why_not([course])
    (course / "deep" / "er" / "tool").chmod(0o755)
    course.chmod(0o700)
    assert str(course) in sandbox_user.why_not([course])
    monkeypatch.setattr(sandbox_user, "setpriv", lambda: None)
    assert "setpriv" in sandbox_user.why_not([Path("/usr")])
    monkeypatch.setattr(sandbox_user.os, "geteuid", lambda: 1000)
    assert sandbox_user.why_not([course]) is None
    assert sandbox_user.sandbox_user() is None


def test_roots_sandbox_becomes_its_user_before_the_students_code():
    """The command bubblewrap starts, run by root, is setpriv to a fresh user: no groups, no
    capabilities, no way back; bubblewrap keeps only the three capabilities setpriv needs."""
    args = sandbox_bubblewrap.command_line(["python"], sandbox.Box(seconds=1), Path("/a"), Path("/b"), Path("/c"),
                          {}, None, 2_000_000_123)  # fmt: skip
    command = args[args.index("--") + 1 :]
    assert Path(command[0]).name == "setpriv"
    assert command[1:5] == ["--reuid", "2000000123", "--regid", "2000000123"]
    assert {"--no-new-privs", "--bounding-set=-all", "--clear-groups"} <= set(command)
    assert command[-2:] == ["--", "python"]
    assert "--unshare-all" not in args and "--unshare-user" not in args
    added = [args[i + 1] for i, a in enumerate(args) if a == "--cap-add"]
    assert added == ["CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP"]
    teacher = sandbox_bubblewrap.command_line(["python"], sandbox.Box(seconds=1), Path("/a"), Path("/b"),
                             Path("/c"), {})  # fmt: skip
    assert "--unshare-all" in teacher and "--cap-add" not in teacher
    assert teacher[teacher.index("--") + 1 :] == ["python"]


def test_the_hosts_own_folders_are_never_counted():
    """While bubblewrap sets a sandbox up its root is still the host's: the host's /tmp (here, the
    whole disk) must not count as the sandbox's memory (it once made an endless loop "8 GB")."""
    import os

    from vitcourse.classroom.sandbox_memory import tmpfs_bytes

    assert tmpfs_bytes([0, os.getpid()]) == 0


# --- a user of its own, without bubblewrap (the platforms' containers) ----------------------------


def _need_own_user() -> None:
    """Root, as on the platforms: the folders above the interpreter are made passable (o+x) as
    the autograder makes them there, then `OWN_USER` must work (under CI, its absence fails)."""
    need_root()
    from vitcourse.environment import default_root

    sandbox_user.open_way([Path(sys.executable), Path(sys.prefix), Path(os.__file__),
                           default_root()])  # fmt: skip
    sandbox.own_user.cache_clear()
    assert sandbox.own_user() is None


@pytest.mark.parametrize(
    "how",
    [
        sandbox.NO_SANDBOX,
        pytest.param(sandbox.BUBBLEWRAP, marks=pytest.mark.slow),
        pytest.param(sandbox.OWN_USER, marks=pytest.mark.slow),
    ],
)
def test_the_graders_language_reaches_the_sandbox(tmp_path, monkeypatch, how):
    """The grader's `--language` (`set_language`, here without VITCOURSE_LANG in the grader's
    own environment) is the sandbox's VITCOURSE_LANG however it runs: the checks in a student's
    notebook and the grader's steps there speak it."""
    if how == sandbox.BUBBLEWRAP:
        need_sandbox()
    elif how == sandbox.OWN_USER:
        _need_own_user()
    monkeypatch.setattr(language, "_chosen", "es")
    monkeypatch.delenv("VITCOURSE_LANG", raising=False)
    given, out = tmp_path / "in", tmp_path / "out"
    given.mkdir()
    code = "import os, sys\nopen(sys.argv[1] + '/lang', 'w').write(os.environ.get('VITCOURSE_LANG', '-'))\n"
    done = sandbox.run([sys.executable, "-c", code, str(INSIDE / "out")], given, out,
                       sandbox.Box(seconds=60, memory_gb=1.0), how)  # fmt: skip
    assert done.returncode == 0 and done.broke is None, done.stderr[-2000:]
    assert (out / "lang").read_text() == "es"


@pytest.mark.slow
def test_a_user_of_its_own_reads_no_private_file_and_leaves_nothing(tmp_path):
    _need_own_user()
    secret = tmp_path / "secret"
    secret.write_text("grader only")
    secret.chmod(0o600)
    marker = "own-user-daemon-5b1c"
    code = (
        "import os, sys, subprocess, time\n"
        "said = [str(os.getuid()), os.environ['HOME'], str(len(os.environ))]\n"
        f"for path in ({str(secret)!r}, {str(tmp_path)!r}):\n"
        "    try:\n"
        "        open(path).read() if os.path.isfile(path) else os.listdir(path); said.append('read')\n"
        "    except OSError as e:\n"
        "        said.append(type(e).__name__)\n"
        "open('/dev/shm/left-behind', 'wb').write(b'x' * 1000)\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time  # {marker}\\ntime.sleep(60)'],\n"
        "                 start_new_session=True)\n"
        "subprocess.Popen([sys.executable, '-c', ZOMBIE], start_new_session=True)\n"
        "for _ in range(1100):  # deeper than Python's recursion goes\n"
        "    os.mkdir('d'); os.chdir('d')\n"
        "import ctypes, errno\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "try:\n"
        "    os.memfd_create('x'); said.append('memfd')\n"
        "except OSError as e:\n"
        "    said.append(errno.errorcode[e.errno])\n"
        "said.append(str(libc.shmget(0, 4096, 0o1666)) + ' ' + errno.errorcode[ctypes.get_errno()])\n"
        "fd = os.open(sys.argv[1] + '/kept', os.O_CREAT | os.O_WRONLY)\n"
        "said.append(str(libc.fallocate(fd, 1, 0, 2**30)) + ' ' + errno.errorcode[ctypes.get_errno()])\n"
        "open(sys.argv[1] + '/said', 'w').write(' | '.join(said))\n"
    ).replace("ZOMBIE", repr(ZOMBIE_LEADER))
    given, out = tmp_path / "in", tmp_path / "out"
    given.mkdir()
    box = sandbox.Box(seconds=60, memory_gb=1.0)
    done = sandbox.run([sys.executable, "-c", code, str(INSIDE / "out")], given, out, box,
                       sandbox.OWN_USER)  # fmt: skip
    assert done.returncode == 0 and done.broke is None, done.stderr[-2000:]
    uid, home, variables, *refused, memfd, shmget, fallocate = (
        (out / "said").read_text().split(" | ")
    )
    assert int(uid) in sandbox_user.SANDBOX_UIDS and home.endswith("/home")
    assert refused == ["PermissionError", "PermissionError"]  # the file, the grader's folder
    assert out.stat().st_uid == int(uid) and stat.S_IMODE(out.stat().st_mode) == 0o700
    if seccomp_filter():  # shared memory no count sees, and disk no size shows: refused
        assert (memfd, shmget) == ("ENOSYS", "-1 ENOSYS") and fallocate in (
            "-1 EOPNOTSUPP",
            "-1 ENOTSUP",
        )
    assert int(variables) < 15  # none of the grader's environment
    assert not Path("/dev/shm/left-behind").exists()
    assert not processes_with(marker)
    assert not sandbox_user.pids_of(int(uid))


# A process of its own session whose first thread exits while another runs on: a zombie to a
# reader of /proc that skips zombies, though it still runs.
ZOMBIE_LEADER = (
    "import ctypes, os, threading, time\n"
    "threading.Thread(target=time.sleep, args=(60,)).start()\n"
    "time.sleep(0.2)\n"
    "ctypes.CDLL(None).syscall(60 if os.uname().machine == 'x86_64' else 93, 0)\n"
)


@pytest.mark.slow
def test_a_user_of_its_own_is_held_to_the_limits(tmp_path):
    """Memory in /dev/shm, processes that left the command's tree, and its home, all counted."""
    _need_own_user()
    shm = "import time\nfor i in range(8):\n    open(f'/dev/shm/hog{i}', 'wb').write(b'x' * 200 * 2**20)\ntime.sleep(30)\n"
    escaped = ("import os, subprocess, sys, time\nfor _ in range(12):\n"
               "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'], start_new_session=True)\n"
               "time.sleep(30)\n")  # fmt: skip
    home = (
        "import os, time\nfor i in range(4):\n"
        "    open(os.path.expanduser(f'~/big{i}'), 'wb').write(b'x' * 20 * 2**20)\ntime.sleep(30)\n"
    )
    many = "import os, time\nfor i in range(30_000):\n    os.close(os.open(f'/dev/shm/f{i}', os.O_CREAT))\ntime.sleep(30)\n"
    cases = ((shm, {}, "memory"), (escaped, {"processes": 6}, "processes"),
             (home, {"output_mb": 50}, "output"), (many, {}, "output"))  # fmt: skip
    for i, (code, box, broke) in enumerate(cases):
        given, out = tmp_path / str(i) / "in", tmp_path / str(i) / "out"
        given.mkdir(parents=True)
        limits = sandbox.Box(**{"seconds": 60, "memory_gb": 1.0, **box})
        done = sandbox.run([sys.executable, "-c", code], given, out, limits, sandbox.OWN_USER)
        assert done.broke == broke, (broke, done)
        assert not [p for p in Path("/dev/shm").iterdir() if p.name.startswith(("hog", "f"))]


@pytest.mark.slow
def test_a_zombie_whose_thread_runs_on_is_killed(tmp_path):
    """The command's only survivor: a process whose first thread exited (a zombie in /proc)
    while another thread runs on. It counts as alive, and is killed."""
    _need_own_user()
    code = (
        "import os, subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', {ZOMBIE_LEADER!r}], start_new_session=True)\n"
        "import time; time.sleep(1)\n"
        "open(sys.argv[1] + '/uid', 'w').write(str(os.getuid()))\n"
    )
    given, out = tmp_path / "in", tmp_path / "out"
    given.mkdir()
    done = sandbox.run([sys.executable, "-c", code, str(INSIDE / "out")], given, out,
                       sandbox.Box(seconds=60, memory_gb=1.0), sandbox.OWN_USER)  # fmt: skip
    assert done.broke is None, done.stderr[-2000:]
    uid = int((out / "uid").read_text())
    assert not sandbox_user.pids_of(uid)
    assert all(threads == 1 for _, threads in sandbox_user._processes_of(uid, Path("/proc")))
