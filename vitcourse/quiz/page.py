"""How a quiz looks: widgets in JupyterLab, HTML that answers in the book's page, text elsewhere.

`vitcourse.quiz.quiz` returns a `QuizView`; the notebook shows it as the richest form its front end
can: JupyterLab draws the widgets (ipywidgets), the book (which has no kernel) the HTML, whose
answers `book/_static/quiz.js` checks in the page, with no request leaving it. The HTML carries
every feedback, hidden until a choice is made: the book is the teacher's edition, and a student's
notebook holds none of it in its source.

Each question is a `<div class="vitcourse-quiz">`: a choice's options are radio inputs in a
fieldset whose legend is the question (the arrow keys choose, a screen reader reads the legend and
the option); a number's or shape's answer is a text input with its label and a Check button. The
feedback is written into a `role="status"` element, which a screen reader announces.
"""

from __future__ import annotations

import html
import json
import re

from vitcourse.language import N_, _
from vitcourse.quiz.questions import LETTERS, WRONG, Question, judge, read_number, read_shape

HAND_IN = N_("To hand it in, write it in the cell: {entry}")
# Written once here, not inside an f-string, whose `{...}` Babel's extraction does not read.
YOUR_ANSWER, CHECK, PREDICT = N_("Your answer"), N_("Check"), N_("predict, then run")
EXPECTS = {
    "number": N_("a number"),
    "shape": N_("a shape, such as (2, 5, 5)"),
}


def inline(text: str) -> str:
    """A question's text as HTML: escaped, `code` in backticks as <code>."""
    parts = re.split(r"`([^`]*)`", text)
    return "".join(
        f"<code>{html.escape(part)}</code>" if i % 2 else html.escape(part)
        for i, part in enumerate(parts)
    )


def _value(question: Question, value) -> str:
    """An answer as the page's data holds it: JSON, a whole number without its ".0"."""
    if question.kind == "shape":
        return json.dumps(list(value))
    return json.dumps(int(value) if value == int(value) else value)


def _entry(question: Question, given) -> str:
    """The dictionary entry that hands an answer in: `"sqrt_d": "b"`, `"tokens": 196`."""
    if question.kind == "choice":
        return f'"{question.id}": "{str(given).strip().lower().rstrip(")").strip()}"'
    read = read_number(given) if question.kind == "number" else read_shape(given)
    if read is None:
        return f'"{question.id}": ...'
    if question.kind == "number":
        return f'"{question.id}": {int(read) if read == int(read) else read}'
    return f'"{question.id}": {read}'


# --- the book: HTML and a little JavaScript ----------------------------------------------------


def question_html(question: Question) -> str:
    """One question as the book's page shows it (book/_static/quiz.js makes it answer)."""
    key = f"quiz-{question.notebook}-{question.id}"
    mark = _(PREDICT) if question.predict else ""
    head = f'<span class="vitcourse-quiz-id">{html.escape(question.id)}</span> '
    if mark:
        head += f'<span class="vitcourse-quiz-predict">{html.escape(mark)}</span> '
    asked = head + inline(_(question.ask))
    words = f'data-wrong-word="{html.escape(_(WRONG))}"'
    status = (
        f'<p class="vitcourse-quiz-feedback" role="status" aria-live="polite" id="{key}-fb"></p>'
    )
    if question.kind == "choice":
        options = "".join(
            f'<label><input type="radio" name="{key}" value="{LETTERS[i]}" '
            f'aria-describedby="{key}-fb"> {LETTERS[i]}) {inline(_(o.text))}</label>'
            for i, o in enumerate(question.options)
        )
        feedback = "".join(
            f'<p data-for="{LETTERS[i]}" data-right="{int(o.right)}">{inline(_(o.feedback))}</p>'
            for i, o in enumerate(question.options)
        )
        body = f"<fieldset><legend>{asked}</legend>{options}</fieldset>"
    else:
        notes = [(1, question.answer, question.right)]
        notes += [(0, wrong, why) for wrong, why in question.mistakes]
        feedback = "".join(
            f'<p data-right="{right}" data-value="{html.escape(_value(question, value))}">'
            f"{inline(_(why))}</p>"
            for right, value, why in notes
        )
        feedback += f'<p data-right="0" data-otherwise="1">{inline(_(question.otherwise))}</p>'
        feedback += (
            f'<p data-right="0" data-unread="1">{html.escape(_(EXPECTS[question.kind]))}</p>'
        )
        body = (
            f'<p class="vitcourse-quiz-ask" id="{key}-ask">{asked}</p>'
            f'<label>{html.escape(_(YOUR_ANSWER))} <input type="text" id="{key}-in" '
            f'aria-describedby="{key}-ask {key}-fb" autocomplete="off" spellcheck="false"></label> '
            f'<button type="button">{html.escape(_(CHECK))}</button>'
        )
    return (
        f'<div class="vitcourse-quiz" data-kind="{question.kind}" data-tolerance="{question.tolerance}" '
        f'id="{key}" {words}>{body}{status}'
        f'<div class="vitcourse-quiz-answers" hidden>{feedback}</div></div>'
    )


