"""The notebooks as files: committed clean, runnable on a fresh machine, collected by nbmake.

nbmake itself executes each notebook (pytest collects `notebooks/` too, see pyproject.toml);
these tests check what execution cannot: that nothing is silently left out."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"
    assert NOTEBOOKS[0].name.startswith("00_")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_is_clean(path):
    nb = json.loads(path.read_text())
    dirty = [
        i
        for i, cell in enumerate(nb["cells"])
        if cell["cell_type"] == "code" and (cell.get("outputs") or cell.get("execution_count"))
    ]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs; strip them before committing"
    # jupyter_client maps "python3" to the running interpreter; other names fail on a fresh machine.
    assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.slow  # runs pytest in a subprocess
def test_every_notebook_is_collected_by_nbmake():
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "notebooks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    for path in NOTEBOOKS:
        assert f"notebooks/{path.name}" in result.stdout, f"{path.name} is not collected"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_explorers_are_backed_by_a_direct_call(path):
    """An explorer cell is skipped under nbmake: nbclient can deadlock on a cell that opens an
    ipywidgets `interactive` (jupyter/nbclient#312, seen here under load). So its logic must also
    run un-skipped: the same figure function, called directly in an earlier cell."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    for i, cell in enumerate(cells):
        source = "".join(cell["source"])
        if "_explorer(" not in source or "import" in source:
            continue
        assert "skip-execution" in cell["metadata"].get("tags", []), f"{path.name}: cell {i}"
        earlier = "".join(
            "".join(c["source"])
            for c in cells[:i]
            if "skip-execution" not in c["metadata"].get("tags", [])
        )
        assert "_figure(" in earlier, (
            f"{path.name}: no direct call of the explorer's figure function"
        )
