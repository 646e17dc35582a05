"""The grader on Gradescope and PrairieLearn (vitcourse.classroom.autograder, .platforms), tried
without the platforms: their folders (`/autograder`, `/grade`) laid out in a temporary folder that
the scripts take from an environment variable, their scripts run as the platform would run them,
and each results.json checked against the fields the platform documents."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.classroom.hostile import _replace, _write, processes_with
from tests.conftest import need_root, need_sandbox, with_quiz_answers
from vitcourse.classroom import autograder, bundles, platforms, sandbox
from vitcourse.classroom import sandbox_cgroup as cgroups
from vitcourse.classroom import sandbox_disk as disk
from vitcourse.classroom.gradebook import Grade
from vitcourse.quiz.questions import questions

ROOT = Path(__file__).resolve().parents[2]
NB01 = json.loads((ROOT / "notebooks" / "01_patches.ipynb").read_text())
SECRET = "GRADER-ONLY-7d1e0b"  # in the platform's grader files, where no student may read it
MARKER = "vitcourse-autograder-hostile-3c9f"  # in the command line of the hostile daemon

# Gradescope's autograder specification and PrairieLearn's external grading results: the fields
# each documents, and what they take.
GRADESCOPE_FIELDS = {"score", "execution_time", "output", "output_format", "test_output_format",
                     "test_name_format", "visibility", "stdout_visibility", "extra_data", "tests",
                     "leaderboard"}  # fmt: skip
GRADESCOPE_TEST_FIELDS = {"score", "max_score", "status", "name", "name_format", "number",
                          "output", "output_format", "tags", "visibility", "extra_data"}  # fmt: skip
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
PRAIRIELEARN_FIELDS = {"gradable", "score", "message", "output", "tests", "images", "format_errors"}
PRAIRIELEARN_TEST_FIELDS = {"name", "description", "points", "max_points", "message", "output",
                            "images"}  # fmt: skip


def valid_gradescope(results: dict) -> dict:
    assert set(results) <= GRADESCOPE_FIELDS, set(results) - GRADESCOPE_FIELDS
    assert isinstance(results["score"], int | float) and isinstance(results["execution_time"], int)
    assert results["visibility"] in VISIBILITY and results["stdout_visibility"] in VISIBILITY
    for test in results["tests"]:
        assert set(test) <= GRADESCOPE_TEST_FIELDS, set(test) - GRADESCOPE_TEST_FIELDS
        assert test["status"] in ("passed", "failed") and test["visibility"] in VISIBILITY
        assert 0 <= test["score"] <= test["max_score"]
        assert isinstance(test["name"], str) and isinstance(test["output"], str)
    assert results["score"] == sum(t["score"] for t in results["tests"])
    return results


def valid_prairielearn(results: dict) -> dict:
    assert set(results) <= PRAIRIELEARN_FIELDS, set(results) - PRAIRIELEARN_FIELDS
    assert isinstance(results["gradable"], bool)
    if results["gradable"]:
        assert 0.0 <= results["score"] <= 1.0
        for test in results["tests"]:
            assert set(test) <= PRAIRIELEARN_TEST_FIELDS, set(test) - PRAIRIELEARN_TEST_FIELDS
            assert 0 <= test["points"] <= test["max_points"]
        possible = sum(t["max_points"] for t in results["tests"])
        assert results["score"] == pytest.approx(
            sum(t["points"] for t in results["tests"]) / possible
        )
    assert len(json.dumps(results).encode()) < 1_000_000  # PrairieLearn's limit
    return results


# --- points.json -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "points, said",
    [
        ({"00_setup": {"x": 1}}, "'00_setup' is not a notebook with exercises or a quiz"),
        ({"01_patches": {"attention": 1}}, "01_patches has no exercise or quiz 'attention'"),
        ({"01_patches": {"patchify": -1}}, "expected points .0 or more., got -1"),
        ({"01_patches": {"patchify": True}}, "got True"),
        ([], "expected {notebook: {exercise: points}}"),
    ],
)
def test_a_wrong_points_file_says_what_it_expected(tmp_path, points, said):
    path = tmp_path / "points.json"
    path.write_text(json.dumps(points))
    with pytest.raises(ValueError, match=said):
        autograder.read_points(path)
    path.write_text("{not json")
    with pytest.raises(ValueError, match="expected a JSON file of points"):
        autograder.read_points(path)


# --- results.json ------------------------------------------------------------------------------


def _run(grades, **changes) -> platforms.Run:
    points = {"01_patches": {"patchify": 2, "unpatchify": 1}}
    fields = dict(grades=grades, points=points, skipped=[], isolation="a test", closed=["/x"],
                  edition={"version": "0.1.0", "commit": "abc"}, seconds=12.3)  # fmt: skip
    return platforms.Run(**(fields | changes))


def test_results_map_points_and_hints():
    grades = [Grade("s", "01_patches", "patchify", "wrong", "the patches are in the wrong order"
                    "\nHint: flatten each patch row by row", "order"),
              Grade("s", "01_patches", "unpatchify", "passed")]  # fmt: skip
    scope = valid_gradescope(
        platforms.gradescope(_run(grades, files={"01_patches": "hw/01 (2).ipynb"}))
    )
    assert "Graded: hw/01 (2).ipynb (as 01_patches)" in scope["output"]
    assert scope["score"] == 1 and [t["max_score"] for t in scope["tests"]] == [2, 1]
    assert scope["tests"][0]["output"] == (
        "wrong: the patches are in the wrong order. Hint: flatten each patch row by row"
    )
    assert scope["execution_time"] == 12 and "a test" in scope["output"]
    learn = valid_prairielearn(platforms.prairielearn(_run(grades)))
    assert learn["gradable"] and learn["score"] == pytest.approx(1 / 3)
    assert learn["tests"][1]["message"] == "passed" and "1 of 3 points" in learn["message"]


def test_a_submission_without_the_notebook_or_a_failed_grader_is_not_gradable():
    missing = [Grade("s", "01_patches", n, "not attempted", "not handed in")
               for n in ("patchify", "unpatchify")]  # fmt: skip
    learn = valid_prairielearn(platforms.prairielearn(_run(missing)))
    assert (
        not learn["gradable"]
        and "Not found in your submission: 01_patches" in learn["format_errors"][0]
    )
    scope = valid_gradescope(platforms.gradescope(_run(missing)))
    assert scope["score"] == 0 and "Not found in your submission" in scope["output"]
    failed = _run([], points={}, failed="RuntimeError: no sandbox")
    assert not valid_prairielearn(platforms.prairielearn(failed))["gradable"]
    scope = valid_gradescope(platforms.gradescope(failed))
    assert scope["tests"] == [] and "its fault, not yours" in scope["output"]


def test_a_flood_of_output_stays_within_prairielearns_limit():
    flood = [Grade("s", "01_patches", n, "error", "\x1b[2J" + "x" * 5_000_000)
             for n in ("patchify", "unpatchify")]  # fmt: skip
    learn = valid_prairielearn(platforms.prairielearn(_run(flood)))
    assert all(len(t["output"]) <= platforms.OUTPUT_CHARS for t in learn["tests"])
    assert "\x1b" not in json.loads(json.dumps(learn))["tests"][0]["output"]


def test_an_unknown_isolation_is_refused():
    with pytest.raises(ValueError, match="sandbox: expected True, False"):
        sandbox.mode("docker")


# --- the platforms' folders, simulated -----------------------------------------------------------

HOSTILE = """
import json, subprocess, sys
root = {root!r}
loot = []
for path in [root + "/source/secret.txt", root + "/data/data.json", root + "/source/points.json",
             root + "/tests/points.json", root + "/results/results.json"]:
    try:
        loot.append(open(path).read())
    except OSError as e:
        loot.append(type(e).__name__)
