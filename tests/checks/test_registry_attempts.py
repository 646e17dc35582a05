"""No realistic wrong attempt passes a check, and each gets the hint that names its mistake.

The attempts are in `tests/learner_attempts.py`, written as learners write them (an argument
ignored, the caller's tensor changed in place, a mode switched inside a step, an edge value, a
branch half written...); `benchmarks/check_attempts.py` counts them per exercise."""

import pytest

from tests.learner_attempts import ATTEMPTS
from vitcourse import checks


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[f"{a.exercise}: {a.what}" for a in ATTEMPTS])
def test_a_wrong_attempt_never_passes_and_its_mistake_is_named(attempt):
    status, said = checks.grade(attempt.exercise, attempt.code)
    assert status in ("wrong", "error"), (status, said)
    assert attempt.says.lower() in said.lower(), said


def test_every_exercise_has_several_attempts():
    tried = {a.exercise for a in ATTEMPTS}
    assert tried == set(checks.exercises())
    assert all(sum(a.exercise == name for a in ATTEMPTS) >= 5 for name in tried)
