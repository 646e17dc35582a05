"""The checks' tools: run the learner's code, compare its output with the reference's, and fail
with the hint that names the likely mistake.

Every check in this package has three parts, built from these few pieces:

- `inputs(seed)`: seeded inputs (`seeded`), and for a module the reference's weights;
- `run(learner, **inputs)`: only the learner's code, called on them (a module is built, given the
  reference's weights and run: `run_with_reference_weights`). The class grader runs this part in a
  sandbox where the course's solution to that exercise does not exist;
- `judge(got, **inputs)`: what came back (plain tensors and numbers, `checks.answers`) handed to
  `compare` with the classic mistakes, each as (hint, a function computing what that mistake would
  output): an output that matches a mistake gets its hint. `fail` raises `CheckFailed`.

The registry (`checks.registry`) turns the verdict into what the notebook shows.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import torch
from torch import nn

from vitcourse.checks.answers import OPEN, type_name
from vitcourse.language import N_, _

# (hint, a function computing the output that mistake would give); used by `compare`.
Mistakes = list[tuple[str, Callable[[], torch.Tensor]]]


class Hint(str):
    """A first-tier hint (the text) that carries a more specific second tier, `more`."""

    more: str

    def __new__(cls, first: str, more: str = "") -> Hint:
        hint = super().__new__(cls, first)
        hint.more = more
        return hint


class NotWritten(Exception):
    """The learner's code still raises NotImplementedError: the exercise is open."""


class PartlyWritten(NotWritten):
    """An exercise with several cases (the branches of `distillation_loss`): the written ones are
    right, the others still raise NotImplementedError. The exercise stays open (the course's
    solution stands in), and the learner is told which part is right and which is left."""

    def __init__(self, right: list[str], still_open: list[str]):
        self.right, self.still_open = right, still_open
        super().__init__(self.said())

    def said(self) -> str:
        return _(
            "what is written is right ({right}); still open: {still_open} (it raises "
            "NotImplementedError)"
        ).format(right=", ".join(self.right), still_open=", ".join(self.still_open))


class CheckFailed(AssertionError):
    """A wrong answer: what is wrong (`problem`) and what to try (`hint`).

    `problem` is written when the check fails, in the language chosen then; `hint` is kept as the
    check wrote it (marked with `N_`) and translated where it is shown: `shown_hint`, which `str()`
    shows. The registry fills in the exercise's name. In a notebook, IPython shows an exception
    that has `_render_traceback_` as exactly the lines it returns: the message, with no frames of
    the check's code, so a failed check never shows the reference solution's lines.
    """

    def __init__(self, problem: str, hint: str = "", exercise: str = ""):
        super().__init__(problem, hint)
        self.problem, self.hint, self.exercise = problem, hint, exercise

    @property
    def shown_hint(self) -> str:
        """The first-tier hint in the language chosen now."""
        return _(self.hint)

    def __str__(self) -> str:
        name = self.exercise or _("your answer")
        said = _("{name} is not right yet: {problem}").format(name=name, problem=self.problem)
        return said + ("\n" + _("Hint: {hint}").format(hint=self.shown_hint) if self.hint else "")

    def _render_traceback_(self) -> list[str]:
        lines = [f"✗ {line}" if i == 0 else line for i, line in enumerate(str(self).splitlines())]
        if self.exercise:  # in a notebook's check cell: where to get more, and what runs on
            lines += [
                _('More help: hint("{name}")   (from vitcourse.checks import hint)').format(
                    name=self.exercise
                ),
                _(
                    "Until this check passes, the notebook goes on with your {name}, so cells "
                    "below that use it may fail."
                ).format(name=self.exercise),
            ]
        return lines


class UsesCourseSolution(Exception):
    """Raised where the class grader removed the course's solution to the exercise it checks: an
    answer that calls, wraps or subclasses it is "not attempted", however it got hold of it."""


class WeightsMismatch(CheckFailed):
    """The learner's module does not take the reference's weights: its `__init__` was changed."""

    def __init__(self, detail: str):
        self.detail = detail[:300]
        super().__init__(
            _("its parameters do not match the reference's names and shapes ({detail})").format(
                detail=self.detail
            ),
            N_("keep __init__ exactly as given; write only forward."),
        )


