"""vitcourse.grade_worker: one notebook run in a fresh kernel, then its exercises checked.

The fast tests read cells the way the worker does (what a cell defines, how it ended, what the
check printed); the slow ones run small notebooks named like the course's, one kernel each, and
the worker's command line as `vitcourse.grade` starts it. `tests/test_grade.py` grades a whole
class through both.
"""

import json
import os
import subprocess
import sys
from dataclasses import asdict

import nbformat
import pytest

from vitcourse.grade import Limits
from vitcourse.grade_worker import (
    _defined,
    _definition,
    _read_result,
    _unchecked,
    run_and_check,
)

NAMES = ["patchify", "unpatchify"]  # notebook 01's exercises
RIGHT_PATCHIFY = """from vitcourse import patching

def patchify(images, patch_size):
    return patching.patchify(images, patch_size)
"""
RIGHT_UNPATCHIFY = """def unpatchify(patches, patch_size, image_size):
    return patching.unpatchify(patches, patch_size, image_size)
"""


def _cell(*outputs):
    """A code cell as the kernel left it."""
    cell = nbformat.v4.new_code_cell("pass")
    cell.outputs = [nbformat.v4.new_output(**output) for output in outputs]
    return cell


def _raised(ename, evalue="boom"):
    return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}


def _printed(text):
    return {"output_type": "stream", "name": "stdout", "text": text}


def _notebook(path, *sources):
    """A notebook of these code cells (and a Markdown cell first, as lessons have) at `path`."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Patches")]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in sources]
    nbformat.write(nb, path)
    return path


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
        ("patchify = lambda images, patch_size: images\n", []),  # an assignment, not a def
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


def test_exercises_with_nothing_to_check():
    limits = Limits(notebook=600, cell=120)
    assert _unchecked("patchify", "ok", True, limits) is None
    assert _unchecked("patchify", None, True, limits) == [
        "not attempted",
        "no cell defines patchify",
    ]
    assert _unchecked("patchify", None, False, limits) == [
        "timeout",
        "the notebook did not reach patchify in 600 s",
    ]
    assert _unchecked("patchify", "timeout:cell 4", True, limits) == [
        "timeout",
        "the cell 4 defining patchify ran past 120 s",
    ]
    error = "SyntaxError: '(' was never closed (cell 2)"
    assert _unchecked("patchify", error, True, limits) == ["error", error]


def test_the_check_cell_is_read_after_its_marker():
    marker = "VITCOURSE-GRADE-0123456789abcdef"
    passed = _printed(f'{marker} ["passed", ""]\n')
    assert _read_result(_cell(passed), marker, "patchify", False, 30) == ["passed", ""]
    # Lines without this run's marker are the student's: ignored; the last marked line counts.
    forged = _printed('VITCOURSE-GRADE-ffffffffffffffff ["passed", ""]\n')
    wrong = _printed(f'hello\n{marker} ["error", "x"]\n{marker} ["wrong", "a hint"]\n')
    assert _read_result(_cell(forged, wrong), marker, "p", False, 30) == ["wrong", "a hint"]
    inside = _printed(f'say {marker} ["passed", ""]\n')  # the marker must open the line
    assert _read_result(_cell(inside), marker, "p", False, 30) == [
        "error",
        "the check printed no result",
    ]
    stuck = _read_result(_cell(passed), marker, "patchify", True, 30)
    assert stuck == ["timeout", "checking patchify took more than 30 s: an endless loop?"]
    assert _read_result(_cell(_raised("MemoryError", "")), marker, "p", False, 30) == [
        "error",
        "MemoryError:",
    ]
    assert _read_result(_cell(_printed(f"{marker} not json\n")), marker, "p", False, 30) == [
        "error",
        "the check printed no result",
    ]


def test_an_unreadable_file_is_an_error_for_each_exercise(tmp_path):
    path = tmp_path / "01_patches (1).ipynb"
    path.write_text("{ this is not a notebook")
    graded = run_and_check(path, tmp_path / "executed.ipynb")
    assert list(graded) == NAMES
    for status, hint in graded.values():
        assert status == "error" and hint.startswith("the file is not a readable notebook: ")
    assert not (tmp_path / "executed.ipynb").exists()


# --- one notebook, run and checked ----------------------------------------------------------------


@pytest.mark.slow
def test_the_worker_command_line(tmp_path):
    """What `vitcourse.grade` starts: it writes the grades, the notebook as it ran, and the
    kernel's process id; a cell with a TabError is an error for what it defines."""
    tab_error = "def unpatchify(patches, patch_size, image_size):\n\tif True:\n        return 1\n"
    path = _notebook(tmp_path / "01_patches.ipynb", RIGHT_PATCHIFY, "print('hi')", tab_error)
    result, executed, kernel = tmp_path / "r.json", tmp_path / "out" / "nb.ipynb", tmp_path / "k"
    limits = json.dumps(asdict(Limits(notebook=120, cell=60, check=60, memory_gb=8)))
    command = [sys.executable, "-m", "vitcourse.grade_worker", str(path), str(result)]
    command += [str(executed), str(kernel), limits]
    env = dict(os.environ, VITCOURSE_PROGRESS=str(tmp_path / "progress.json"), MPLBACKEND="Agg")
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    graded = json.loads(result.read_text())
    assert graded["patchify"] == ["passed", ""]
    status, hint = graded["unpatchify"]
    assert status == "error" and hint.startswith("TabError: ") and hint.endswith("(cell 4)")
    assert kernel.read_text().isdigit() and int(kernel.read_text()) != os.getpid()
    ran = nbformat.read(executed, as_version=4)
    assert [c.source for c in ran.cells] == [c.source for c in nbformat.read(path, 4).cells]
    assert ran.cells[2].outputs[0]["text"] == "hi\n"
    assert ran.cells[3].outputs[0]["ename"] == "TabError"


