"""What a learner sees when a check fails, for every exercise: an answer that matches none of the
check's known mistakes, and one whose code raises inside the check. Both are said in a few lines,
with no line of the solution and no frame of the package; a second, more specific hint is one
call away (`hint(name)`, named in the failure's last lines); MultiHeadSelfAttention is judged on
its own."""

import contextlib
import io
import re
import warnings
from pathlib import Path

import nbformat
import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell

from vitcourse import checks
from vitcourse.checks import harness

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def _solution_lines() -> set[str]:
    """Every line of code between the solution markers of the teacher's notebooks."""
    lines = set()
    for path in NOTEBOOKS.glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            inside = False
            for line in cell.source.splitlines():
                if "### BEGIN SOLUTION" in line:
                    inside = True
                elif "### END SOLUTION" in line:
                    inside = False
                elif inside:
                    code = line.split("  #")[0].strip()
                    if len(code) >= 14:
                        lines.add(code)
    return lines


SOLUTION = _solution_lines()


def _off(value):
    """A right answer, changed so that it matches none of the known mistakes."""
    if isinstance(value, tuple):
        return tuple(_off(v) for v in value)
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value * 1.01 + 0.003
    if isinstance(value, float | int):
        return value * 1.01 + 7
    return value


def _wrong(exercise):
    reference = exercise.reference
    if isinstance(reference, type):

        def forward(self, x):
            return _off(reference.forward(self, x))

        return type("Mine", (reference,), {"forward": forward})
    return lambda *args, **kwargs: _off(reference(*args, **kwargs))


def _raising(exercise):
    def broken(*args, **kwargs):
        scores = torch.ones(2, 3) @ torch.ones(4, 5)  # a shape slip in the learner's own line
        return scores

    if isinstance(exercise.reference, type):
        return type("Mine", (exercise.reference,), {"forward": lambda self, x: broken()})
    return broken


def _wrong_step(model, optimizer, images, labels, label_smoothing, grad_clip):
    loss = torch.nn.functional.cross_entropy(model(images), labels)
    loss.backward()  # gradients never reset, no clipping, no smoothing: all three at once
    optimizer.step()
    return loss


def _wrong_masking(batch_size, num_patches, mask_ratio, generator=None):
    mask = torch.zeros(batch_size, num_patches, dtype=torch.bool)
    return torch.arange(num_patches).expand(batch_size, -1), mask


SPECIAL = {"train_step": _wrong_step, "random_masking": _wrong_masking}


def _shown(cell_name: str, learner) -> list[str]:
    """What the notebook shows for `check(learner)`, line by line."""
    shell = InteractiveShell.instance()
    shell.user_ns["_learner"] = learner
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        shell.run_cell(f"from vitcourse.checks import {cell_name}\n{cell_name}(_learner)")
    return [line for line in out.getvalue().splitlines() if line.strip()]


def _cell_names() -> dict[str, str]:
    return {getattr(checks, n).exercise: n for n in checks.__all__ if n.startswith("check_")}


def _assert_short_and_clean(name: str, lines: list[str]) -> None:
    text = "\n".join(lines)
    assert lines[0].startswith(f"✗ {name} is not right yet"), text
    assert 3 <= len(lines) <= 5, text
    assert f'hint("{name}")' in lines[-2] and f"goes on with your {name}" in lines[-1], text
    assert "Traceback" not in text and 'File "' not in text and "vitcourse/" not in text, text
    leaked = [code for code in SOLUTION if code in text]
    assert not leaked, (name, leaked)


@pytest.mark.parametrize("name", list(checks.EXERCISES))
def test_an_answer_that_matches_no_known_mistake_gets_a_short_nudge(name):
    learner = SPECIAL.get(name) or _wrong(checks.EXERCISES[name])
    lines = _shown(_cell_names()[name], learner)
    _assert_short_and_clean(name, lines)
    assert lines[1].startswith("Hint: "), lines


@pytest.mark.parametrize("name", list(checks.EXERCISES))
def test_code_that_raises_inside_a_check_is_said_in_a_few_lines(name, capsys):
    lines = _shown(_cell_names()[name], _raising(checks.EXERCISES[name]))
    _assert_short_and_clean(name, lines)
    assert "your code raised RuntimeError" in lines[0]
    assert "at `scores = torch.ones(2, 3) @ torch.ones(4, 5)" in lines[0]  # the learner's line
    assert "called with " in lines[0] and lines[1].startswith("Hint: ")
    # The second tier, as the failure says to ask for it: another text, no solution either.
    shell = InteractiveShell.instance()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        call, imports = re.fullmatch(r"More help: (.+?)\s+\((.+)\)", lines[-2]).groups()
        shell.run_cell(f"{imports}\n{call}")
    more = out.getvalue().strip()
    assert (
        more.startswith(f"Hint for {name}: ") and more[len(f"Hint for {name}: ") :] not in lines[1]
    )
    assert not [code for code in SOLUTION if code in more]


