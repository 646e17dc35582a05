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
    # And the notebooks' questions: `quiz()` reads them from the installed package.
    quizzes = {
        p.relative_to(ROOT).as_posix() for p in (ROOT / "vitcourse/quiz/data").glob("*.json")
    }
    assert len(quizzes) == 11 and quizzes <= names, sorted(quizzes - names)


# --- the package's shape: layers without cycles, rooms a learner can read in one sitting ---------

PACKAGE = ROOT / "vitcourse"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of(path: Path, modules: set[str]) -> set[str]:
    """The vitcourse modules a module imports, anywhere in it (inside functions, and under
    `if TYPE_CHECKING:`: a cycle for the type hints alone is still one a reader must untangle).
    Also the modules it reaches without an import statement: a dotted name after `import
    vitcourse` (`vitcourse.training.loop.Trainer` in a type hint), a module's full name in a string
    (`importlib.import_module("vitcourse.x")`), and the rooms in a front door's table."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vitcourse"):
            for alias in node.names:  # `from vitcourse import attention` imports a module
                child = f"{node.module}.{alias.name}"
                found.add(child if child in modules else node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("vitcourse"))
        elif isinstance(node, ast.Attribute) and (dotted := _dotted(node)):
            found |= {m for m in modules if dotted == m or dotted.startswith(f"{m}.")}
        elif isinstance(node, ast.Constant) and node.value in modules - {"vitcourse"}:
            found.add(node.value)  # not the catalogs' domain, "vitcourse"
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            prefix = ROOM_TABLES.get(getattr(node.targets[0], "id", None))
            if prefix is not None:
                strings = [n.value for n in ast.walk(node.value) if isinstance(n, ast.Constant)]
                found |= {f"{prefix}{s}" for s in strings if f"{prefix}{s}" in modules}
    return found


# Tables of modules imported by name when first needed: a front door's rooms, under this prefix.
# (Not the registry's CHECK_MODULES: the registry imports the checks to fill itself when asked for
# all of them, and each check registers itself at its top, the way a plugin does.)
ROOM_TABLES = {"_ROOMS": "vitcourse."}


def _dotted(node: ast.expr) -> str | None:
    """`vitcourse.a.b` for an attribute chain that starts at the name `vitcourse`, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name) and node.id == "vitcourse":
        return ".".join(["vitcourse", *reversed(parts)])
    return None


def import_graph() -> dict[str, set[str]]:
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {module: _imports_of(path, set(paths)) - {module} for module, path in paths.items()}


def test_the_import_graph_sees_subpackages():
    graph = import_graph()
    assert "vitcourse.checks.registry" in graph["vitcourse.checks.patching"]
    assert "vitcourse.patching" in graph["vitcourse.checks.patching"]


def test_the_import_graph_sees_dotted_names_strings_and_tables(tmp_path):
    """A module that reaches another through a type hint after `import vitcourse`, an
    `import_module` string or a front door's table imports it, for the cycle test too."""
    modules = {"vitcourse", "vitcourse.training", "vitcourse.training.loop", "vitcourse.presets"}
    hinted = tmp_path / "hinted.py"
    hinted.write_text("import vitcourse\ndef f(trainer: vitcourse.training.loop.Trainer): ...\n")
    assert "vitcourse.training.loop" in _imports_of(hinted, modules)
    named = tmp_path / "named.py"
    named.write_text('import importlib\nimportlib.import_module("vitcourse.presets")\n')
    assert _imports_of(named, modules) == {"vitcourse.presets"}
    door = tmp_path / "door.py"
    door.write_text('_ROOMS = {"preset": "presets", "other": "elsewhere"}\nx = "presets"\n')
    assert _imports_of(door, modules) == {"vitcourse.presets"}
    graph = import_graph()
    assert "vitcourse.data.loading" in graph["vitcourse.data"]  # its table of rooms
    assert "vitcourse.checks.mae" in graph["vitcourse.checks"]


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


def test_the_formatter_lays_out_the_package_but_a_few_tables():
    """The package reads as `ruff format` writes it (.ci/run checks that): the formatter is switched
    off only on the few tables whose alignment teaches, and a module meets the 400 lines below
    in that layout, not by switching the formatter off."""
    skipped = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "# fmt: skip" in line or "# fmt: off" in line
    ]
    assert len(skipped) <= 5, skipped


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


