"""The live slideshow in a real browser: JupyterLab, jupyterlab-rise, headless Chromium.

A teacher presents a notebook as slides with jupyterlab-rise (requirements-teachers.txt): the RISE
button on the notebook's toolbar ("Render as Reveal Slideshow", Alt+R) builds Reveal.js slides
from the cells' slide marks, and the code cells still run on the slides. This test proves it
works for the course's notebook 01: it starts JupyterLab on 127.0.0.1 (as tests/test_browser.py
does, in quick mode) on a temporary copy of `notebooks/01_patches.ipynb`, and, in headless
Chromium driven by Playwright, does what a teacher does:

- opens the notebook, presses the RISE button, then the slideshow's full-screen button;
- starts at the title slide and presses Shift+Enter, cell after cell, as the lecture goes: the
  set-up cells (marked `skip`, hidden on the slides) run too, as Shift+Enter passes them;
- on the first slide whose code draws a figure, runs that cell (Ctrl+Enter, staying on the slide):
  its printed text and its figure (an <img>) appear on the slide shown;
- presses Space: the next slide is shown; Shift+Space: the figure's again, of which a screenshot
  is saved (its path is printed; a copy goes to the folder `VITCOURSE_SLIDE_SHOTS` names, if it
  is set); Space again, and Shift+Enter runs the cell RISE selected, the next slide's first code cell.

The targets come from the notebook's own marks (`metadata.slideshow.slide_type`); a notebook
without marks fails the test.

What jupyterlab-rise 0.43.1 does, which the test relies on: the button opens a panel right of the
notebook holding an iframe at /rise/<notebook>?activeCellIndex=N (the command palette's "Open as
Reveal Slideshow" opens the same page in a new browser tab). That page is a small JupyterLab of
its own: it loads the notebook from disk and connects to the notebook's kernel (one session per
path), so what runs there is not shown in the notebook's tab. Each slide is a
`<section id="slide-H-V">`, the one shown has the class `present`; `skip` cells stay in the page,
hidden (class `reveal-skip`), `notes` cells go to the speaker notes. Each cell keeps its index in
the notebook in `data-windowed-list-index`. Caveats: widgets do not render there (the page cannot
load the widget manager, @jupyter-widgets/jupyterlab-manager), so the explorers show as text; and
a slide is not laid out again when an output comes in, so a figure can run off the bottom of the
screen until the slide is shown again (Space, then Shift+Space).

Needs what tests/test_browser.py needs (Chromium, Playwright) and jupyterlab-rise
(`pip install -r requirements-teachers.txt`); without them the test is skipped, except under CI
(the `CI` variable set), where their absence fails it. Run it alone (under a minute):

    pytest tests/test_slides_lab.py -s
"""

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import need
from tests.test_browser import CHROMIUM, _need_browser, running_lab

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = "01_patches.ipynb"
DRAWS = ("plt.show()", "show_patches", "fig")  # a code cell that draws a figure
SLIDE = "section[id^='slide-']"  # a slide or sub-slide; the one shown also has .present

pytestmark = pytest.mark.slow


def slide_type(cell: dict) -> str | None:
    return cell["metadata"].get("slideshow", {}).get("slide_type")


def layout(cells: list[dict]) -> list[tuple[int, int, int] | None]:
    """Where RISE puts each cell: (slide, sub-slide, fragment), as in the ids of its sections
    (`slide-H-V`) and the fragment it is in (0: none); None for a `skip` or `notes` cell.

    As jupyterlab-rise 0.43.1 does it: the cells before the first one shown (not `skip`, not
    `notes`) are on the first slide, whatever their marks; a cell marked `-` (or unmarked) goes
    where the cell before it went, into its fragment too."""
    h = v = f = 0
    started = False
    where = []
    for cell in cells:
        kind = slide_type(cell) or "-"
        if started:
            if kind == "slide":
                h, v, f = h + 1, 0, 0
            elif kind == "subslide":
                v, f = v + 1, 0
            elif kind == "fragment":
                f += 1
        elif kind not in ("skip", "notes"):
            started = True
        where.append(None if kind in ("skip", "notes") else (h, v, f))
    return where


def targets(cells: list[dict]) -> tuple[int, str, str, int | None]:
    """From the notebook's marks: the first code cell shown that draws a figure (not in a
    fragment), its slide's id, the next slide's id and that slide's first code cell (or None)."""
    marked = [i for i, cell in enumerate(cells) if slide_type(cell)]
    if not marked:
        pytest.fail(
            f"{NOTEBOOK} has no slide marks (metadata.slideshow.slide_type): nothing to present",
            pytrace=False,
        )
    where = layout(cells)
    figure = next(
        (
            i
            for i, cell in enumerate(cells)
            if cell["cell_type"] == "code"
            and where[i]
            and where[i][2] == 0
            and any(d in "".join(cell["source"]) for d in DRAWS)
        ),
        None,
    )
    assert figure is not None, f"{NOTEBOOK}: no code cell on a slide draws a figure"
    here = where[figure][:2]
    later = [i for i in range(figure + 1, len(cells)) if where[i] and where[i][:2] != here]
    assert later, f"{NOTEBOOK}: no slide after the figure's (cell {figure})"
    following = where[later[0]][:2]
    code = [i for i in later if where[i][:2] == following and cells[i]["cell_type"] == "code"]
    return figure, section_id(here), section_id(following), (code or [None])[0]


