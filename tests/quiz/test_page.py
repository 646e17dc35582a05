"""vitcourse.quiz.page: a quiz as widgets (JupyterLab), as the book's HTML with book/_static/quiz.js
(answered with the keyboard in Chromium, no request leaving the page, axe-core clean), and as
slides (book/decks.py)."""

from __future__ import annotations

import html
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import need
from vitcourse.language import speaking
from vitcourse.quiz import quiz
from vitcourse.quiz.page import answer_text, question_text, quiz_html

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_the_html_holds_each_question_in_a_vitcourse_quiz_with_its_feedback_hidden(sample):
    page = quiz_html(list(sample.values()))
    assert page.count('<div class="vitcourse-quiz"') == 4
    choice = page.split('<div class="vitcourse-quiz"')[1]
    assert "<fieldset><legend>" in choice and choice.count('type="radio"') == 3
    assert 'role="status"' in choice and "<code>√d</code>" in choice
    hidden = choice.split('class="vitcourse-quiz-answers" hidden>')[1]
    for option in sample["sqrt_d"].options:  # every option's feedback, hidden until chosen
        assert html.escape(option.feedback) in hidden
    number = page.split('<div class="vitcourse-quiz"')[2]
    assert 'data-kind="number"' in number and 'type="text"' in number and "<button" in number
    assert 'data-value="197"' in number and "data-otherwise" in number


def test_the_html_escapes_every_text(sample, monkeypatch):
    question = sample["sqrt_d"]
    sneaky = question.__class__(**{**question.__dict__, "ask": "<script>alert(1)</script> `<b>`"})
    page = quiz_html([sneaky])
    assert "<script>" not in page and "&lt;script&gt;" in page and "<code>&lt;b&gt;</code>" in page


def test_the_widgets_show_a_written_answers_feedback_and_a_chosen_ones(sample):
    view = quiz("99_sample", {"sqrt_d": "a", "tokens": None})
    bundle = view._repr_mimebundle_()
    assert {"application/vnd.jupyter.widget-view+json", "text/html", "text/plain"} <= set(bundle)
    box = view.widget()
    choice, number = box.children
    radio, feedback = choice.children[1], choice.children[2]
    assert radio.value.startswith("a)") and "softmax" in feedback.value and "✗" in feedback.value
    assert html.escape('"sqrt_d": "a"') in feedback.value  # how to hand it in
    radio.value = radio.options[1]  # the learner tries again
    assert "✓" in feedback.value and "variance d" in feedback.value
    text, button = number.children[1].children
    assert number.children[2].value == ""  # not answered: no feedback yet
    text.value = "197"
    button.click()
    assert "No cls token yet." in number.children[2].value
    assert html.escape('"tokens": 197') in number.children[2].value  # a number, not "197"


def test_a_slide_shows_the_question_and_the_notes_its_answer(sample):
    shown = question_text(sample["sqrt_d"])
    assert "Why divide by" in shown and "b) So the spread stays put." in shown
    assert "variance d" not in shown  # the answer is not on the slide
    assert answer_text(sample["sqrt_d"]).startswith("b) So the spread stays put.")
    assert answer_text(sample["tokens"]).startswith("196")
    assert answer_text(sample["scores"]).startswith("(2, 5, 5)")


def test_the_decks_give_each_question_a_slide_and_its_answer_to_the_notes(sample):
    import nbformat

    import book.decks as decks

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# 99 · Sample"),
        nbformat.v4.new_code_cell('quiz("99_sample", {"sqrt_d": None, "tokens": 196})'),
    ]
    cells = decks.quiz_slides(notebook).cells
    kinds = [c.metadata.get("slideshow", {}).get("slide_type") for c in cells[1:]]
    assert kinds == ["slide", "notes", "slide", "notes"]
    assert "So the spread stays put" in cells[1].source and "variance d" in cells[2].source


# --- in a browser: the book's page, answered with the keyboard ---------------------------------


def _page(folder: Path, body: str, language: str = "en") -> Path:
    static = ROOT / "book" / "_static"
    for name in ("quiz.js", "course.css"):
        shutil.copy(static / name, folder / name)
    page = folder / "quiz.html"
    page.write_text(
        f'<!doctype html><html lang="{language}"><head><meta charset="utf-8"><title>Quiz</title>'
        '<link rel="stylesheet" href="course.css"><script src="quiz.js"></script></head>'
        f"<body><main><h1>Quiz</h1>{body}</main></body></html>",
        encoding="utf-8",
    )
    return page


@pytest.fixture(scope="module")
def chromium():
    need("playwright.sync_api", "pip install -r requirements.txt")
    need("axe_playwright_python", "pip install -r requirements-book.txt")
    if not CHROMIUM:
        if os.environ.get("CI"):
            pytest.fail("Chromium is missing (sudo apt-get install chromium); CI needs it")
        pytest.skip("needs Chromium (sudo apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        yield browser
        browser.close()


def feedback(page, question: str) -> str:
    return page.inner_text(f"[id$='-{question}'] .vitcourse-quiz-feedback")


@pytest.mark.slow
@pytest.mark.parametrize("language", ["en", "es"])
def test_the_page_answers_by_keyboard_with_no_kernel_and_no_request(
    sample, chromium, tmp_path, language
):
    from axe_playwright_python.sync_playwright import Axe

    with speaking(language):
        page_file = _page(tmp_path, quiz_html(list(sample.values())), language)
    context = chromium.new_context()
    requests = []
    context.on("request", lambda r: requests.append(r.url))
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri())
    wrong = "Not quite." if language == "en" else "Todavía no."
    # A choice: Tab to the group, Space picks option a (wrong), the arrow key moves to b (right).
    page.focus("#quiz-99_sample-sqrt_d input[value=a]")
    page.keyboard.press("Space")
    assert feedback(page, "sqrt_d").startswith(f"✗ {wrong}")
    assert "That is the softmax's doing." in feedback(page, "sqrt_d")
    page.keyboard.press("ArrowDown")
    assert feedback(page, "sqrt_d") == "✓ Right: variance d."  # its own "Right:", no second
    # A number: type, Enter; a classic mistake gets its own feedback, any other the nudge.
    box = "#quiz-99_sample-tokens input[type=text]"
    page.focus(box)
    page.keyboard.type("197")
    page.keyboard.press("Enter")
    assert feedback(page, "tokens") == f"✗ {wrong} No cls token yet."
    page.fill(box, "12")
    page.keyboard.press("Enter")
    assert feedback(page, "tokens") == f"✗ {wrong} Count one side first."
    page.fill(box, "196")
    page.click("#quiz-99_sample-tokens button")
    assert feedback(page, "tokens") == "✓ Right: 14 × 14 = 196."
    page.fill("#quiz-99_sample-ratio input[type=text]", "0,5")  # a decimal comma
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")  # the Check button, reached by Tab
    assert feedback(page, "ratio").startswith("✓")
    page.fill("#quiz-99_sample-scores input[type=text]", "torch.Size([2, 5, 5])")
    page.click("#quiz-99_sample-scores button")
    assert feedback(page, "scores").startswith("✓")
    page.fill("#quiz-99_sample-scores input[type=text]", "B, T, T")
    page.click("#quiz-99_sample-scores button")
    assert re.match(rf"✗ {wrong} \S", feedback(page, "scores"))  # what a shape is
    assert errors == []
    assert all(url.startswith("file://") for url in requests), requests
    violations = Axe().run(page, options={"resultTypes": ["violations"]}).response["violations"]
    serious = [v["id"] for v in violations if v["impact"] in ("critical", "serious")]
    assert serious == []
    context.close()
