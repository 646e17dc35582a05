"""Test-suite settings, at the top of the repository so they hold for `pytest notebooks/...` too.

Quick mode is set here, before nbmake starts any kernel: the kernels inherit this process's
environment, so every notebook runs with small data and few steps. Run
`VITCOURSE_QUICK=0 pytest notebooks/` to execute the notebooks in full mode instead.
The checks' progress file goes to a temporary folder.

Every notebook nbmake executes is marked `slow`, so `pytest -m "not slow"` is the quick loop.
Notebook 10 is skipped, with the reason, where requirements-extras.txt is not installed."""

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("VITCOURSE_QUICK", "1")
# The checks record each exercise's result for `vitcourse.checks.progress()`; the tests' results
# go to a file of their own, not to the learner's ~/.vitcourse/progress.json.
os.environ.setdefault(
    "VITCOURSE_PROGRESS", str(Path(tempfile.mkdtemp(prefix="vitcourse-tests-")) / "progress.json")
)


def pytest_collection_modifyitems(items):
    from tests.conftest import NEEDS_EXTRAS, missing_extras

    missing = missing_extras()
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
            # Notebook 10 needs requirements-extras.txt: skipped with the reason without it,
            # except under CI (which installs it), where the notebook's own error fails the run.
            if item.path.name in NEEDS_EXTRAS and missing and not os.environ.get("CI"):
                reason = f"needs {', '.join(missing)}: pip install -r requirements-extras.txt"
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True)
def _no_figure_outlives_its_test():
    """Close every matplotlib figure a test left open: one test's leftovers would otherwise count
    in another's `plt.get_fignums()` (which a test runs after depends on which are installed)."""
    yield
    import sys

    if "matplotlib.pyplot" in sys.modules:  # only where a test drew something
        sys.modules["matplotlib.pyplot"].close("all")
