"""vitcourse.classroom.grade and the checks' registry: a class of realistic submissions, graded.

The slow test writes a class the way a teacher collects one: the reference answers, an untouched
student copy, classic wrong answers, an endless loop, a deleted check cell, a syntax error, and
stray files; then it runs `python -m vitcourse.grade` on it and reads what came out. The worker
that runs and checks each notebook has its own tests, case by case, in `test_grade_worker.py`.
"""

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import need, need_sandbox
from vitcourse import checks, language
from vitcourse.classroom import (
    autograder,
    grade,
    gradebook,
    platforms,
    sandbox,
    sandbox_cgroup,
    sandbox_disk,
    similarity,
)
from vitcourse.classroom.gradebook import Grade, summarise
from vitcourse.classroom.grading import exercises_by_notebook, match_notebook
from vitcourse.classroom.student import student_notebook
from vitcourse.translation.catalogs import package_template

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


@pytest.fixture(autouse=True)
def _english(monkeypatch):
    """Each test in English, and the language one chooses (`--language`) forgotten after it."""
    monkeypatch.setattr(language, "_chosen", None)
    monkeypatch.setenv("VITCOURSE_LANG", "en")  # and restored after it (set_language sets it)


def test_exercises_are_the_notebooks_check_cells():
    """The registry names, for each notebook, the exercises its check cells bind, in order,
    and each one's solution cell defines that name."""
    found = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        source = "\n".join("".join(c["source"]) for c in json.loads(path.read_text())["cells"])
        bound = re.findall(r"^(\w+) = check_\w+\(\1\)", source, flags=re.M)
        if bound:
            found[path.stem] = bound
        for name in bound:
            assert re.search(rf"^(def|class) {name}\b", source, flags=re.M), (path.name, name)
    assert exercises_by_notebook() == found
    assert len(checks.EXERCISES) == 17


def test_notebooks_are_matched_by_name_or_number():
    assert match_notebook("01_patches.ipynb") == "01_patches"
    assert match_notebook("01_patches (1).ipynb") == "01_patches"
    assert match_notebook("03-my-attention.ipynb") == "03_attention"
    assert match_notebook("00_welcome_and_data.ipynb") == "00_welcome_and_data"  # a quiz
    assert match_notebook("10_something.ipynb") == "10_bridges"
    assert match_notebook("11_more.ipynb") is None
    assert match_notebook("012_x.ipynb") is None


def test_summary_counts_and_common_mistakes():
    rows = [
        Grade("ada", "01_patches", "patchify", "passed"),
        Grade("bob", "01_patches", "patchify", "wrong", "patchify: x\nHint: A", "A"),
        Grade("cy", "01_patches", "patchify", "wrong", "patchify: y\nHint: A", "A"),
        Grade("dee", "01_patches", "patchify", "timeout", "ran past"),
        Grade("eve", "01_patches", "patchify", "error", "ValueError: <b>mine</b>"),
    ]
    text = summarise(rows, ["x.txt: not a student folder", "<i>.txt: hidden"])
    assert "| patchify | 01_patches | 1 of 5 | 2 | 0 | 1 | 1 |" in text
    assert "- **patchify** (2 students): A" in text
    assert "mine" not in text  # a student's own words are never a "common mistake"
    assert "- x.txt: not a student folder" in text and "- &lt;i&gt;.txt: hidden" in text