def with_gradient(loss) -> tuple:
    """A loss and whether it carries a gradient back to the inputs that require one: a loss
    computed under torch.no_grad() (or from detached numbers) has the right value and trains
    nothing. `run` returns this pair; `judge` hands it to `judge_gradient`."""
    return loss, bool(getattr(loss, "requires_grad", False))


_NO_GRADIENT = Hint(
    N_(
        "the loss carries no gradient: it was computed under torch.no_grad(), or from numbers "
        "taken out of the graph (detach, item, numpy), so backward() has nothing to run through "
        "and the model would not learn."
    ),
    more=N_(
        "torch.no_grad() belongs to evaluation; a loss must be computed from the model's outputs "
        "as tensors, all the way."
    ),
)


def judge_gradient(got) -> object:
    """The loss `with_gradient` returned, after failing if it carries no gradient."""
    if not (type(got) in (tuple, list) and len(got) == 2):
        raise ValueError("an answer that pack did not write")
    loss, carries = got
    if type(loss) is torch.Tensor and carries is not True:
        fail(_("the loss it returned carries no gradient"), _NO_GRADIENT)
    return loss


def each_case(call: Callable, cases) -> list:
    """The learner's code called once per case (`call(*case)`); a case whose code still raises
    NotImplementedError gives `OPEN`, so that a function with several branches is judged on the
    ones written (`judge_cases`)."""
    results = []
    for case in cases:
        try:
            results.append(call(*case))
        except NotImplementedError:
            results.append(OPEN)
    return results


def judge_cases(got: list, cases, judge_one: Callable, label: Callable) -> None:
    """Judge each written case (`judge_one(answer, case)`); `label(case)` names a case for the
    learner ("kind='soft'"). A wrong written case fails and says what is still open; all open is
    `NotWritten`; written and right with some open is `PartlyWritten`."""
    answers = list(zip(cases, got, strict=True))
    still_open = list(dict.fromkeys(label(c) for c, a in answers if a is OPEN))
    written = [(c, a) for c, a in answers if a is not OPEN]
    if not written:
        raise NotWritten
    for case, answer in written:
        try:
            judge_one(answer, case)
        except CheckFailed as failed:
            if still_open:
                failed.problem += " " + _("({still_open}: not written yet)").format(
                    still_open=", ".join(still_open)
                )
            raise
    if still_open:
        raise PartlyWritten(list(dict.fromkeys(label(c) for c, _a in written)), still_open)


def tensors_of(inputs: dict) -> list[tuple[str, torch.Tensor]]:
    """The check's input tensors, named as a message names them: at the top level and inside
    lists and tuples (`batches[0][0]`), in a fixed order. Dicts (a module's weights, which
    `load_state_dict` copies) are left out."""
    found = []

    def walk(name: str, value, depth: int = 0):
        if type(value) is torch.Tensor:
            found.append((name, value))
        elif type(value) in (list, tuple) and depth < 3:
            for i, item in enumerate(value):
                walk(f"{name}[{i}]", item, depth + 1)

    for key, value in inputs.items():
        walk(key, value)
    return found


_IN_PLACE = Hint(
    N_(
        "an in-place operation (`+=`, `-=`, `/=`, or a method whose name ends in `_`) writes into "
        "the tensor it was given, so the caller's tensor changes too. Make a new tensor instead: "
        "a plain `+`, `-` or `/` does."
    ),
    more=N_(
        "the output can be right and the caller still harmed: a tensor changed in place is "
        "wrong the next time the caller uses it (positions added twice, a batch normalised "
        "twice), and autograd refuses some such changes."
    ),
)


