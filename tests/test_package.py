"""The wheel that Colab and Kaggle install (`pip install vitcourse @ git+...`) holds every module
of the package, subpackages included."""

import ast
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import vitcourse

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
    # The compiled catalogs ship too: an installed course (the platforms' bundles) speaks Spanish.
    names = set(zipfile.ZipFile(wheel).namelist())
    compiled = {p.relative_to(ROOT).as_posix() for p in (ROOT / "vitcourse").rglob("*.mo")}
    assert compiled and compiled <= names, sorted(compiled - names)


# --- the package's shape: layers without cycles, rooms a learner can read in one sitting ---------

PACKAGE = ROOT / "vitcourse"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of(path: Path, modules: set[str]) -> set[str]:
    """The vitcourse modules a module imports, anywhere in it (inside functions, and under
    `if TYPE_CHECKING:`: a cycle for the type hints alone is still one a reader must untangle)."""
    tree = ast.parse(path.read_text())
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
    above = {
        "vitcourse.vit",
        "vitcourse.training.loop",
        "vitcourse.checkpoints",
        "vitcourse.checks",
    }
    data = [m for m in graph if m.startswith("vitcourse.data.")]
    for module in ("vitcourse.environment", "vitcourse.training.scaling", *data):
        assert not graph[module] & above, module
    # torch, and the language its errors speak, only: every layer may use it
    assert graph["vitcourse.training.scaling"] <= {"vitcourse.language"}


def test_the_language_module_imports_no_course_module():
    """`vitcourse.language` (the standard library's gettext and nothing of ours) is the one module
    the model's files and the bottom layers may import besides their own: a learner who copies the
    model's files copies it too, or replaces `_` with `str`."""
    assert import_graph()["vitcourse.language"] == set()