def quiz_html(questions: list[Question]) -> str:
    return "\n".join(question_html(q) for q in questions)


# --- slides and plain text ---------------------------------------------------------------------


def question_text(question: Question) -> str:
    """The question as Markdown, for a slide or a terminal: the question and its options."""
    lines = [f"**{question.id}**. {_(question.ask)}"]
    for i, option in enumerate(question.options):
        lines.append(f"{LETTERS[i]}) {_(option.text)}")
    return "\n\n".join(lines)


def answer_text(question: Question) -> str:
    """The right answer and why, for the speaker's notes."""
    if question.kind == "choice":
        option = question.options[LETTERS.index(question.right_letter)]
        return f"{question.right_letter}) {_(option.text)}\n\n{_(option.feedback)}"
    answer = question.answer
    shown = f"{answer:g}" if question.kind == "number" else str(answer)
    return f"{shown}\n\n{_(question.right)}"


# --- JupyterLab: widgets -----------------------------------------------------------------------


def _feedback_html(question: Question, given) -> str:
    verdict = judge(question, given)
    if not verdict.answered:
        return ""
    mark = "✓" if verdict.right else f"✗ {html.escape(_(WRONG))}"
    colour = "#1a7f37" if verdict.right else "#b35900"
    entry = html.escape(_(HAND_IN).format(entry=_entry(question, given)))
    return (
        f'<div style="border-left:4px solid {colour};padding-left:8px">'
        f"<b>{mark}</b> {inline(verdict.feedback)}"
        f'<br><small style="opacity:0.8">{entry}</small></div>'
    )


def question_widget(question: Question, given=None):
    """One question as widgets: the question, its options (or a text box and Check), feedback."""
    import ipywidgets as widgets

    mark = f" <i>({_(PREDICT)})</i>" if question.predict else ""
    asked = widgets.HTML(f"<b>{html.escape(question.id)}</b>{mark}. {inline(_(question.ask))}")
    feedback = widgets.HTML(_feedback_html(question, given))
    if question.kind == "choice":
        # A radio button's label is plain text: `code` keeps its name, not its backticks.
        labels = [
            f"{LETTERS[i]}) {_(o.text).replace('`', '')}" for i, o in enumerate(question.options)
        ]
        chosen = judge(question, given)
        start = None
        if chosen.answered and isinstance(given, str) and given.strip().lower()[:1] in LETTERS:
            index = LETTERS.index(given.strip().lower()[:1])
            start = labels[index] if index < len(labels) else None
        control = widgets.RadioButtons(options=labels, value=start, layout={"width": "auto"})

        def chose(change):
            if change["new"] is not None:
                feedback.value = _feedback_html(question, change["new"][0])

        control.observe(chose, names="value")
        return widgets.VBox([asked, control, feedback])
    box = widgets.Text(
        value="" if given is None else str(given), placeholder=_(EXPECTS[question.kind])
    )
    button = widgets.Button(description=_(CHECK))

    def check(_button=None):
        feedback.value = _feedback_html(question, box.value)

    button.on_click(check)
    return widgets.VBox([asked, widgets.HBox([box, button]), feedback])


class QuizView:
    """What `quiz()` returns: widgets in JupyterLab, the book's HTML, text in a terminal."""

    def __init__(self, notebook: str, questions: list[Question], answers: dict):
        self.notebook, self.questions, self.answers = notebook, questions, answers

    def widget(self):
        import ipywidgets as widgets

        parts = [question_widget(q, self.answers.get(q.id)) for q in self.questions]
        return widgets.VBox(parts, layout={"border": "1px solid #ccc", "padding": "6px"})

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget()._repr_mimebundle_())
        bundle["text/html"] = quiz_html(self.questions)
        bundle["text/plain"] = repr(self)
        return bundle

    def __repr__(self) -> str:
        return "\n\n".join(question_text(q) for q in self.questions)
