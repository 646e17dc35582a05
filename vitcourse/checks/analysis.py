"""Checks for notebook 07's `attention_rollout` and notebook 08's `equivariance_error`
(`vitcourse.analysis`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from vitcourse import analysis
from vitcourse.checks.answers import type_name
from vitcourse.checks.harness import Hint, compare, fail, randomized, seeded
from vitcourse.checks.registry import exercise
from vitcourse.language import N_, _

_ROLLOUT_MORE = N_(
    "start from the identity (B, T, T); for each layer, first to last: the mean of its heads "
    "(B, T, T), plus the identity, each row divided by its sum, multiplied onto the running "
    "product from the left."
)
# The hint for an answer that matches none of the known mistakes.
_ROLLOUT_GENERIC = Hint(
    N_(
        "compare your loop with the recipe above the exercise, one step at a time: the "
        "heads averaged, the identity added, the rows renormalised, the layers "
        "multiplied."
    ),
    more=_ROLLOUT_MORE,
)


@exercise("attention_rollout", "07_inside_a_vit", analysis.attention_rollout)
class check_attention_rollout:
    """Check `fn(maps (layers, B, heads, T, T)) -> (B, T, T)`: attention rollout."""

    called = N_("maps (3, 2, 2, 5, 5): 3 layers, B = 2, 2 heads, T = 5")
    more = _ROLLOUT_MORE
    worked = N_(
        "one layer, one image, one head, T = 2, whose attention is [[0, 1], [1, 0]] (each token "
        "looks only at the other). Plus the identity: [[1, 1], [1, 1]]; each row divided by its "
        "sum: [[0.5, 0.5], [0.5, 0.5]]: that is the rollout, shape (1, 2, 2). With two such "
        "layers it is [[0.5, 0.5], [0.5, 0.5]] times itself, the same matrix. Run yours on "
        "torch.tensor([[0., 1.], [1., 0.]]).reshape(1, 1, 1, 2, 2) and compare."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        scores = seeded(3, 2, 2, 5, 5, seed=seed) * 2
        return {"maps": scores.softmax(-1)}  # (L=3, B=2, h=2, T=5, T=5), rows sum to 1

    @staticmethod
    def run(attention_rollout, maps):
        return attention_rollout(maps)

    @staticmethod
    def judge(got, maps) -> None:
        eye = torch.eye(5)

        def roll(combine=lambda m: m.mean(1), residual=True, renormalise=True, order="new @ old"):
            out = eye.expand(2, 5, 5)
            for layer in maps:
                a = combine(layer) + (eye if residual else 0)
                if renormalise:
                    a = a / a.sum(-1, keepdim=True)
                out = a @ out if order == "new @ old" else out @ a
            return out

        mistakes = [
            (
                N_(
                    "the residual path is missing: add the identity to each layer's attention "
                    "(each token also keeps itself), then renormalise the rows."
                ),
                lambda: roll(residual=False),
            ),
            (
                N_(
                    "after adding the identity, the rows sum to 2: divide each row by its sum "
                    "again."
                ),
                lambda: roll(renormalise=False),
            ),
            (
                N_(
                    "the layers are multiplied in the wrong order: each layer reads what the "
                    "layers below mixed, so the new layer goes on the left of the product."
                ),
                lambda: roll(order="old @ new"),
            ),
            (
                N_("combine the heads by their mean (over the head axis), not their maximum."),
                lambda: roll(combine=lambda m: m.max(1).values),
            ),
            (
                N_(
                    "that is only the last layer's attention: rollout multiplies every layer's "
                    "together."
                ),
                lambda: (maps[-1].mean(1) + eye) / (maps[-1].mean(1) + eye).sum(-1, keepdim=True),
            ),
        ]
        compare(
            got,
            analysis.attention_rollout(maps),
            mistakes,
            generic=_ROLLOUT_GENERIC,
            shape_hints={
                (3, 2, 5, 5): N_(
                    "that is one map per layer: multiply the layers together into one "
                    "(B, T, T) map."
                ),
                (2, 2, 5, 5): N_("average the heads (dim 1 of each layer's (B, h, T, T)) first."),
            },
        )


def _features(weights: dict, where: torch.Tensor) -> Callable:
    """The layer the equivariance check measures: a 3 x 3 convolution with `weights`, plus a fixed
    pattern by position (`where`), which is not equivariant at all. Both sides build it."""
    conv = nn.Conv2d(1, 4, 3, padding=1)
    conv.load_state_dict(weights)
    conv.eval()

    def features(x):
        return conv(x) + where

    return features


# The hint for an answer that matches none of the known mistakes.
_EQUIVARIANCE_GENERIC = Hint(
    N_("compare your steps with the instructions above the exercise, one at a time."),
    more=N_(
        "over the columns away from the border only (both times): the norm of "
        "(shifted features - features of the shifted image), divided by the norm "
        "of the shifted features."
    ),
)


def _real_shift(x: torch.Tensor, pixels: int) -> torch.Tensor:
    """The check's real shift: `analysis.shift` with a background of 0.5 coming in."""
    return analysis.shift(x, pixels, fill=0.5)


# (shift, border, move) of the check's four calls: border 0 keeps every column; the last two
# move the image by a real shift, where nothing wraps round.
_SHIFTS = ((3, 2, analysis.roll), (1, 0, analysis.roll), (-2, 3, _real_shift), (2, 2, _real_shift))


