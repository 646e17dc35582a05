"""vitcourse.classroom.grade_worker and vitcourse.classroom.grading: one notebook run in a sandbox,
what it defines kept, then each answer run without the course's solution and judged by the grader.

The fast tests read cells the way the worker does (what a cell defines, how it ended) and judge
packed answers; the slow ones grade small notebooks named like the course's, in the sandbox.
`tests/classroom/test_grade.py` grades a whole class; `tests/classroom/test_grade_sandbox.py` a
hostile one.
"""

import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

from tests.conftest import need, need_sandbox
from vitcourse.checks.registry import exercises
from vitcourse.classroom import grade_solutions, gradebook, grading, sandbox
from vitcourse.classroom.grade_worker import _defined, _definition
from vitcourse.classroom.sandbox import Limits

NAMES = ["patchify", "unpatchify"]  # notebook 01's exercises
RIGHT_PATCHIFY = """def patchify(images, patch_size):
    B, C, H, W = images.shape
    P = patch_size
    x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
    return x.reshape(B, -1, P * P * C)
"""
RIGHT_UNPATCHIFY = """def unpatchify(patches, patch_size, image_size):
    (H, W), P = image_size, patch_size
    B, N, K = patches.shape
    C = K // (P * P)
    x = patches.reshape(B, H // P, W // P, P, P, C).permute(0, 5, 1, 3, 2, 4)
    return x.reshape(B, C, H, W)
"""


def _cell(*outputs):
    """A code cell as the kernel left it."""
    cell = nbformat.v4.new_code_cell("pass")
    cell.outputs = [nbformat.v4.new_output(**output) for output in outputs]
    return cell


def _raised(ename, evalue="boom"):
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}


def _notebook(*sources) -> bytes:
    """A notebook of these code cells (and a Markdown cell first, as lessons have)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Patches")]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    return nbformat.writes(nb).encode()


# --- reading cells ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, found",
    [
        ("def patchify(images, patch_size):\n    pass\n", ["patchify"]),
        ("class unpatchify:\n    pass\n", ["unpatchify"]),
        ("async def patchify(images, patch_size):\n    pass\n", ["patchify"]),
        ("if True:\n    def patchify(images, patch_size):\n        pass\n", ["patchify"]),
        (
            "try:\n\tdef patchify(images, patch_size):\n\t\tpass\nexcept Exception:\n\tpass\n",
            ["patchify"],
        ),
        ("def make():\n    def patchify(images, patch_size):\n        pass\n", ["patchify"]),
        ("def patchify(images, patch_size:\n    return images\n", ["patchify"]),  # no parser
        # in the exercises' order, not the cell's
        ("def unpatchify(p, s, i):\n    pass\ndef patchify(i, s):\n    pass\n", NAMES),
        ("patchify = lambda images, patch_size: images\n", ["patchify"]),  # a lambda counts
        ("patchify: object = make()\n", ["patchify"]),
        ("patchify = check_patchify(patchify)\n", []),  # a check cell is no definition
        ("    patchify = 1\n", []),  # not at the top level
        ("patchify == 1\n", []),
        ("# def patchify(images, patch_size):\n", []),
        ("def patchify_v2(images, patch_size):\n    pass\n", []),
        ("x = 'def patchify'\n", []),
    ],
)
def test_a_cell_defines_what_it_defs_or_classes(source, found):
    assert _defined(source, NAMES) == found


def test_a_defining_cell_ran_timed_out_or_never_compiled():
    assert _definition(_cell(), "cell 3", timed_out=False) == "ok"
    assert _definition(_cell(_raised("NameError")), "cell 3", False) == "ok"  # the def ran
    assert _definition(_cell(), "cell 3", timed_out=True) == "timeout:cell 3"
    for ename in ("SyntaxError", "IndentationError", "TabError"):
        assert (
            _definition(_cell(_raised(ename, "bad")), "cell 3", False) == f"{ename}: bad (cell 3)"
        )
    assert _definition(_cell(_raised("SyntaxError")), "cell 3", True) == "timeout:cell 3"


def _judge(run, name="patchify", limits=Limits(notebook=600, cell=120)):  # noqa: B008
    return grading.judge(name, run, Path("/nonexistent"), Path("/nonexistent"), limits, False)


def test_exercises_with_nothing_to_run():
    assert _judge({"definitions": {}, "reached": True}) == (
        "not attempted", "no cell defines patchify", "")  # fmt: skip
    assert _judge({"definitions": {}, "reached": False})[:2] == (
        "timeout", "the notebook did not reach patchify in 600 s")  # fmt: skip
    assert _judge({"definitions": {"patchify": "timeout:cell 4"}})[:2] == (
        "timeout", "the cell 4 defining patchify ran past 120 s")  # fmt: skip
    error = "SyntaxError: '(' was never closed (cell 2)"
    assert _judge({"definitions": {"patchify": error}})[:2] == ("error", error)
    assert _judge({"definitions": {}, "stopped": "cell 5"})[:2] == (
        "error", "the kernel stopped in cell 5 before patchify was defined")  # fmt: skip
    assert _judge({"definitions": {"patchify": "ok"}})[:2] == (
        "error", "its cell ran but did not define patchify")  # fmt: skip


def test_a_forged_or_broken_answer_file_is_an_error_never_a_pass(tmp_path):
    """What the sandbox writes is read only as a regular file, parsed as plain data, and judged
    here: a link, a pickle, or the right answer with a missing file does not pass."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "answer.json").symlink_to("/etc/passwd")
    assert grading._read_output(out / "answer.json", 2**20) is None
    (out / "big").write_bytes(b"x" * 100)
    assert grading._read_output(out / "big", 10) is None


