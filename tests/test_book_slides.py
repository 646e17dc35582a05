"""The book's slide decks (book/decks.py), opened offline in Debian's Chromium on a 1280×720 screen.

The book is the one tests/test_book.py builds (or `VITCOURSE_BOOK_HTML`'s). Each notebook's page
links to its deck; each deck is opened with every request to another site refused, and paged
through with the space bar as a teacher would. On every slide: nothing asked of another site, no
console error, every figure loaded and described, no text clipped or scrolled sideways past the
slide's right edge, the slide number clear of reveal's arrows and of the text, and nothing
overflowing the screen: a slide taller than 1280×720 is shrunk to fit (book/_static/slides.js),
but never below `SMALLEST_FIT`, where its text would be too small to read from the back of a room;
a slide with room to spare gives it to its figures (grown to their column, or as far as slides.js
lets a figure grow). Every figure the notebook draws on a slide shown is found in its deck, and
reveal's speaker view shows the teacher's notes.

`VITCOURSE_SLIDE_SHOTS=folder` keeps a screenshot of three slides of notebook 01's deck there.

    pytest tests/test_book_slides.py
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from tests.test_book import book, browser, executed, serve  # noqa: F401 (fixtures)
from tests.test_slides import slide_type

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
SCREEN = {"width": 1280, "height": 720}
SMALLEST_FIT = 0.75  # a slide shrunk further holds too much: split it in the notebook
ROOM = 72  # a slide with more free height than this (a tenth) gives it to its figures
ELSEWHERE = re.compile(r"^(?!http://127\.0\.0\.1).*")

pytestmark = pytest.mark.slow

# What the current slide shows, read in the page: its position, how far slides.js shrank it, its
# box against the screen, and its figures (loaded or not, with their alt text).
CURRENT = """() => {
  const slide = Reveal.getCurrentSlide();
  const box = slide.getBoundingClientRect();
  let bottom = box.top;
  for (const child of slide.children) {
    if (!child.matches('aside.notes')) bottom = Math.max(bottom, child.getBoundingClientRect().bottom);
  }
  const images = [...slide.querySelectorAll('img')].map(i => ({
    src: i.src.slice(0, 80), loaded: i.complete && i.naturalWidth > 0, alt: i.alt,
    key: i.src.length + ':' + i.src.slice(-40)}));
  const clipped = [];  // text past the slide's right edge, or hidden or scrolled sideways in a box
  for (const el of slide.querySelectorAll('*')) {
    const style = getComputedStyle(el);
    const r = el.getBoundingClientRect();
    if (el.closest('aside.notes') || style.display === 'none' || !r.width || !r.height) continue;
    const sideways = style.overflowX !== 'visible' && el.scrollWidth > el.clientWidth + 1;
    const past = !el.children.length && el.textContent.trim() && r.right > box.right + 1;
    if (sideways || past) clipped.push(`${el.tagName}: ${el.textContent.trim().slice(0, 40)}`);
  }
  const overlaps = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  const number = document.querySelector('.reveal .slide-number');
  const arrows = [...document.querySelectorAll('.reveal .controls button')]
    .filter(b => b.getBoundingClientRect().width && getComputedStyle(b).display !== 'none');
  const covered = number ? arrows.filter(b => overlaps(number.getBoundingClientRect(),
    b.getBoundingClientRect())).map(b => b.className) : [];
  const texts = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);  // the number over text
  for (let node = texts.nextNode(); number && node; node = texts.nextNode()) {
    if (!node.textContent.trim() || node.parentElement.closest('aside.notes')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const box = node.parentElement.closest('.jp-InputArea-editor');  // a long cell scrolls in it
    const seen = r => !box || overlaps(r, box.getBoundingClientRect());
    const under = r => seen(r) && overlaps(number.getBoundingClientRect(), r);
    if ([...range.getClientRects()].some(under)) {
      covered.push(`text: ${node.textContent.trim().slice(0, 40)}`);
    }
  }
  // A figure left small on a slide with room: not grown to its column or to slides.js's limit.
  const room = 720 - (bottom - box.top) / Reveal.getScale();
  const grown = parseFloat(slide.dataset.grown) >= 1.5;
  const small = [...slide.querySelectorAll('img')].filter(i => i.naturalWidth
    && !i.closest('aside.notes') && i.clientWidth < i.parentElement.clientWidth - 2 && !grown);
  const {h, v} = Reveal.getIndices();
  return {where: `${h}/${v}`, fit: parseFloat(slide.dataset.fit || 'NaN'),
          room, small: small.map(i => i.alt.slice(0, 40)),
          top: box.top, bottom, right: box.right, images, clipped, covered,
          title: (slide.querySelector('h1, h2, h3') || {}).textContent || ''};
}"""


def deck_path(name: str) -> str:
    return f"slides/{Path(name).stem}.slides.html"


def shown_figures(notebook: dict) -> int:
    """The figures a deck shows: image outputs of cells not skipped."""
    return sum(
        any(mime.startswith("image/") for mime in output.get("data", {}))
        for cell in notebook["cells"]
        if cell["cell_type"] == "code" and slide_type(cell) not in ("skip", "notes")
        for output in cell.get("outputs", [])
    )


def page_through(context, address: str, deck: str) -> dict:
    """Open a deck and press space until its last step; what each slide showed."""
    page = context.new_page()
    errors, failed = [], []
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("response", lambda r: r.status >= 400 and failed.append(f"{r.status} {r.url}"))
    page.goto(address + deck, wait_until="networkidle")
    page.wait_for_function("() => window.Reveal && Reveal.isReady()")
    slides, steps = {}, 0
    while True:
        page.wait_for_timeout(60)  # images decode, slides.js fits the slide
        seen = page.evaluate(CURRENT)
        slides[seen["where"]] = seen
        if page.evaluate("() => Reveal.isLastSlide() && !Reveal.availableFragments().next"):
            break
        page.keyboard.press("Space")
        steps += 1
        assert steps < 400, f"{deck}: still paging after 400 presses"
    total = page.evaluate("() => Reveal.getTotalSlides()")
    page.close()
    return {"slides": slides, "errors": errors, "failed": failed, "total": total}


@pytest.fixture(scope="module")
def decks(book, browser):  # noqa: F811
    """Every deck of both editions paged through on a 1280×720 screen, offline; with what it asked
    elsewhere."""
    address = serve(book)
    context = browser.new_context(viewport=SCREEN)
    offsite = []
    context.route(ELSEWHERE, lambda route: (offsite.append(route.request.url), route.abort()))
    seen = {}
    for name in [*NOTEBOOKS, *(f"es/{n}" for n in NOTEBOOKS)]:  # both editions' decks
        offsite.clear()
        edition, notebook = name.rpartition("/")[::2]
        deck = f"{edition}/{deck_path(notebook)}" if edition else deck_path(notebook)
        seen[name] = {**page_through(context, address, deck), "offsite": list(offsite)}
    context.close()
    return seen


def test_every_notebook_page_links_to_its_deck(book):  # noqa: F811
    for name in NOTEBOOKS:
        page = (book / "notebooks" / Path(name).with_suffix(".html")).read_text()
        assert f'href="../{deck_path(name)}"' in page, f"{name}: its page has no link to its deck"
        assert (book / deck_path(name)).is_file(), f"{name}: no deck"


def test_every_deck_opens_offline_and_every_slide_fits_the_screen(decks):
    problems = []
    for name, deck in decks.items():
        for what in ("errors", "failed", "offsite"):
            if deck[what]:
                problems.append(f"{name}: {what}: {deck[what][:3]}")
        if len(deck["slides"]) != deck["total"]:
            problems.append(
                f"{name}: paged through {len(deck['slides'])} of {deck['total']} slides"
            )
        for where, slide in deck["slides"].items():
            label = f"{name}, slide {where} ({slide['title'][:40]!r})"
            if not slide["fit"] >= SMALLEST_FIT:
                problems.append(f"{label}: shrunk to {slide['fit']} to fit, below {SMALLEST_FIT}")
            if slide["bottom"] > SCREEN["height"] + 1 or slide["right"] > SCREEN["width"] + 1:
                problems.append(f"{label}: overflows the screen: {slide}")
            if slide["clipped"]:
                problems.append(f"{label}: clipped at its right edge: {slide['clipped'][:3]}")
            if slide["covered"]:
                problems.append(f"{label}: the slide number covers {slide['covered']}")
            if slide["small"] and slide["room"] > ROOM:
                free = f"{slide['room']:.0f} px free"
                problems.append(f"{label}: {free}, its figures not grown into it: {slide['small']}")
    assert not problems, "\n".join(problems)


def test_every_figure_is_in_its_deck_loaded_and_described(book, decks):  # noqa: F811
    problems = []
    for name, deck in decks.items():
        images = [i for slide in deck["slides"].values() for i in slide["images"]]
        edition, notebook = name.rpartition("/")[::2]
        html = book / edition if edition else book
        expected = shown_figures(executed(html, f"notebooks/{Path(notebook).with_suffix('.html')}"))
        if len(images) != expected:
            problems.append(f"{name}: {len(images)} figures on its slides, its notebook draws "
                            f"{expected} on slides shown")  # fmt: skip
        for image in images:
            if not image["loaded"]:
                problems.append(f"{name}: a figure did not load: {image['src']}")
            if len(image["alt"].split()) < 5:
                problems.append(f"{name}: a figure's alt text does not say what it shows")
    assert not problems, "\n".join(problems)


def test_the_speaker_view_shows_the_notes(book, browser, tmp_path):  # noqa: F811
    address = serve(book)
    context = browser.new_context(viewport=SCREEN)
    offsite = []
    context.route(ELSEWHERE, lambda route: (offsite.append(route.request.url), route.abort()))
    page = context.new_page()
    page.goto(address + deck_path("01_patches.ipynb"), wait_until="networkidle")
    page.wait_for_function("() => window.Reveal && Reveal.isReady()")
    notes = page.locator(".slides > section").first.locator("aside.notes").inner_text()
    assert len(notes.split()) >= 5, "the title slide carries no notes for the teacher"
    with page.expect_popup() as opened:
        page.keyboard.press("s")
    speaker = opened.value
    speaker.locator(".speaker-controls-notes").wait_for(timeout=10_000)
    speaker.wait_for_function(
        "expected => document.querySelector('.speaker-controls-notes').innerText.includes("
        "expected)",
        arg=notes.split("\n")[0][:40],
    )
    shots = os.environ.get("VITCOURSE_SLIDE_SHOTS")
    if shots:
        Path(shots).mkdir(parents=True, exist_ok=True)
        speaker.screenshot(path=str(Path(shots) / "speaker-view.png"))
    context.close()
    assert not offsite, offsite


def test_three_slides_as_a_class_sees_them(book, browser, tmp_path):  # noqa: F811
    """A screenshot of the title, an exercise and a figure of notebook 01 (kept where
    VITCOURSE_SLIDE_SHOTS says, to be looked at); each shows what it should."""
    address = serve(book)
    context = browser.new_context(viewport=SCREEN)
    page = context.new_page()
    page.goto(address + deck_path("01_patches.ipynb"), wait_until="networkidle")
    page.wait_for_function("() => window.Reveal && Reveal.isReady()")
    wanted = {"title": "01 · Patches", "exercise": "Exercise 1", "figure": None}
    found = {}
    while len(found) < len(wanted):
        seen = page.evaluate(CURRENT)
        for kind, heading in wanted.items():
            if kind in found:
                continue
            if (heading and heading in seen["title"]) or (
                heading is None and seen["images"] and seen["where"] != "0/0"
            ):
                page.wait_for_timeout(300)
                found[kind] = tmp_path / f"01-{kind}.png"
                page.screenshot(path=str(found[kind]))
        if page.evaluate("() => Reveal.isLastSlide()"):
            break
        page.keyboard.press("ArrowDown" if page.evaluate("() => Reveal.availableRoutes().down")
                            else "ArrowRight")  # fmt: skip
    context.close()
    assert set(found) == set(wanted), f"found only {sorted(found)}"
    shots = os.environ.get("VITCOURSE_SLIDE_SHOTS")
    if shots:
        for path in found.values():
            shutil.copy(path, Path(shots) / path.name)


def test_a_deck_prints_to_pdf_one_page_a_slide(book, browser, tmp_path):  # noqa: F811
    """reveal.js's print view (`?print-pdf`), as a teacher prints a handout: Chromium's PDF of it
    has a page for every slide (a fragment's steps print as one)."""
    address = serve(book)
    context = browser.new_context(viewport=SCREEN)
    context.route(ELSEWHERE, lambda route: route.abort())
    page = context.new_page()
    page.goto(address + deck_path("01_patches.ipynb") + "?print-pdf", wait_until="networkidle")
    page.wait_for_function("() => window.Reveal && Reveal.isReady()")
    slides = page.evaluate("() => Reveal.getTotalSlides()")
    pdf = page.pdf(width="1280px", height="720px", print_background=True)
    context.close()
    pages = len(re.findall(rb"/Type\s*/Page\b", pdf))
    assert pages == slides, f"the PDF has {pages} pages for {slides} slides"