# Code in a first-tier hint: a call with arguments (`torch.cat([cls, x], dim=1)`), a method call
# (`.transpose(1, 2)`) or an assignment between names (`x = x + ...`; the maths' `d = D / h` is
# no code).
CODE = re.compile(r"[A-Za-z_]\w*\([^)]*[,=][^)]*\)|\.\w+\(|\b[a-z_][a-z_0-9]* = [a-z_]")


def _hints_given(name: str, monkeypatch) -> list[str]:
    """Every hint a check holds for the answers `compare` judges, its mistakes' included."""
    module = __import__(checks.EXERCISES[name].judge.__module__, fromlist=["compare"])
    seen: list[str] = []

    def recording(got, expected, mistakes=(), generic="", shape_hints=None, what=""):
        seen.extend([hint for hint, _ in mistakes] + [generic, *(shape_hints or {}).values()])
        harness.compare(got, expected, mistakes, generic, shape_hints, what)

    monkeypatch.setattr(module, "compare", recording, raising=False)
    exercise = checks.EXERCISES[name]
    learner = SPECIAL.get(name) or _wrong(exercise)
    with pytest.raises(checks.CheckFailed):
        exercise.check(learner)
    return [h for h in seen if h]


@pytest.mark.parametrize("name", list(checks.EXERCISES))
def test_first_tier_hints_hold_no_code_and_no_tier_holds_the_solution(name, monkeypatch):
    hints = _hints_given(name, monkeypatch)
    for hint in hints:
        assert not CODE.search(hint), (name, hint)
        for tier in (hint, getattr(hint, "more", "")):
            assert not [code for code in SOLUTION if code in tier], (name, tier)
    for _, hint in getattr(checks.EXERCISES[name], "raised", []):
        assert not CODE.search(hint), (name, hint)


def test_most_hints_come_with_a_second_tier(monkeypatch):
    hints = [h for name in checks.EXERCISES for h in _hints_given(name, monkeypatch)]
    with_more = [h for h in hints if getattr(h, "more", "")]
    assert len(hints) >= 40 and len(with_more) >= len(hints) * 0.6, (len(hints), len(with_more))


def test_multi_head_attention_is_judged_with_the_courses_attention_inside():
    from vitcourse.attention import MultiHeadSelfAttention, scaled_dot_product_attention

    shell = InteractiveShell.instance()
    shell.run_cell(
        "import torch\n"
        "from torch import nn\n"
        "from vitcourse.attention import MultiHeadSelfAttention as _Course\n"
        "def attention(q, k, v):\n"
        "    w = (q @ k.transpose(-2, -1)).softmax(-1)  # a learner's attention, not scaled\n"
        "    return w @ v, w\n"
        "class Mine(_Course):\n"
        "    def forward(self, x):\n"
        "        B, T, D = x.shape\n"
        "        h, d = self.num_heads, self.head_dim\n"
        "        q, k, v = self.qkv(x).reshape(B, T, 3, h, d).permute(2, 0, 3, 1, 4)\n"
        "        out, _ = attention(q, k, v)\n"
        "        return self.proj(out.transpose(1, 2).reshape(B, T, D))\n"
    )
    namespace = shell.user_ns
    mine, wrong = namespace["Mine"], namespace["attention"]
    with contextlib.redirect_stdout(io.StringIO()):
        assert checks.check_multi_head_attention(mine) is mine  # right, whatever attention is
    assert namespace["attention"] is wrong  # the learner's own name is given back
    learners, course = mine(12, 3), MultiHeadSelfAttention(12, 3)
    course.load_state_dict(learners.state_dict())
    x = torch.randn(1, 3, 12)
    assert not torch.allclose(learners(x), course(x))  # their attention runs in it again

    def open_attention(q, k, v):
        raise NotImplementedError()

    namespace["attention"] = open_attention  # an attention not written yet: MHSA still judged
    with contextlib.redirect_stdout(io.StringIO()):
        assert checks.check_multi_head_attention(mine) is mine
    assert namespace["attention"] is open_attention
    assert scaled_dot_product_attention is checks.EXERCISES["attention"].reference