# --- one notebook, graded -------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "sources, limits, expected",
    [
        pytest.param(  # a def inside a function defines nothing; the solution in a lambda
            [
                "from vitcourse import patching",
                "def make():\n    def patchify(images, patch_size):\n"
                "        return images\n    return patchify\n",
                "unpatchify = lambda p, s, i: patching.unpatchify(p, s, i)",
            ],
            Limits(),
            {
                "patchify": ("error", "its cell ran but did not define patchify"),
                "unpatchify": (
                    "not attempted",
                    "unpatchify uses the course's own solution (called, wrapped or subclassed), "
                    "not yours",
                ),
            },
            id="nested-def-and-lambda",
        ),
        pytest.param(  # what a defining cell left is judged, whatever later cells do
            [
                RIGHT_PATCHIFY,
                "del patchify",
                "if True:\n" + "".join(f"    {line}\n" for line in RIGHT_UNPATCHIFY.splitlines()),
                "from vitcourse.checks import check_unpatchify\n",
                "unpatchify = check_unpatchify(unpatchify)",
            ],
            Limits(),
            {"patchify": ("passed", ""), "unpatchify": ("passed", "")},
            id="kept-after-each-defining-cell",
        ),
        pytest.param(  # an endless answer, then an endless cell: both stopped, in their own times
            [
                "def patchify(images, patch_size):\n    while True:\n        pass\n",
                "def unpatchify(patches, patch_size, image_size):\n    return patches\n"
                "while True:\n    pass\n",
            ],
            Limits(cell=3, check=3),
            {
                "patchify": (
                    "timeout",
                    "running patchify on the check's inputs took more than 3 s: an endless loop?",
                ),
                "unpatchify": ("timeout", "the cell 3 defining unpatchify ran past 3 s"),
            },
            id="endless-answer-and-cell",
        ),
        pytest.param(  # an answer that ends its process is an error for itself alone
            [
                RIGHT_PATCHIFY,
                "import os\n\ndef unpatchify(patches, patch_size, image_size):\n    os._exit(1)\n",
            ],
            Limits(),
            {
                "patchify": ("passed", ""),
                "unpatchify": (
                    "error",
                    "unpatchify stopped the checker's process (exit(), a crash, or out of memory)",
                ),
            },
            id="answer-ends-its-process",
        ),
        pytest.param(  # the notebook's time counts from its first exercise; a later cell that
            # imports gets no start-up allowance (the grader imported torch before the first cell)
            [RIGHT_PATCHIFY, "import time\ntime.sleep(120)", RIGHT_UNPATCHIFY],
            Limits(notebook=15, cell=60),
            {
                "patchify": ("passed", ""),
                "unpatchify": ("timeout", "the notebook did not reach unpatchify in 15 s"),
            },
            id="notebook-out-of-time",
        ),
        pytest.param(  # not a notebook: an error for each exercise, quoting nothing of the file
            None,
            Limits(),
            {
                "patchify": ("error", "the file is not a readable notebook (NotJSONError)"),
                "unpatchify": ("error", "the file is not a readable notebook (NotJSONError)"),
            },
            id="not-a-notebook",
        ),
    ],
)
def test_one_notebook_graded(tmp_path, sources, limits, expected):
    need_sandbox()
    data = b"{ root:x:0:0 this is not a notebook" if sources is None else _notebook(*sources)
    graded = grading.grade_notebook("ada", "01_patches", data, tmp_path, limits, work=tmp_path)
    got = {g.exercise: (g.status, g.hint) for g in graded}
    assert got.pop("quiz")[0] == "not attempted"  # none of these has a quiz cell: graded apart
    assert got == expected
    if sources is not None:
        ran = nbformat.read(
            tmp_path / "executed" / gradebook.file_name("ada") / "01_patches.ipynb", as_version=4
        )
        assert [c.source for c in ran.cells[1:]] == sources  # the student's cells only


