"""vitcourse.checks.scrambling: `scramble` accepts right answers and names each mistake, written
the way a learner would write them."""

import pytest
import torch

from vitcourse import checks
from vitcourse.patching import patchify, unpatchify
from vitcourse.scrambling import scramble


def _gathered(images, patch_size, patch_order, pixel_order):
    # The right answer in other words: an index per number, gathered in one step.
    patches = patchify(images, patch_size)
    index = pixel_order.expand(len(patch_order), -1)
    picked = patches[:, patch_order].gather(2, index.expand(len(images), -1, -1))
    return unpatchify(picked, patch_size, images.shape[-2:])


def _written_into(images, patch_size, patch_order, pixel_order):
    patches = patchify(images, patch_size)
    out = torch.empty_like(patches)
    out[:, patch_order] = patches  # scatters: patch i goes to place patch_order[i]
    return unpatchify(out[:, :, pixel_order], patch_size, images.shape[-2:])


def _pixels_written_into(images, patch_size, patch_order, pixel_order):
    patches = patchify(images, patch_size)[:, patch_order]
    out = torch.empty_like(patches)
    out[:, :, pixel_order] = patches
    return unpatchify(out, patch_size, images.shape[-2:])


def _patches_only(images, patch_size, patch_order, pixel_order):
    return unpatchify(patchify(images, patch_size)[:, patch_order], patch_size, images.shape[-2:])


def _pixels_only(images, patch_size, patch_order, pixel_order):
    return unpatchify(
        patchify(images, patch_size)[:, :, pixel_order], patch_size, images.shape[-2:]
    )


def _orders_swapped(images, patch_size, patch_order, pixel_order):
    patches = patchify(images, patch_size)
    return unpatchify(patches[:, pixel_order][:, :, patch_order], patch_size, images.shape[-2:])


def _reshaped(images, patch_size, patch_order, pixel_order):
    B, C, H, W = images.shape
    patches = images.reshape(B, (H // patch_size) * (W // patch_size), -1)  # not patches
    return patches[:, patch_order][:, :, pixel_order].reshape(B, C, H, W)


def test_right_answers_pass_and_come_back():
    assert checks.check_scramble(scramble) is scramble
    assert checks.check_scramble(_gathered) is _gathered


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_written_into, "the patches moved the other way"),
        (_pixels_written_into, "the numbers inside each patch moved the other way"),
        (_patches_only, "apply pixel_order too"),
        (_pixels_only, "apply patch_order too"),
        (lambda images, *args: patchify(_gathered(images, *args), 4), "give them back as images"),
        (_reshaped, "a plain reshape of the images does not cut out patches"),
        (lambda images, *args: _gathered(images, *args).flip(-1), "some numbers are not where"),
    ],
)
def test_each_mistake_gets_its_hint(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_scramble(fn)


def test_orders_on_the_wrong_axes_raise_and_get_a_hint(capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns["_learner"] = _orders_swapped
    shell.run_cell("from vitcourse.checks import check_scramble\ncheck_scramble(_learner)")
    shown = capsys.readouterr().out
    assert "scramble" in shown and "each order goes with its own axis" in shown, shown


def test_the_verdicts_hold_for_another_seed():
    exercise = checks.EXERCISES["scramble"]
    for seed in (1, 7):
        inputs = exercise.inputs(seed)
        exercise.judge(exercise.run(scramble, **inputs), **inputs)  # passes
        with pytest.raises(checks.CheckFailed, match="apply pixel_order too"):
            exercise.judge(exercise.run(_patches_only, **inputs), **inputs)


def test_an_open_exercise_lends_the_reference(capsys):
    def open_one(images, patch_size, patch_order, pixel_order):
        raise NotImplementedError

    assert checks.check_scramble(open_one) is scramble
    assert "not written yet" in capsys.readouterr().out
