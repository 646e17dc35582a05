"""The book on a phone, a tablet and a desktop, in Debian's Chromium (the book of tests/test_book.py).

- At 390 and 800 pixels (a phone, a tablet held upright), in both editions, the menu button opens
  a chapter list the reader sees and can follow, and the contents button the page's sections
  (book/_static/navigation.js works round a bug of the pinned theme pair; without it both buttons
  do nothing below the desktop layout).
- At 1280 pixels the menu button hides the chapter list and shows it again.
- At 390 pixels no page is wider than the screen: nothing scrolls sideways but code.

    pytest tests/test_book_screens.py
"""

from __future__ import annotations

import pytest

from tests.test_book import book, browser, navigation, serve  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow

PAGES = ["index.html", "notebooks/03_attention.html", "es/notebooks/03_attention.html"]


def visible_button(page, kind: str):
    """The reader's menu ("primary") or contents ("secondary") button: the one on the screen."""
    buttons = page.locator(f".{kind}-toggle")
    shown = [buttons.nth(i) for i in range(buttons.count()) if buttons.nth(i).is_visible()]
    assert len(shown) == 1, f"{len(shown)} visible {kind} buttons"
    return shown[0]


@pytest.mark.parametrize("width", [390, 800])
@pytest.mark.parametrize("name", PAGES)
def test_the_menu_and_contents_buttons_open_what_they_say_on_a_phone_and_a_tablet(
    book,  # noqa: F811 (a fixture)
    browser,  # noqa: F811 (a fixture)
    width,
    name,
):
    context = browser.new_context(viewport={"width": width, "height": 800})
    page = context.new_page()
    address = serve(book)
    page.goto(address + name, wait_until="networkidle")
    assert not page.locator("nav.bd-docs-nav a.reference.internal").first.is_visible()

    visible_button(page, "primary").click()
    chapters = page.locator("dialog[open] nav.bd-docs-nav a.reference.internal")
    chapters.first.wait_for(state="visible", timeout=5000)
    assert chapters.count() >= 11, "the chapter list lists every notebook"
    target = chapters.filter(has_text="05").first  # a chapter, followed
    target.click()
    page.wait_for_load_state("networkidle")
    assert "05_vision_transformer" in page.url

    page.goto(address + name, wait_until="networkidle")
    if page.locator(".secondary-toggle").count():  # pages with sections have the button
        visible_button(page, "secondary").click()
        sections = page.locator("dialog[open] nav.page-toc a")
        sections.first.wait_for(state="visible", timeout=5000)
        assert sections.count() >= 3
        first = sections.first.get_attribute("href")
        sections.first.click()
        assert page.url.endswith(first)
    context.close()


def test_the_menu_button_hides_and_shows_the_chapter_list_on_a_desktop(book, browser):  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(serve(book) + "notebooks/03_attention.html", wait_until="networkidle")
    chapters = page.locator("#pst-primary-sidebar nav.bd-docs-nav")
    assert chapters.is_visible()
    visible_button(page, "primary").click()
    chapters.wait_for(state="hidden", timeout=5000)
    wide = page.locator("article").bounding_box()["width"]
    visible_button(page, "primary").click()
    chapters.wait_for(state="visible", timeout=5000)
    assert page.locator("article").bounding_box()["width"] < wide  # the text took the room
    context.close()


def test_no_page_is_wider_than_a_phone(book, browser):  # noqa: F811
    context = browser.new_context(viewport={"width": 390, "height": 800})
    address = serve(book)
    pages = navigation(book) + [f"es/{p}" for p in navigation(book / "es")]
    wide = []
    for name in pages:
        page = context.new_page()
        page.goto(address + name, wait_until="networkidle")
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > 390:
            wide.append(f"{name}: {width} px")
        page.close()
    context.close()
    assert not wide, wide
