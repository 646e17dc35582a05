/* The notebooks' questions answer in the book's page, with no kernel and no request leaving it
 * (vitcourse/quiz_page.py writes each question's HTML, its feedback hidden inside it).
 * A choice: choosing an option (a click, or the arrow keys in its group) shows that option's
 * feedback. A number or a shape: Check (or Enter) reads the answer as vitcourse.quiz.judge does
 * (a decimal comma is read as a point; a shape is its whole numbers), then shows the feedback of
 * the right answer, of the classic mistake it matches, or the nudge for any other. The feedback
 * is written into the question's role="status" element, which a screen reader announces. */
(function () {
  "use strict";

  function show(quiz, note, right) {
    const status = quiz.querySelector(".vitcourse-quiz-feedback");
    // A right answer's feedback opens with its own "Right:"; a wrong one gets the page's words.
    status.textContent = "";
    const mark = document.createElement("strong");
    mark.textContent = right ? "✓ " : "✗ " + quiz.dataset.wrongWord + " ";
    status.appendChild(mark);
    const text = document.createElement("span");
    text.innerHTML = note ? note.innerHTML : "";
    status.appendChild(text);
    quiz.classList.toggle("vitcourse-quiz-right", right);
    quiz.classList.toggle("vitcourse-quiz-wrong", !right);
  }

  function number(text) {
    let t = text.trim().replace(/[\s\u00a0]/g, "");
    if ((t.match(/,/g) || []).length === 1 && t.indexOf(".") < 0) t = t.replace(",", ".");
    t = t.replace(/,/g, "");
    if (!/^[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?$/i.test(t)) return null;
    return parseFloat(t);
  }

  function shape(text) {
    const cleaned = text.toLowerCase().replace("torch.size", "");
    if (/[^\d\s,x×*()[\].-]/.test(cleaned)) return null;
    const found = cleaned.match(/-?\d+(\.\d+)?/g);
    if (!found) return null;
    const values = found.map(Number);
    return values.every(Number.isInteger) ? values : null;
  }

  function same(kind, tolerance, a, b) {
    if (kind === "number") return Math.abs(a - b) <= tolerance + 1e-9 * Math.max(1, Math.abs(b));
    return a.length === b.length && a.every((v, i) => v === b[i]);
  }

  function check(quiz) {
    const kind = quiz.dataset.kind;
    const tolerance = parseFloat(quiz.dataset.tolerance) || 0;
    const input = quiz.querySelector("input[type=text]");
    if (!input.value.trim()) return;
    const given = kind === "number" ? number(input.value) : shape(input.value);
    const notes = quiz.querySelectorAll(".vitcourse-quiz-answers p");
    if (given === null) {
      show(quiz, quiz.querySelector("p[data-unread]"), false);
      return;
    }
    for (const note of notes) {
      if (note.dataset.value === undefined) continue;
      if (same(kind, tolerance, given, JSON.parse(note.dataset.value))) {
        show(quiz, note, note.dataset.right === "1");
        return;
      }
    }
    show(quiz, quiz.querySelector("p[data-otherwise]"), false);
  }

  function start() {
    document.querySelectorAll("div.vitcourse-quiz").forEach((quiz) => {
      if (quiz.dataset.kind === "choice") {
        quiz.querySelectorAll("input[type=radio]").forEach((option) => {
          option.addEventListener("change", () => {
            const note = quiz.querySelector(`p[data-for="${option.value}"]`);
            show(quiz, note, note.dataset.right === "1");
          });
        });
      } else {
        quiz.querySelector("button").addEventListener("click", () => check(quiz));
        quiz.querySelector("input[type=text]").addEventListener("keydown", (event) => {
          if (event.key === "Enter") check(quiz);
        });
      }
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
