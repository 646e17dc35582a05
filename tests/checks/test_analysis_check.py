"""vitcourse.checks.analysis: attention_rollout (notebook 07) and equivariance_error (08) accept
right answers and name each mistake.
The wrong answers are written the way a learner would write them, not copied from the
checks' own simulations."""

import pytest
import torch

from vitcourse import checks
from vitcourse.analysis import roll

# --- notebook 07: attention rollout ------------------------------------------------------------


def _rollout(combine="mean", residual=True, renormalise=True, new_on_left=True, layers=None):
    def attention_rollout(maps):
        L, B, h, T, _ = maps.shape
        eye = torch.eye(T)
        result = eye.expand(B, T, T)
        for layer in maps if layers is None else maps[layers]:
            a = layer.mean(dim=1) if combine == "mean" else layer.amax(dim=1)
            if residual:
                a = a + eye
            if renormalise:
                a = a / a.sum(dim=-1, keepdim=True)
            result = a @ result if new_on_left else result @ a
        return result

    return attention_rollout


def test_attention_rollout_check_accepts_good_answers():
    from vitcourse.analysis import attention_rollout

    assert checks.check_attention_rollout(attention_rollout) is attention_rollout
    good = _rollout()
    assert checks.check_attention_rollout(good) is good


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_rollout(residual=False), "the residual path is missing"),
        (_rollout(renormalise=False), "rows sum to 2"),
        (_rollout(new_on_left=False), "multiplied in the wrong order"),
        (_rollout(combine="max"), "by their mean"),
        (_rollout(layers=slice(-1, None)), "only the last layer"),
        (lambda maps: maps.mean(2), "one map per layer"),
    ],
)
def test_attention_rollout_mistakes(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_attention_rollout(fn)


# --- notebook 08: translation equivariance -----------------------------------------------------


def _equivariance(
    shift_features=True,
    dims=-1,
    border=True,
    relative=True,
    whole_denominator=False,
    by="a",
    move=True,
):
    def equivariance_error(features, image, shift, border_columns, given=roll):
        def moved(x, pixels):  # the given move, or torch.roll along `dims` whatever was given
            return given(x, pixels) if dims == -1 and move else torch.roll(x, pixels, dims=dims)

        a = features(image)
        if shift_features:
            a = moved(a, shift)
        b = features(moved(image, shift))
        whole = {"a": a, "b": b}[by]
        if border:
            end = a.shape[-1] - border_columns
            a, b = a[..., border_columns:end], b[..., border_columns:end]
        error = (a - b).norm()
        below = whole if whole_denominator else {"a": a, "b": b}[by]
        return (error / below.norm() if relative else error).item()

    return equivariance_error


def test_equivariance_check_accepts_good_answers():
    from vitcourse.analysis import equivariance_error

    assert checks.check_equivariance_error(equivariance_error) is equivariance_error
    good = _equivariance()
    assert checks.check_equivariance_error(good) is good


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_equivariance(shift_features=False), "shift the features too"),
        (_equivariance(dims=-2), "shift along the width"),
        (_equivariance(border=False), "leave out `border` columns"),
        (_equivariance(relative=False), "make it relative"),
        (_equivariance(whole_denominator=True), "leave the border out of the denominator too"),
        (_equivariance(by="b"), "not of the features of the shifted image"),
        (_equivariance(move=False), "not always torch.roll"),
        (lambda f, x, s, b, m: "small", "should return one number"),
    ],
)
def test_equivariance_mistakes(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_equivariance_error(fn)


def test_a_wrong_number_is_called_a_number_not_a_shape():
    with pytest.raises(AssertionError) as failed:
        checks.check_equivariance_error(_equivariance(relative=False))
    assert "the shape is right" not in str(failed.value)
    assert "which is not the right value" in str(failed.value)


def test_the_verdicts_hold_for_another_seed():
    good = _rollout()
    assert checks.EXERCISES["attention_rollout"].check(good, seed=12345) is good
    with pytest.raises(AssertionError, match="rows sum to 2"):
        checks.EXERCISES["attention_rollout"].check(_rollout(renormalise=False), seed=12345)
    good = _equivariance()
    assert checks.EXERCISES["equivariance_error"].check(good, seed=12345) is good
    with pytest.raises(AssertionError, match="shift along the width"):
        checks.EXERCISES["equivariance_error"].check(_equivariance(dims=-2), seed=12345)