@pytest.mark.slow
def test_the_answer_runs_where_the_solution_is_not(tmp_path):
    """In the copy of the package an answer runs with, the exercise's solution is a stub: called,
    built or subclassed, it raises UsesCourseSolution; the rest of the package works."""
    need_sandbox()
    copy = grade_solutions.package_without("MultiHeadSelfAttention", tmp_path)
    source = (copy / "attention.py").read_text()
    assert "raise UsesCourseSolution('vitcourse.attention.MultiHeadSelfAttention')" in source
    assert "def scaled_dot_product_attention" in source  # the other exercise's is there
    probe = """
import json, torch
from vitcourse.checks.harness import UsesCourseSolution
from vitcourse import attention, vit
seen = []
try:
    attention.MultiHeadSelfAttention(12, 3)
except UsesCourseSolution:
    seen.append("built")
try:
    class Mine(attention.MultiHeadSelfAttention):
        pass
except UsesCourseSolution:
    seen.append("subclassed")
out = attention.scaled_dot_product_attention(*torch.randn(3, 1, 1, 2, 4))[0]
seen.append(list(out.shape))
open("/grading/out/seen.json", "w").write(json.dumps(seen))
"""
    box = sandbox.Box(seconds=120, package=copy)
    given, out = tmp_path / "in", tmp_path / "out"
    given.mkdir()
    done = sandbox.run([sys.executable, "-c", probe], given, out, box)
    assert done.returncode == 0, done.stderr
    assert json.loads((out / "seen.json").read_text()) == ["built", "subclassed", [1, 1, 2, 4]]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(exercises()))
def test_every_solution_can_be_removed(tmp_path, name):
    """For each exercise, the copy of the package without its solution imports, checks included,
    and its solution raises UsesCourseSolution there."""
    import subprocess

    copy = grade_solutions.package_without(name, tmp_path)
    reference = exercises()[name].reference
    code = (
        "import importlib, vitcourse.checks, vitcourse.classroom.grade_probe\n"
        "from vitcourse.checks.harness import UsesCourseSolution\n"
        f"module = importlib.import_module({reference.__module__!r})\n"
        f"assert vitcourse.__file__.startswith({str(copy)!r}), vitcourse.__file__\n"
        "try:\n"
        f"    getattr(module, {reference.__name__!r})()\n"
        "except UsesCourseSolution:\n"
        "    print('removed')\n"
    )
    script = tmp_path / "probe.py"
    script.write_text(code)
    command = sandbox.with_package([sys.executable, "-m", "probe"], copy)
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
    assert done.stdout.strip() == "removed", done.stderr[-2000:]


@pytest.mark.slow
def test_without_the_sandbox_the_same_verdicts(tmp_path):
    """--no-sandbox: the same two steps as the teacher's own processes (the answer still runs with
    the copy of the package that lacks its solution, and is judged here)."""
    need("cloudpickle", "pip install -r requirements-teachers.txt")
    wrapped = "from vitcourse import patching\nunpatchify = patching.unpatchify\n"
    data = _notebook(RIGHT_PATCHIFY, wrapped)
    graded = grading.grade_notebook(
        "ada", "01_patches", data, tmp_path, Limits(), isolation=False, work=tmp_path
    )
    assert [(g.status, g.hint[:24]) for g in graded] == [
        ("passed", ""),
        ("not attempted", "unpatchify uses the cour"),
        ("not attempted", "none of the 5 questions "),  # the quiz: no quiz cell here
    ]