def _equivariance_mistakes(features, image, shift: int, border: int, move) -> list:
    """equivariance_error's classic slips for one call, each with the number it would give."""
    W = image.shape[-1]
    inner = (..., slice(border, W - border))
    f_then_s = move(features(image), shift)
    s_then_f = features(move(image, shift))

    def relative(a, b, part=inner):
        return ((a - b)[part].norm() / a[part].norm()).reshape(1)

    return [
        (
            N_(
                "shift the features too: compare the features of the shifted image with "
                "the image's features shifted afterwards, by the same amount."
            ),
            lambda: relative(features(image), s_then_f),
        ),
        (
            N_(
                "move the image and the features with the function the check passes as "
                "`move`: it is not always torch.roll (a real shift lets the background in and "
                "wraps nothing round)."
            ),
            lambda: relative(
                torch.roll(features(image), shift, dims=-1),
                features(torch.roll(image, shift, dims=-1)),
            ),
        ),
        (
            N_("shift along the width, the last axis (dims=-1), not the height."),
            lambda: relative(
                torch.roll(features(image), shift, dims=-2),
                features(torch.roll(image, shift, dims=-2)),
            ),
        ),
        (
            N_(
                "leave out `border` columns at each side: there pixels wrapped round or the "
                "background came in, and no layer can be blamed for those."
            ),
            lambda: relative(f_then_s, s_then_f, part=(...,)),
        ),
        (
            N_(
                "make it relative: divide the difference's norm by the norm of the shifted "
                "features, over the same columns."
            ),
            lambda: (f_then_s - s_then_f)[inner].norm().reshape(1),
        ),
        (
            N_(
                "leave the border out of the denominator too: divide by the norm of the "
                "shifted features over the same inner columns, not over the whole width."
            ),
            lambda: ((f_then_s - s_then_f)[inner].norm() / f_then_s.norm()).reshape(1),
        ),
        (
            N_(
                "divide by the norm of the shifted features (computed first, then "
                "shifted), not of the features of the shifted image."
            ),
            lambda: relative(s_then_f, f_then_s),
        ),
    ]


@exercise("equivariance_error", "08_vit_vs_cnn", analysis.equivariance_error)
class check_equivariance_error:
    """Check `fn(features, image, shift, border, move) -> float`: a layer's distance from
    translation equivariance, as `vitcourse.analysis.equivariance_error` measures it, at four
    shifts and borders (border 0 among them), with wrap-around and with a real shift. A one-number tensor is accepted as the number, on purpose: the
    statement asks for `.item()`, and both mean the same."""

    called = N_(
        "features (a 3 × 3 convolution plus a fixed pattern by position), image (1, 1, 10, 12), "
        "with (shift, border) (3, 2) and (1, 0) moved by roll, (-2, 3) and (2, 2) by a real shift"
    )
    more = N_(
        "two paths to compare: features first then move, and move first then features, both "
        "with move(x, shift). Both "
        "norms (the difference's and the divisor's) over the columns from border to width - "
        "border, and the divisor is the first path's."
    )
    worked = N_(
        "two features to try yours on, with any image, shift and border: features = lambda x: x "
        "(the identity, equivariant) must give 0; features = lambda x: x + torch.arange(12.) (a "
        "pattern fixed by position, for images 12 pixels wide) gives more than 0. And with border "
        "0 every column counts: on a (1, 1, 10, 12) image the columns from 0 to 11."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        return {
            "weights": randomized(nn.Conv2d(1, 4, 3, padding=1), seed).state_dict(),
            "where": seeded(1, 4, 10, 12, seed=seed + 5),
            "image": seeded(1, 1, 10, 12, seed=seed + 6),
        }

    @staticmethod
    def run(equivariance_error, weights, where, image):
        with torch.no_grad():
            features = _features(weights, where)
            return [equivariance_error(features, image, *case) for case in _SHIFTS]

    @staticmethod
    def judge(got, weights, where, image) -> None:
        if not (isinstance(got, list) and len(got) == len(_SHIFTS)):
            raise ValueError("an answer that pack did not write")
        features = _features(weights, where)
        for answer, (shift, border, move) in zip(got, _SHIFTS, strict=True):
            if isinstance(answer, torch.Tensor) and answer.numel() == 1:
                answer = answer.item()
            if not isinstance(answer, float | int):
                fail(_("it should return one number, got {type}").format(type=type_name(answer)))
            if border == 0 and answer != answer:  # NaN: 0 / 0 over no column at all
                fail(
                    _("with border=0 it returned nan: your slice keeps no column"),
                    Hint(
                        N_(
                            "border 0 means every column. `[..., border:-border]` is empty then "
                            "(-0 is 0, and a slice up to 0 holds nothing): end the slice at the "
                            "width minus border instead."
                        ),
                        more=N_("x.shape[-1] is the width."),
                    ),
                )
            with torch.no_grad():
                expected = analysis.equivariance_error(features, image, shift, border, move)
                mistakes = _equivariance_mistakes(features, image, shift, border, move)
                compare(
                    torch.tensor([float(answer)]),
                    torch.tensor([expected]),
                    mistakes,
                    generic=_EQUIVARIANCE_GENERIC,
                    what=_("the number for shift {shift} and border {border} ({move})").format(
                        shift=shift, border=border, move=_move_name(move)
                    ),
                )


def _move_name(move) -> str:
    """How the feedback names the check's `move`: wrap-around or a real shift."""
    return _("wrapped round") if move is analysis.roll else _("a real shift")
