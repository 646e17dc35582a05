"""vitcourse.classroom.submissions: a class's folders walked, what is graded and what is not."""

import os
from pathlib import Path

import pytest

from vitcourse.classroom import sandbox
from vitcourse.classroom.submissions import find_submissions

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_find_submissions_reports_what_it_skips(tmp_path):
    (tmp_path / "ada").mkdir()
    (tmp_path / "ada" / "01_patches.ipynb").write_text("{}")
    (tmp_path / "ada" / "01_patches (1).ipynb").write_text("{}")
    os.utime(tmp_path / "ada" / "01_patches.ipynb", (1e9, 1e9))  # the older download
    (tmp_path / "ada" / "notes.txt").write_text("hello")
    (tmp_path / "ada" / ".DS_Store").write_text("")
    (tmp_path / "ada" / "__MACOSX").mkdir()
    (tmp_path / "ada" / "__MACOSX" / "01_patches.ipynb").write_text("")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "01_patches-Copy1.ipynb").write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "stray.ipynb").write_text("{}")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "cy").mkdir()
    (tmp_path / "cy" / "01_patches.ipynb").symlink_to(tmp_path / "bob" / "01_patches-Copy1.ipynb")
    (tmp_path / "cy" / "work").symlink_to(tmp_path / "bob")
    (tmp_path / "dee").symlink_to(tmp_path / "bob")
    students, skipped = find_submissions(tmp_path)
    assert {s: {n: p.name for n, p in h.items()} for s, h in students.items()} == {
        "ada": {"01_patches": "01_patches (1).ipynb"},  # the newest copy
        "bob": {"01_patches": "01_patches-Copy1.ipynb"},
        "cy": {},  # its links are not followed
        "empty": {},
    }
    assert sorted(skipped) == [
        ".hidden: hidden (its name starts with a dot) (expected SUBMISSIONS/<student>/)",
        "ada/.DS_Store: hidden (its name starts with a dot)",
        "ada/01_patches.ipynb: an older copy of 01_patches; graded ada/01_patches (1).ipynb",
        "ada/__MACOSX: a macOS archive folder",
        "ada/notes.txt: not a course notebook with exercises or a quiz",
        "cy/01_patches.ipynb: a link, not followed",
        "cy/work: a link, not followed",
        "dee: a link, not followed (expected SUBMISSIONS/<student>/)",
        "stray.ipynb: not a student folder (expected SUBMISSIONS/<student>/)",
    ]
    with pytest.raises(FileNotFoundError, match="expected a folder of student folders"):
        find_submissions(tmp_path / "missing")


def test_a_student_folder_is_walked_within_bounds(tmp_path):
    """A folder chain 1,500 deep or 3,000 files in a student's folder: walked without recursion,
    within MAX_DEPTH and MAX_ENTRIES, and said so; a name that is not UTF-8 is kept, escaped."""
    subs = tmp_path / "subs"
    deep = subs / "deep"
    deep.mkdir(parents=True)
    here = os.getcwd()
    os.chdir(deep)
    try:
        for _ in range(1500):
            os.mkdir("d")
            os.chdir("d")
    finally:
        os.chdir(here)
    (subs / "many").mkdir()
    for i in range(3000):
        (subs / "many" / f"{i}.txt").touch()
    os.mkdir(os.fsencode(subs) + b"/caf\xe9")
    teacher = (NOTEBOOKS / "01_patches.ipynb").read_text()
    (subs / "many" / "01_patches.ipynb").write_text(teacher)
    students, skipped = find_submissions(subs)
    assert set(students) == {"deep", "many", "caf\\xe9"}
    assert any("more than 8 folders deep" in s for s in skipped)
    assert any(s.startswith("many: more than 2000 files") for s in skipped)
    sandbox.remove_tree(deep)
    assert not deep.exists()