forged = json.dumps({{"score": 1000, "gradable": True, "tests": []}})
try:
    open(root + "/results/results.json", "w").write(forged)
    loot.append("wrote results.json")
except OSError as e:
    loot.append("results.json: " + type(e).__name__)
# {marker}: a process of its own session, writing results.json again and again for 90 s
daemon = "import time\\n# {marker}\\nfor _ in range(900):\\n    try:\\n        open(%r, 'w').write(%r)\\n    except OSError:\\n        pass\\n    time.sleep(0.1)\\n"
subprocess.Popen([sys.executable, "-c", daemon % (root + "/results/results.json", forged)],
                 start_new_session=True)
def patchify(images, patch_size):
    raise RuntimeError("LOOT " + " | ".join(loot))
"""
WRONG = "def patchify(images, patch_size):\n    return images\n"
# patchify built from the course's unpatchify (another exercise's solution), undone
BORROWED = """
import torch
from vitcourse.patching import unpatchify as _undo
def patchify(images, patch_size):
    B, C, H, W = images.shape
    n, d = (H // patch_size) * (W // patch_size), patch_size * patch_size * C
    where = _undo(torch.arange(n * d, dtype=torch.float64).reshape(1, n, d), patch_size, (H, W))
    out = images.new_empty(B, n * d)
    out[:, where.long().flatten()] = images.reshape(B, -1)
    return out.reshape(B, n, d)
"""


def _submission(kind: str, root: Path) -> dict:
    if kind == "honest":  # the exercises and the quiz answered right
        return with_quiz_answers(NB01, "01_patches")
    if kind == "wrong":  # patchify and the quiz wrong
        wrong = {q: "?" for q in questions("01_patches")}
        return with_quiz_answers(_replace(NB01, "patchify", WRONG), "01_patches", wrong)
    if kind == "borrowed":
        return _replace(NB01, "patchify", BORROWED)
    code = HOSTILE.format(root=str(root), marker=MARKER)
    return _replace(NB01, "patchify", code)


def _run_script(script: Path, variable: str, root: Path, isolation: str, *more: str) -> dict:
    """Run a platform's script as the platform would (root, no arguments but the isolation
    asked for), with its folder at `root`; return its results.json, read as the platform would."""
    from vitcourse.environment import default_root

    env = dict(os.environ, VITCOURSE_PYTHON=sys.executable, VITCOURSE_DATA=str(default_root()))
    env[variable] = str(root)
    start = time.monotonic()
    done = subprocess.run(["bash", str(script), "--isolation", isolation, *more], env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    seconds = time.monotonic() - start
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    results = json.loads((root / "results" / "results.json").read_text())
    return {"results": results, "stdout": done.stdout, "seconds": seconds,
            "text": (root / "results" / "results.json").read_text()}  # fmt: skip


def _gradescope(tmp: Path, bundle: Path, kind: str, isolation: str) -> dict:
    root = tmp / f"gradescope-{kind}-{isolation}"
    with zipfile.ZipFile(bundle) as z:
        z.extractall(root / "source")
    for script in ("setup.sh", "run_autograder", "install.sh"):
        (root / "source" / script).chmod(0o755)
    (root / "source" / "secret.txt").write_text(SECRET)
    _write(_submission(kind, root), root / "submission" / "01_patches.ipynb")
    (root / "results").mkdir()
    return _run_script(root / "source" / "run_autograder", "VITCOURSE_GRADESCOPE_ROOT", root,
                       isolation)  # fmt: skip


def _prairielearn(tmp: Path, folder: Path, kind: str, isolation: str) -> dict:
    root = tmp / f"prairielearn-{kind}-{isolation}"
    shutil.copytree(folder / "questions" / "vitcourse_01_patches" / "tests", root / "tests")
    (root / "data").mkdir()
    (root / "data" / "data.json").write_text(json.dumps({"secret": SECRET}))
    _write(_submission(kind, root), root / "student" / "01_patches.ipynb")
    return _run_script(folder / "entrypoint", "VITCOURSE_PRAIRIELEARN_ROOT", root, isolation)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Each platform's script on an honest, a wrong and a hostile submission, as a user of its
    own (the platforms' containers allow no user namespace) and in bubblewrap's sandbox. As root,
    the grader lets any user pass through (o+x) the folders above the interpreter: a course or an
    interpreter under /root is reached, nothing there is listed."""
    need_sandbox()
    need_root()
    tmp = tmp_path_factory.mktemp("platforms")
    bundle = bundles.build_gradescope(["01_patches"], tmp / "autograder.zip")
    folder = bundles.build_prairielearn(["01_patches"], tmp / "grader", "me/vitcourse:1")
    runs = {}
    for kind, isolation in (("honest", "auto"), ("wrong", "own-user"), ("hostile", "own-user"),
                            ("hostile", "bubblewrap"), ("borrowed", "own-user")):  # fmt: skip
        runs["gradescope", kind, isolation] = _gradescope(tmp, bundle, kind, isolation)
    for kind, isolation in (("honest", "own-user"), ("wrong", "auto"), ("hostile", "own-user")):
        runs["prairielearn", kind, isolation] = _prairielearn(tmp, folder, kind, isolation)
    time.sleep(2)  # time for a daemon left behind to write results.json again
    return runs


