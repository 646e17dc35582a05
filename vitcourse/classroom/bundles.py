"""The bundles a teacher uploads to a grading platform, each holding the course at this edition.

    python -m vitcourse.classroom.autograder gradescope --notebooks 01 03 --out autograder.zip
    python -m vitcourse.classroom.autograder prairielearn --notebooks 03 --out grader/

`build_gradescope` makes the zip Gradescope's "Autograder" upload takes (`setup.sh`,
`run_autograder`); `build_prairielearn` a folder to build PrairieLearn's grader image from
(`Dockerfile`, `entrypoint`) with an example question for each notebook (`questions/`). Both hold
the course itself at this edition (its package, data, requirements and `constraints.txt`),
`install.sh`, which installs it, and `points.json`, the points of each exercise (1 by default),
which a teacher may edit. Their scripts are in `vitcourse/classroom/platform_files/`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import uuid
import zipfile
from pathlib import Path

import vitcourse
from vitcourse.classroom import platforms
from vitcourse.classroom.grading import graded_by_notebook, match_notebook
from vitcourse.classroom.sandbox_bubblewrap import package_dir
from vitcourse.language import _

FILES = Path(__file__).resolve().parent / "platform_files"
COURSE = package_dir().parent  # the checkout the bundles copy the course from
SCRIPTS = ("install.sh", "setup.sh", "run_autograder", "entrypoint")  # executable in the bundles
COURSE_FILES = ("pyproject.toml", "README.md", "requirements.txt", "constraints.txt", "LICENSE")


def pick_notebooks(asked: list[str] | None) -> list[str]:
    """Course notebooks from names or numbers (`01`, `03_attention`); all that are graded if none."""
    if not asked:
        return list(graded_by_notebook())
    found = {a: match_notebook(a if a.endswith(".ipynb") else a + ".ipynb") for a in asked}
    unknown = [a for a, notebook in found.items() if notebook is None]
    if unknown:
        raise ValueError(
            f"--notebooks: {', '.join(unknown)} is not a course notebook with exercises or a quiz; "
            f"expected one of {', '.join(graded_by_notebook())} (or its number)"
        )
    return list(dict.fromkeys(found.values()))


def copy_course(target: Path) -> dict:
    """The course at this edition into `target`: the package (no caches), the data, what installs
    it. Returns the edition: the package's version and, from a git checkout, its commit."""
    from vitcourse.environment import default_root

    missing = [
        n
        for n in ("pyproject.toml", "requirements.txt", "constraints.txt")
        if not (COURSE / n).exists()
    ]
    if missing or not default_root().is_dir():
        raise FileNotFoundError(
            f"the bundles are made from a clone of the course (git clone "
            f"https://github.com/vitcourse/vitcourse), with its data; {COURSE} has no "
            f"{', '.join(missing) or 'data folder at ' + str(default_root())}"
        )
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(package_dir(), target / "vitcourse", ignore=ignore)
    shutil.copytree(default_root(), target / "data", ignore=ignore)
    for name in COURSE_FILES:
        if (COURSE / name).exists():
            shutil.copy2(COURSE / name, target / name)
    edition = {"version": vitcourse.__version__, "commit": None}
    git = ["git", "-C", str(COURSE)]
    try:
        commit = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            [*git, "status", "--porcelain", "--", "vitcourse", "data"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        edition["commit"] = commit + (" with local changes" if changed else "")
    except (OSError, subprocess.CalledProcessError):
        pass  # an installed course, not a checkout
    return edition


def _common(target: Path, notebooks: list[str]) -> None:
    """What both bundles hold: the course, install.sh, points.json and the edition."""
    edition = copy_course(target / "course")
    shutil.copy2(FILES / "install.sh", target / "install.sh")
    points = {nb: {name: 1 for name in graded_by_notebook()[nb]} for nb in notebooks}
    (target / "points.json").write_text(json.dumps(points, indent=2) + "\n")
    (target / "edition.json").write_text(json.dumps(edition) + "\n")


def build_gradescope(notebooks: list[str], out: Path) -> Path:
    """The zip for Gradescope's autograder upload: setup.sh and run_autograder at its top."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        _common(folder, notebooks)
        for name in ("setup.sh", "run_autograder"):
            shutil.copy2(FILES / "gradescope" / name, folder / name)
        out.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
            for path in sorted(folder.rglob("*")):
                if path.is_file():
                    info = zipfile.ZipInfo.from_file(path, path.relative_to(folder).as_posix())
                    info.external_attr = (0o755 if path.name in SCRIPTS else 0o644) << 16
                    bundle.writestr(info, path.read_bytes(), zipfile.ZIP_DEFLATED)
    return out


def build_prairielearn(notebooks: list[str], out: Path, image: str) -> Path:
    """A folder to build the grader's image from, and an example question per notebook."""
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(
            f"--out: expected a new or empty folder, got {out}, which holds files"
        )
    out.mkdir(parents=True, exist_ok=True)
    _common(out, notebooks)
    for name in ("Dockerfile", "entrypoint"):
        shutil.copy2(FILES / "prairielearn" / name, out / name)
    for name in ("install.sh", "entrypoint"):
        (out / name).chmod(0o755)  # whatever the installed package's copies kept
    for notebook in notebooks:
        question = out / "questions" / f"vitcourse_{notebook}"
        (question / "tests").mkdir(parents=True)
        (question / "info.json").write_text(
            json.dumps(
                question_info(notebook, image, platforms.PLATFORMS["prairielearn"].timeout),
                indent=2,
            )
            + "\n"
        )
        (question / "question.html").write_text(question_html(notebook))
        points = {notebook: {name: 1 for name in graded_by_notebook()[notebook]}}
        (question / "tests" / "points.json").write_text(json.dumps(points, indent=2) + "\n")
    return out


# What each platform's bundle is made by (`python -m vitcourse.classroom.autograder NAME`).
BUILDERS = {"gradescope": build_gradescope, "prairielearn": build_prairielearn}


# --- PrairieLearn's question ----------------------------------------------------------------


def question_info(notebook: str, image: str, timeout: int) -> dict:
    """A PrairieLearn question's info.json: graded externally, by `image`, within `timeout` s; its
    uuid is derived from the image and the notebook (the same on every build)."""
    return {
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"vitcourse/{image}/{notebook}")),
        "title": _("vitcourse notebook {notebook}").format(notebook=notebook),
        "topic": "Vision Transformers",
        "tags": ["vitcourse"],
        "type": "v3",
        "singleVariant": True,
        "gradingMethod": "External",
        "externalGradingOptions": {
            "enabled": True,
            "image": image,
            "entrypoint": "/usr/local/bin/vitcourse-grade-prairielearn",
            "timeout": timeout,
        },
    }


def question_html(notebook: str) -> str:
    """Its question.html: the notebook uploaded, the grader's results shown."""
    upload = _(
        "Upload your notebook <code>{notebook}.ipynb</code>. Its exercises are run on the\n"
        "  course's checks, with inputs you have not seen; each says what it found."
    )
    return (
        "<pl-question-panel>\n"
        f"  <p>{upload.format(notebook=notebook)}</p>\n"
        "</pl-question-panel>\n\n"
        f'<pl-file-upload file-names="{notebook}.ipynb"></pl-file-upload>\n\n'
        "<pl-submission-panel>\n"
        "  <pl-external-grader-results></pl-external-grader-results>\n"
        "  <pl-file-preview></pl-file-preview>\n"
        "</pl-submission-panel>\n"
    )
