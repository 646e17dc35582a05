"""Check for notebook 06's exercise: one optimisation step, `train_step`
(`vitcourse.training.loop`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from vitcourse.checks.harness import Mistakes, compare, fail, randomized, seeded
from vitcourse.checks.hints import Hint
from vitcourse.checks.registry import exercise
from vitcourse.language import N_, _
from vitcourse.training import loop


def _tiny_model() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(12, 16), nn.GELU(), nn.Linear(16, 3))


def _run_steps(
    step: Callable, state: dict, batches: list, label_smoothing: float = 0.1, grad_clip: float = 1.0
):
    """Two steps with `step` on the tiny model, from the weights `state`, with its AdamW; the
    losses and the final weights. Both sides use it: `run` with the learner's step, `judge` with
    the reference's and the mistakes'."""
    model = _tiny_model()
    model.load_state_dict(state)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05, weight_decay=0.05)
    losses = [step(model, optimizer, x, y, label_smoothing, grad_clip) for x, y in batches]
    return losses, torch.cat([p.detach().flatten() for p in model.parameters()])


_STEP_MORE = N_(
    "the step's order: the logits, the loss (with label smoothing), reset the gradients, "
    "backward, clip the gradient norm, the optimizer's step; return the loss."
)


def _step_mistakes(state, batches) -> Mistakes:
    """The classic slips in a training step, each as the weights it would leave after two steps."""

    def without(zero=True, clip=True, update=True, smoothing=True):
        def step(model, optimizer, x, y, label_smoothing, grad_clip):
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

        return _run_steps(step, state, batches)[1]

    mistakes = [
        (
            Hint(
                N_(
                    "the gradients are never reset, so the second step also adds the first "
                    "batch's: each backward() adds to what the parameters' gradients hold."
                ),
                more=N_("the optimizer can reset them; do it once per step, before backward()."),
            ),
            lambda: without(zero=False),
        ),
        (
            Hint(
                N_(
                    "the weights never change: the optimizer must take its step after backward() "
                    "and the clipping."
                ),
                more=N_(
                    "resetting the gradients between backward() and the optimizer's step "
                    "leaves it nothing to apply: reset them before backward()."
                ),
            ),
            lambda: without(update=False),
        ),
        (
            Hint(
                N_("the gradient norm is not clipped to grad_clip."),
                more=N_(
                    "torch.nn.utils has a function that clips the parameters' gradient norm "
                    "in place; it goes after backward() and before the optimizer's step."
                ),
            ),
            lambda: without(clip=False),
        ),
        (
            Hint(
                N_("label smoothing is missing from the loss."),
                more=N_(
                    "the cross-entropy function takes label smoothing as one of its arguments."
                ),
            ),
            lambda: without(smoothing=False),
        ),
    ]
    return mistakes


@exercise("train_step", "06_training", loop.train_step)
class check_train_step:
    """Check `fn(model, optimizer, images, labels, label_smoothing, grad_clip) -> loss`: one
    optimisation step, as `vitcourse.training.loop.train_step` takes it. The loss may come back as a
    tensor or as a number (`.item()`); the check puts the model in training mode itself."""

    called = N_(
        "a tiny model (Linear 12 -> 16 -> 3) with AdamW, two batches of images (8, 1, 3, 4) and "
        "labels (8,), label_smoothing 0.1, grad_clip 1.0"
    )
    more = _STEP_MORE

    @staticmethod
    def inputs(seed: int) -> dict:
        """A tiny seeded model's weights and two batches whose gradients exceed the clip norm."""
        return {
            "state": randomized(_tiny_model(), seed).state_dict(),
            "batches": [
                (seeded(8, 1, 3, 4, seed=seed + s) * 3, torch.arange(8) % 3) for s in (1, 2)
            ],
        }

    @staticmethod
    def run(train_step, state, batches):
        return _run_steps(train_step, state, batches)

    @staticmethod
    def judge(got, state, batches) -> None:
        losses, weights = got
        expected_losses, expected = _run_steps(loop.train_step, state, batches)
        if not all(
            isinstance(loss, float | int) or (isinstance(loss, torch.Tensor) and loss.numel() == 1)
            for loss in losses
        ):
            fail(
                _("it should return the batch's loss, one number (a tensor, or its .item())"),
                N_("return the loss the step computed."),
            )

        mistakes = _step_mistakes(state, batches)
        # The weights first: a wrong step shows there, and then changes the second batch's loss too.
        compare(
            weights,
            expected,
            mistakes,
            generic=Hint(N_("check the step's parts and their order."), more=_STEP_MORE),
            what=_("the weights after two steps"),
        )
        compare(
            torch.stack(
                [torch.as_tensor(loss, dtype=torch.float32).reshape(()) for loss in losses]
            ),
            torch.stack(expected_losses).detach(),
            generic=Hint(
                N_(
                    "return the batch's loss: the cross-entropy (with label smoothing) of the "
                    "model's logits against the labels."
                ),
                more=N_(
                    "the loss of the logits computed at the start of the step, before the update."
                ),
            ),
            what=_("the returned losses"),
        )