def _lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def test_every_module_and_function_is_readable_in_one_sitting():
    """The house rules (CONTRIBUTING.md): a module a learner reads in one sitting (400 lines), no
    function a chapter of its own (65)."""
    too_long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text()
        if len(source.splitlines()) > 400:
            too_long.append(f"{_module_name(path)}: {len(source.splitlines())} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _lines(node) > 65:
                too_long.append(f"{_module_name(path)}.{node.name}: {_lines(node)} lines")
    assert not too_long, too_long


# The model a learner builds, in the order the notebooks build it: each file imports only the
# files before it, torch, and `vitcourse.language` (its errors in the learner's language).
LEARNER_MODULES = ["patching", "embedding", "attention", "block", "vit"]


def test_the_learners_model_imports_only_itself():
    graph = import_graph()
    for i, name in enumerate(LEARNER_MODULES):
        before = {f"vitcourse.{m}" for m in LEARNER_MODULES[:i]} | {"vitcourse.language"}
        assert graph[f"vitcourse.{name}"] <= before, (name, graph[f"vitcourse.{name}"] - before)


def _loaded_by(code: str) -> list[str]:
    """The vitcourse modules a fresh Python has loaded after running `code`."""
    ours = "sorted(m for m in sys.modules if m.split('.')[0] == 'vitcourse')"
    show = f"import sys; print(' '.join({ours}))"
    done = subprocess.run([sys.executable, "-c", f"{code}\n{show}"], capture_output=True,
                          text=True, check=True, cwd=ROOT)  # fmt: skip
    return done.stdout.split()


def test_reading_the_model_loads_no_machinery():
    """`import vitcourse.vit` (and so `.attention`, `.block`) loads the model's own files, not the
    data layer, the trainer, the grader or the bridges."""
    loaded = _loaded_by("import vitcourse.vit")
    model = {f"vitcourse.{m}" for m in LEARNER_MODULES}
    assert set(loaded) <= {"vitcourse", "vitcourse.language"} | model, loaded


def test_notebook_01s_first_check_loads_its_own_module_only():
    """`from vitcourse.checks import check_patchify` loads the checks' shared rooms (the harness,
    the registry and what they use), the patching check and `vitcourse.patching`: not the
    trainer, the data layer or the other checks."""
    loaded = _loaded_by("from vitcourse.checks import check_patchify")
    checks = {"harness", "answers", "hints", "crashes", "exercise", "registry", "patching"}
    expected = {"vitcourse", "vitcourse.patching", "vitcourse.checks", "vitcourse.language"}
    assert set(loaded) == expected | {f"vitcourse.checks.{m}" for m in checks}, loaded


def test_names_that_moved_still_import_from_their_old_home():
    """A learner's saved notebook keeps working: `from vitcourse.vit import preset_for` and
    `from vitcourse.pretraining import MaskedAutoencoder` find the names in their new files."""
    from vitcourse import deit, mae, presets, pretrained, vit
    from vitcourse.training import pretraining

    assert vit.preset_for is presets.preset_for and vit.PRESETS is presets.PRESETS
    assert (
        vit.DistilledViT is deit.DistilledViT and vit.load_pretrained is pretrained.load_pretrained
    )
    for name in pretraining._MOVED:  # pretraining itself imports one of them; the rest forward
        assert getattr(pretraining, name) is getattr(mae, name), name
    assert "random_masking" not in vars(pretraining)  # found through the forward, not a copy
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        vit.nothing  # noqa: B018


def _defined_in(path: Path) -> set[str]:
    """The names a module defines at its top level (in `if` and `try` blocks too): its functions,
    classes and assigned names, not the ones it imports."""
    names = set()

    def visit(body):
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
            elif isinstance(node, ast.If | ast.Try):
                visit(
                    node.body
                    + node.orelse
                    + [s for h in getattr(node, "handlers", []) for s in h.body]
                )

    visit(ast.parse(path.read_text()).body)
    return names


def test_the_package_imports_each_name_from_the_module_that_defines_it():
    """One home per name: inside the package, `from vitcourse.X import n` and `X.n` (after
    `from vitcourse import X`) name the module that defines `n`, never one that imports it or
    forwards it (`_MOVED`: the old homes kept for the notebooks and learners' own code)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    defined = {module: _defined_in(path) for module, path in paths.items()}

    def homeless(module: str, name: str) -> bool:
        return name not in defined[module] and f"{module}.{name}" not in paths

    through = []
    for path in sorted(paths.values()):
        tree = ast.parse(path.read_text())
        aliases = {}  # local name -> module, for `from vitcourse import vit` and `import ... as`
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in paths and node.level == 0:
                for a in node.names:
                    if f"{node.module}.{a.name}" in paths:
                        aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    elif homeless(node.module, a.name):
                        through.append(f"{_module_name(path)}: from {node.module} import {a.name}")
            if isinstance(node, ast.Import):
                aliases |= {a.asname: a.name for a in node.names if a.asname and a.name in paths}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                module = aliases.get(node.value.id)
                if module and homeless(module, node.attr):
                    through.append(f"{_module_name(path)}: {module}.{node.attr}")
    assert not through, through


def test_the_old_homes_forward_to_the_new_and_only_what_moved():
    """Every `_MOVED` name is found in its home, and the old home's documented names (`__all__`)
    are its own: the book's reference lists each name once."""
    import importlib

    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    olds = [m for m, p in paths.items() if "_MOVED = " in p.read_text()]
    assert {"vitcourse.vit", "vitcourse.data", "vitcourse.training"} <= set(olds), olds
    for old in olds:
        module = importlib.import_module(old)
        for name, home in module._MOVED.items():
            assert getattr(module, name) is getattr(
                importlib.import_module(f"vitcourse.{home}"), name
            )
            assert name in _defined_in(paths[f"vitcourse.{home}"]), (old, name, home)
        own = _defined_in(paths[old])
        assert set(getattr(module, "__all__", [])) <= own, (old, set(module.__all__) - own)
        with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
            module.nothing  # noqa: B018


# --- the house by audience: the learner's model on top, the machinery in subpackages ------------

# The old doors: files that stand for a module that moved into a subpackage, so that the notebooks'
# imports and the documented commands (`python -m vitcourse.train`) keep working.
OLD_DOORS = vitcourse.OLD_DOORS


def test_the_old_doors_are_the_files_that_stand_for_another_module():
    standing = {p.stem for p in PACKAGE.glob("*.py") if "sys.modules[__name__] = " in p.read_text()}
    assert standing == set(OLD_DOORS)


def test_the_top_level_holds_the_model_and_what_a_learner_reads_and_the_old_doors():
    """The folder shows the course: the model a learner builds and the tools the notebooks show at
    the top, the machinery in subpackages named for who uses it."""
    top = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"} - set(OLD_DOORS)
    assert set(LEARNER_MODULES) <= top
    assert len(top) <= 21, sorted(top)  # each model kind in a module of its own (CONTRIBUTING.md)
    subpackages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert subpackages == {"checks", "training", "data", "cli", "classroom", "bridges",
                           "translation"}  # fmt: skip
    for name in subpackages:  # each opens with a map of its rooms
        map_ = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        rooms = {p.stem for p in (PACKAGE / name).glob("*.py")} - {"__init__"}
        if name != "checks":  # its map lists the notebooks' checks, not its files
            assert all(f"    {room}" in map_ for room in rooms), (name, map_)


def test_the_old_doors_are_the_moved_modules_themselves():
    """`import vitcourse.datasets` gives `vitcourse.data.datasets` itself (same object: a
    monkeypatch or a saved notebook's import sees one module), and nothing in the package uses
    them: every import inside it names the module's home."""
    import importlib

    for old, home in OLD_DOORS.items():
        if old == "lightning":
            pytest.importorskip("lightning")
        if old == "tensorboard":
            pytest.importorskip("tensorboard")
        assert importlib.import_module(f"vitcourse.{old}") is importlib.import_module(
            f"vitcourse.{home}"
        ), old
    graph = import_graph()
    doors = {f"vitcourse.{old}" for old in OLD_DOORS}
    users = {m: graph[m] & doors for m in graph if graph[m] & doors and m not in doors}
    assert users == {}, users


def test_tab_completion_shows_the_names_the_subpackages_forward():
    import vitcourse.data
    import vitcourse.training

    assert {"load_dataset", "make_loaders", "load_photo"} <= set(dir(vitcourse.data))
    assert {"Trainer", "TrainConfig", "evaluate"} <= set(dir(vitcourse.training))
    assert {"ViTConfig", "VisionTransformer"} <= set(dir(vitcourse))


@pytest.mark.slow
def test_the_documented_commands_run_through_their_old_doors():
    """`python -m vitcourse.train` (the README's), `.pretrain`, `.grade` and `.student` still
    start their commands, now in `vitcourse.cli` and `vitcourse.classroom`."""
    for command in ("train", "pretrain", "grade", "student"):
        done = subprocess.run([sys.executable, "-m", f"vitcourse.{command}", "--help"],
                              capture_output=True, text=True, cwd=ROOT)  # fmt: skip
        assert done.returncode == 0, (command, done.stderr[-2000:])
        assert f"usage: python -m vitcourse.{command}" in done.stdout, (command, done.stdout)


def test_the_tests_mirror_the_package():
    """`tests/<subpackage>/test_<module>.py` for a module in a subpackage: a reader finds a room's
    tests where the room is. Names stay unique (pytest imports each test file by its name)."""
    tests = ROOT / "tests"
    files = [p for p in tests.rglob("test_*.py")]
    assert len({p.name for p in files}) == len(files)
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")} - {"checks"}
    for path in files:
        folder = path.parent.relative_to(tests).as_posix()
        module = path.stem.removeprefix("test_")
        if folder != ".":  # test_grade_sandbox.py: the grade module, in a sandbox
            assert folder in subpackages, path
            rooms = {p.stem for p in (PACKAGE / folder).glob("*.py")}
            assert any(module == r or module.startswith(f"{r}_") for r in rooms), path
    for sub in subpackages:  # every room of a subpackage has its tests beside it
        rooms = {p.stem for p in (PACKAGE / sub).glob("*.py")} - {"__init__"}
        tested = {p.stem.removeprefix("test_") for p in (tests / sub).glob("test_*.py")}
        tested |= {r for r in rooms for t in tested if t.startswith(f"{r}_")}
        elsewhere = TESTED_WITH.get(sub, {})
        assert rooms - tested == set(elsewhere), (sub, rooms - tested)
        for room, test in elsewhere.items():
            assert room in (tests / sub / test).read_text(), (room, test)


# Rooms of the grader tested in the file of the step they serve.
TESTED_WITH = {
    "classroom": {
        "grade_probe": "test_grade_worker.py",
        "grade_solutions": "test_grade_worker.py", "gradebook": "test_grade.py",
        "sandbox_memory": "test_sandbox.py", "sandbox_user": "test_sandbox.py",
        "sandbox_bubblewrap": "test_sandbox.py", "platforms": "test_autograder.py",
    },
}  # fmt: skip
