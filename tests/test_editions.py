"""Editions a class can pin: constraints.txt holds an exact version of every package the course's
requirement files name, and each pin is one the requirement allows (README, "For a class")."""

import re
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
FILES = [
    "requirements.txt",
    "requirements-teachers.txt",
    "requirements-extras.txt",
    "requirements-book.txt",
]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(path: Path) -> list[Requirement]:
    found = []
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("-r "):
            found += requirements(path.parent / line[3:].strip())
        elif line and not line.startswith("-"):
            found.append(Requirement(line))
    return found


def pins() -> dict[str, str]:
    pinned = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not an exact pin (name==version)"
            pinned[_canonical(name)] = version
    return pinned


def test_constraints_pin_every_required_package_to_a_version_it_allows():
    pinned = pins()
    for file in FILES:
        for requirement in requirements(ROOT / file):
            name = _canonical(requirement.name)
            assert name in pinned, f"constraints.txt does not pin {requirement.name} ({file})"
            assert requirement.specifier.contains(pinned[name], prereleases=True), (
                f"constraints.txt pins {requirement.name}=={pinned[name]}, which {file} "
                f"does not allow ({requirement})"
            )


def test_the_course_itself_is_not_pinned():
    assert "vitcourse" not in pins()  # installed from the checkout (-e .), whatever its state
