"""Exercise checks: compare a learner's code with the reference and explain what went wrong.

Used by the exercises in notebooks 01-09. The package mirrors the modules it checks:
`checks.patching` checks `vitcourse.patching`, `checks.attention` checks `vitcourse.attention`, and
so on (`checks.training` checks the loop, `vitcourse.training.loop`, and `checks.distillation`
checks `vitcourse.training.distillation`); the reference solutions live in their concept's module.
Six rooms serve them all::

    harness    run the learner's code on seeded inputs, compare with the reference, and fail
               with the hint that names the likely mistake (`compare`, `CheckFailed`)
    answers    what the learner's code returned, as plain data that cannot carry code
    hints      hints in three tiers (the first a `Hint`'s text, the second its `more` or the
               exercise's, the third a small case worked by hand), and the few lines said when
               the learner's own code raises inside a check
    crashes    the first sentence for each kind of error the learner's code raises
    exercise   one exercise: its check's two sides (the learner's `answer`, the judge's
               `verdict`) and what it says when the learner's code crashes
    registry   `@exercise(name, notebook, reference)`: the verdict the notebook prints
               ("correct", "not written yet"), `hint("attention")` (the second tier), the
               progress file, `progress()` and `grade()`; `exercises()`, all of them in order

A notebook imports only the checks it uses: `check_patchify` is found in `checks.patching` when
first asked for, so notebook 01 does not load notebook 06's trainer and its data layer.

Each check runs the learner's function (or module, with the reference's weights loaded into it)
on seeded inputs and compares with `vitcourse`'s own version, in two sides the class grader
keeps apart (`run` and `judge`; the answer crosses between them as plain data, `answers`). On success the check cell gets the
learner's object back, so the notebook goes on with their code; on a wrong answer it fails with a
hint; while the exercise still raises `NotImplementedError`, it says so and hands back the
reference, so the rest of the notebook runs.
"""

import importlib

from vitcourse.checks.exercise import Exercise
from vitcourse.checks.harness import CheckFailed, Hint
from vitcourse.checks.registry import (
    CHECK_MODULES,
    assert_written,
    exercise_results,
    exercises,
    grade,
    hint,
    passed,
    progress,
    progress_file,
)

# Each check's module, imported when a notebook first asks for the check (PEP 562): notebook 01's
# `from vitcourse.checks import check_patchify` loads the patching check and the patching module,
# not notebook 06's trainer and its data layer. `exercises()` imports them all, in this order.
_ROOMS = {
    "check_patchify": "checks.patching",  # notebook 01
    "check_unpatchify": "checks.patching",
    "check_embed_tokens": "checks.embedding",  # 02
    "check_patch_embedding": "checks.embedding",
    "check_attention": "checks.attention",  # 03
    "check_multi_head_attention": "checks.attention",
    "check_layer_norm": "checks.block",  # 04
    "check_transformer_block": "checks.block",
    "check_parameter_count": "checks.vit",  # 05
    "check_vision_transformer": "checks.vit",
    "check_train_step": "checks.training",  # 06
    "check_attention_rollout": "checks.analysis",  # 07
    "check_equivariance_error": "checks.analysis",  # 08
    "check_masked_patch_loss": "checks.mae",  # 09
    "check_random_masking": "checks.mae",
    "check_distillation_loss": "checks.distillation",  # 09
    "check_scramble": "checks.scrambling",  # 09
}
assert {room.removeprefix("checks.") for room in _ROOMS.values()} == set(CHECK_MODULES)


def __getattr__(name: str):
    if name in _ROOMS:
        return getattr(importlib.import_module(f"vitcourse.{_ROOMS[name]}"), name)
    if name == "EXERCISES":  # every exercise, in the course's order
        return exercises()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "CHECK_MODULES",
    "EXERCISES",
    "CheckFailed",
    "Exercise",
    "assert_written",
    "check_attention",
    "check_attention_rollout",
    "check_distillation_loss",
    "check_embed_tokens",
    "check_equivariance_error",
    "check_layer_norm",
    "check_masked_patch_loss",
    "check_multi_head_attention",
    "check_parameter_count",
    "check_patch_embedding",
    "check_patchify",
    "check_random_masking",
    "check_scramble",
    "check_train_step",
    "check_transformer_block",
    "check_unpatchify",
    "check_vision_transformer",
    "exercise_results",
    "exercises",
    "grade",
    "hint",
    "passed",
    "Hint",
    "progress",
    "progress_file",
]
