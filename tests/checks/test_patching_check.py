"""vitcourse.checks.patching: patchify and unpatchify accept right answers and name each mistake.
The wrong answers are written the way a learner would write them, not copied from the
checks' own simulations."""

import pytest

from vitcourse import checks
from vitcourse.patching import patchify, unpatchify

# --- patches ----------------------------------------------------------------------------------


def _patchify_with(order):
    def fn(images, P):
        B, C, H, W = images.shape
        x = images.reshape(B, C, H // P, P, W // P, P).permute(*order)
        return x.reshape(B, (H // P) * (W // P), P * P * C)

    return fn


@pytest.mark.parametrize(
    "fn, hint",
    [
        (_patchify_with((0, 4, 2, 3, 5, 1)), "column by column. Number them like reading a page"),
        (_patchify_with((0, 2, 4, 1, 3, 5)), "channel last"),
        (
            lambda images, P: images.reshape(images.shape[0], -1, P * P * images.shape[1]),
            "a plain reshape does not cut out squares",
        ),
        (lambda images, P: patchify(images, P).transpose(1, 2), "last two axes are swapped"),
        (lambda images, P: patchify(images, P) * 2, "shape is right but the values are not"),
    ],
)
def test_patchify_mistakes(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_patchify(fn)


def test_unpatchify():
    assert checks.check_unpatchify(unpatchify) is unpatchify
    with pytest.raises(AssertionError, match="plain reshape does not put the squares back"):
        checks.check_unpatchify(lambda p, P, size: p.reshape(p.shape[0], -1, *size))
    with pytest.raises(AssertionError, match="should give x back"):
        checks.check_unpatchify(lambda p, P, size: unpatchify(p, P, size).flip(-1))