def test_outputs_are_read_only_as_small_regular_files(tmp_path):
    """What a sandbox left where the grader reads: a folder, a FIFO, a link, JSON nested 50,000
    deep, a file chmodded to 000 (for a teacher without root): none of them raises, none is read."""
    (tmp_path / "run.json").mkdir()
    os.mkfifo(tmp_path / "fifo")
    os.symlink("/etc/passwd", tmp_path / "link")
    (tmp_path / "deep").write_text("[" * 50_000 + "]" * 50_000)
    (tmp_path / "big").write_text("x" * 101)
    for name in ("run.json", "fifo", "link", "big"):
        assert grading._read_output(tmp_path / name, 100) is None, name
    assert grading._read_json(tmp_path / "deep", 2**20) is None
    (tmp_path / "ok").write_text('{"kind": "x"}')
    assert grading._read_json(tmp_path / "ok", 100) == {"kind": "x"}


def test_outputs_are_read_without_following_a_link_at_any_level(tmp_path):
    """After its cells ran, a notebook can rename the folder it wrote (`defs`) and put a link
    there, to a folder of the grader's holding a correct answer: the grader reads from its own
    output folder down, one folder at a time, and follows no link at any level."""
    out, elsewhere = tmp_path / "out", tmp_path / "graders"
    (elsewhere / "deeper").mkdir(parents=True)
    for folder in (elsewhere, elsewhere / "deeper"):
        (folder / "patchify.pkl").write_bytes(b"the course's answer")
    (out / "real" / "defs").mkdir(parents=True)
    (out / "real" / "defs" / "patchify.pkl").write_bytes(b"the student's")
    read = grading._read_output(out / "real" / "defs" / "patchify.pkl", 100, out)
    assert read == b"the student's"  # no link: read as before
    os.symlink(elsewhere, out / "defs")  # a link for the folder
    os.symlink(elsewhere, out / "real" / "linked")  # a link one level down
    os.symlink(elsewhere / "patchify.pkl", out / "real" / "defs" / "answer.pkl")  # the file
    for path in (
        out / "defs" / "patchify.pkl",
        out / "defs" / "deeper" / "patchify.pkl",
        out / "real" / "linked" / "patchify.pkl",
        out / "real" / "defs" / "answer.pkl",
        out / "real" / ".." / ".." / "graders" / "patchify.pkl",
        tmp_path / "graders" / "patchify.pkl",  # outside the output folder
    ):
        assert grading._read_output(path, 100, out) is None, path
    os.rename(out, tmp_path / "moved")  # the output folder itself a link: not followed either
    os.symlink(elsewhere, out)
    assert grading._read_output(out / "patchify.pkl", 100, out) is None
    assert grading._read_json(out / "patchify.pkl", 100, out) is None


def _display(data: str, kind: str = "display_data") -> dict:
    content = {"data": {"text/plain": data}, "metadata": {}, "transient": {"display_id": "flood"}}
    return {"msg_type": kind, "header": {"msg_type": kind}, "parent_header": {}, "content": content}


def test_an_update_of_a_display_shown_many_times_stays_within_the_cells_limit():
    """120 tiny outputs under one display id, then one update of half a megabyte: nbclient would
    write it into all 120 (60 MB); the grader's client keeps each cell within its limit, and says
    so."""
    from vitcourse.classroom.grade_worker import CappedClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("flood()"), nbformat.v4.new_code_cell("small()")]
    client = CappedClient(nb)
    client.reset_execution_trackers()  # as executing a notebook starts
    client.clear_before_next_output = False  # as executing a cell starts
    for _ in range(120):
        client.output(nb.cells[0].outputs, _display("tiny"), "flood", 0)
    client.output(nb.cells[1].outputs, _display("tiny"), "flood", 1)
    client._update_display_id("flood", _display("x" * 500_000, "update_display_data"))
    flooded = json.dumps(nb.cells[0].outputs)
    assert len(flooded) <= CappedClient.limit and "the grader kept only the first 1 MB" in flooded
    assert nb.cells[1].outputs[0]["data"]["text/plain"] == "x" * 500_000  # one copy fits
    client._update_display_id("flood", _display("small", "update_display_data"))
    assert [o["data"]["text/plain"] for o in nb.cells[0].outputs] == ["small"] * 120
