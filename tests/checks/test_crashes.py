"""vitcourse.checks.crashes: an error raised by the learner's own code gets a first sentence for
its kind (the name, argument or type that is off), and a second tier of its own."""

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from vitcourse import checks
from vitcourse.checks.crashes import KINDS, by_kind
from vitcourse.presets import PRESETS


def _raised(code) -> BaseException:
    try:
        code()
    except Exception as error:  # noqa: BLE001 - the error is what the test reads
        return error
    raise AssertionError("the code did not raise")


def _needs_two(a, b):
    return a + b


def _in_place_on_a_leaf():
    logits = torch.ones(2, requires_grad=True)
    logits /= 2
    return logits


def _unpack_three():
    a, b = torch.zeros(3)
    return a + b


# (what a learner wrote, words the first tier must hold, words its second tier must hold)
CRASHES = [
    (lambda: nn.utils.clip_grad_norm_(nn.Linear(2, 2).parameters, 1.0), "parentheses", "returns"),
    (
        lambda: PRESETS["course-28/7"].mlp_ratio,
        "a ViTConfig has no attribute `mlp_ratio`",
        "fields",
    ),
    (lambda: None.shape, "without `return`", "None"),
    (lambda: F.linear(nn.LayerNorm(3), torch.zeros(3, 3)), "given a LayerNorm", "call on a tensor"),
    (lambda: _needs_two(1, c=2), "no argument named `c`", "help(_needs_two)"),
    (lambda: _needs_two(1), "without 'b'", "count the arguments"),
    (lambda: _needs_two(1, 2, 3), "takes 2 positional", "self"),
    (lambda: None + torch.zeros(1), "`+` between a NoneType and a Tensor", "print type"),
    (lambda: torch.zeros(2, 3).shape(0), "a torch.Size was called", "square brackets"),
    (_unpack_three, "unpacks into 2", "len"),
    (
        lambda: (torch.ones(2, requires_grad=True) * 2).detach().sum().backward(),
        "no gradient",
        "never around",
    ),
    (_in_place_on_a_leaf, "requires a gradient", "autograd refuses"),
    (lambda: (torch.ones(2), None).transpose(0, 1), "a tuple has no attribute", "unpack it"),
    (lambda: torch.randperm(4, torch.Generator()), "randperm was called with", "(dims or dim?)"),
    (
        lambda: F.cross_entropy(torch.zeros(6, 5), torch.zeros(6, 5).argmax()),
        "6 rows of logits and 0 target classes",
        "dim=-1",
    ),
    (lambda: undefined_name, "`undefined_name` is not defined", "Run All"),  # noqa: F821
    (lambda: torch.zeros(2, 3).sum(dim=3), "axis 3 does not exist", ".shape"),
]


@pytest.mark.parametrize("code, first, more", CRASHES)
def test_each_kind_of_error_gets_its_own_first_sentence(code, first, more):
    hint = by_kind(_raised(code))
    assert hint is not None and first in hint, hint
    assert more in hint.more, hint.more


def test_every_kind_is_tried_above():
    matched = {
        next(i for i, kind in enumerate(KINDS) if kind == found)
        for code, _, _ in CRASHES
        for found in [_kind_of(_raised(code))]
    }
    assert matched == set(range(len(KINDS)))


def _kind_of(error):
    import re

    return next(
        k for k in KINDS if type(error).__name__ in k.types and re.search(k.pattern, str(error))
    )


def test_an_exercises_own_hint_for_an_error_comes_before_the_kinds():
    def clash(q, k, v):  # a shape error: the attention check's own hint for it
        return torch.ones(2, 3) @ torch.ones(4, 5), None

    with pytest.raises(checks.CheckFailed) as raised:
        checks.check_attention(clash)
    assert raised.value.hint.startswith("a matrix product's shapes")


def test_a_crash_in_the_grader_says_the_kind_too():
    from tests.learner_attempts import step_parameters_uncalled

    status, said = checks.grade("train_step", step_parameters_uncalled)
    assert status == "error"
    assert "your code raised TypeError" in said and "parentheses" in said


def test_the_general_crash_hints_second_tier_is_each_exercises_own():
    def crash(*args, **kwargs):
        return torch.ones(2, 3) @ torch.ones(4, 5)

    seconds = set()
    for name in ("patchify", "layer_norm", "attention_rollout", "masked_patch_loss"):
        failed = checks.exercises()[name].crashed(_raised(lambda: crash()))
        seconds.add(failed.hint.more)
    assert len(seconds) == 4, seconds


def test_kinds_are_frozen_data():
    assert all(dataclasses.is_dataclass(kind) for kind in KINDS)
