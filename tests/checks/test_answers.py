"""vitcourse.checks.answers: what crosses from the learner's side of a check to the judge is plain
data: tensors and numbers come back as they were, anything else as its type's name."""

import json

import pytest
import torch

from vitcourse.checks.answers import MAX_DEPTH, MAX_ITEMS, OPEN, Other, pack, type_name, unpack


def test_tensors_numbers_and_their_tuples_come_back_as_they_were():
    answer = (torch.arange(6.0).view(2, 3), [1, 2.5, "x", None, True], OPEN)
    back = unpack(*pack(answer))
    assert torch.equal(back[0], answer[0]) and type(back[0]) is torch.Tensor
    assert back[1] == [1, 2.5, "x", None, True] and back[2] is OPEN


class Sneaky(torch.Tensor):
    """A tensor subclass: its methods could run the learner's code in the judge's process."""


@pytest.mark.parametrize(
    "value, name",
    [
        ({"weights": 1}, "dict"),
        (torch.zeros(2).as_subclass(Sneaky), "Sneaky"),
        (torch.nn.Linear(2, 2), "Linear"),
        (tuple(range(MAX_ITEMS + 1)), "tuple"),
    ],
)
def test_anything_else_arrives_as_its_type_name(value, name):
    back = unpack(*pack(value))
    assert back == Other(name) and type_name(back) == name


def test_nesting_past_the_depth_is_cut_and_a_forged_answer_refused():
    deep = [1]
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    back = unpack(*pack(deep))
    for _ in range(MAX_DEPTH):
        (back,) = back  # each level a list of one, down to the depth kept
    assert back == Other("list")
    with pytest.raises(ValueError, match="an answer that pack did not write"):
        unpack(json.dumps({"code": "import os"}).encode(), b"")