@pytest.mark.slow
@pytest.mark.parametrize(
    "sources, limits, expected",
    [
        pytest.param(  # the keep cell finds no `patchify`; a lambda is no `def`
            [
                "from vitcourse import patching",
                "def make():\n    def patchify(images, patch_size):\n"
                "        return patching.patchify(images, patch_size)\n    return patchify\n",
                "unpatchify = lambda p, s, i: patching.unpatchify(p, s, i)",
            ],
            Limits(),
            {
                "patchify": ["error", "its cell ran but did not define patchify"],
                "unpatchify": ["not attempted", "no cell defines unpatchify"],
            },
            id="nested-def-and-lambda",
        ),
        pytest.param(  # what a defining cell left is checked, whatever later cells bind
            [
                RIGHT_PATCHIFY,
                "patchify = None",
                "if True:\n" + "".join(f"    {line}\n" for line in RIGHT_UNPATCHIFY.splitlines()),
                "unpatchify = patching.unpatchify  # as a check cell lending the solution does",
            ],
            Limits(),
            {"patchify": ["passed", ""], "unpatchify": ["passed", ""]},
            id="kept-after-each-defining-cell",
        ),
        pytest.param(  # an endless check, then an endless cell: both stopped, in their own times
            [
                "def patchify(images, patch_size):\n    while True:\n        pass\n",
                "def unpatchify(patches, patch_size, image_size):\n    return patches\n"
                "while True:\n    pass\n",
            ],
            Limits(cell=3, check=3),
            {
                "patchify": ["timeout", "checking patchify took more than 3 s: an endless loop?"],
                "unpatchify": ["timeout", "the cell 3 defining unpatchify ran past 3 s"],
            },
            id="endless-check-and-cell",
        ),
        pytest.param(  # what was checked before the kernel stopped stands
            [
                RIGHT_PATCHIFY,
                "import os\n\ndef unpatchify(patches, patch_size, image_size):\n    os._exit(1)\n",
            ],
            Limits(),
            {
                "patchify": ["passed", ""],
                "unpatchify": [
                    "error",
                    "the kernel stopped in the check of unpatchify (exit(), a crash, or out of "
                    "memory)",
                ],
            },
            id="kernel-stops-in-a-check",
        ),
        pytest.param(  # the notebook's time includes starting its kernel
            [RIGHT_PATCHIFY, "import time\ntime.sleep(120)", RIGHT_UNPATCHIFY],
            Limits(notebook=15, cell=60),
            {
                "patchify": ["passed", ""],
                "unpatchify": ["timeout", "the notebook did not reach unpatchify in 15 s"],
            },
            id="notebook-out-of-time",
        ),
    ],
)
def test_one_notebook_run_and_checked(tmp_path, monkeypatch, sources, limits, expected):
    monkeypatch.setenv("VITCOURSE_PROGRESS", str(tmp_path / "progress.json"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    path = _notebook(tmp_path / "01_patches.ipynb", *sources)
    graded = run_and_check(path, tmp_path / "executed.ipynb", limits)
    assert list(graded) == NAMES
    assert graded == expected
    ran = nbformat.read(tmp_path / "executed.ipynb", as_version=4)
    assert len(ran.cells) == len(sources) + 1  # the student's cells only
    assert not any("__vitcourse_defs__" in c.source for c in ran.cells)
