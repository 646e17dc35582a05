"""docs/make_pictures.py: the README's pictures can be made again from the course's code."""

import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # it executes five notebooks (in quick mode)
def test_the_pictures_script_runs_and_makes_every_picture_the_readme_shows(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "docs" / "make_pictures.py"),
            "--out",
            str(tmp_path),
            "--quick",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    readme = (ROOT / "README.md").read_text() + (ROOT / "README.es.md").read_text()
    shown = [line for line in readme.splitlines() if "](docs/" in line and ".png" in line]
    assert shown, "the README shows no picture from docs/"
    for line in shown:
        name = line.split("](docs/")[1].split(")")[0]
        made = tmp_path / name
        assert made.exists(), f"the README shows docs/{name}, which the script does not make"
        assert (ROOT / "docs" / name).exists(), f"docs/{name} is not committed"
        with Image.open(made) as picture:
            assert picture.width >= 450 and picture.height >= 250, picture.size  # legible
        assert made.stat().st_size < 300_000  # small enough for a README
