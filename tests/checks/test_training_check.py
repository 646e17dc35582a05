"""vitcourse.checks.training: train_step accepts right answers and names each mistake.
The wrong answers are written the way a learner would write them, not copied from the
checks' own simulations."""

import pytest
import torch.nn.functional as F
from torch import nn

from vitcourse import checks


def open_exercise(*args, **kwargs):
    raise NotImplementedError()


# --- notebook 06: the training step ------------------------------------------------------------


def _step(order: str, smoothing: bool = True):
    """A learner's train_step, its lines in the order given ("zero backward clip step", ...)."""

    def train_step(model, optimizer, images, labels, label_smoothing, grad_clip):
        loss = F.cross_entropy(
            model(images), labels, label_smoothing=label_smoothing if smoothing else 0.0
        )
        for part in order.split():
            if part == "zero":
                optimizer.zero_grad()
            elif part == "backward":
                loss.backward()
            elif part == "clip":
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            elif part == "step":
                optimizer.step()
        return loss

    return train_step


def test_train_step_accepts_the_reference_and_a_learners_version(capsys):
    from vitcourse.training.loop import train_step

    assert checks.EXERCISES["train_step"].check(train_step) is train_step  # passes its own check
    good = _step("zero backward clip step")
    assert checks.check_train_step(good) is good
    assert checks.check_train_step(open_exercise) is train_step
    assert "not written yet" in capsys.readouterr().out


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_step("backward clip step"), "gradients are never reset"),
        (_step("zero backward clip"), "the weights never change"),
        (_step("backward clip zero step"), "the weights never change"),
        (_step("zero backward step"), "gradient norm is not clipped"),
        (_step("zero backward clip step", smoothing=False), "label smoothing is missing"),
    ],
)
def test_train_step_mistakes(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_train_step(fn)


def test_the_verdicts_hold_for_another_seed():
    good = _step("zero backward clip step")
    assert checks.EXERCISES["train_step"].check(good, seed=12345) is good
    with pytest.raises(AssertionError, match="gradients are never reset"):
        checks.EXERCISES["train_step"].check(_step("backward clip step"), seed=12345)