@pytest.mark.slow
def test_honest_and_wrong_submissions_on_both_platforms(graded):
    honest = valid_gradescope(graded["gradescope", "honest", "auto"]["results"])
    assert honest["score"] == 3 and [t["status"] for t in honest["tests"]] == ["passed"] * 3
    assert "01_patches: quiz" == honest["tests"][2]["name"]  # the quiz, a test of its own
    assert "bubblewrap's sandbox" in honest["output"]
    wrong = valid_gradescope(graded["gradescope", "wrong", "own-user"]["results"])
    assert wrong["score"] == 1 and wrong["tests"][0]["output"].startswith("wrong: ")
    assert wrong["tests"][2]["output"].startswith("wrong: 0 of ")  # the quiz's answers
    assert "a user of its own" in wrong["output"] and "left readable" in wrong["output"]
    # How memory and output were counted, in both modes: by the kernel where the grader made a
    # cgroup and mounted a tmpfs
    said = f"{cgroups.note()}; {disk.note()}"
    assert said in honest["output"] and said in wrong["output"], (said, wrong["output"])
    learn = valid_prairielearn(graded["prairielearn", "honest", "own-user"]["results"])
    assert learn["gradable"] and learn["score"] == 1.0
    learn = valid_prairielearn(graded["prairielearn", "wrong", "auto"]["results"])
    assert learn["score"] == pytest.approx(1 / 3) and learn["tests"][0]["output"].startswith(
        "wrong: "
    )
    # Gradescope shows stdout to the teacher only: the run's summary
    assert "3 of 3 points" in graded["gradescope", "honest", "auto"]["stdout"]


