"""vitcourse.checks.distillation: distillation_loss accepts right answers and names each mistake.
The wrong answers are written the way a learner would write them, not copied from the
checks' own simulations."""

import pytest
import torch.nn.functional as F

from vitcourse import checks

# --- notebook 09: distillation --------------------------------------------------------------


def _distill(mode="good"):
    def distillation_loss(cls_logits, dist_logits, teacher_logits, labels, kind, alpha, tau):
        base = F.cross_entropy(cls_logits, labels)
        if kind == "hard":
            target = teacher_logits.argmax(dim=-1)
            if mode == "teacher probabilities":
                target = teacher_logits.softmax(dim=-1)
            teacher = F.cross_entropy(dist_logits, target)
        else:
            p_teacher = (teacher_logits / tau).softmax(-1)
            log_student = (dist_logits / tau).log_softmax(-1)
            kl = (p_teacher * (p_teacher.log() - log_student)).sum(-1).mean()
            if mode == "KL swapped":
                p_student = log_student.exp()
                kl = (p_student * (log_student - p_teacher.log())).sum(-1).mean()
            teacher = kl if mode == "no tau squared" else kl * tau**2
        if mode == "alpha swapped":
            return alpha * base + (1 - alpha) * teacher
        return (1 - alpha) * base + alpha * teacher

    return distillation_loss


def test_distillation_loss_check_accepts_good_answers():
    from vitcourse.training.distillation import distillation_loss

    assert checks.check_distillation_loss(distillation_loss) is distillation_loss
    good = _distill()
    assert checks.check_distillation_loss(good) is good


@pytest.mark.parametrize(
    "mode, hint",
    [
        ("teacher probabilities", "trains on the teacher's guesses"),
        ("alpha swapped", "alpha weighs the teacher's part"),
        ("no tau squared", "not multiplied by τ²"),
        ("KL swapped", "the teacher's distribution is the target"),
    ],
)
def test_distillation_loss_mistakes(mode, hint):
    with pytest.raises(AssertionError, match=hint):
        checks.check_distillation_loss(_distill(mode))


def test_the_verdicts_hold_for_another_seed():
    good = _distill()
    assert checks.EXERCISES["distillation_loss"].check(good, seed=12345) is good
    with pytest.raises(AssertionError, match="the teacher's distribution is the target"):
        checks.EXERCISES["distillation_loss"].check(_distill("KL swapped"), seed=12345)
