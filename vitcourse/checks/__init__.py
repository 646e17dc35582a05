"""Exercise checks: compare a learner's code with the reference and explain what went wrong.

Used by the exercises in notebooks 01-09. The package mirrors the modules it checks:
`checks.patching` checks `vitcourse.patching`, `checks.attention` checks `vitcourse.attention`,
and so on; the reference solutions live in their concept's module. Three rooms serve them all:

    harness    run the learner's code on seeded inputs, compare with the reference, and fail
               with the hint that names the likely mistake (`compare`, `CheckFailed`)
    answers    what the learner's code returned, as plain data that cannot carry code
    hints      hints in two tiers (`Hint`; `hint("attention")` prints the second), and the few
               lines said when the learner's own code raises inside a check
    registry   `@exercise(name, notebook, reference)`: the verdict the notebook prints
               ("correct", "not written yet"), the progress file, `progress()` and `grade()`

Each check runs the learner's function (or module, with the reference's weights loaded into it)
on seeded inputs and compares with `vitcourse`'s own version, in two sides the class grader
keeps apart (`run` and `judge`; the answer crosses between them as plain data, `answers`). On success the check cell gets the
learner's object back, so the notebook goes on with their code; on a wrong answer it fails with a
hint; while the exercise still raises `NotImplementedError`, it says so and hands back the
reference, so the rest of the notebook runs.
"""

# ruff: noqa: I001 - the check modules are imported in the course's order, not sorted: importing
# one registers its exercises, and `EXERCISES` (so `progress()` and the grader) lists them in that
# order.
from vitcourse.checks.harness import CheckFailed
from vitcourse.checks.hints import Hint, hint
from vitcourse.checks.registry import (
    EXERCISES,
    Exercise,
    assert_written,
    exercise_results,
    grade,
    passed,
    progress,
    progress_file,
)
from vitcourse.checks.patching import check_patchify, check_unpatchify  # notebook 01
from vitcourse.checks.embedding import check_embed_tokens, check_patch_embedding  # 02
from vitcourse.checks.attention import check_attention, check_multi_head_attention  # 03
from vitcourse.checks.block import check_layer_norm, check_transformer_block  # 04
from vitcourse.checks.vit import check_parameter_count, check_vision_transformer  # 05
from vitcourse.checks.training import check_train_step  # 06
from vitcourse.checks.analysis import check_attention_rollout, check_equivariance_error  # 07, 08
from vitcourse.checks.mae import check_masked_patch_loss, check_random_masking  # 09
from vitcourse.checks.distillation import check_distillation_loss  # 09
from vitcourse.checks.scrambling import check_scramble  # 09

__all__ = [
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
    "grade",
    "hint",
    "passed",
    "Hint",
    "progress",
    "progress_file",
]
