"""No expected output is within an answer's reach when the class grader checks it.

For every registered exercise, the grader's own second step (`grading.probe`: the answer runs in
the sandbox on inputs drawn from a fresh seed, with a copy of the package that lacks the
exercise's solution) is handed a determined student's answer, `tests/classroom/snooping.py`, which
computes nothing and looks instead: every frame up the stack, every tensor in the process, every
file the sandbox shows. The grader computes the expected output from the same inputs in its own
process; nothing the snoop found may equal any part of it. If it did, an answer returning what it
found would pass without the exercise being written.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.conftest import need_sandbox
from vitcourse.checks.answers import unpack
from vitcourse.checks.harness import tensors_of
from vitcourse.checks.registry import exercises
from vitcourse.classroom import grading
from vitcourse.classroom.sandbox import Limits

SEED = 20261129


def _parts(value):
    """The tensors and numbers of a returned answer, however nested."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _parts(item)
    elif type(value) in (int, float):
        yield value


def _same(found: torch.Tensor, expected: torch.Tensor) -> bool:
    if found.shape != expected.shape or found.dtype.is_complex:
        return False
    return torch.allclose(found.double(), expected.double(), rtol=1e-5, atol=1e-6)


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def _snooped(tmp_path, monkeypatch, name: str) -> tuple[str, list, list]:
    """Grade the snoop as `name`'s answer: the grader's verdict, and the tensors and numbers the
    snoop found."""
    import cloudpickle
    from safetensors.torch import load_file

    from tests.classroom import snooping

    exercise = exercises()[name]
    cloudpickle.register_pickle_by_value(snooping)
    try:
        answer = snooping.Snoop if isinstance(exercise.reference, type) else snooping.snoop
        pickled = cloudpickle.dumps(answer)
    finally:
        cloudpickle.unregister_pickle_by_value(snooping)
    monkeypatch.setattr(grading.secrets, "randbelow", lambda _n: SEED)  # to know its inputs here
    status, why, _hint = grading.probe(name, pickled, tmp_path / "work", Limits(check=120))
    assert status == "error" and "snooped" in why, (status, why)  # it looked, then raised
    out = tmp_path / "work" / f"probe-{name}" / "out"
    found = list(load_file(out / "snooped.safetensors").values())
    numbers = json.loads((out / "snooped.json").read_text())
    inputs = exercise.inputs(SEED)
    for key, tensor in tensors_of(inputs):  # it looked where it should: the inputs are there
        assert any(_same(f, tensor) for f in found), f"{name}: the snoop missed input {key}"
    assert numbers, f"{name}: the snoop found no number in the frames"
    return status, found, numbers


def _expected(name: str) -> list:
    """The parts of the expected output, computed here as the grader computes it."""
    exercise = exercises()[name]
    returned, _after = unpack(*exercise.answer(exercise.reference, exercise.inputs(SEED)))
    return list(_parts(returned))


def _reached(part, found: list, numbers: list) -> bool:
    if isinstance(part, torch.Tensor) and part.numel() > 1:
        return any(_same(f, part) for f in found)
    value = float(part)
    if abs(value) < 1e-6 or value in (1.0, -1.0):
        return False  # found anywhere: 0 and 1 are no leak
    return any(_close(float(n), value) for n in numbers)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(exercises()))
def test_no_expected_output_is_within_the_answers_reach(tmp_path, monkeypatch, name):
    need_sandbox()
    _status, found, numbers = _snooped(tmp_path, monkeypatch, name)
    for part in _expected(name):
        shown = tuple(part.shape) if isinstance(part, torch.Tensor) else part
        assert not _reached(part, found, numbers), f"{name}: the expected {shown} is within reach"


@pytest.mark.slow
def test_the_snoop_finds_an_expected_output_the_grader_would_leak(tmp_path, monkeypatch):
    """The control: a grader that left the expected images beside the inputs file, where a
    student's unpatchify could read them, is caught."""
    need_sandbox()
    expected = _expected("unpatchify")
    save = torch.save

    def leaky(inputs, path):
        save(inputs, path)
        save(expected, path.parent / "expected.pt")

    monkeypatch.setattr(grading.torch, "save", leaky)
    _status, found, numbers = _snooped(tmp_path, monkeypatch, "unpatchify")
    assert all(_reached(part, found, numbers) for part in expected)
