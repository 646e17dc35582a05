"""Check for notebook 06's exercise: one optimisation step, `train_step`
(`vitcourse.training.loop`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from vitcourse.checks.harness import Hint, Mistakes, compare, fail, randomized, seeded
from vitcourse.checks.registry import exercise
from vitcourse.language import N_, _
from vitcourse.training import loop


def _tiny_model() -> nn.Module:
    """A model whose training and evaluation modes differ, as a ViT's do (dropout): BatchNorm
    normalises with the batch's statistics in training mode and with its running ones in
    evaluation mode, with no randomness for the two sides to share."""
    return nn.Sequential(
        nn.Flatten(), nn.Linear(12, 16), nn.BatchNorm1d(16), nn.GELU(), nn.Linear(16, 3)
    )


# (label_smoothing, grad_clip) of the check's two runs: the notebook's, and others that show
# whether the step uses its arguments.
_SETTINGS = ((0.1, 1.0), (0.3, 0.25))


def _run_steps(
    step: Callable, state: dict, batches: list, label_smoothing: float = 0.1, grad_clip: float = 1.0
):
    """Two steps with `step` on the tiny model, from the weights `state`, with its AdamW; the
    losses, the final weights and whether the model is still in training mode. Both sides use it:
    `run` with the learner's step, `judge` with the reference's and the mistakes'."""
    model = _tiny_model()
    model.load_state_dict(state)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.05)
    losses = [step(model, optimizer, x, y, label_smoothing, grad_clip) for x, y in batches]
    return losses, torch.cat([p.detach().flatten() for p in model.parameters()]), model.training


_STEP_MORE = N_(
    "the step's order: the logits, the loss (with label smoothing), reset the gradients, "
    "backward, clip the gradient norm, the optimizer's step; return the loss."
)


_NEVER_RESET = Hint(
    N_(
        "the gradients are never reset, so the second step also adds the first "
        "batch's: each backward() adds to what the parameters' gradients hold."
    ),
    more=N_("the optimizer can reset them; do it once per step, before backward()."),
)

_NEVER_UPDATED = Hint(
    N_(
        "the weights never change: the optimizer must take its step after backward() "
        "and the clipping."
    ),
    more=N_(
        "resetting the gradients between backward() and the optimizer's step "
        "leaves it nothing to apply: reset them before backward()."
    ),
)

_NOT_CLIPPED = Hint(
    N_("the gradient norm is not clipped to grad_clip before the optimizer's step."),
    more=N_(
        "torch.nn.utils has a function that clips the parameters' gradient norm "
        "in place; it goes after backward() and before the optimizer's step."
    ),
)

_NO_SMOOTHING = Hint(
    N_("label smoothing is missing from the loss."),
    more=N_("the cross-entropy function takes label smoothing as one of its arguments."),
)

_EVAL_MODE = Hint(
    N_(
        "the step puts the model in evaluation mode: dropout and BatchNorm then "
        "behave as at test time, and the model does not train as it should. The "
        "trainer sets training mode before the steps; the step leaves the mode alone."
    ),
    more=N_(
        "model.eval() belongs to evaluation (with torch.no_grad()), after the "
        "training steps; this check's model has a BatchNorm layer, which shows it."
    ),
)

_ARGUMENTS_IGNORED = Hint(
    N_(
        "the step ignores its label_smoothing and grad_clip arguments: it uses "
        "the notebook's values whatever it is given (the check also tries "
        "label_smoothing 0.3 and grad_clip 0.25)."
    ),
    more=N_("use the arguments' names where the numbers are."),
)


_SMOOTHING_IGNORED = Hint(
    N_(
        "the step ignores its label_smoothing argument: it uses the notebook's 0.1 whatever it is "
        "given (the check also tries 0.3)."
    ),
    more=N_("use the argument's name where the number is."),
)
_CLIP_IGNORED = Hint(
    N_(
        "the step ignores its grad_clip argument: it clips at the notebook's 1.0 whatever it is "
        "given (the check also tries 0.25)."
    ),
    more=N_("use the argument's name where the number is."),
)


