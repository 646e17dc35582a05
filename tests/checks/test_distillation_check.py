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


def _half(hard):
    """A distillation_loss whose hard branch is `hard` and whose soft branch is still open."""

    def distillation_loss(cls_logits, dist_logits, teacher_logits, labels, kind="hard",
                          alpha=0.5, tau=1.0):  # fmt: skip
        if kind == "hard":
            return hard(cls_logits, dist_logits, teacher_logits, labels, alpha)
        raise NotImplementedError()

    return distillation_loss


def _right_hard(c, d, t, y, alpha):
    return (1 - alpha) * F.cross_entropy(c, y) + alpha * F.cross_entropy(d, t.argmax(-1))


def _alpha_swapped(c, d, t, y, alpha):
    return alpha * F.cross_entropy(c, y) + (1 - alpha) * F.cross_entropy(d, t.argmax(-1))


def test_a_half_written_loss_is_judged_on_its_written_branch(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("VITCOURSE_PROGRESS", str(tmp_path / "progress.json"))
    reference = checks.EXERCISES["distillation_loss"].reference
    # written and right: said so, the other branch named as open, the reference lent
    assert checks.check_distillation_loss(_half(_right_hard)) is reference
    said = capsys.readouterr().out
    assert "what is written is right (kind='hard')" in said and "still open: kind='soft'" in said
    assert checks.exercise_results()["distillation_loss"] == "not attempted"
    status, hint = checks.grade("distillation_loss", _half(_right_hard))
    assert status == "not attempted" and "kind='soft'" in hint
    # written and wrong: judged wrong, with its hint, and the open branch named
    with pytest.raises(checks.CheckFailed) as failed:
        checks.check_distillation_loss(_half(_alpha_swapped))
    assert "alpha weighs the teacher's part" in str(failed.value)
    assert "kind='soft': not written yet" in str(failed.value)
    assert checks.exercise_results()["distillation_loss"] == "wrong"
    assert checks.grade("distillation_loss", _half(_alpha_swapped))[0] == "wrong"


def test_a_loss_with_no_branch_written_is_still_open(capsys):
    def distillation_loss(*args, **kwargs):
        raise NotImplementedError()

    reference = checks.EXERCISES["distillation_loss"].reference
    assert checks.check_distillation_loss(distillation_loss) is reference
    assert "not written yet" in capsys.readouterr().out
    assert checks.grade("distillation_loss", distillation_loss) == ("not attempted", "")