def unchanged(inputs: dict, after: list, shown: dict | None = None) -> None:
    """Fail if the learner's code changed one of its input tensors in place: `after` holds the
    tensors as they were after the call (`tensors_of`'s order); `shown` maps an input's name to
    the words the learner knows it by."""
    before = tensors_of(inputs)
    if type(after) is not list or len(after) != len(before):
        raise ValueError("an answer that pack did not write")
    for (name, tensor), then in zip(before, after, strict=True):
        if type(then) is not torch.Tensor:
            raise ValueError("an answer that pack did not write")
        if then.shape != tensor.shape or not torch.equal(then, tensor):
            root = name.split("[")[0]
            said = (shown or {}).get(root, f"`{name}`")
            fail(
                _("your code changed {name}, one of its inputs, in place").format(name=said),
                _IN_PLACE,
            )


def fail(problem: str, hint: str = ""):
    raise CheckFailed(problem, hint)


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and torch.allclose(a, b, rtol=1e-4, atol=1e-5)


def _not_a_tensor(got, where: str):
    """Fail for a plain number where a tensor is wanted: `.item()` took the tensor away."""
    fail(
        _("{where}it returned a Python number ({type}), not a tensor").format(
            where=where, type=type(got).__name__
        ),
        Hint(
            N_(
                "keep the tensor: turned into a plain Python number (by item or float), it "
                "leaves nothing for backward to run through."
            ),
            more=N_("a loss is used as a tensor: the training step calls loss.backward() on it."),
        ),
    )


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
    compares several ("the weights", "the returned losses"), in the language chosen (the caller's
    `_`). The hints are passed as written (`N_`): they are translated where they are shown.
    """
    where = _("in {what}, ").format(what=what) if what else ""
    if type(got) in (float, int):
        _not_a_tensor(got, where)
    if type(got) is not torch.Tensor:
        fail(
            _("{where}it should return a tensor, but returned {type}").format(
                where=where, type=type_name(got)
            )
        )
    if got.shape != expected.shape:
        hint = (shape_hints or {}).get(tuple(got.shape), "")
        fail(
            _("{where}expected an output of shape {expected}, got {got}").format(
                where=where, expected=tuple(expected.shape), got=tuple(got.shape)
            ),
            hint,
        )
    if got.dtype != expected.dtype:
        fail(
            _("{where}expected {expected} numbers, got {got}").format(
                where=where, expected=expected.dtype, got=got.dtype
            )
        )
    if close(got, expected):
        return
    if not torch.isfinite(got).all():
        fail(_("{where}the output holds NaN or infinite values").format(where=where), generic)
    if got.numel() == 1:  # one number: its shape says nothing
        problem = _("{where}it returned {value}, which is not the right value").format(
            where=where, value=f"{got.item():.6g}"
        )
    else:
        problem = _("{where}the shape is right but the values are not").format(where=where)
    for hint, mistaken in mistakes:
        try:
            wrong = mistaken()
        except Exception:  # a mistake that cannot even be computed on these inputs
            continue
        if close(got, wrong):
            fail(problem, hint)
    fail(problem, generic)


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


@contextlib.contextmanager
def references_in_place(learner, **references):
    """While the learner's code runs, the names it calls from an earlier exercise (`attention`
    inside MultiHeadSelfAttention's forward) are right ones: each exercise is judged on its own,
    so a wrong `attention` cannot make a right MultiHeadSelfAttention fail."""
    parts = [learner] if not isinstance(learner, type) else list(vars(learner).values())
    spaces = {
        id(g): g for part in parts if isinstance(g := getattr(part, "__globals__", None), dict)
    }
    missing = object()
    saved = [
        (space, name, space.get(name, missing)) for space in spaces.values() for name in references
    ]
    try:
        for space in spaces.values():
            space.update(references)
        yield
    finally:
        for space, name, value in saved:
            if value is missing:
                space.pop(name, None)
            else:
                space[name] = value


def run_with_reference_weights(build: Callable, weights: dict, x: torch.Tensor):
    """Build the learner's module, load the reference's `weights` (its state dict) into it, and
    run it on `x`."""
    learner = build()
    try:
        learner.load_state_dict(weights)
    except RuntimeError as e:
        raise WeightsMismatch(str(e).splitlines()[0]) from None
    learner.eval()
    with torch.no_grad():
        return learner(x)