def section_id(slide: tuple[int, int]) -> str:
    return f"slide-{slide[0]}-{slide[1]}"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab server on a copy of the notebook; yields (url, folder)."""
    _need_browser()
    need("jupyterlab_rise", "pip install -r requirements-teachers.txt")
    with running_lab(tmp_path_factory.mktemp("lab"), [NOTEBOOK]) as running:
        yield running


def poll(condition, timeout: float) -> bool:
    """Asks condition() until it is true, for up to `timeout` seconds; says whether it was."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


def wait_until(condition, timeout: float, what: str) -> None:
    if not poll(condition, timeout):
        pytest.fail(f"after {timeout:.0f} s: {what}", pytrace=False)


# The slideshow's state, read in its page: the slide shown, the active cell's index in the
# notebook, whether a cell is running ([*]), and each code cell's prompt.
STATE = """() => {
  const shown = [...document.querySelectorAll("section[id^='slide-'].present")].pop();
  const active = document.querySelector('.jp-Notebook .jp-Cell.jp-mod-active');
  const prompts = {};
  for (const cell of document.querySelectorAll('.jp-Notebook .jp-CodeCell')) {
    prompts[cell.dataset.windowedListIndex] =
      cell.querySelector('.jp-InputPrompt').innerText.trim();
  }
  return {
    slide: shown ? shown.id : null,
    active: active ? Number(active.dataset.windowedListIndex) : null,
    busy: Object.values(prompts).some(p => p.includes('*')),
    prompts,
    fullscreen: !!document.fullscreenElement,
  };
}"""


# How far below the bottom of the screen the slide shown ends, in pixels.
BELOW = """() => document.querySelector("section[id^='slide-'].present")
  .getBoundingClientRect().bottom - window.innerHeight"""