@pytest.mark.parametrize("module", ["vitcourse.cnn", "vitcourse.checkpoints"])
def test_the_other_models_and_their_files_load_no_trainer(module):
    """`import vitcourse.cnn` and `import vitcourse.checkpoints` (which reads every kind of model
    file) load the models and the data layer they size themselves by, not the trainer, the command
    lines or the grader: the data layer imports nothing of `training/`."""
    loaded = _loaded_by(f"import {module}")
    assert module in loaded
    machinery = [
        m
        for m in loaded
        if m.startswith(("vitcourse.training", "vitcourse.cli", "vitcourse.classroom"))
    ]
    assert machinery == [], machinery


def test_notebook_01s_first_check_loads_its_own_module_only():
    """`from vitcourse.checks import check_patchify` loads the checks' shared rooms (the harness,
    the registry and what they use), the patching check and `vitcourse.patching`: not the
    trainer, the data layer or the other checks."""
    loaded = _loaded_by("from vitcourse.checks import check_patchify")
    checks = {"harness", "answers", "hints", "crashes", "exercise", "registry", "patching"}
    expected = {"vitcourse", "vitcourse.patching", "vitcourse.checks", "vitcourse.language"}
    assert set(loaded) == expected | {f"vitcourse.checks.{m}" for m in checks}, loaded


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
    `from vitcourse import X`) name the module that defines `n`, never one that imports it
    (and no module but a front door forwards a name: tested below)."""
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


def test_the_front_doors_forward_each_name_to_its_home():
    """A subpackage's front door (`vitcourse.checks`, `.data`, `.training`, and `vitcourse` itself)
    finds each name of its `_ROOMS` table in the module that defines it, and nowhere else."""
    import importlib

    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    doors = [m for m, p in paths.items() if "_ROOMS = " in p.read_text()]
    assert set(doors) == {"vitcourse", "vitcourse.checks", "vitcourse.data", "vitcourse.training"}
    for door in doors:
        module = importlib.import_module(door)
        for name, home in module._ROOMS.items():
            assert getattr(module, name) is getattr(
                importlib.import_module(f"vitcourse.{home}"), name
            )
            assert name in _defined_in(paths[f"vitcourse.{home}"]), (door, name, home)
        with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
            module.nothing  # noqa: B018


def test_only_a_front_door_forwards_names():
    """A module-level `__getattr__` (PEP 562) lets a module answer for names it does not define: a
    subpackage's `__init__` may (its front door); any other module would be a second home."""
    forwarding = [
        _module_name(path)
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "__init__.py"
        and any(
            isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
            for node in ast.parse(path.read_text()).body
        )
    ]
    assert forwarding == []


# The notebooks in every edition: the teacher's and the student's, in English and in Spanish.
NOTEBOOK_FOLDERS = ("notebooks", "student", "es/notebooks", "es/student")