@pytest.mark.slow
@pytest.mark.parametrize("run", [("gradescope", "hostile", "own-user"),
                                 ("gradescope", "hostile", "bubblewrap"),
                                 ("prairielearn", "hostile", "own-user")])  # fmt: skip
def test_a_hostile_submission_neither_reads_the_grader_nor_writes_its_score(graded, run):
    found = graded[run]
    results = found["results"]
    if run[0] == "gradescope":
        valid_gradescope(results)
        earned, output = results["score"], results["tests"][0]["output"]
    else:
        valid_prairielearn(results)
        earned, output = results["score"] * 3, results["tests"][0]["output"]
    assert earned == pytest.approx(1)  # unpatchify passed; the patchify that raised, the quiz not
    assert output.startswith("error: ") and "LOOT" in output  # what it found came out here...
    # ...and it found nothing: each file refused (as a user of its own) or absent (in the sandbox)
    # the error's own words come first, in parentheses, then what the check called and a hint
    *read, wrote = output.split("LOOT ", 1)[1].split("), called with")[0].split(" | ")
    refused = "PermissionError" if run[2] == "own-user" else "FileNotFoundError"
    assert read == [refused] * 5 and wrote == f"results.json: {refused}", output
    assert SECRET not in found["text"]
    assert not processes_with(MARKER)  # its daemon did not outlive the grading
    assert json.loads(found["text"]) == results  # and did not write results.json since


def test_a_grader_that_fails_still_writes_results(tmp_path, capsys):
    """A broken points.json is the grader's fault: said in results.json (PrairieLearn: not
    gradable, so the student loses no attempt), and the script's exit status is 1."""
    for platform in ("gradescope", "prairielearn"):
        root = tmp_path / platform
        (root / "student").mkdir(parents=True)
        (root / "points.json").write_text('{"01_patches": {"patchify": "ten"}}')
        status = autograder.grade_on(platform, root, root / "points.json", autograder.Limits())
        results = json.loads((root / "results" / "results.json").read_text())
        if platform == "gradescope":
            assert valid_gradescope(results)["score"] == 0 and "its fault" in results["output"]
        else:
            assert not valid_prairielearn(results)["gradable"]
        assert status == 1 and "expected points (0 or more), got 'ten'" in capsys.readouterr().out