def settle(state, before: int, timeout: float = 180) -> None:
    """After Shift+Enter on cell `before`: waits until the active cell has moved on, nothing runs
    and the active cell has stayed put for a second (RISE selects a new slide's first code cell
    450 ms after the slide changes)."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = state()
        if now["active"] != last:
            last, since = now["active"], time.monotonic()
        if last != before and not now["busy"] and time.monotonic() - since > 1.0:
            return
        time.sleep(0.2)
    pytest.fail(f"Shift+Enter on cell {before} did not run it or move on", pytrace=False)


def ran(prompt: str | None) -> bool:
    return bool(prompt) and prompt.strip("[]: ").isdigit()


def done(state, index: int) -> bool:
    """Cell `index` has run (its prompt holds a number) and nothing runs now."""
    now = state()
    return ran(now["prompts"].get(str(index))) and not now["busy"]


def test_slideshow_runs_cells_and_moves_on(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    url, work = lab
    cells = json.loads((work / NOTEBOOK).read_text())["cells"]
    figure, figure_slide, next_slide, next_code = targets(cells)
    print(f"\nfigure: cell {figure} on {figure_slide}; next: {next_slide}, code cell {next_code}")
    started = time.monotonic()
    errors = []  # the browser console's errors, reported at the end

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(f"{url}/lab/tree/{NOTEBOOK}?reset")
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        # The kernel is ready when the status bar says so (a first start can take a minute).
        page.locator(".jp-StatusBar-Widget", has_text="Idle").first.wait_for(timeout=180_000)
        panel.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']").wait_for(
            timeout=60_000
        )

        # The RISE button (Alt+R): the slideshow opens in a panel, an iframe at /rise/.
        panel.locator(".jp-Toolbar-item[data-jp-item-name='RISE-button'] jp-button").click()
        iframe = page.locator("iframe[src*='/rise/']")
        iframe.wait_for(timeout=60_000)
        show = page.frame_locator("iframe[src*='/rise/']")
        show.locator(f"{SLIDE}.present").first.wait_for(timeout=120_000)
        frame = iframe.element_handle().content_frame()
        state = lambda: frame.evaluate(STATE)  # noqa: E731
        built = frame.evaluate(f'() => document.querySelectorAll("{SLIDE}").length')
        wanted = len({w[:2] for w in layout(cells) if w})
        assert built == wanted, f"RISE built {built} slides, the marks make {wanted}"
        assert state()["slide"] == "slide-0-0", f"the slideshow starts on {state()['slide']}"

        # Full screen, as a teacher presents (the slideshow panel's toolbar button).
        page.locator(".jp-Toolbar-item[data-jp-item-name='fullscreen'] jp-button").click()
        time.sleep(1)
        fullscreen = state()["fullscreen"]
        print(f"full screen: {fullscreen}")

        # From the top, Shift+Enter cell after cell (RISE:smart-exec: run, select the next cell,
        # show its slide; on a new slide RISE selects its first code cell), to the figure's cell.
        show.locator(".jp-Cell[data-windowed-list-index='0']").click()
        wait_until(lambda: state()["active"] == 0, 10, "the title cell is not selected")
        for _ in range(len(cells)):
            before = state()["active"]
            if before >= figure:
                break
            page.keyboard.press("Shift+Enter")
            settle(state, before)
        now = state()
        assert now["active"] == figure, f"Shift+Enter went from the top to {now['active']}"
        assert now["slide"] == figure_slide, f"cell {figure} selected, {now['slide']} shown"
        where = layout(cells)
        hidden = [i for i in range(figure) if not where[i] and cells[i]["cell_type"] == "code"]
        unrun = [i for i in hidden if not ran(now["prompts"].get(str(i)))]
        assert not unrun, f"Shift+Enter did not run the hidden (skip) code cells {unrun}"

        # Ctrl+Enter runs the figure's cell and stays: its text and figure appear on the slide.
        page.keyboard.press("Control+Enter")
        wait_until(lambda: done(state, figure), 180, f"cell {figure} (the figure) did not run")
        cell = show.locator(f"{SLIDE}.present .jp-CodeCell[data-windowed-list-index='{figure}']")
        outputs = cell.locator(".jp-OutputArea")
        outputs.locator("img").first.wait_for(state="visible", timeout=60_000)
        text = outputs.inner_text()
        assert "Traceback" not in text, f"cell {figure} failed on the slide:\n{text[:2000]}"
        if "print(" in "".join(cells[figure]["source"]):
            printed = outputs.locator("[data-mime-type='application/vnd.jupyter.stdout']")
            assert printed.first.inner_text().strip(), f"cell {figure} printed nothing"
        assert state()["slide"] == figure_slide, "running the cell moved the slideshow"
        time.sleep(1)
        below = frame.evaluate(BELOW)

        # Space: the next slide (past the figure slide's fragments, if it has any).
        for _ in range(1 + max(w[2] for w in layout(cells) if w)):
            page.keyboard.press("Space")
            if poll(lambda: state()["slide"] != figure_slide, 5):
                break
        now = state()
        assert now["slide"] == next_slide, f"Space went from {figure_slide} to {now['slide']}"

        # Shift+Space: back to the figure, laid out again for its output (jupyterlab-rise
        # 0.43.1 does not when an output comes in: it watches the classic Notebook's `.output`
        # elements, which JupyterLab has none of), for the screenshot.
        page.keyboard.press("Shift+Space")
        wait_until(lambda: state()["slide"] == figure_slide, 10, "Shift+Space did not go back")
        time.sleep(1)
        print(
            f"the figure's slide ends {below:.0f} px below the screen's bottom once the cell ran,"
            f" {frame.evaluate(BELOW):.0f} px once shown again (negative: above)"
        )
        shot = tmp_path / "rise_slide.png"
        (page if fullscreen else iframe).screenshot(path=str(shot))
        print(f"screenshot of {figure_slide}: {shot}")
        shots = os.environ.get("VITCOURSE_SLIDE_SHOTS")
        if shots:  # for a person to look at
            Path(shots).mkdir(parents=True, exist_ok=True)
            shutil.copy(shot, Path(shots) / "rise-slide.png")

        # On the next slide again, RISE selects its first code cell, and Shift+Enter runs it.
        page.keyboard.press("Space")
        wait_until(lambda: state()["slide"] == next_slide, 10, f"Space did not show {next_slide}")
        if next_code is not None:
            show.locator(f"{SLIDE}.present [data-windowed-list-index='{next_code}']").wait_for(
                state="visible", timeout=10_000
            )
            wait_until(
                lambda: state()["active"] == next_code,
                10,
                f"RISE did not select cell {next_code}, the first code cell on {next_slide}",
            )
            time.sleep(0.5)
            page.keyboard.press("Shift+Enter")
            wait_until(lambda: done(state, next_code), 180,
                       f"Shift+Enter on {next_slide} did not run cell {next_code}")  # fmt: skip
            result = show.locator(f"[data-windowed-list-index='{next_code}'] .jp-OutputArea")
            assert "Traceback" not in result.inner_text(), result.inner_text()[:2000]
        browser.close()

    unique = sorted({e.splitlines()[0][:160] for e in errors})
    print(f"{len(errors)} console errors ({len(unique)} distinct):", *unique, sep="\n  ")
    print(f"slideshow test: {time.monotonic() - started:.0f} s")
