"""Distillation: a ViT learns from a trained CNN as well as from the labels (DeiT, notebook 09).

Touvron et al. 2021 ("Training data-efficient image transformers & distillation through
attention", DeiT) trained ViTs on ImageNet alone, without the ViT paper's 303 million extra
images, partly by distilling from a CNN teacher (section 4). The student (`vitcourse.deit.
DistilledViT`) has two tokens that classify: the cls token learns from the labels, the
distillation token from the teacher. The teacher is frozen; it only answers. DeiT found a CNN
a better teacher than a transformer and suggested why (section 5.2): its answers pass on the
CNN's built-in assumptions (nearby pixels belong together), which a ViT must otherwise learn from
data.

    distillation_loss     DeiT's hard and soft losses (section 4, equations 2 and 3)
    DistillationTrainer   the course's Trainer, asking the teacher about every training batch
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from vitcourse.language import _
from vitcourse.training.loop import Trainer

KINDS = ("hard", "soft")


def distillation_loss(
    cls_logits: torch.Tensor,
    dist_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    labels: torch.Tensor,
    kind: str = "hard",
    alpha: float = 0.5,
    tau: float = 1.0,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """DeiT's loss (notebook 09's exercise); every logits tensor is (B, classes).

    (1 - alpha) * cross entropy of the cls head against the true labels, plus alpha times:

    - "hard": cross entropy of the distillation head against the teacher's guesses (its
      argmax). DeiT's equation 3 uses alpha = 1/2.
    - "soft": tau^2 * KL(teacher || student) between the softmaxes at temperature tau, averaged
      over the batch (equation 2; DeiT used tau = 3, alpha = 0.1). The teacher's probabilities
      are the target; the tau^2 keeps the gradients' size as tau changes (Hinton et al. 2015).
      DeiT's code (losses.py) also divides by the number of classes: at the same alpha its soft
      term is that many times smaller than this one.
    """
    if kind not in KINDS:
        raise ValueError(
            _("{argument} must be one of {kinds}, got {value}").format(
                argument="kind", kinds=KINDS, value=repr(kind)
            )
        )
    if not 0 <= alpha <= 1:
        raise ValueError(
            _("{argument} weighs the teacher's loss, in [0, 1]; got {value}").format(
                argument="alpha", value=alpha
            )
        )
    if not cls_logits.shape == dist_logits.shape == teacher_logits.shape:
        raise ValueError(
            _(
                "expected three (B, classes) logits of one shape, got {cls}, {dist} and {teacher} "
                "(cls, dist, teacher)"
            ).format(
                cls=tuple(cls_logits.shape),
                dist=tuple(dist_logits.shape),
                teacher=tuple(teacher_logits.shape),
            )
        )
    base = F.cross_entropy(cls_logits, labels, label_smoothing=label_smoothing)
    if kind == "hard":
        teacher = F.cross_entropy(dist_logits, teacher_logits.argmax(dim=-1))
    else:
        teacher = F.kl_div(
            F.log_softmax(dist_logits / tau, dim=-1),  # the student's log-probabilities
            F.log_softmax(teacher_logits / tau, dim=-1),  # the teacher's, as the target
            reduction="batchmean",
            log_target=True,
        ) * (tau * tau)
    return (1 - alpha) * base + alpha * teacher


class DistillationTrainer(Trainer):
    """The course's Trainer for a `DistilledViT` student and a frozen teacher.

    The teacher answers on the same (augmented) batch the student sees. Its forward pass runs
    inside every step, so it counts against a time budget; the minutes spent training the
    teacher must be added by whoever compares budgets (`python -m vitcourse.train --teacher`
    reports them).
    """

    def __init__(
        self,
        model: nn.Module,
        loaders,
        config,
        teacher: nn.Module,
        kind: str = "hard",
        alpha: float | None = None,
        tau: float | None = None,
        **kwargs,
    ):
        super().__init__(model, loaders, config, **kwargs)
        if getattr(model, "num_prefix_tokens", 1) != 2:
            raise TypeError(
                _("the student needs a distillation token ({needed}); got a {name}").format(
                    needed="vitcourse.deit.DistilledViT", name=type(model).__name__
                )
            )
        classes = (model.config.num_classes, teacher.config.num_classes)
        if classes[0] != classes[1]:
            raise ValueError(
                _(
                    "the student has {student} classes and the teacher {teacher}: train the "
                    "teacher on the same dataset"
                ).format(student=classes[0], teacher=classes[1])
            )
        self.teacher = teacher.to(self.device).eval().requires_grad_(False)
        self.kind = kind
        # DeiT's settings: hard distillation weighs teacher and labels equally; soft, 0.1 and tau 3.
        self.alpha = alpha if alpha is not None else (0.5 if kind == "hard" else 0.1)
        self.tau = tau if tau is not None else (1.0 if kind == "hard" else 3.0)
        if kind not in KINDS or not 0 <= self.alpha <= 1:
            raise ValueError(
                _(
                    "expected {kind} in {kinds} and {alpha} in [0, 1], got {got_kind}, {got_alpha}"
                ).format(
                    kind="kind", kinds=KINDS, alpha="alpha", got_kind=repr(kind), got_alpha=alpha
                )
            )

    def loss_fn(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            teacher_logits = self.teacher(images)  # (B, classes)
        cls_logits, dist_logits = self.network(images)  # training mode: both heads
        return distillation_loss(
            cls_logits,
            dist_logits,
            teacher_logits,
            labels,
            self.kind,
            self.alpha,
            self.tau,
            self.config.label_smoothing,
        )
