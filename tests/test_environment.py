"""vitcourse.environment: quick mode, device choice, the report notebook 00 prints."""

import ast
from pathlib import Path

import pytest
import torch

import vitcourse
from vitcourse.environment import default_root, environment_report, pick_device, quick_mode


@pytest.mark.parametrize(
    "value, expected", [("1", True), ("yes", True), ("0", False), ("", False), ("false", False)]
)
def test_quick_mode_reads_the_variable(monkeypatch, value, expected):
    monkeypatch.setenv("VITCOURSE_QUICK", value)
    assert quick_mode() is expected


def test_pick_device_prefers_what_is_there(monkeypatch):
    monkeypatch.delenv("VITCOURSE_DEVICE", raising=False)
    expected = (
        "cuda"
        if torch.cuda.is_available()
        else ("mps" if torch.backends.mps.is_available() else "cpu")
    )
    assert pick_device().type == expected
    assert pick_device("cpu") == torch.device("cpu")
    monkeypatch.setenv("VITCOURSE_DEVICE", "cpu")
    assert pick_device() == torch.device("cpu")


def test_pick_device_refuses_a_missing_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="'cuda' was asked for.*no CUDA GPU"):
        pick_device("cuda")


def test_environment_report_names_versions_and_device():
    report = environment_report()
    assert report["torch"] == torch.__version__
    assert report["device"].split(" ")[0] == pick_device().type
    assert int(report["torch threads"]) == torch.get_num_threads()


def test_default_root_is_the_repos_data_folder_or_the_variable(monkeypatch, tmp_path):
    monkeypatch.delenv("VITCOURSE_DATA", raising=False)
    assert default_root() == Path(__file__).resolve().parent.parent / "data"
    monkeypatch.setenv("VITCOURSE_DATA", str(tmp_path))
    assert default_root() == tmp_path


def _imports_of(path: Path) -> set[str]:
    """The vitcourse modules a module imports, anywhere in it (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vitcourse"):
            if node.module == "vitcourse":  # from vitcourse import attention, block, ...
                found.update(f"vitcourse.{alias.name}" for alias in node.names)
            else:
                found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("vitcourse."))
    return found


def test_the_package_has_no_import_cycle():
    package = Path(vitcourse.__file__).parent
    graph = {
        f"vitcourse.{p.stem}": _imports_of(p) for p in package.glob("*.py") if p.stem != "__init__"
    }
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
    # The layering the style guide asks for: environment and data import no model piece.
    assert graph["vitcourse.environment"] == set()
    assert graph["vitcourse.data"] == {"vitcourse.environment"}
