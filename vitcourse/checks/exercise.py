"""One exercise: its check's two sides, and what it says when the learner's code crashes.

An `Exercise` is what `@exercise` (`checks.registry`) registers for a check class: the learner's
side (`answer`: run their code on a copy of the inputs; what it returned, and whether it changed
its inputs, as plain data) and the judge's (`verdict`), which the class grader keeps apart, and
`check`, which joins them in a notebook.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from vitcourse.checks.answers import pack, unpack
from vitcourse.checks.crashes import crash_hint
from vitcourse.checks.harness import (
    CheckFailed,
    Hint,
    NotWritten,
    PartlyWritten,
    tensors_of,
    unchanged,
)
from vitcourse.checks.hints import LearnerRaised
from vitcourse.language import N_

_CRASHED = Hint(
    N_(
        "read the error: it names the operation and the shapes that do not fit. Print the shape "
        "of each intermediate result on inputs of the shapes above."
    ),
    more=N_(
        "write each step's shape as a comment beside it, from the input's shape to the result's."
    ),
)  # the hint for an error of no known kind; its second tier is the exercise's own


@dataclass(frozen=True)
class Exercise:
    """One exercise: the name the learner defines (and the check rebinds), its notebook, its check.

    A check is three functions (see `checks.harness`): `inputs(seed)`, `run(learner, **inputs)`,
    which calls only the learner's code, and `judge(got, **inputs)`, which raises `CheckFailed` on
    a wrong answer. `answer` and `verdict` are the two sides the class grader keeps apart (the
    learner's code in a sandbox, the verdict in its own process); `check` joins them. The rest is
    what the check says: its hints for errors the learner's code raises (`raised`), what it calls
    that code with (`called`), its second and third tiers (`more`, `worked`) and the words a
    message uses for its inputs (`shown`: `{"batches": "the images or labels of a batch"}`)."""

    name: str  # e.g. "patchify" or "MultiHeadSelfAttention"
    notebook: str  # the notebook's file name without ".ipynb", e.g. "01_patches"
    reference: object  # the course's solution, which the check lends while the exercise is open
    inputs: Callable[[int], dict]
    run: Callable
    judge: Callable
    raised: tuple = ()  # (a text the error contains, its Hint), for errors the learner's code raises
    called: str = ""
    more: str = ""
    worked: str = ""
    shown: tuple = ()  # (input, the words a message names it by)

    @classmethod
    def of(cls, name: str, notebook: str, reference, check: type) -> Exercise:
        """The exercise a check class describes (see `checks.harness`): its three functions and
        what it may add for the notebook."""
        return cls(
            name,
            notebook,
            reference,
            check.inputs,
            check.run,
            check.judge,
            raised=tuple(getattr(check, "raised", ())),
            called=getattr(check, "called", ""),
            more=getattr(check, "more", ""),
            worked=getattr(check, "worked", ""),
            shown=tuple(getattr(check, "shown", {}).items()),
        )

    def answer(self, learner, inputs: dict) -> tuple[bytes, bytes]:
        """The learner's side: run their code on a copy of `inputs`; what it returned and the
        copy's tensors after the call (to see whether it changed them in place), packed.
        NotWritten while it raises NotImplementedError; their own errors propagate."""
        given = copy.deepcopy(inputs)
        try:
            returned = self.run(learner, **given)
        except NotImplementedError as e:
            raise NotWritten from e
        return pack((returned, [tensor for _name, tensor in tensors_of(given)]))

    def verdict(self, answer: tuple[bytes, bytes], inputs: dict) -> None:
        """The judge's side: return on a right answer; CheckFailed, named after the exercise;
        NotWritten (or PartlyWritten) when nothing (or only a part) is written."""
        returned, after = unpack(*answer)
        try:
            unchanged(inputs, after, dict(self.shown))
            self.judge(returned, **inputs)
        except CheckFailed as failed:
            failed.exercise = self.name
            raise

    def check(self, learner, seed: int = 0):
        """Both sides in this process: the learner's object back when right, the reference while
        the exercise is open; CheckFailed when wrong; PartlyWritten when what is written is right
        and a part is still open (the caller says so, and lends the reference)."""
        inputs = self.inputs(seed)
        try:
            answer = self.answer(learner, inputs)
        except NotWritten:
            return self.reference
        except CheckFailed as failed:  # a module that does not take the reference's weights
            failed.exercise = self.name
            raise
        try:
            self.verdict(answer, inputs)
        except PartlyWritten:
            raise
        except NotWritten:
            return self.reference
        return learner

    def crashed(self, error: BaseException) -> LearnerRaised:
        """What the learner sees when their code raised `error` inside the check."""
        failed = LearnerRaised(
            error, self.called, crash_hint(error, self.raised, _CRASHED, self.more)
        )
        failed.exercise = self.name
        return failed
