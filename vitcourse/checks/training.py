"""Check for notebook 06's exercise: one optimisation step, `train_step` (`vitcourse.training`)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from vitcourse import training
from vitcourse.checks.harness import compare, fail, randomized, seeded
from vitcourse.checks.registry import exercise


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


@exercise("train_step", "06_training", training.train_step)
class check_train_step:
    """Check `fn(model, optimizer, images, labels, label_smoothing, grad_clip) -> loss`: one
    optimisation step, as `vitcourse.training.train_step` takes it."""

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
        expected_losses, expected = _run_steps(training.train_step, state, batches)
        if not all(isinstance(loss, torch.Tensor) and loss.numel() == 1 for loss in losses):
            fail("it should return the batch's loss, a tensor with one number")

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
                "the gradients are never reset, so the second step also adds the first batch's: "
                "call optimizer.zero_grad() before loss.backward().",
                lambda: without(zero=False),
            ),
            (
                "the weights never change: call optimizer.step() after loss.backward() (and the "
                "clipping), and zero the gradients *before* backward(), not between it and step().",
                lambda: without(update=False),
            ),
            (
                "the gradient norm is not clipped: call nn.utils.clip_grad_norm_("
                "model.parameters(), grad_clip) after backward() and before step().",
                lambda: without(clip=False),
            ),
            (
                "label smoothing is missing: F.cross_entropy(logits, labels, "
                "label_smoothing=label_smoothing).",
                lambda: without(smoothing=False),
            ),
        ]
        # The weights first: a wrong step shows there, and then changes the second batch's loss too.
        compare(
            weights,
            expected,
            mistakes,
            generic="forward, loss, zero_grad, backward, clip, step, in that order.",
            what="the weights after two steps",
        )
        compare(
            torch.stack([loss.reshape(()) for loss in losses]),
            torch.stack(expected_losses).detach(),
            generic="return the batch's loss: the cross-entropy of model(images) against labels.",
            what="the returned losses",
        )
