"""Check for notebook 09's distillation exercise: DeiT's hard and soft `distillation_loss`
(`vitcourse.distillation`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from vitcourse import distillation
from vitcourse.checks.harness import Mistakes, compare, seeded
from vitcourse.checks.registry import exercise

ce = F.cross_entropy


def kl(student, target, tau: float, reduction: str = "batchmean", target_tau: float | None = None):
    """KL(target || student) between the softened distributions, as F.kl_div computes it."""
    return F.kl_div(
        F.log_softmax(student / tau, -1),
        F.log_softmax(target / (tau if target_tau is None else target_tau), -1),
        reduction=reduction,
        log_target=True,
    )


def hard_mistakes(cls_l, dist_l, teacher, labels, alpha: float) -> Mistakes:
    base, guesses = ce(cls_l, labels), teacher.argmax(-1)
    return [
        (
            "hard distillation trains on the teacher's guesses, teacher_logits.argmax(-1), as if "
            "they were labels.",
            lambda: (1 - alpha) * base + alpha * ce(dist_l, teacher.softmax(-1)),
        ),
        (
            "the cls head learns from the labels and the distillation head from the teacher, not "
            "the other way round.",
            lambda: (1 - alpha) * ce(dist_l, labels) + alpha * ce(cls_l, guesses),
        ),
        (
            "alpha weighs the teacher's part: (1 - alpha) * labels' loss + alpha * teacher's loss.",
            lambda: alpha * base + (1 - alpha) * ce(dist_l, guesses),
        ),
    ]


def soft_mistakes(cls_l, dist_l, teacher, labels, alpha: float, tau: float) -> Mistakes:
    base, t2 = ce(cls_l, labels), tau * tau
    return [
        (
            "multiply the KL divergence by tau ** 2, which keeps its gradients the size they would "
            "have at tau = 1.",
            lambda: (1 - alpha) * base + alpha * kl(dist_l, teacher, tau),
        ),
        (
            "KL(teacher || student): the teacher's probabilities are the target. In "
            "F.kl_div(input, target) the input is the student's log-probabilities.",
            lambda: (1 - alpha) * base + alpha * t2 * kl(teacher, dist_l, tau),
        ),
        (
            "average over the batch only (reduction='batchmean'): reduction='mean' also divides "
            "by the number of classes.",
            lambda: (
                (1 - alpha) * base + alpha * t2 * kl(dist_l, teacher, tau, "sum") / dist_l.numel()
            ),
        ),
        (
            "alpha weighs the teacher's part: (1 - alpha) * labels' loss + alpha * teacher's loss.",
            lambda: alpha * base + (1 - alpha) * t2 * kl(dist_l, teacher, tau),
        ),
        (
            "divide both the student's and the teacher's logits by tau before the softmax.",
            lambda: (1 - alpha) * base + alpha * t2 * kl(dist_l, teacher, tau, target_tau=1.0),
        ),
        (
            "the cls head learns from the labels and the distillation head from the teacher, not "
            "the other way round.",
            lambda: (1 - alpha) * ce(dist_l, labels) + alpha * t2 * kl(cls_l, teacher, tau),
        ),
    ]


_SETTINGS = (("hard", 0.2, 1.0), ("soft", 0.3, 3.0), ("hard", 0.5, 1.0))  # (kind, alpha, tau)


@exercise("distillation_loss", "09_when_vits_win", distillation.distillation_loss)
class check_distillation_loss:
    """Check `fn(cls_logits, dist_logits, teacher_logits, labels, kind, alpha, tau) -> scalar`:
    DeiT's hard and soft distillation losses."""

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
        inputs = (cls_logits, dist_logits, teacher_logits, labels)
        return [
            distillation_loss(*(x.clone() for x in inputs), kind, alpha, tau)
            for kind, alpha, tau in _SETTINGS
        ]

    @staticmethod
    def judge(got, cls_logits, dist_logits, teacher_logits, labels) -> None:
        logits = (cls_logits, dist_logits, teacher_logits)
        for (kind, alpha, tau), answer in zip(_SETTINGS, got, strict=True):
            if isinstance(answer, torch.Tensor) and answer.numel() == 1:
                answer = answer.reshape(())
            if kind == "hard":
                mistakes = hard_mistakes(*logits, labels, alpha)
                teacher_part = "cross entropy(dist_logits, teacher_logits.argmax(-1))."
            else:
                mistakes = soft_mistakes(*logits, labels, alpha, tau)
                teacher_part = (
                    "tau ** 2 * KL(teacher || student) at temperature tau, averaged over the batch."
                )
            compare(
                answer,
                distillation.distillation_loss(*logits, labels, kind, alpha, tau),
                mistakes,
                generic=f"for kind={kind!r}: (1 - alpha) * cross entropy(cls_logits, labels) + "
                "alpha * " + teacher_part,
                shape_hints={(6,): "that is one loss per image: average them into one number."},
            )
