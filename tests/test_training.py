"""vitcourse.training: the loop, its schedule and its optimizer."""

import math

import pytest

from tests.conftest import new_trainer
from vitcourse.training import (
    TrainConfig,
    evaluate,
    learning_rate,
    make_optimizer,
)
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
    assert trainer.step == 4 * len(trainer.loaders.train) == len(history.step_losses)


def test_training_is_reproducible():
    a, b = new_trainer(), new_trainer()
    a.fit()
    b.fit()
    assert a.history.step_losses == b.history.step_losses


def test_learning_rate_is_finite_everywhere():
    c = TrainConfig(warmup=0.0)
    assert all(math.isfinite(learning_rate(p / 10, c)) for p in range(11))
