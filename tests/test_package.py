"""The wheel that Colab and Kaggle install (`pip install vitcourse @ git+...`) holds every module
of the package, subpackages included."""

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_built_wheel_holds_every_module_of_the_package(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "vitcourse", source / "vitcourse", ignore=shutil.ignore_patterns("__pycache__")
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        check=True,
    )
    (wheel,) = (tmp_path / "dist").glob("vitcourse-*.whl")
    packed = {name for name in zipfile.ZipFile(wheel).namelist() if name.endswith(".py")}
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "vitcourse").rglob("*.py")}
    assert "vitcourse/checks/__init__.py" in modules
    assert modules <= packed, sorted(modules - packed)


# --- the package's shape: layers without cycles, rooms a learner can read in one sitting ---------

PACKAGE = ROOT / "vitcourse"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of(path: Path, modules: set[str]) -> set[str]:
    """The vitcourse modules a module imports, anywhere in it (inside functions too), except
    under `if TYPE_CHECKING:`."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):  # imports for type hints only never run: leave them out
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            node.body = []
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vitcourse"):
            for alias in node.names:  # `from vitcourse import attention` imports a module
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("vitcourse"))
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {module: _imports_of(path, set(paths)) - {module} for module, path in paths.items()}


def test_the_import_graph_sees_subpackages():
    graph = import_graph()
    assert "vitcourse.checks.registry" in graph["vitcourse.checks.patching"]
    assert "vitcourse.patching" in graph["vitcourse.checks.patching"]


def test_the_package_has_no_import_cycle_subpackages_included():
    graph = import_graph()
    done, path = set(), []

    def visit(module):
        if module in path:
            cycle = path[path.index(module) :] + [module]
            raise AssertionError("import cycle: " + " -> ".join(cycle))
        if module in done or module not in graph:
            return
        path.append(module)
        for imported in graph[module]:
            visit(imported)
        path.pop()
        done.add(module)

    for module in graph:
        visit(module)


def test_the_bottom_layers_import_nothing_above_them():
    graph = import_graph()
    above = {"vitcourse.vit", "vitcourse.training", "vitcourse.checkpoints", "vitcourse.checks"}
    for module in ("vitcourse.environment", "vitcourse.scaling", "vitcourse.data"):
        assert not graph[module] & above, module
    assert graph["vitcourse.scaling"] == set()  # torch only: every layer may use it


def _lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def test_every_module_and_function_is_readable_in_one_sitting():
    """The house rules (STYLE.md): a module a learner reads in one sitting, no function a chapter
    of its own. vit.py, the whole model with its presets and weight converters, is the exception."""
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        if path.name != "vit.py" and len(source.splitlines()) > 400:
            too_long.append(f"{_module_name(path)}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _lines(node) > 65:
                too_long.append(f"{_module_name(path)}.{node.name}: {_lines(node)} lines")
    assert not too_long, too_long