def test_reports_escape_what_students_wrote(tmp_path):
    rows = [
        Grade("=1+2", "01_patches", "patchify", "passed"),
        Grade("<b>bo</b>", "01_patches", "patchify", "error", "ValueError: <script>[x](y)"),
        Grade("<b>bo</b>", "01_patches", "unpatchify", "passed"),
        Grade("x;=1+2", "01_patches", "patchify", "error", "a\x1b]0;owned\x07\u202eb\nc"),
    ]
    gradebook.write_reports(rows, [], [], tmp_path)
    text = (tmp_path / "grades.csv").read_text()
    lines = text.splitlines()
    assert lines[0] == '"student","notebook","exercise","status","points","hint","flags"'
    assert lines[1].startswith('"\'=1+2","01_patches","patchify","passed",1,')
    assert '"x;=1+2"' in text  # quoted: a `;`-separated spreadsheet reads one cell, not a formula
    assert "\\x1b]0;owned\\x07\\u202eb c" in text  # escaped, on one line
    for path in tmp_path.rglob("*.*"):
        assert not re.search(
            r"[\x00-\x09\x0b-\x1f\x7f\u202a-\u202e\u2066-\u2069]", path.read_text()
        )
    feedback = (tmp_path / "feedback" / f"{gradebook.file_name('<b>bo</b>')}.md").read_text()
    assert "# Feedback for &lt;b&gt;bo&lt;/b&gt;" in feedback
    assert "ValueError: &lt;script&gt;\\[x\\](y)" in feedback
    with open(tmp_path / "gradebook.csv", newline="") as f:
        table = list(csv.reader(f))
    assert table == [
        ["student", "01_patches patchify", "01_patches unpatchify", "total"],
        ["<b>bo</b>", "0", "1", "1"],  # sorted by name
        ["'=1+2", "1", "0", "1"],
        ["x;=1+2", "0", "0", "0"],
    ]


def test_every_student_gets_a_file_of_their_own():
    names = ["ann smith", "ann_smith", "Ann_Smith", "ann.smith", "a" * 200, "a" * 201, "\udcff"]
    files = [gradebook.file_name(n) for n in names]
    assert len({f.lower() for f in files}) == len(names)  # on a disk that ignores case, too
    assert all(len(f) <= 80 and re.fullmatch(r"[\w.-]+", f) for f in files), files
    raw = ["caf\udce9", "caf\\xe9", "caf\u00e9", "\x1b[31mred"]  # bytes, a backslash, text, ESC
    shown = [gradebook.student_name(n) for n in raw]
    assert len(set(shown)) == len(raw) and all(s.isprintable() for s in shown), shown
    shown[0].encode("utf-8")  # writable anywhere


def test_alike_answers_are_listed():
    """Answers compared with names, comments and layout made uniform: a renamed copy is identical,
    the course's solution is named as such, different answers are not listed."""
    import inspect

    need("copydetect", "pip install -r requirements-teachers.txt")

    from vitcourse import patching

    mine = "def patchify(x, p):\n    B, C, H, W = x.shape  # mine\n    return x.reshape(B, -1, p)\n"
    copy = (
        "def patchify(img, size):\n    n, c, h, w = img.shape\n    return img.reshape(n, -1, size)"
    )
    other = "def patchify(x, p):\n    return x.unfold(2, p, p).unfold(3, p, p).flatten(2)\n"
    solution = inspect.getsource(patching.patchify)
    answers = {
        (student, "patchify"): similarity.normalised(source, "patchify")
        for student, source in (("ann", mine), ("ben", copy), ("cat", other), ("dan", solution))
    }
    found = gradebook.alike(answers)
    assert found == [
        "patchify: dan's answer is the course's own solution, word for word",
        "patchify: ann, ben (identical)",
    ]
    assert "raise NotImplementedError" in similarity.normalised(
        "def patchify(x, p):\n    raise NotImplementedError()\n", "patchify"
    )  # the names it did not bind stay as they are


# --- a whole class, graded end to end ------------------------------------------------------


def _cells(nb):
    return nb["cells"]


def _source(cell):
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def _replace_definition(nb, name, code):
    """The notebook with the cell defining `name` replaced by `code`."""
    nb = json.loads(json.dumps(nb))
    (cell,) = [c for c in _cells(nb) if re.search(rf"^def {name}\b", _source(c), flags=re.M)]
    cell["source"] = code
    return nb