def test_nothing_handed_in_is_graded_without_running_anything(tmp_path):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "notes.txt").write_text("sorry")
    points = {"01_patches": {"patchify": 1, "unpatchify": 1}}
    grades, skipped, files = autograder.grade_submission(tmp_path / "submission", points,
                                                  autograder.Limits(), sandbox.NO_SANDBOX)  # fmt: skip
    assert [(g.status, g.hint) for g in grades] == [("not attempted", "not handed in")] * 2
    assert (
        skipped == ["submission/notes.txt: not a course notebook with exercises or a quiz"]
        and not files
    )


def test_the_installed_package_is_closed_to_a_user_of_its_own(tmp_path, monkeypatch):
    """Installed (site-packages), the package with the solutions is closed when the student runs
    as a user of its own; a source checkout is left as it is, and the results say so."""
    installed = tmp_path / "lib" / "site-packages" / "vitcourse"
    installed.mkdir(parents=True)
    root = tmp_path / "autograder"
    root.mkdir()
    monkeypatch.setattr(autograder, "package_dir", lambda: installed)
    closed, warning = autograder.close_grader_files(root, sandbox.OWN_USER)
    assert stat.S_IMODE(installed.stat().st_mode) == 0o700 and warning == ""
    assert any("the course's solutions" in c for c in closed)
    if os.geteuid() == 0:
        assert stat.S_IMODE(root.stat().st_mode) == 0o700 and str(root) in closed
    installed.chmod(0o755)
    assert autograder.close_grader_files(root, sandbox.BUBBLEWRAP)[0] == closed[:-1]
    assert stat.S_IMODE(installed.stat().st_mode) == 0o755  # mounted over in the sandbox
    checkout = tmp_path / "course" / "vitcourse"
    checkout.mkdir(parents=True)
    monkeypatch.setattr(autograder, "package_dir", lambda: checkout)
    _, warning = autograder.close_grader_files(root, sandbox.OWN_USER)
    assert "source checkout, left readable" in warning


def test_a_grader_that_cannot_isolate_says_why(monkeypatch):
    monkeypatch.setattr(sandbox, "bubblewrap", lambda: "bubblewrap is not installed")
    monkeypatch.setattr(autograder.os, "geteuid", lambda: 1000)
    with pytest.raises(
        RuntimeError,
        match="cannot keep the student's code apart here: "
        "bubblewrap is not installed; a user of its own needs a grader run as root",
    ):
        autograder.choose_isolation()
    assert autograder.choose_isolation("none")[0] == sandbox.NO_SANDBOX


@pytest.mark.slow
def test_an_answer_built_from_another_exercise_s_solution_is_not_the_student_s(graded):
    """The checker's package lacks the solutions to all of the notebook's exercises: a patchify
    that undoes the course's unpatchify is "not attempted", as one that calls patchify's."""
    results = valid_gradescope(graded["gradescope", "borrowed", "own-user"]["results"])
    assert results["tests"][0]["output"].startswith("not attempted: patchify uses the course's own")
    assert results["score"] == 1


@pytest.mark.slow
def test_a_job_out_of_the_platforms_time_still_gets_its_results(tmp_path):
    """PrairieLearn shows nothing of a job it kills: when the budget is spent, the grader writes
    results.json itself (what is not graded a timeout), stops what it started, and ends."""
    need_sandbox()
    need_root()
    marker = "vitcourse-out-of-time-8e2a"
    slow = (f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', "
            f"'import time  # {marker}\\ntime.sleep(300)'])\ntime.sleep(300)\n")  # fmt: skip
    nb = json.loads(json.dumps(NB01))
    nb["cells"].insert(3, {"cell_type": "code", "metadata": {}, "outputs": [],
                           "execution_count": None, "source": slow})  # fmt: skip
    folder = bundles.build_prairielearn(["01_patches"], tmp_path / "grader", "me/x:1")
    root = tmp_path / "job"
    shutil.copytree(folder / "questions" / "vitcourse_01_patches" / "tests", root / "tests")
    _write(nb, root / "student" / "01_patches.ipynb")
    found = _run_script(folder / "entrypoint", "VITCOURSE_PRAIRIELEARN_ROOT", root, "own-user",
                        "--budget", "40")  # fmt: skip
    results = valid_prairielearn(found["results"])
    assert results["gradable"] and results["score"] == 0
    assert all(t["output"] == "timeout: the grading ran past the 40 s the platform gives it"
               for t in results["tests"])  # fmt: skip
    assert found["seconds"] < 70 and not processes_with(marker)
