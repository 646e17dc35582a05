"""vitcourse.training.loop: the loop, its schedule and its optimizer."""

import copy
import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import new_trainer
from vitcourse.training.evaluation import evaluate
from vitcourse.training.loop import TrainConfig, Trainer, learning_rate, make_optimizer, train_step
from vitcourse.vit import VisionTransformer


def test_learning_rate_warms_up_then_decays():
    c = TrainConfig(lr=1.0, warmup=0.1, min_lr_ratio=0.01)
    assert learning_rate(0.0, c) == 0.0
    assert learning_rate(0.05, c) == pytest.approx(0.5)
    assert learning_rate(0.1, c) == pytest.approx(1.0)
    assert learning_rate(0.55, c) == pytest.approx(0.01 + 0.99 * 0.5)
    assert learning_rate(1.0, c) == pytest.approx(0.01)
    values = [learning_rate(p / 100, c) for p in range(10, 101)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_weight_decay_only_on_weight_matrices(tiny_vit):
    model = VisionTransformer(tiny_vit)
    decay, no_decay = make_optimizer(model, TrainConfig()).param_groups
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    assert "blocks.0.attn.qkv.weight" in decayed and "patch_embed.proj.weight" in decayed
    assert not decayed & {
        "cls_token",
        "pos_embed",
        "norm.weight",
        "head.bias",
        "blocks.0.norm1.weight",
    }
    assert decay["weight_decay"] > 0 and no_decay["weight_decay"] == 0
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_bad_train_configs():
    with pytest.raises(ValueError, match="epochs must be at least 1, got 0"):
        TrainConfig(epochs=0)
    with pytest.raises(ValueError, match="minutes must be positive"):
        TrainConfig(minutes=0)


def test_training_lowers_the_loss_and_learns():
    trainer = new_trainer()
    before = evaluate(trainer.model, trainer.loaders.val)
    history = trainer.fit()
    after = evaluate(trainer.model, trainer.loaders.val)
    assert [r["epoch"] for r in history.epochs] == [1, 2, 3, 4]
    assert after["loss"] < 0.7 * before["loss"]
    assert after["acc"] > 0.8
    assert trainer.steps_done == 4 * len(trainer.loaders.train) == len(history.step_losses)


def test_training_is_reproducible():
    a, b = new_trainer(), new_trainer()
    a.fit()
    b.fit()
    assert a.history.step_losses == b.history.step_losses


def test_learning_rate_is_finite_everywhere():
    c = TrainConfig(warmup=0.0)
    assert all(math.isfinite(learning_rate(p / 10, c)) for p in range(11))


def test_train_step_can_return_the_logits_its_loss_was_computed_from(tiny_vit, toy_loaders):
    """The trainer's training accuracy comes from these logits: the model's output on the batch
    before the step's update, the one the loss was computed from."""
    torch.manual_seed(0)
    model = VisionTransformer(tiny_vit)
    before = copy.deepcopy(model)
    optimizer = make_optimizer(model, TrainConfig(lr=1e-2))
    images, labels = next(iter(toy_loaders().train))
    loss, logits = train_step(model, optimizer, images, labels, 0.1, 1.0, return_logits=True)
    torch.testing.assert_close(logits, before(images))  # before the update...
    assert not torch.equal(model(images), before(images))  # ...which changed the model
    torch.testing.assert_close(loss, F.cross_entropy(logits, labels, label_smoothing=0.1))
    assert not logits.requires_grad
    own = train_step(
        model,
        optimizer,
        images,
        labels,
        loss_fn=lambda x, y: model(x).pow(2).mean(),
        return_logits=True,
    )
    assert own[1] is None  # another loss: no logits to count right answers from


def test_history_records_the_training_accuracy_of_every_step_and_epoch():
    trainer = new_trainer()
    history = trainer.fit()
    per_epoch = len(trainer.loaders.train)
    assert len(history.step_accuracies) == len(history.step_losses) == 4 * per_epoch
    assert all(0.0 <= a <= 1.0 for a in history.step_accuracies)
    for i, record in enumerate(history.epochs):
        steps = history.step_accuracies[i * per_epoch : (i + 1) * per_epoch]
        assert record["train_acc"] == pytest.approx(sum(steps) / per_epoch)
    first, last = history.epochs[0]["train_acc"], history.epochs[-1]["train_acc"]
    assert first < 0.7 and last > 0.9  # it learns: from near chance (1/3) to most right


def test_a_trainer_with_its_own_loss_records_no_training_accuracy(tiny_vit, toy_loaders):
    class OwnLoss(Trainer):  # as notebook 09's trainers do: a loss that is not on labels' logits
        def loss_fn(self, images, labels):
            return self.network(images).pow(2).mean()

    torch.manual_seed(0)
    trainer = OwnLoss(VisionTransformer(tiny_vit), toy_loaders(), TrainConfig(epochs=2), [], "cpu")
    history = trainer.fit()
    assert history.step_accuracies == [] and len(history.step_losses) == trainer.steps_done
    assert [record["train_acc"] for record in history.epochs] == [None, None]


def test_the_loops_counters_say_what_they_are():
    """The loop notebook 06 prints counts `steps_done` over the run and `epoch_batches_done` in the
    epoch under way, and reads the recipe's settings at every step."""
    trainer = new_trainer(TrainConfig(epochs=1))
    assert not trainer.finished() and not trainer.finished_everywhere()
    trainer.fit()
    assert trainer.finished() and trainer.finished_everywhere()
    assert trainer.steps_done == trainer.steps_per_epoch
    assert trainer.epoch_batches_done == 0  # the epoch ended: none of the next one yet
    trainer.config = replace(trainer.config, grad_clip=0.5)
    assert trainer.step_options["grad_clip"] == 0.5  # read at every step, not kept from the start


def learners_step(model, optimizer, images, labels, label_smoothing, grad_clip):
    """A step written as notebook 06's exercise asks (the teacher's solution): it returns the
    loss's number, which the exercise accepts too, and no logits."""
    logits = model(images)
    loss = F.cross_entropy(logits, labels, label_smoothing=label_smoothing)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    return loss.item()


def test_a_trainer_given_the_learners_step_trains_with_it_as_with_the_packages():
    """Notebook 06 hands the learner's `train_step` to its trainer: the same run step for step
    (losses, training accuracies from the logits it caught, weights), and nothing left hooked."""
    config = TrainConfig(epochs=2, lr=3e-3, warmup=0.1)
    package, calls = new_trainer(config), []

    def counted(*args):
        calls.append(len(args))
        return learners_step(*args)

    learners = new_trainer(config)
    learners = Trainer(learners.model, learners.loaders, config, device="cpu", train_step=counted)
    package.fit(), learners.fit()
    assert len(calls) == learners.steps_done == package.steps_done > 0
    assert learners.history.step_losses == pytest.approx(package.history.step_losses, abs=1e-6)
    assert learners.history.step_accuracies == package.history.step_accuracies
    assert learners.history.epochs[-1]["train_acc"] == package.history.epochs[-1]["train_acc"]
    weights = zip(
        package.model.state_dict().items(), learners.model.state_dict().values(), strict=True
    )
    for (name, theirs), ours in weights:
        assert torch.allclose(theirs, ours, atol=1e-6), name
    assert not learners.model._forward_hooks  # the hook that caught the logits is gone


def test_a_trainer_with_its_own_loss_refuses_the_learners_step():
    """A trainer with a `loss_fn` (notebook 09's) computes another loss than a classifier's step:
    given a learner's step it says so at the first step instead of training the wrong thing."""

    class OwnLoss(Trainer):
        def loss_fn(self, images, labels):
            return self.network(images).square().mean()

    base = new_trainer(TrainConfig(epochs=1))
    trainer = OwnLoss(base.model, base.loaders, base.config, device="cpu", train_step=learners_step)
    with pytest.raises(ValueError, match="own loss_fn takes the package's train_step"):
        trainer.fit()
    assert not trainer.model._forward_hooks


def test_the_loop_notebook_06_prints_is_short():
    """`Trainer.train_epoch` is printed in notebook 06: one screen, `train_step` called on one line
    with the batch (its other settings in `step_options`)."""
    import inspect

    source = inspect.getsource(Trainer.train_epoch)
    assert len(source.splitlines()) <= 30
    call = next(line for line in source.splitlines() if "train_step(" in line)
    assert "**self.step_options" in source
    assert call.strip().startswith("loss, logits = self.train_step(")
