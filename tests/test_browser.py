"""The explorers in a real browser: JupyterLab, headless Chromium, Run All, move a slider.

nbmake skips the explorer cells (nbclient can deadlock on them, jupyter/nbclient#312), so this is
the test that proves a widget renders. It starts JupyterLab on 127.0.0.1 (no token, a free port)
on a temporary copy of the notebooks, opens each notebook that builds an explorer in headless
Chromium driven by Playwright, runs all cells, and checks: every code cell ran, no cell ended in
an error, the widgets rendered, moving a slider redraws the figure, and the notebook's questions
are widgets whose options answer when chosen.

Needs Debian's `chromium` (`sudo apt-get install chromium`; Playwright's own browser download is
not used) and PyPI's `playwright` (in requirements.txt). Without Chromium the test is skipped,
except under CI (the `CI` variable set), where a missing browser fails the run. Run it alone:

    pytest tests/test_browser.py
"""

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXPLORER_NOTEBOOKS = [
    "01_patches.ipynb",
    "02_embeddings.ipynb",
    "03_attention.ipynb",
    "07_inside_a_vit.ipynb",
]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = pytest.mark.slow


def _need_browser():
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing = "PyPI's playwright (pip install -r requirements.txt)"
    else:
        missing = None if CHROMIUM else "Chromium (sudo apt-get install chromium)"
    if missing:
        message = f"the browser test needs {missing}"
        if os.environ.get("CI"):
            pytest.fail(message + "; under CI a missing browser is a failure")
        pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_lab(home: Path, names: list[str]):
    """A JupyterLab server (quick mode, no token, a free port) on copies of the notebooks `names`
    in home/notebooks; yields (url, that folder). tests/test_slides_lab.py starts one too."""
    work = home / "notebooks"
    work.mkdir()
    for name in names:
        shutil.copy(ROOT / "notebooks" / name, work / name)
    # JupyterLab 4 renders only the cells in view; render them all, so every output is in the DOM.
    settings = home / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)
    (settings / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))
    port = _free_port()
    env = dict(
        os.environ,
        VITCOURSE_QUICK="1",
        JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
    )
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1",
               f"--port={port}", "--IdentityProvider.token=", "--ServerApp.password=",
               "--allow-root", f"--ServerApp.root_dir={work}"]  # fmt: skip
    log = open(home / "lab.log", "w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail(f"JupyterLab did not start: {(home / 'lab.log').read_text()[-2000:]}")
        yield url, work
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a copy of the explorer notebooks; yields (url, folder)."""
    _need_browser()
    with running_lab(tmp_path_factory.mktemp("lab"), EXPLORER_NOTEBOOKS) as running:
        yield running


@pytest.fixture(scope="module")
def page(lab):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        yield page
        browser.close()


@pytest.mark.parametrize("name", EXPLORER_NOTEBOOKS)
def test_explorer_renders_and_redraws(lab, page, name):
    url, work = lab
    page.goto(f"{url}/lab/tree/{name}?reset")
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    # The kernel is ready when the status bar says so (a fresh environment's first kernel can take
    # a minute to start: Python compiles every module it imports for the first time).
    page.locator(".jp-StatusBar-Widget", has_text="Idle").first.wait_for(timeout=180_000)
    panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(timeout=60_000)
    prompts = panel.locator(".jp-CodeCell .jp-InputPrompt")
    deadline = time.monotonic() + 600
    clicked = 0
    while time.monotonic() < deadline:  # done when every prompt holds a number: [7]:
        texts = prompts.all_inner_texts()
        if texts and all(t.strip()[1:-2].isdigit() for t in texts):
            break
        if all(t.strip() == "[ ]:" for t in texts) and clicked < 3:  # nothing started yet
            panel.locator(".jp-Cell").first.click()  # the notebook has the focus
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
            clicked += 1
            time.sleep(20)  # give it time to start before asking again
        time.sleep(1)
    else:
        shot = work.parent / f"{name}.png"
        page.screenshot(path=str(shot))
        pytest.fail(
            f"{name}: cells still running or never run after 10 minutes ({clicked} clicks on "
            f"Run All Cells): {texts}; screenshot {shot}"
        )

    # The widgets rendered: the explorer's sliders are there, and no widget failed to display.
    explorer = panel.locator(".widget-interact").last
    explorer.locator("img").first.wait_for(timeout=60_000)
    assert "Error displaying widget" not in panel.inner_text()
    # No cell ended in an error (as shown; the saved file is checked below too).
    errors = [
        t for t in panel.locator(".jp-OutputArea-child").all_inner_texts() if "Traceback" in t
    ]
    assert not errors, f"{name}: {errors[0][:2000]}"

    # The quiz is widgets here (the book shows HTML): one radio group a choice, and choosing an
    # option shows its feedback at once.
    from vitcourse.quiz.questions import questions

    asked = questions(Path(name).stem).values()
    radios = panel.locator(".widget-radio-box")
    assert radios.count() == sum(q.kind == "choice" for q in asked), name
    assert "✗ Not quite." not in panel.inner_text() and "✓ Right:" not in panel.inner_text()
    radios.last.locator("input").first.click()
    panel.get_by_text(re.compile(r"^(✓|✗ Not quite\.)$")).first.wait_for(timeout=30_000)

    # Moving a slider redraws the figure.
    before = explorer.locator("img").first.get_attribute("src")
    explorer.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        images = explorer.locator("img")
        if images.count() and images.first.get_attribute("src") != before:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"{name}: moving the slider did not redraw the figure")

    # The file saved from the browser agrees: every code cell ran, none holds an error.
    page.keyboard.press("Control+s")
    deadline, code = time.monotonic() + 30, None
    while time.monotonic() < deadline:
        try:  # JupyterLab may be writing the file as we read it: read again
            saved = json.loads((work / name).read_text())
        except json.JSONDecodeError:
            time.sleep(0.5)
            continue
        code = [c for c in saved["cells"] if c["cell_type"] == "code"]
        if any(c["execution_count"] for c in code):
            break
        time.sleep(0.5)
    assert code is not None, f"{name}: the saved notebook could not be read"
    assert all(c["execution_count"] for c in code), f"{name}: a code cell did not run"
    assert not [o for c in code for o in c["outputs"] if o["output_type"] == "error"]