def _notebook_imports(folder: str):
    """(notebook, module, name) for every `from vitcourse... import name` in a folder's notebooks."""
    import json

    for path in sorted((ROOT / folder).glob("*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] != "code":
                continue
            lines = "".join(cell["source"]).splitlines()
            magic = ("%", "!")  # IPython's lines (%pip install): not Python
            code = "\n".join(
                line[: len(line) - len(line.lstrip())] + "pass"
                if line.lstrip().startswith(magic)
                else line
                for line in lines
            )
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("vitcourse"):
                    for alias in node.names:
                        yield f"{folder}/{path.name}", node.module, alias.name


@pytest.mark.parametrize("folder", NOTEBOOK_FOLDERS)
def test_the_notebooks_import_each_name_from_its_home_or_a_front_door(folder):
    """A learner who opens the module a notebook imports from finds the name there: the module
    that defines it, or a subpackage's front door (an `__init__` whose table names its room)."""
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    found = list(_notebook_imports(folder))
    assert len(found) > 100, folder  # the parse saw the notebooks' imports
    elsewhere = []
    for notebook, module, name in found:
        path = paths.get(module)
        assert path is not None, (notebook, module)  # no module that is not the package's
        if f"{module}.{name}" in paths or name in _defined_in(path):
            continue
        if path.name == "__init__.py":
            continue  # a front door (the test above checks its table)
        elsewhere.append(f"{notebook}: from {module} import {name}")
    assert elsewhere == []


def test_the_notebook_import_test_catches_a_second_home(tmp_path, monkeypatch):
    """The test above fails for `from vitcourse.vit import preset_for` (`vit` imports nothing of
    the presets) in a notebook."""
    import json

    folder = tmp_path / "notebooks"
    folder.mkdir()
    cell = {"cell_type": "code", "source": ["from vitcourse.vit import preset_for\n"]}
    (folder / "00.ipynb").write_text(json.dumps({"cells": [cell]}))
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    ((notebook, module, name),) = _notebook_imports("notebooks")
    assert (module, name) == ("vitcourse.vit", "preset_for")
    assert "preset_for" not in _defined_in(PACKAGE / "vit.py")


# --- the house by audience: the learner's model on top, the machinery in subpackages ------------

# The documented commands (`python -m vitcourse.train`): short files that run the module named.
COMMANDS = vitcourse.COMMANDS


def test_the_commands_are_the_only_files_that_stand_for_another_module():
    standing = {p.stem for p in PACKAGE.glob("*.py") if "sys.modules[__name__] = " in p.read_text()}
    assert standing == set(COMMANDS)


def test_the_top_level_holds_the_model_and_what_a_learner_reads_and_the_commands():
    """The folder shows the course: the model a learner builds and the tools the notebooks show at
    the top, the machinery in subpackages named for who uses it."""
    top = {path.stem for path in PACKAGE.glob("*.py")} - {"__init__"} - set(COMMANDS)
    assert set(LEARNER_MODULES) <= top
    assert len(top) <= 21, sorted(top)  # each model kind in a module of its own (CONTRIBUTING.md)
    subpackages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert subpackages == {"checks", "training", "data", "cli", "classroom", "bridges",
                           "translation", "quiz"}  # fmt: skip
    for name in subpackages:  # each opens with a map of its rooms
        map_ = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text()))
        rooms = {p.stem for p in (PACKAGE / name).glob("*.py")} - {"__init__"}
        if name != "checks":  # its map lists the notebooks' checks, not its files
            assert all(f"    {room}" in map_ for room in rooms), (name, map_)


def test_the_commands_are_the_modules_they_run():
    """`import vitcourse.train` gives `vitcourse.cli.train` itself (a monkeypatch sees one module),
    and nothing in the package imports a command's file: every import names the module's home."""
    import importlib

    for command, home in COMMANDS.items():
        assert importlib.import_module(f"vitcourse.{command}") is importlib.import_module(
            f"vitcourse.{home}"
        ), command
    graph = import_graph()
    files = {f"vitcourse.{command}" for command in COMMANDS}
    users = {m: graph[m] & files for m in graph if graph[m] & files and m not in files}
    assert users == {}, users


def test_tab_completion_shows_the_names_the_subpackages_forward():
    import vitcourse.data
    import vitcourse.training

    assert {"load_dataset", "make_loaders", "load_photo"} <= set(dir(vitcourse.data))
    assert {"Trainer", "TrainConfig", "evaluate"} <= set(dir(vitcourse.training))
    assert {"ViTConfig", "VisionTransformer"} <= set(dir(vitcourse))


@pytest.mark.slow
def test_the_documented_commands_run():
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
    subpackages = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
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


# Rooms tested in the file of the step they serve (the grader's), or through what uses them (the
# checks' shared rooms).
TESTED_WITH = {
    "checks": {  # the rooms every check uses, tested through the checks
        "harness": "test_registry.py",
        "exercise": "test_registry.py",
        "attention_slips": "test_attention_check.py",
    },
    "classroom": {
        "grade_probe": "test_grade_worker.py",
        "grade_solutions": "test_grade_worker.py",
        "gradebook": "test_grade.py",
        "sandbox_memory": "test_sandbox.py",
        "sandbox_user": "test_sandbox.py",
        "sandbox_bubblewrap": "test_sandbox.py",
        "sandbox_watch": "test_sandbox.py",
        "platforms": "test_autograder.py",
    },
}
