"""The checks' tools: run the learner's code, compare its output with the reference's, and fail
with the hint that names the likely mistake.

Every check in this package is built from these few pieces. A check runs the learner's function
(or module, with the reference's weights loaded into it, `run_with_reference_weights`) on seeded
inputs (`seeded`), and hands the output to `compare` together with the classic mistakes, each
as (hint, a function computing what that mistake would output): an output that matches a mistake
gets its hint. `call` turns the learner's NotImplementedError into `NotWritten`, and `fail`
raises `CheckFailed`; the registry (`checks.registry`) turns both into what the notebook shows.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

# (hint, a function computing the output that mistake would give); used by `compare`.
Mistakes = list[tuple[str, Callable[[], torch.Tensor]]]


class NotWritten(Exception):
    """The learner's code still raises NotImplementedError: the exercise is open."""


class CheckFailed(AssertionError):
    """A wrong answer: what is wrong (`problem`) and what to try (`hint`).

    The registry fills in the exercise's name. In a notebook, IPython shows an exception that has
    `_render_traceback_` as exactly the lines it returns: the message, with no frames of the
    check's code, so a failed check never shows the reference solution's lines.
    """

    def __init__(self, problem: str, hint: str = "", exercise: str = ""):
        super().__init__(problem, hint)
        self.problem, self.hint, self.exercise = problem, hint, exercise

    def __str__(self) -> str:
        name = self.exercise or "your answer"
        return f"{name} is not right yet: {self.problem}" + (
            f"\nHint: {self.hint}" if self.hint else ""
        )

    def _render_traceback_(self) -> list[str]:
        return [f"✗ {line}" if i == 0 else line for i, line in enumerate(str(self).splitlines())]


def call(fn: Callable, *args, **kwargs):
    """Call the learner's `fn`; an exercise that is still open raises `NotWritten`."""
    try:
        return fn(*args, **kwargs)
    except NotImplementedError as e:
        raise NotWritten from e


def fail(problem: str, hint: str = ""):
    raise CheckFailed(problem, hint)


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, rtol=1e-4, atol=1e-5)


def compare(
    got,
    expected: torch.Tensor,
    mistakes: Mistakes = (),
    generic: str = "",
    shape_hints: dict | None = None,
    what: str = "",
) -> None:
    """Pass silently if `got` equals `expected`; otherwise fail with the best hint we have.

    `shape_hints` maps a wrong shape to its hint; `what` names the part compared when a check
    compares several ("the weights", "the returned losses").
    """
    where = f"in {what}, " if what else ""
    if not isinstance(got, torch.Tensor):
        fail(f"{where}it should return a tensor, but returned {type(got).__name__}")
    if got.shape != expected.shape:
        hint = (shape_hints or {}).get(tuple(got.shape), "")
        fail(
            f"{where}expected an output of shape {tuple(expected.shape)}, got {tuple(got.shape)}",
            hint,
        )
    if close(got, expected):
        return
    if not torch.isfinite(got).all():
        fail(f"{where}the output holds NaN or infinite values", generic)
    for hint, mistaken in mistakes:
        try:
            wrong = mistaken()
        except Exception:  # a mistake that cannot even be computed on these inputs
            continue
        if close(got, wrong):
            fail(f"{where}the shape is right but the values are not", hint)
    fail(f"{where}the shape is right but the values are not", generic)


def seeded(*shape: int, seed: int = 0) -> torch.Tensor:
    """Random numbers that are the same on every run: the checks' inputs."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def randomized(module: nn.Module, seed: int = 0) -> nn.Module:
    """Give every parameter (LayerNorm gains included) distinct random values, so that two
    different computations cannot agree by accident."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3 + (1.0 if p.ndim == 1 else 0.0))
    return module.eval()


def run_with_reference_weights(build: Callable, reference: nn.Module, x: torch.Tensor):
    """Build the learner's module, load the reference's weights into it, and run it on `x`."""
    learner = call(build)
    try:
        learner.load_state_dict(reference.state_dict())
    except RuntimeError as e:
        fail(
            "its parameters do not match the reference's names and shapes "
            f"({str(e).splitlines()[0]})",
            "keep __init__ exactly as given; write only forward.",
        )
    learner.eval()
    with torch.no_grad():
        return call(learner, x.clone())
