"""vitcourse.checks' registry and harness: an open exercise hands back the reference, a right
answer is returned and praised, a wrong one fails with a short message that shows nothing of the
reference; every check sits in the checks module named after the module it checks."""

import contextlib
import importlib
import inspect
import io
import subprocess
import sys

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell

from vitcourse import checks, patching
from vitcourse.attention import MultiHeadSelfAttention, scaled_dot_product_attention
from vitcourse.checks.harness import CheckFailed
from vitcourse.patching import patchify


def open_exercise(*args, **kwargs):
    raise NotImplementedError()


def test_open_exercise_hands_back_the_reference(capsys):
    assert checks.check_patchify(open_exercise) is patchify
    assert "not written yet" in capsys.readouterr().out
    assert checks.check_attention(open_exercise) is scaled_dot_product_attention


def test_correct_answer_is_returned_and_praised(capsys):
    def my_patchify(images, patch_size):
        B, C, H, W = images.shape
        P = patch_size
        x = images.reshape(B, C, H // P, P, W // P, P).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(B, -1, P * P * C)

    assert checks.check_patchify(my_patchify) is my_patchify
    assert "correct" in capsys.readouterr().out


def _check_cells():
    return {name: getattr(checks, name) for name in checks.__all__ if name.startswith("check_")}


def test_every_exercise_is_registered_once_by_the_checks_module_of_its_reference():
    cells = _check_cells()
    assert len(cells) == len(checks.EXERCISES) == 17
    registered = {cell.exercise for cell in cells.values()}
    assert registered == set(checks.EXERCISES)
    for cell in cells.values():
        reference = checks.EXERCISES[cell.exercise].reference
        # e.g. "patching"; the loop (vitcourse.training.loop) is checked by `checks.training`
        checked_module = reference.__module__.removesuffix(".loop").rsplit(".", 1)[-1]
        assert cell.__wrapped__.__module__ == f"vitcourse.checks.{checked_module}", cell.exercise


def test_exercises_are_listed_in_the_course_order():
    notebooks = [exercise.notebook for exercise in checks.EXERCISES.values()]
    assert notebooks == sorted(notebooks)
    assert list(checks.EXERCISES)[:2] == ["patchify", "unpatchify"]


def test_a_notebook_that_imports_one_check_still_sees_every_exercise_in_order():
    """Each check module is imported when its check is first asked for; `progress()`, `grade()`,
    `hint()` and the grader still see every exercise, in the course's order, whichever came first."""
    code = """
import vitcourse.checks.registry as registry
from vitcourse.checks import check_scramble, hint
print(list(registry.EXERCISES))
hint("patchify")
from vitcourse.checks import EXERCISES
print(list(EXERCISES))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    first, said, every = done.stdout.splitlines()[:3]
    assert first == "['scramble']"  # one check asked for, one module imported
    assert said.startswith("Hint for patchify")
    assert every == str(list(checks.EXERCISES))
    assert list(checks.EXERCISES)[:2] == ["patchify", "unpatchify"]


def test_an_unknown_name_is_an_attribute_error_that_says_so():
    with pytest.raises(AttributeError, match="has no attribute 'check_nothing'"):
        checks.check_nothing  # noqa: B018
    assert "check_patchify" in dir(checks)


def test_the_verdict_names_the_exercise_as_registered(capsys):
    from vitcourse.vit import VisionTransformer

    class ViT(VisionTransformer):  # a learner's class that is right
        pass

    assert checks.check_vision_transformer(ViT) is ViT
    assert "✓ ViT: correct" in capsys.readouterr().out

    class Broken(VisionTransformer):
        def forward(self, images):
            return super().forward(images) * 2

    with pytest.raises(CheckFailed, match="^ViT is not right yet"):
        checks.check_vision_transformer(Broken)


def _wrong_attention(q, k, v):
    weights = (q @ k.transpose(-2, -1)).softmax(-1)  # not scaled by sqrt(d)
    return weights @ v, weights


def test_a_failed_check_shows_its_hint_in_a_few_lines_and_no_line_of_the_reference():
    shell = InteractiveShell.instance()
    shell.user_ns["_wrong_attention"] = _wrong_attention
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
        shell.run_cell(
            "from vitcourse.checks import check_attention\ncheck_attention(_wrong_attention)"
        )
    lines = [line.strip() for line in shown.getvalue().splitlines() if line.strip()]
    assert lines[0].startswith("✗ attention is not right yet")
    assert "√d" in lines[1] and len(lines) == 4
    assert 'hint("attention")' in lines[2]  # the second tier, one call away
    assert "the notebook goes on with your attention" in lines[3]
    # Nothing of the reference solution, nor of the check that holds its mistakes, is shown.
    for module in ("vitcourse.attention", "vitcourse.checks.attention", "vitcourse.checks.harness"):
        source = inspect.getsource(importlib.import_module(module))
        code = {line.strip() for line in source.splitlines() if len(line.strip()) > 12}
        assert not code & set(lines), module


def test_a_learners_own_error_is_said_in_a_few_lines_with_their_line_and_the_inputs():
    def broken(q, k, v):
        scores = q @ k  # (B, h, T, d) @ (B, h, T, d): a shape error in the learner's own line
        return scores, scores

    with pytest.raises(CheckFailed) as raised:
        checks.check_attention(broken)
    said = raised.value._render_traceback_()
    assert said[0].startswith("✗ attention is not right yet: your code raised RuntimeError")
    assert "at `scores = q @ k" in said[0] and "(2, 3, 5, 8)" in said[0]
    assert said[1].startswith("Hint: a matrix product's shapes do not fit")
    assert len(said) == 4 and raised.value.__cause__ is None and raised.value.__suppress_context__
    # The class grader's own path still sees the learner's error as it is.
    assert checks.grade("attention", broken)[0] == "error"


def test_grade_reports_the_exercise_name_and_hint_quietly(capsys):
    status, hint = checks.grade("attention", _wrong_attention)
    assert status == "wrong"
    assert hint.startswith("attention is not right yet") and "√d" in hint
    assert capsys.readouterr().out == ""
    assert checks.grade("attention", lambda q, k, v: torch.zeros(1))[0] == "wrong"


def my_patchify(images, patch_size):  # a learner's right answer (not the reference object)
    return patching.patchify(images, patch_size)


def wrong_patchify(images, patch_size):
    B = images.shape[0]
    return images.reshape(B, -1, patch_size * patch_size * images.shape[1])  # a plain reshape


def open_patchify(images, patch_size):
    raise NotImplementedError()


def broken_patchify(images, patch_size):
    return images.no_such_method()


def test_grade_names_each_outcome():
    assert checks.grade("patchify", my_patchify) == ("passed", "")
    status, hint = checks.grade("patchify", patching.patchify)  # lent by the check, or imported
    assert status == "not attempted" and "the course's own solution" in hint
    status, hint = checks.grade("patchify", wrong_patchify)
    assert status == "wrong" and "a plain reshape does not cut out squares" in hint
    assert checks.grade("patchify", open_patchify) == ("not attempted", "")
    status, hint = checks.grade("patchify", broken_patchify)
    assert status == "error" and "AttributeError" in hint and "no_such_method" in hint
    status, hint = checks.grade("patchify", None)  # nothing defined at all
    assert status == "error" and "NoneType" in hint
    with pytest.raises(KeyError, match="no exercise named 'patchifyy'"):
        checks.grade("patchifyy", patching.patchify)


def test_classes_pass_as_themselves():
    """A check returns the learner's own object on success: a class exercise passes too."""
    from vitcourse.attention import MultiHeadSelfAttention

    class Mine(MultiHeadSelfAttention):
        pass

    assert checks.grade("MultiHeadSelfAttention", Mine) == ("passed", "")


def test_progress_lists_what_the_checks_recorded(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VITCOURSE_PROGRESS", str(tmp_path / "progress.json"))
    assert set(checks.exercise_results().values()) == {"not run yet"}
    checks.check_patchify(my_patchify)
    checks.check_unpatchify(lambda *args: (_ for _ in ()).throw(NotImplementedError()))
    with pytest.raises(AssertionError):
        checks.check_embed_tokens(lambda *args: torch.zeros(1))
    checks.progress()
    results = checks.exercise_results()
    assert results["patchify"] == "passed"
    assert results["unpatchify"] == "not attempted"
    assert results["embed_tokens"] == "wrong"
    assert results["attention"] == "not run yet"
    shown = capsys.readouterr().out
    assert (
        "✓ patchify: passed" in shown and f"1 of {len(checks.EXERCISES)} exercises passed" in shown
    )
    with pytest.raises(AssertionError):
        checks.check_patchify(wrong_patchify)
    assert checks.exercise_results()["patchify"] == "wrong"  # the latest result counts
    # Running a check cell again after it lent the reference is no pass.
    assert checks.check_patchify(patching.patchify) is patching.patchify
    assert checks.exercise_results()["patchify"] == "not attempted"
    with pytest.raises(AssertionError, match="patchify is not written yet"):
        checks.assert_written("patchify", patching.patchify)
    checks.assert_written("patchify", my_patchify)


def teachers_patchify(images, patch_size):  # as the teacher's copy of notebook 01 holds it
    ### BEGIN SOLUTION
    return patching.patchify(images, patch_size)
    ### END SOLUTION


class TeachersAttention(MultiHeadSelfAttention):  # a class: the markers sit in a method
    def forward(self, x):
        ### BEGIN SOLUTION
        return super().forward(x)
        ### END SOLUTION


def test_the_teachers_solutions_are_not_the_learners_progress(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("VITCOURSE_PROGRESS", str(tmp_path / "progress.json"))
    assert checks.check_patchify(teachers_patchify) is teachers_patchify
    assert (
        "correct (the solution in the teacher's copy: not your progress)" in capsys.readouterr().out
    )
    assert checks.check_multi_head_attention(TeachersAttention) is TeachersAttention
    # Shown as what it is (the book executes the teacher's copies), never counted as passed.
    results = checks.exercise_results()
    assert results["patchify"] == results["MultiHeadSelfAttention"] == checks.registry.TEACHERS
    capsys.readouterr()
    checks.progress("01")
    shown = capsys.readouterr().out
    assert "✓ patchify: correct with the teacher's solution (not counted)" in shown
    assert "not run yet" in shown and "0 of 15 exercises passed" in shown
    assert checks.passed("patchify") and not checks.passed("unpatchify")
    checks.check_patchify(my_patchify)  # the learner's own answer is recorded
    assert checks.exercise_results()["patchify"] == "passed" and checks.passed("patchify")
    with pytest.raises(AssertionError):
        checks.check_patchify(wrong_patchify)
    assert not checks.passed("patchify")  # the latest result counts
    checks.check_patchify(my_patchify)
    checks.check_patchify(teachers_patchify)  # and the teacher's copy never overwrites it
    assert checks.exercise_results()["patchify"] == "passed"


def test_progress_of_one_notebook_lists_its_exercises_and_sums_up_the_rest(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("VITCOURSE_PROGRESS", str(tmp_path / "progress.json"))
    checks.check_patchify(my_patchify)
    checks.check_attention(lambda q, k, v: scaled_dot_product_attention(q, k, v))
    capsys.readouterr()
    checks.progress("01")
    lines = capsys.readouterr().out.splitlines()
    others = len(checks.EXERCISES) - 2
    assert lines == [
        "01_patches",
        "  ✓ patchify: passed",
        "  · unpatchify: not run yet",
        f"the rest of the course: 1 of {others} exercises passed (progress() lists them all)",
    ]
    with pytest.raises(ValueError, match="no exercises in notebook '42'"):
        checks.progress("42")


def test_progress_survives_a_damaged_file(tmp_path, monkeypatch):
    path = tmp_path / "progress.json"
    path.write_text("{not json")
    monkeypatch.setenv("VITCOURSE_PROGRESS", str(path))
    checks.check_patchify(my_patchify)
    assert checks.exercise_results()["patchify"] == "passed"


@pytest.mark.parametrize("name", list(checks.EXERCISES))
def test_each_reference_passes_its_own_check(name):
    """The registry's reference is the solution its check compares with: the raw check accepts
    it, while `grade` and the notebook's check cell treat it as not the learner's work."""
    exercise = checks.EXERCISES[name]
    assert exercise.check(exercise.reference) is exercise.reference
    assert checks.grade(name, exercise.reference)[0] == "not attempted"


def test_a_teachers_copy_executed_in_a_fresh_kernel_shows_its_checks_in_progress(
    tmp_path, monkeypatch
):
    """As the book executes a teacher's copy (MyST-NB, nbclient): each check prints ✓ and the
    notebook's "Your progress" cell lists it (not "not run yet"), without counting it."""
    import nbclient
    import nbformat

    solution = (
        "from vitcourse.checks import check_patchify, progress\n"
        "from vitcourse import patching\n\n"
        "def patchify(images, patch_size):\n"
        "    ### BEGIN SOLUTION\n"
        "    return patching.patchify(images, patch_size)\n"
        "    ### END SOLUTION\n\n"
        "patchify = check_patchify(patchify)"
    )
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(solution), nbformat.v4.new_code_cell('progress("01")')]
    )
    monkeypatch.setenv("VITCOURSE_PROGRESS", str(tmp_path / "progress.json"))  # the kernel's too
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    checked, listed = ("".join(o.get("text", "") for o in c.outputs) for c in notebook.cells)
    assert checked.startswith("✓ patchify: correct")
    assert "✓ patchify: correct with the teacher's solution (not counted)" in listed
    assert "the rest of the course: 0 of 15 exercises passed" in listed


_FUNCTIONS = [
    name
    for name, e in checks.exercises().items()
    if not isinstance(e.reference, type) and name not in ("count_parameters", "random_masking")
]


@pytest.mark.parametrize("name", _FUNCTIONS)
def test_a_function_that_changes_its_callers_tensor_in_place_is_caught(name):
    reference = checks.EXERCISES[name].reference

    def in_place(*args, **kwargs):
        out = reference(*args, **kwargs)
        first = next(a for a in args if isinstance(a, torch.Tensor))
        with torch.no_grad():  # right output, and the caller's tensor changed
            first.add_(1)
        return out

    status, hint = checks.grade(name, in_place)
    assert status == "wrong" and "one of its inputs, in place" in hint, hint
    assert "a plain `+`, `-` or `/`" in hint
