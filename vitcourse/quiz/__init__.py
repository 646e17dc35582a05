"""Check your understanding: a few questions on the *why* in every notebook, with feedback for each
wrong answer::

    questions   the questions as data (data/NN_name.json), checked when read; an answer judged
    page        how a quiz looks: widgets in JupyterLab, HTML for the book, text for slides

A notebook shows some of its questions with one call, whose dictionary holds the learner's
answers::

    quiz("03_attention", {"sqrt_d": None, "rows_sum": None})   # None: not answered yet

In JupyterLab each question is a widget: choose, see the feedback at once, try again. The answers
written in the dictionary are the ones handed in: the class grader reads them from the saved
notebook (`vitcourse.classroom.grade_quiz`), without running it. The book shows the same questions
as HTML that answers in the page (`page`, `book/_static/quiz.js`).

Why not jupyterquiz (on the package index), which renders questions from JSON with a feedback per
answer: its answers live only in the page, so nothing a learner chose survives "save, close, hand
in" for a grader to read (its own notebook on preserving responses says the feature is not
perfect in JupyterLab, which gives its JavaScript no way back to Python); its
text is not in our catalogs, so the Spanish edition would need a second copy of every question;
and the grader must judge an answer as the learner saw it judged: `judge` does it in Python for
the widgets and the grader, and `quiz.js` reads answers the same way in the book (tests/quiz
holds both to the same cases). What we need is small: this package and `quiz.js` are a few
hundred lines.
"""

from __future__ import annotations

from vitcourse.language import _
from vitcourse.quiz.questions import questions as notebook_questions


def quiz(notebook: str, answers: dict | None = None):
    """Show `notebook`'s questions named in `answers` (all of them if None), each with the
    feedback on the answer written there; in JupyterLab, widgets to try the others. The learner's
    answers are what the dictionary holds: write them there to hand them in."""
    from vitcourse.quiz.page import QuizView

    known = notebook_questions(notebook)
    if answers is None:
        answers = dict.fromkeys(known)
    if not isinstance(answers, dict):
        raise TypeError(
            "quiz: expected the answers as a dictionary {question: answer}, "
            f"got {type(answers).__name__}"
        )
    unknown = [name for name in answers if name not in known]
    if unknown:
        raise ValueError(
            _("{notebook} has no question {names}: its questions are {known}").format(
                notebook=notebook, names=", ".join(map(str, unknown)), known=", ".join(known)
            )
        )
    return QuizView(notebook, [known[name] for name in answers], answers)