def _write(nb, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb))


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    need_sandbox()
    teacher = json.loads((NOTEBOOKS / "01_patches.ipynb").read_text())
    student, _ = student_notebook(teacher, "01_patches.ipynb")
    root = tmp_path_factory.mktemp("class")
    subs = root / "submissions"
    _write(teacher, subs / "ada" / "01_patches.ipynb")  # the reference answers
    _write(student, subs / "bob" / "01_patches.ipynb")  # untouched
    wrong = "def patchify(images, patch_size):\n    B, C, H, W = images.shape\n"
    wrong += "    return images.reshape(B, -1, patch_size * patch_size * C)\n"
    _write(_replace_definition(teacher, "patchify", wrong), subs / "cy" / "01_patches.ipynb")
    endless = "def patchify(images, patch_size):\n    while True:\n        pass\n"
    _write(_replace_definition(teacher, "patchify", endless), subs / "dee" / "01_patches.ipynb")
    # eve: deleted the check cells, and defined unpatchify twice, wrong then right, in a moved cell
    eve = json.loads(json.dumps(teacher))
    eve["cells"] = [c for c in _cells(eve) if "= check_" not in _source(c)]
    right = [c for c in _cells(eve) if re.search(r"^def unpatchify", _source(c), flags=re.M)][0]
    early = json.loads(json.dumps(right))
    early["source"] = "def unpatchify(patches, patch_size, image_size):\n    return patches\n"
    eve["cells"].insert(1, early)
    _write(eve, subs / "eve" / "01_patches.ipynb")
    syntax = "def patchify(images, patch_size:\n    return images\n"
    _write(_replace_definition(student, "patchify", syntax), subs / "fay" / "01_patches.ipynb")
    (subs / "fay" / "01_patches.ipynb").rename(subs / "fay" / "01_patches (1).ipynb")
    (subs / "fay" / "notes.txt").write_text("I could not do it")
    (subs / "README.txt").write_text("the class of 2026")
    merged = json.loads(json.dumps(student))  # the exercise cell and its check cell in one
    cells = _cells(merged)
    i = next(i for i, c in enumerate(cells) if re.search(r"^def patchify", _source(c), flags=re.M))
    cells[i]["source"] = _source(cells[i]) + "\npatchify = check_patchify(patchify)\n"
    _write(merged, subs / "jo" / "01_patches.ipynb")
    dies = json.loads(json.dumps(teacher))  # the kernel stops after both exercises are defined
    dies["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None,
                          "outputs": [], "source": "import os\nos._exit(1)"})  # fmt: skip
    _write(dies, subs / "ivy" / "01_patches.ipynb")
    (subs / "hal").mkdir()  # handed in nothing
    (subs / "gus").mkdir()
    (subs / "gus" / "01_patches.ipynb").write_text("{ this is not a notebook")
    sources = {p: p.read_bytes() for p in subs.rglob("*") if p.is_file()}
    out = root / "out"
    command = [
        sys.executable,
        "-m",
        "vitcourse.grade",
        "submissions",
        "--out",
        "out",
    ]  # relative
    command += ["--timeout", "120", "--cell-timeout", "8", "--jobs", "2"]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    after = {p: p.read_bytes() for p in subs.rglob("*") if p.is_file()}
    assert after == sources, "the grader changed a submission"
    with open(out / "grades.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return {(r["student"], r["exercise"]): (r["status"], r["hint"]) for r in rows}, out, done


@pytest.mark.slow
def test_the_class_is_graded(graded_class):
    grades, out, done = graded_class
    status = {key: value[0] for key, value in grades.items()}
    assert status[("ada", "patchify")] == status[("ada", "unpatchify")] == "passed"
    assert grades[("bob", "patchify")] == grades[("bob", "unpatchify")] == ("not attempted", "")
    assert status[("cy", "patchify")] == "wrong"
    assert "a plain reshape does not cut out squares" in grades[("cy", "patchify")][1]
    assert status[("cy", "unpatchify")] == "passed"
    assert status[("dee", "patchify")] == "timeout"
    assert status[("dee", "unpatchify")] == "passed"  # the loop did not stop the rest
    assert status[("eve", "patchify")] == status[("eve", "unpatchify")] == "passed"
    assert status[("fay", "patchify")] == "error"
    assert "SyntaxError" in grades[("fay", "patchify")][1]
    assert status[("fay", "unpatchify")] == "not attempted"  # still graded
    assert status[("gus", "patchify")] == "error"
    assert "not a readable notebook" in grades[("gus", "patchify")][1]
    assert status[("jo", "patchify")] == "not attempted"  # the reference the check lent
    assert "the course's own solution" in grades[("jo", "patchify")][1]
    # the kernel stopped after both exercises were defined: what they had defined is graded
    assert status[("ivy", "patchify")] == status[("ivy", "unpatchify")] == "passed"
    assert grades[("hal", "patchify")] == ("not attempted", "not handed in")
    # The quiz, read from the cells handed in: untouched everywhere, so "not attempted"; hal's
    # and gus's notebooks were not handed in or not readable.
    assert {status[(s, "quiz")] for s in "ada bob cy dee eve fay gus hal ivy jo".split()} == {
        "not attempted"
    }
    assert grades[("hal", "quiz")] == ("not attempted", "not handed in")
    assert len(grades) == 30  # 10 students x (2 exercises and the quiz)
    assert "skipped README.txt: not a student folder" in done.stdout
    assert "skipped fay/notes.txt: not a course notebook" in done.stdout


@pytest.mark.slow
def test_the_class_gets_feedback_and_a_summary(graded_class):
    _, out, done = graded_class
    feedback = (out / "feedback" / f"{gradebook.file_name('cy')}.md").read_text()
    assert "# Feedback for cy" in feedback and "1 of 3 exercises passed" in feedback
    assert "✗ **patchify**: wrong" in feedback
    assert "the values are not. Hint: a plain reshape does not cut out squares" in feedback
    summary = (out / "summary.md").read_text()
    assert "| patchify | 01_patches | 3 of 10 | 1 | 3 | 2 | 1 |" in summary
    assert "| unpatchify | 01_patches | 5 of 10 | 0 | 4 | 1 | 0 |" in summary
    assert "**patchify** (1 student): a plain reshape does not cut out squares" in summary
    assert "| patchify | 01_patches | 3 of 10" in done.stdout  # printed too
    nothing = (out / "feedback" / f"{gradebook.file_name('hal')}.md").read_text()
    assert "0 of 3 exercises passed" in nothing and "not handed in" in nothing
    executed = json.loads(
        (out / "executed" / gradebook.file_name("ada") / "01_patches.ipynb").read_text()
    )
    assert any(c.get("outputs") for c in executed["cells"])
    assert not any("__vitcourse_defs__" in _source(c) for c in executed["cells"])


def test_an_unknown_language_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    """`python -m vitcourse.grade --language fr` (and the autograder's grade commands): one line
    naming the languages, before anything is graded or written; a known one is the grader's
    language and its sandboxes' (`VITCOURSE_LANG`, which `sandbox.run` passes on)."""
    commands = [
        (grade.main, [str(tmp_path / "subs"), "--out", str(tmp_path / "out")]),
        (autograder.main, ["grade-gradescope", "--root", str(tmp_path / "root")]),
        (autograder.main, ["grade-prairielearn", "--root", str(tmp_path / "root")]),
    ]
    for main, args in commands:
        with pytest.raises(SystemExit) as stopped:
            main([*args, "--language", "fr"])
        said = capsys.readouterr().err
        assert stopped.value.code == 2 and said.count("\n") == 1, said
        assert said.startswith("error: --language: the course speaks no language 'fr'")
        assert "en (English)" in said and "es (español)" in said
    assert not (tmp_path / "out").exists() and not (tmp_path / "root").exists()
    assert language.language() == "en"
    monkeypatch.setattr(grade, "catalog", lambda code: None)  # as if Spanish were compiled
    grade.speak(grade._parser(), "es_ES.UTF-8")
    assert language.language() == "es" and os.environ["VITCOURSE_LANG"] == "es"


def test_the_feedback_speaks_the_graders_language(tmp_path, monkeypatch):
    """What students read goes through `_` when it is written (a made-up catalog here); the
    statuses stay English in grades.csv, and "not handed in" is recognised in either language."""
    said = {"wrong": "incorrecto", "Feedback for {student}": "Comentarios para {student}",
            "{passed} of {total} exercises passed.": "{passed} de {total} ejercicios superados.",
            "not handed in": "no entregado", "Graded: {files}": "Corregido: {files}",
            "Hint: {hint}": "Pista: {hint}", "nothing": "nada"}  # fmt: skip

    class Spanish:
        def gettext(self, message):
            return said.get(message, message)

    monkeypatch.setattr(language, "catalog", lambda code: Spanish())
    language.set_language("es")
    missing = gradebook._(gradebook.NOT_HANDED_IN)
    rows = [
        Grade("ana", "01_patches", "patchify", "wrong", "patchify: x\nPista: mira", "y"),
        Grade("ana", "03_attention", "attention", "not attempted", missing),
    ]
    gradebook.write_reports(rows, [], [], tmp_path)
    feedback = (tmp_path / "feedback" / f"{gradebook.file_name('ana')}.md").read_text()
    assert "# Comentarios para ana" in feedback and "0 de 2 ejercicios superados." in feedback
    assert "**patchify**: incorrecto" in feedback and "patchify: x. Pista: mira" in feedback
    assert "no entregado" in feedback
    assert '"wrong"' in (tmp_path / "grades.csv").read_text()  # the data stays English
    run = platforms.Run(rows, {"01_patches": {}, "03_attention": {}}, [], "", [], {}, 1.0)
    assert run.handed_in == ["01_patches"]
    assert "Corregido: 01_patches.ipynb" in platforms.summary(run)
    assert platforms.feedback(rows[0]) == "incorrecto: patchify: x. Pista: mira"


def test_the_feedback_s_messages_are_extracted():
    """The catalog's extraction finds the grader's messages (`_`/`N_` with literal text)."""
    catalog = package_template()
    for message in (
        "Feedback for {student}",
        "{passed} of {total} exercises passed.",
        "not handed in",
        "the notebook ran past its {seconds:.0f} s",
        "{name} used more than {gb:g} GB of memory",
        "cell {number}",
        "Not found in your submission: {files} (a file is matched by its name or its two-digit "
        "number)",
        "Class summary: {count} students",
        "no isolation: the student's code ran with the grader's rights",
    ):
        assert catalog.get(message) is not None, message


def test_without_a_sandbox_the_grader_refuses_unless_told(tmp_path, monkeypatch, capsys):
    need("cloudpickle", "pip install -r requirements-teachers.txt")
    monkeypatch.setattr(sandbox, "bubblewrap", lambda: "bubblewrap is not installed")
    (tmp_path / "subs").mkdir()
    monkeypatch.setattr(grade.os, "geteuid", lambda: 1000)  # a teacher
    with pytest.raises(SystemExit) as stopped:
        grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out")])
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert "bubblewrap is not installed" in said and "--no-sandbox grades without one" in said
    assert "read and change your files" in said
    monkeypatch.setattr(grade.os, "geteuid", lambda: 0)  # root: no hint to run students as root
    with pytest.raises(SystemExit) as stopped:
        grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out")])
    said = capsys.readouterr().err
    assert stopped.value.code == 2 and "--no-sandbox grades without one" not in said
    assert (
        "grade as a user other than root" in said and "would run the students' code as root" in said
    )
    grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out"), "--no-sandbox"])
    assert "warning: no sandbox" in capsys.readouterr().err


def test_a_class_that_fails_the_same_way_everywhere_is_refused(tmp_path, monkeypatch, capsys):
    """Every notebook an error for one reason is the grader's set-up (a package the sandbox cannot
    see), not the class: the reports are written, and the grader exits non-zero with one line."""
    need("cloudpickle", "pip install -r requirements-teachers.txt")
    monkeypatch.setattr(sandbox, "bubblewrap", lambda: None)
    why = "ModuleNotFoundError: No module named 'vitcourse'"
    monkeypatch.setattr(
        grade,
        "grade_notebook",
        lambda student, notebook, *a: [
            Grade(student, notebook, n, "error", why) for n in ("patchify", "unpatchify")
        ],  # fmt: skip
    )
    teacher = (NOTEBOOKS / "01_patches.ipynb").read_text()
    for student in ("ada", "bob"):
        (tmp_path / "subs" / student).mkdir(parents=True)
        (tmp_path / "subs" / student / "01_patches.ipynb").write_text(teacher)
    with pytest.raises(SystemExit) as stopped:
        grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out")])
    assert stopped.value.code == 3
    said = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress bar
    assert said.startswith("error: every notebook failed the same way") and why in said
    assert (tmp_path / "out" / "grades.csv").read_text().count("ada") == 2
    assert grade.same_failure([Grade("ada", "01_patches", "patchify", "error", why)]) is None


def test_a_crash_while_grading_is_an_error_for_that_student_alone(tmp_path, monkeypatch):
    """Anything the grader raises while grading one notebook becomes that student's error, with a
    one-line reason, in the journal; the others are graded, and --resume does not crash again."""
    need("copydetect", "pip install -r requirements-teachers.txt")  # similar.md compares them

    def grade_notebook(student, notebook, *args):
        if student == "bad":
            raise RecursionError("maximum recursion depth exceeded\nwhile calling")
        return [Grade(student, notebook, n, "passed") for n in ("patchify", "unpatchify")]

    monkeypatch.setattr(grade, "grade_notebook", grade_notebook)
    teacher = (NOTEBOOKS / "01_patches.ipynb").read_text()
    for student in ("bad", "good"):
        (tmp_path / "subs" / student).mkdir(parents=True)
        (tmp_path / "subs" / student / "01_patches.ipynb").write_text(teacher)
    for resume in (False, True):
        grades, _ = grade.grade_class(tmp_path / "subs", tmp_path / "out", resume=resume)
        status = {(g.student, g.exercise): (g.status, g.hint) for g in grades}
        assert status[("good", "patchify")] == ("passed", "")
        assert status[("bad", "patchify")] == (
            "error",
            "the grader could not grade this notebook "
            "(RecursionError: maximum recursion depth exceeded while calling)",
        )
    assert len((tmp_path / "out" / "journal.jsonl").read_text().splitlines()) == 2


def test_the_grader_says_where_the_poll_is_the_only_count(tmp_path, monkeypatch, capsys):
    """A grader that can make no cgroup and mount no tmpfs (a teacher who is not root) says so on
    the terminal, one line each; where it can, it says nothing."""
    need("cloudpickle", "pip install -r requirements-teachers.txt")
    monkeypatch.setattr(sandbox, "bubblewrap", lambda: None)
    (tmp_path / "subs").mkdir()
    for kernel, said in (
        (sandbox_cgroup, sandbox_cgroup.POLL_ONLY),
        (sandbox_disk, sandbox_disk.POLLED),
    ):
        monkeypatch.setattr(kernel, "why_not", lambda said=said: said)
    grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out")])
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {sandbox_cgroup.POLL_ONLY}.", f"note: {sandbox_disk.POLLED}."]
    for kernel in (sandbox_cgroup, sandbox_disk):
        monkeypatch.setattr(kernel, "why_not", lambda: None)
    grade.main([str(tmp_path / "subs"), "--out", str(tmp_path / "out")])
    assert "note: " not in capsys.readouterr().err
