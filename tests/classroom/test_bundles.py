"""vitcourse.classroom.bundles: what a teacher uploads to Gradescope and PrairieLearn. (Grading
with them, in the platforms' layouts, is tested in test_autograder.py.)"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile

import pytest

from vitcourse.classroom import autograder, bundles
from vitcourse.classroom.grading import KERNEL_SECONDS
from vitcourse.classroom.platforms import PLATFORMS
from vitcourse.classroom.sandbox import STARTUP_SECONDS


def test_notebooks_are_picked_by_name_or_number():
    assert bundles.pick_notebooks(["01", "03_attention", "01_patches"]) == [
        "01_patches",
        "03_attention",
    ]
    assert bundles.pick_notebooks(None)[:2] == ["00_welcome_and_data", "01_patches"]  # 00: a quiz
    with pytest.raises(ValueError, match=r"--notebooks: 11 is not a course notebook.*01_patches"):
        bundles.pick_notebooks(["11"])


def test_the_gradescope_zip(tmp_path):
    made = bundles.build_gradescope(["01_patches", "03_attention"], tmp_path / "bundles.zip")
    with zipfile.ZipFile(made) as bundle:
        names = set(bundle.namelist())
        modes = {i.filename: i.external_attr >> 16 for i in bundle.infolist()}
        bundle.extractall(tmp_path / "source")
    # Gradescope runs setup.sh and run_autograder from the zip's top: both executable.
    for script in ("setup.sh", "run_autograder"):
        assert script in names and modes[script] & stat.S_IXUSR, script
    assert {
        "install.sh",
        "points.json",
        "edition.json",
        "course/pyproject.toml",
        "course/constraints.txt",
        "course/vitcourse/classroom/bundles.py",
        "course/data/FashionMNIST/raw/t10k-images-idx3-ubyte.gz",
    } <= names
    assert not any("__pycache__" in n for n in names)
    points = json.loads((tmp_path / "source" / "points.json").read_text())
    assert points == {  # a point an exercise, and one the quiz
        "01_patches": {"patchify": 1, "unpatchify": 1, "quiz": 1},
        "03_attention": {"attention": 1, "MultiHeadSelfAttention": 1, "quiz": 1},
    }
    assert autograder.read_points(tmp_path / "source" / "points.json") == points
    edition = json.loads((tmp_path / "source" / "edition.json").read_text())
    assert edition["version"] and edition["commit"]  # the tests run in a checkout
    setup = (tmp_path / "source" / "setup.sh").read_text()
    assert "bubblewrap" in setup and "util-linux" in setup and "--python 3.11" in setup


def test_the_prairielearn_folder(tmp_path):
    out = bundles.build_prairielearn(["03_attention"], tmp_path / "grader", "me/grader:1")
    assert "\nFROM python:3.11-slim" in (out / "Dockerfile").read_text()
    assert os.access(out / "entrypoint", os.X_OK) and (out / "course" / "vitcourse").is_dir()
    question = out / "questions" / "vitcourse_03_attention"
    info = json.loads((question / "info.json").read_text())
    assert info["gradingMethod"] == "External" and info["type"] == "v3"
    options = info["externalGradingOptions"]
    assert options["enabled"] and options["image"] == "me/grader:1"
    assert options["entrypoint"] == "/usr/local/bin/vitcourse-grade-prairielearn"
    assert 0 < options["timeout"] <= 600  # PrairieLearn's most
    # a notebook that takes all its time still leaves the checks some of PrairieLearn's
    limits = PLATFORMS["prairielearn"].limits
    assert (
        limits.notebook + KERNEL_SECONDS + STARTUP_SECONDS + 2 * limits.check < options["timeout"]
    )
    assert 'file-names="03_attention.ipynb"' in (question / "question.html").read_text()
    assert json.loads((question / "tests" / "points.json").read_text()) == {
        "03_attention": {"attention": 1, "MultiHeadSelfAttention": 1, "quiz": 1}
    }
    # the same question gets the same uuid each time (a course's questions must differ)
    again = bundles.build_prairielearn(["03_attention"], tmp_path / "again", "me/grader:1")
    assert json.loads((again / "questions/vitcourse_03_attention/info.json").read_text()) == info
    with pytest.raises(FileExistsError, match="expected a new or empty folder"):
        bundles.build_prairielearn(["03_attention"], out, "me/grader:1")


def test_the_scripts_pass_shellcheck(tmp_path):
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is not installed (.ci/run installs it)")
        pytest.skip("shellcheck is not installed (Debian: apt install shellcheck)")
    files = bundles.FILES
    scripts = [
        files / "install.sh",
        files / "gradescope" / "setup.sh",
        files / "gradescope" / "run_autograder",
        files / "prairielearn" / "entrypoint",
    ]
    done = subprocess.run(
        ["shellcheck", "--shell=bash", *map(str, scripts)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout


@pytest.mark.slow
def test_install_sh_resolves_against_this_environment(tmp_path):
    """setup.sh's and the Dockerfile's pip part, as a dry run here: the edition's constraints,
    requirements.txt and the bundled course resolve together, and the data lands for all users
    (apt and Python 3.11 itself are the platforms' part: shellcheck reads those lines)."""
    made = bundles.build_gradescope(["01_patches"], tmp_path / "bundles.zip")
    with zipfile.ZipFile(made) as bundle:
        bundle.extractall(tmp_path / "source")
    data = tmp_path / "data"
    done = subprocess.run(
        ["bash", str(tmp_path / "source" / "install.sh"), sys.executable, str(data), "--dry-run"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Would install" in done.stdout and "vitcourse-" in done.stdout
    assert (data / "FashionMNIST" / "raw").is_dir() and (data / "edition.json").exists()
    assert all(p.stat().st_mode & 0o004 for p in data.rglob("*"))


def test_a_bundle_needs_the_course_s_clone(tmp_path, monkeypatch):
    monkeypatch.setattr(bundles, "COURSE", tmp_path)
    with pytest.raises(FileNotFoundError, match="made from a clone of the course.*pyproject.toml"):
        bundles.build_gradescope(["01_patches"], tmp_path / "bundles.zip")


def test_a_platform_is_one_entry():
    """Each platform in the table has its bundle's builder and both commands, built from its
    entry: making the bundle, and grading in its layout with its points file and budget."""
    assert set(bundles.BUILDERS) == set(PLATFORMS)
    commands = autograder._parser()._subparsers._group_actions[0].choices
    for name, platform in PLATFORMS.items():
        assert name in commands and f"grade-{name}" in commands
        made = commands[name].parse_args([])
        assert made.out.name == platform.bundle
        assert ("image" in vars(made)) is (platform.image is not None)
        grading = commands[f"grade-{name}"].parse_args([])
        assert str(grading.root) == os.environ.get(platform.variable, platform.root)
    assert PLATFORMS["prairielearn"].budget == PLATFORMS["prairielearn"].timeout - 30
    assert PLATFORMS["gradescope"].budget is None
