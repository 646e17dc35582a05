"""A class's submissions, as a teacher collects them: one folder per student under SUBMISSIONS,
`SUBMISSIONS/<student>/01_patches.ipynb`, ...

A file is matched to a course notebook by its name, or by its two-digit number when a download
renamed it (`01_patches (1).ipynb`); of several copies the newest is graded. Links are never
followed, hidden files are reported, not graded, and a student's folder is looked into only so
deep and so wide (`MAX_DEPTH`, `MAX_ENTRIES`), each notebook read up to `MAX_NOTEBOOK_BYTES`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from vitcourse.classroom import gradebook
from vitcourse.classroom.grading import match_notebook
from vitcourse.language import _

MAX_NOTEBOOK_BYTES = 100 * 2**20
MAX_DEPTH = 8  # folders within a student's folder that are looked into
MAX_ENTRIES = 2_000  # files and folders looked at in one student's folder


def _skip_reason(path: Path) -> str | None:
    """Why a file or folder in SUBMISSIONS is not graded, or None."""
    if path.is_symlink():
        return _("a link, not followed")
    if path.name.startswith("."):
        return _("hidden (its name starts with a dot)")
    if path.name == "__MACOSX":
        return _("a macOS archive folder")
    return None


def find_submissions(root: Path) -> tuple[dict[str, dict[str, Path]], list[str]]:
    """Walk SUBMISSIONS: ({student: {notebook: path}}, [what was skipped, and why]).

    Links are never followed. Where a student's folder holds several copies of one notebook
    (`01_patches.ipynb`, `01_patches (1).ipynb`, an `old/` folder), the most recently modified
    one is graded and the others are reported."""
    if root.is_symlink() or not root.is_dir():
        raise FileNotFoundError(f"expected a folder of student folders, got {root}")
    students: dict[str, dict[str, Path]] = {}
    skipped = []
    for entry in sorted(root.iterdir()):
        why = _skip_reason(entry) or (None if entry.is_dir() else _("not a student folder"))
        if why:
            skipped.append(
                _("{name}: {why} (expected SUBMISSIONS/<student>/)").format(
                    name=entry.name, why=why
                )
            )
            continue
        copies = notebooks_in(entry, root, skipped)
        student = gradebook.student_name(entry.name)
        students[student] = {}
        for notebook, paths in sorted(copies.items()):
            newest = max(paths, key=lambda p: p.lstat().st_mtime)
            students[student][notebook] = newest
            for other in paths:
                if other != newest:
                    skipped.append(
                        _("{path}: an older copy of {notebook}; graded {newest}").format(
                            path=other.relative_to(root),
                            notebook=notebook,
                            newest=newest.relative_to(root),
                        )
                    )
    return students, skipped


def notebooks_in(folder: Path, root: Path, skipped: list[str]) -> dict[str, list[Path]]:
    """{notebook: [its copies]} in one student's folder, walked without recursion, links not
    entered, at most MAX_DEPTH folders deep and MAX_ENTRIES entries; what is not graded is added
    to `skipped`, with why."""
    copies: dict[str, list[Path]] = {}
    todo, seen = [(folder, 0)], 0
    while todo:
        here, depth = todo.pop()
        try:
            names = sorted(os.listdir(here))
        except OSError as e:
            skipped.append(
                _("{path}: cannot be read ({error})").format(
                    path=here.relative_to(root), error=type(e).__name__
                )
            )
            continue
        for name in names:
            path, seen = here / name, seen + 1
            if seen > MAX_ENTRIES:
                skipped.append(
                    _("{path}: more than {count} files; the rest were not looked at").format(
                        path=folder.relative_to(root), count=MAX_ENTRIES
                    )
                )
                return copies
            why, info = _skip_reason(path), path.lstat()
            if why is None and stat.S_ISDIR(info.st_mode):
                deep = depth >= MAX_DEPTH
                why = _("more than {count} folders deep").format(count=MAX_DEPTH) if deep else None
                if why is None:
                    todo.append((path, depth + 1))
                    continue
            notebook = match_notebook(name) if path.suffix == ".ipynb" else None
            if why is None and (notebook is None or not stat.S_ISREG(info.st_mode)):
                why = _("not a course notebook with exercises or a quiz")
            if why:
                skipped.append(f"{path.relative_to(root)}: {why}")
            else:
                copies.setdefault(notebook, []).append(path)
    return copies


def read_submission(path: Path) -> bytes:
    """A submission's bytes, never through a link, at most MAX_NOTEBOOK_BYTES."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(_("not a regular file"))
        data = f.read(MAX_NOTEBOOK_BYTES + 1)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise OSError(_("larger than {mb} MB").format(mb=MAX_NOTEBOOK_BYTES // 2**20))
    return data
