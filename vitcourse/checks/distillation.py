"""Check for notebook 09's distillation exercise: DeiT's hard and soft `distillation_loss`
(`vitcourse.training.distillation`).

The soft loss's KL divergence is averaged over the batch (`batchmean`): the divergence between
each image's two distributions, as DeiT's equation 2 writes it. DeiT's code (`losses.py`) divides
the summed divergence by batch × classes instead, "to have the legacy PyTorch behavior" (its
comment); the hint for that answer says so rather than calling DeiT's code a slip."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vitcourse.checks.harness import (
    Hint,
    Mistakes,
    compare,
    each_case,
    judge_cases,
    judge_gradient,
    seeded,
    with_gradient,
)
from vitcourse.checks.registry import exercise
from vitcourse.language import N_, _
from vitcourse.training import distillation

ce = F.cross_entropy


def kl(student, target, tau: float, reduction: str = "batchmean", target_tau: float | None = None):
    """KL(target || student) between the softened distributions, as F.kl_div computes it."""
    return F.kl_div(
        F.log_softmax(student / tau, -1),
        F.log_softmax(target / (tau if target_tau is None else target_tau), -1),
        reduction=reduction,
        log_target=True,
    )


# Two slips the hard and the soft loss share.
_HEADS_SWAPPED = N_(
    "the cls head learns from the labels and the distillation head from the teacher, not the "
    "other way round."
)
_ALPHA_SWAPPED = N_(
    "alpha weighs the teacher's part and 1 - alpha the labels' part, not the other way round."
)


_PROBABILITIES_AS_LABELS = Hint(
    N_(
        "hard distillation trains on the teacher's guesses, its top class for each "
        "image, as if they were labels, not on its probabilities (DeiT's equation 3)."
    ),
    more=N_("the teacher's guess is the index of its largest logit."),
)


_HARD_SOFTENED = Hint(
    N_(
        "the hard loss takes no temperature: tau belongs to the soft loss, and the hard loss "
        "is the same whatever tau is given (the check tries it with tau 2)."
    ),
    more=N_("DeiT's equation 3 has no τ: a cross-entropy against the teacher's top classes."),
)


def hard_mistakes(cls_l, dist_l, teacher, labels, alpha: float, tau: float = 1.0) -> Mistakes:
    base, guesses = ce(cls_l, labels), teacher.argmax(-1)
    return [
        (_HARD_SOFTENED, lambda: (1 - alpha) * base + alpha * ce(dist_l / tau, guesses)),
        (
            _PROBABILITIES_AS_LABELS,
            lambda: (1 - alpha) * base + alpha * ce(dist_l, teacher.softmax(-1)),
        ),
        (_HEADS_SWAPPED, lambda: (1 - alpha) * ce(dist_l, labels) + alpha * ce(cls_l, guesses)),
        (_ALPHA_SWAPPED, lambda: alpha * base + (1 - alpha) * ce(dist_l, guesses)),
    ]


_PROBABILITIES_AS_LOGS = Hint(
    N_(
        "the teacher's target is given as probabilities (softmax) while log_target=True "
        "tells F.kl_div it holds log-probabilities: give log_softmax with "
        "log_target=True, or probabilities with log_target=False."
    ),
    more=N_(
        "F.kl_div reads its target as log-probabilities only when log_target=True; "
        "its input (the student's) is always log-probabilities."
    ),
)

_NO_TAU_SQUARED = Hint(
    N_(
        "the KL term is not multiplied by τ²: softening by τ shrinks its gradients by "
        "about 1/τ², and τ² brings them back to the size they have at τ = 1."
    ),
    more=N_(
        "Hinton et al. (2015), section 2: the soft targets' gradients scale as 1/τ²; "
        "the text above the exercise explains it."
    ),
)

_KL_REVERSED = Hint(
    N_(
        "the KL divergence is the wrong way round: KL(teacher ‖ student), the "
        "teacher's distribution is the target."
    ),
    more=N_(
        "F.kl_div(input, target) computes KL(target ‖ input): the input is the "
        "student's (the distillation head's) log-probabilities."
    ),
)

_BATCH_TIMES_CLASSES = Hint(
    N_(
        "that divides the summed KL by batch × classes: DeiT's losses.py does exactly "
        "that (for PyTorch's old behaviour, its comment says), and so does "
        "reduction='mean'. This exercise takes each image's KL divergence, averaged "
        "over the images only: the text above the exercise says why."
    ),
    more=N_(
        "with 5 classes your teacher's term is 5 times smaller than the course's; "
        "F.kl_div's reduction decides the divisor, and 'batchmean' divides by the "
        "batch."
    ),
)

_TEACHER_UNSOFTENED = Hint(
    N_("soften the teacher's logits by τ too: both distributions are taken at temperature τ."),
    more=N_("divide both logits tensors by τ before their log-softmax."),
)

_TAU_WRITTEN_IN = Hint(
    N_(
        "the tau argument is ignored: your soft loss is the one for another "
        "temperature, whatever tau is given (the check tries tau 3, then 2)."
    ),
    more=N_("use the argument for τ, in the softening and in τ²."),
)


def soft_mistakes(cls_l, dist_l, teacher, labels, alpha: float, tau: float) -> Mistakes:
    base, t2 = ce(cls_l, labels), tau * tau
    probabilities = F.kl_div(  # the teacher's probabilities handed over as log-probabilities
        F.log_softmax(dist_l / tau, -1),
        F.softmax(teacher / tau, -1),
        reduction="batchmean",
        log_target=True,
    )
    mistakes = [
        (
            _PROBABILITIES_AS_LOGS,
            lambda: (1 - alpha) * base + alpha * t2 * probabilities,
        ),
        (
            _NO_TAU_SQUARED,
            lambda: (1 - alpha) * base + alpha * kl(dist_l, teacher, tau),
        ),
        (
            _KL_REVERSED,
            lambda: (1 - alpha) * base + alpha * t2 * kl(teacher, dist_l, tau),
        ),
        (
            _BATCH_TIMES_CLASSES,
            lambda: (
                (1 - alpha) * base + alpha * t2 * kl(dist_l, teacher, tau, "sum") / dist_l.numel()
            ),
        ),
        (_ALPHA_SWAPPED, lambda: alpha * base + (1 - alpha) * t2 * kl(dist_l, teacher, tau)),
        (
            _TEACHER_UNSOFTENED,
            lambda: (1 - alpha) * base + alpha * t2 * kl(dist_l, teacher, tau, target_tau=1.0),
        ),
        (
            _HEADS_SWAPPED,
            lambda: (1 - alpha) * ce(dist_l, labels) + alpha * t2 * kl(cls_l, teacher, tau),
        ),
    ]
    for fixed in (1.0, 3.0):  # a temperature written into the code, the notebook's or none
        if fixed != tau:
            mistakes.append(
                (
                    _TAU_WRITTEN_IN,
                    lambda fixed=fixed: (
                        (1 - alpha) * base + alpha * fixed * fixed * kl(dist_l, teacher, fixed)
                    ),
                )
            )
    return mistakes


# (kind, alpha, tau) of the check's four calls; each branch is judged on its own.
_SETTINGS = (("hard", 0.2, 1.0), ("soft", 0.3, 3.0), ("hard", 0.5, 2.0), ("soft", 0.6, 2.0))


@exercise("distillation_loss", "09_when_vits_win", distillation.distillation_loss)
class check_distillation_loss:
    """Check `fn(cls_logits, dist_logits, teacher_logits, labels, kind, alpha, tau) -> scalar`:
    DeiT's hard and soft distillation losses. A branch still raising NotImplementedError is
    reported as open while the other is judged."""

    called = N_(
        "cls_logits, dist_logits and teacher_logits each (6, 5), labels (6,); kind 'hard' with "
        "alpha 0.2 and tau 1, and alpha 0.5 and tau 2; kind 'soft' with alpha 0.3 and tau 3, and "
        "alpha 0.6 and tau 2"
    )
    more = N_(
        "(1 - α) · the labels' cross-entropy on the cls head, plus α · the teacher's part on the "
        "distillation head: for 'hard' a cross-entropy against the teacher's top classes; for "
        "'soft' τ² · KL(teacher ‖ student) of the two softened distributions, averaged over the "
        "batch."
    )
    worked = N_(
        "one image, two classes: cls_logits [[0, 0]], dist_logits [[0, 0]], teacher_logits [[2, "
        "0]], labels [1]. Hard, alpha 0.5: the teacher's guess is class 0; the cls head's "
        "cross-entropy against the label is ln 2 ≈ 0.693, the distillation head's against the "
        "guess also 0.693; the loss is 0.5 · 0.693 + 0.5 · 0.693 = 0.693. Soft, alpha 0.5, tau "
        "2: the teacher softened, [1, 0], gives the probabilities [0.731, 0.269], the student "
        "[0.5, 0.5]; KL(teacher ‖ student) = 0.731 · ln(0.731 / 0.5) + 0.269 · ln(0.269 / 0.5) ≈ "
        "0.111, times τ² = 4, 0.444; the loss is 0.5 · 0.693 + 0.5 · 0.444 ≈ 0.568. Run yours on "
        "these and compare."
    )

    @staticmethod
    def inputs(seed: int) -> dict:
        cls_logits, dist_logits, teacher_logits = (
            seeded(6, 5, seed=seed + s) * 2 for s in (11, 12, 13)
        )
        return {
            "cls_logits": cls_logits,
            "dist_logits": dist_logits,
            "teacher_logits": teacher_logits,
            "labels": torch.tensor([0, 1, 2, 3, 4, 0]),
        }

    @staticmethod
    def run(distillation_loss, cls_logits, dist_logits, teacher_logits, labels):
        cls_logits.requires_grad_(True)  # the student's two heads, as in training
        dist_logits.requires_grad_(True)
        inputs = (cls_logits, dist_logits, teacher_logits, labels)
        return each_case(
            lambda *setting: with_gradient(distillation_loss(*inputs, *setting)), _SETTINGS
        )

    @staticmethod
    def judge(got, cls_logits, dist_logits, teacher_logits, labels) -> None:
        logits = (cls_logits, dist_logits, teacher_logits)
        if not isinstance(got, list):
            raise ValueError("an answer that pack did not write")

        def judge_one(answer, setting) -> None:
            kind, alpha, tau = setting
            answer = judge_gradient(answer)
            if isinstance(answer, torch.Tensor) and answer.numel() == 1:
                answer = answer.reshape(())
            if kind == "hard":
                mistakes, equation = hard_mistakes(*logits, labels, alpha, tau), 3
            else:
                mistakes, equation = soft_mistakes(*logits, labels, alpha, tau), 2
            compare_with = _(  # written now: it names this setting's values
                "for kind={kind} (alpha {alpha}, tau {tau}): compare your loss with DeiT's "
                "equation {equation}, as written above the exercise."
            ).format(kind=repr(kind), alpha=alpha, tau=tau, equation=equation)
            compare(
                answer,
                distillation.distillation_loss(*logits, labels, kind, alpha, tau),
                mistakes,
                generic=Hint(
                    compare_with,
                    more=N_(
                        "each head has its own target: the cls head the labels, the distillation "
                        "head the teacher; α weighs the teacher's part."
                    ),
                ),
                shape_hints={(6,): N_("that is one loss per image: average them into one number.")},
                what=f"kind={kind!r}, alpha {alpha}, tau {tau}",
            )

        judge_cases(got, _SETTINGS, judge_one, label=lambda setting: f"kind={setting[0]!r}")