def _step_mistakes(state, batches, label_smoothing: float, grad_clip: float) -> Mistakes:
    """The classic slips in a training step, each as the weights it would leave after two steps."""

    def without(zero=True, clip=True, update=True, smoothing=True, train=True, fixed=()):
        def step(model, optimizer, x, y, label_smoothing, grad_clip):
            if not train:
                model.eval()
            if "smoothing" in fixed:  # the notebook's values written into the step
                label_smoothing = _SETTINGS[0][0]
            if "clip" in fixed:
                grad_clip = _SETTINGS[0][1]
            smoothed = label_smoothing if smoothing else 0
            loss = F.cross_entropy(model(x), y, label_smoothing=smoothed)
            if zero:
                optimizer.zero_grad()
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
            if update:
                optimizer.step()
            return loss

        return _run_steps(step, state, batches, label_smoothing, grad_clip)[1]

    mistakes = [
        (
            _NEVER_RESET,
            lambda: without(zero=False),
        ),
        (
            _NEVER_UPDATED,
            lambda: without(update=False),
        ),
        (
            _NOT_CLIPPED,
            lambda: without(clip=False),
        ),
        (
            _NO_SMOOTHING,
            lambda: without(smoothing=False),
        ),
        (
            _EVAL_MODE,
            lambda: without(train=False),
        ),
    ]
    if (label_smoothing, grad_clip) != _SETTINGS[0]:  # the notebook's values written in
        mistakes += [
            (_ARGUMENTS_IGNORED, lambda: without(fixed=("smoothing", "clip"))),
            (_SMOOTHING_IGNORED, lambda: without(fixed=("smoothing",))),
            (_CLIP_IGNORED, lambda: without(fixed=("clip",))),
        ]
    return mistakes


@exercise("train_step", "06_training", loop.train_step)
class check_train_step:
    """Check `fn(model, optimizer, images, labels, label_smoothing, grad_clip) -> loss`: one
    optimisation step, as `vitcourse.training.loop.train_step` takes it. The loss may come back as a
    tensor or as a number (`.item()`): accepted on purpose, the trainer only prints it. The check
    puts the model in training mode itself, and the step must leave it so."""

    called = N_(
        "a tiny model (Linear 12 -> 16, BatchNorm, Linear 16 -> 3) with AdamW, two batches of "
        "images (8, 1, 3, 4) and labels (8,), with label_smoothing 0.1 and grad_clip 1.0, then "
        "with 0.3 and 0.25"
    )
    more = _STEP_MORE
    worked = N_(
        "the order, with what each line changes: the logits (nothing yet); the loss with "
        "label_smoothing (nothing yet); the optimizer's zero_grad() (every .grad emptied); the "
        "backward pass from the loss (every .grad filled with this batch's gradient); the "
        "clipping (the .grad rescaled so that their total norm is at most grad_clip); the "
        "optimizer's step() (the weights move); return the loss. Print one parameter's .grad "
        "norm and its first value after each line of yours, and compare."
    )
    shown = {"batches": N_("the images or labels of a batch")}

    @staticmethod
    def inputs(seed: int) -> dict:
        """A tiny seeded model's weights and two batches whose gradients exceed the clip norms."""
        return {
            "state": randomized(_tiny_model(), seed).train().state_dict(),
            "batches": [
                (seeded(8, 1, 3, 4, seed=seed + s) * 3, torch.arange(8) % 3) for s in (1, 2)
            ],
        }

    @staticmethod
    def run(train_step, state, batches):
        return [_run_steps(train_step, state, batches, *setting) for setting in _SETTINGS]

    @staticmethod
    def judge(got, state, batches) -> None:
        if not (isinstance(got, list) and len(got) == len(_SETTINGS)):
            raise ValueError("an answer that pack did not write")
        for answer, setting in zip(got, _SETTINGS, strict=True):
            _judge_steps(answer, state, batches, *setting)


def _judge_steps(got, state, batches, label_smoothing: float, grad_clip: float) -> None:
    """One setting's verdict: the weights after two steps, the mode, then the returned losses."""
    losses, weights, training = got
    expected_losses, expected, _mode = _run_steps(
        loop.train_step, state, batches, label_smoothing, grad_clip
    )
    if not all(
        isinstance(loss, float | int) or (isinstance(loss, torch.Tensor) and loss.numel() == 1)
        for loss in losses
    ):
        fail(
            _("it should return the batch's loss, one number (a tensor, or its .item())"),
            N_("return the loss the step computed."),
        )
    mistakes = _step_mistakes(state, batches, label_smoothing, grad_clip)
    said = _("the weights after two steps (label_smoothing {smoothing}, grad_clip {clip})")
    # The weights first: a wrong step shows there, and then changes the second batch's loss too.
    compare(
        weights,
        expected,
        mistakes,
        generic=Hint(N_("check the step's parts and their order."), more=_STEP_MORE),
        what=said.format(smoothing=label_smoothing, clip=grad_clip),
    )
    if training is not True:
        fail(
            _("after your step the model is in evaluation mode"),
            _EVAL_MODE,
        )
    compare(
        torch.stack([torch.as_tensor(loss, dtype=torch.float32).reshape(()) for loss in losses]),
        torch.stack(expected_losses).detach(),
        generic=Hint(
            N_(
                "return the batch's loss: the cross-entropy (with label smoothing) of the "
                "model's logits against the labels."
            ),
            more=N_("the loss of the logits computed at the start of the step, before the update."),
        ),
        what=_("the returned losses"),
    )
