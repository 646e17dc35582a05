"""vitcourse.training.distillation: DeiT's distillation losses and trainer (notebook 09). (The
student with its distillation token is tested in tests/test_deit.py.)"""

import dataclasses
import math

import pytest
import torch

from vitcourse.cnn import SmallCNN
from vitcourse.deit import DistilledViT
from vitcourse.training.distillation import DistillationTrainer, distillation_loss
from vitcourse.training.loop import TrainConfig, Trainer
from vitcourse.vit import VisionTransformer

LOGITS = {
    "cls": torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 1.0]]),
    "dist": torch.tensor([[0.0, 1.0, 0.0], [1.0, -1.0, 2.0]]),
    "teacher": torch.tensor([[0.0, 3.0, 1.0], [4.0, 0.0, 1.0]]),
}
LABELS = torch.tensor([0, 2])


def cross_entropy(logits: list[float], label: int) -> float:
    return -logits[label] + math.log(sum(math.exp(v) for v in logits))


def softmax(logits: list[float], tau: float) -> list[float]:
    exps = [math.exp(v / tau) for v in logits]
    return [e / sum(exps) for e in exps]


def test_hard_distillation_equals_the_hand_computation():
    # Teacher's guesses: class 1 for the first image, class 0 for the second.
    by_hand = (
        sum(
            0.5 * cross_entropy(LOGITS["cls"][b].tolist(), LABELS[b].item())
            + 0.5 * cross_entropy(LOGITS["dist"][b].tolist(), teacher)
            for b, teacher in [(0, 1), (1, 0)]
        )
        / 2
    )
    loss = distillation_loss(LOGITS["cls"], LOGITS["dist"], LOGITS["teacher"], LABELS, "hard")
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)


@pytest.mark.parametrize(("alpha", "tau"), [(0.1, 3.0), (0.5, 1.0), (1.0, 2.0)])
def test_soft_distillation_equals_the_hand_computation(alpha, tau):
    by_hand = 0.0
    for b in range(2):
        p_teacher = softmax(LOGITS["teacher"][b].tolist(), tau)
        p_student = softmax(LOGITS["dist"][b].tolist(), tau)
        kl = sum(t * (math.log(t) - math.log(s)) for t, s in zip(p_teacher, p_student, strict=True))
        ce = cross_entropy(LOGITS["cls"][b].tolist(), LABELS[b].item())
        by_hand += ((1 - alpha) * ce + alpha * tau * tau * kl) / 2
    loss = distillation_loss(
        LOGITS["cls"], LOGITS["dist"], LOGITS["teacher"], LABELS, "soft", alpha, tau
    )
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)


def test_the_loss_refuses_what_it_cannot_compute():
    with pytest.raises(ValueError, match="kind must be one of"):
        distillation_loss(LOGITS["cls"], LOGITS["dist"], LOGITS["teacher"], LABELS, "medium")
    with pytest.raises(ValueError, match="alpha weighs"):
        distillation_loss(LOGITS["cls"], LOGITS["dist"], LOGITS["teacher"], LABELS, alpha=2)
    with pytest.raises(ValueError, match="three .B, classes. logits of one shape"):
        distillation_loss(LOGITS["cls"], LOGITS["dist"][:, :2], LOGITS["teacher"], LABELS)


def test_distillation_trains_the_student_and_leaves_the_teacher_alone(
    tiny_vit, tiny_cnn, toy_loaders
):
    torch.manual_seed(0)
    teacher = Trainer(SmallCNN(tiny_cnn), toy_loaders(), TrainConfig(epochs=3), device="cpu")
    teacher.fit()
    frozen = {k: v.clone() for k, v in teacher.model.state_dict().items()}
    student = DistillationTrainer(
        DistilledViT(tiny_vit),
        toy_loaders(),
        TrainConfig(epochs=6, lr=3e-3),
        teacher.model,
        "hard",
        device="cpu",
    )
    history = student.fit()
    assert history.epochs[-1]["val_acc"] > 0.8  # the toy task is learnt
    for key, value in teacher.model.state_dict().items():
        torch.testing.assert_close(value, frozen[key])
    assert not any(p.requires_grad for p in student.teacher.parameters())
    # The step's loss is DeiT's, not plain cross entropy: the teacher is asked every batch.
    images, labels = next(iter(toy_loaders().train))
    student.model.train()
    cls_logits, dist_logits = student.model(images)
    expected = distillation_loss(
        cls_logits, dist_logits, teacher.model(images), labels, "hard", 0.5, 1.0, 0.1
    )
    torch.testing.assert_close(student.loss_fn(images, labels), expected)


def test_the_trainer_needs_a_student_with_a_token_and_matching_classes(
    tiny_vit, tiny_cnn, toy_loaders
):
    teacher = SmallCNN(tiny_cnn)
    with pytest.raises(TypeError, match="needs a distillation token"):
        DistillationTrainer(VisionTransformer(tiny_vit), toy_loaders(), TrainConfig(), teacher)
    other = SmallCNN(dataclasses.replace(tiny_cnn, num_classes=5))
    with pytest.raises(ValueError, match="the student has 3 classes and the teacher 5"):
        DistillationTrainer(DistilledViT(tiny_vit), toy_loaders(), TrainConfig(), other)
    with pytest.raises(ValueError, match="expected kind in"):
        DistillationTrainer(DistilledViT(tiny_vit), toy_loaders(), TrainConfig(), teacher, "warm")