def test_the_second_tier_follows_the_latest_failure(capsys):
    def unscaled(q, k, v):
        weights = (q @ k.transpose(-2, -1)).softmax(-1)
        return weights @ v, weights

    with pytest.raises(checks.CheckFailed):
        checks.check_attention(unscaled)
    checks.hint("attention")
    about_scaling = capsys.readouterr().out
    assert "saturates" in about_scaling  # the second tier of the mistake found
    checks.check_attention(lambda q, k, v: checks.EXERCISES["attention"].reference(q, k, v))
    capsys.readouterr()
    checks.hint("attention")  # passed since: the exercise's general second tier
    general = capsys.readouterr().out
    assert general != about_scaling and "Vaswani et al." in general
    with pytest.raises(KeyError, match="no exercise named 'atention'"):
        checks.hint("atention")


def test_k_dot_T_in_attention_gets_the_hint_and_not_pytorchs_fix():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines = _shown(
            "check_attention",
            lambda q, k, v: ((q @ k.T).softmax(-1) @ v, (q @ k.T).softmax(-1)),
        )
    assert not [w for w in caught if "x.T" in str(w.message)]
    _assert_short_and_clean("attention", lines)
    assert "`.T` reverses *all* of them" in lines[1]
    assert "mT" not in "\n".join(lines)  # PyTorch's warning would name the fix


def _extracted(catalog):
    """Whether a text is a message of `catalog`, or one of its templates ("{name}: ...") filled."""
    exact = {message.id for message in catalog if message.id}
    templates = [
        re.compile(".+?".join(re.escape(part) for part in re.split(r"\{\w*\}", text)), re.S)
        for text in exact
        if "{" in text
    ]
    return lambda text: text in exact or any(t.fullmatch(text) for t in templates)


def test_what_the_checks_say_is_extracted_for_the_translators(monkeypatch):
    """Every hint a check holds (both tiers, its errors' and its inputs' words too) and what a
    failed check, a verdict, `hint()` and `progress()` say are marked for the catalog (`_`, `N_`),
    so a translation can reach each of them."""
    from vitcourse.translation.catalogs import package_template

    catalog = package_template()
    for message in [
        "{name} is not right yet: {problem}",
        "Hint: {hint}",
        'More help: hint("{name}")   (from vitcourse.checks import hint)',
        "✓ {name}: correct, it matches the reference. Well done!",
        "Hint for {name}: {text}",
        "{passed} of {total} exercises passed (recorded in {file})",
        "not run yet",
        checks.registry.TEACHERS,
        "keep __init__ exactly as given; write only forward.",
        "{where}the shape is right but the values are not",
        "your code raised {error}",
    ]:
        assert catalog.get(message) is not None, message
    extracted = _extracted(catalog)
    cells = {
        getattr(checks, n).exercise: getattr(checks, n) for n in checks.__all__ if n[:6] == "check_"
    }
    for name in checks.EXERCISES:
        check = cells[name].__wrapped__
        raised = [hint for _text, hint in getattr(check, "raised", [])]
        texts = [check.more, check.called] + [t for h in raised for t in (h, h.more)]
        texts += [t for h in _hints_given(name, monkeypatch) for t in (h, getattr(h, "more", ""))]
        missing = [text for text in texts if text and not extracted(text)]
        assert not missing, (name, missing)


def test_a_third_hint_works_a_smaller_case_and_then_says_it_is_the_last(capsys):
    def plain_reshape(images, patch_size):
        B, C = images.shape[:2]
        return images.reshape(B, -1, patch_size * patch_size * C)

    with pytest.raises(checks.CheckFailed):
        checks.check_patchify(plain_reshape)
    said = []
    for _ in range(3):
        checks.hint("patchify")
        said.append(capsys.readouterr().out)
    assert said[0].startswith("Hint for patchify: ") and "split the height" in said[0]
    assert said[1].startswith("Worked by hand, for patchify: ") and "[0, 1, 4, 5]" in said[1]
    assert "last hint" in said[1] and said[2] == said[1]  # asked again: the same, said as last
    assert not [code for code in SOLUTION if code in said[1]]
    with pytest.raises(checks.CheckFailed):  # a new failure: the tiers start again
        checks.check_patchify(plain_reshape)
    checks.hint("patchify")
    assert capsys.readouterr().out == said[0]


@pytest.mark.parametrize("name", list(checks.EXERCISES))
def test_every_exercise_has_a_third_tier_of_its_own_without_code_of_the_solution(name):
    worked = checks.EXERCISES[name].worked
    assert len(worked) > 150
    assert not [code for code in SOLUTION if code in worked]
    others = [e.worked for n, e in checks.EXERCISES.items() if n != name]
    assert worked not in others
