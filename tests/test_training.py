"""vitcourse.training: the loop, its schedule, time budgets, resuming, and the callbacks."""

import io
import math
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import TINY_VIT, make_toy_loaders
from vitcourse.checkpoints import load_checkpoint
from vitcourse.cnn import SmallCNN
from vitcourse.training import (
    Callback,
    CheckpointCallback,
    ProgressCallback,
    Timeline,
    TrainConfig,
    Trainer,
    evaluate,
    learning_rate,
    make_optimizer,
)
from vitcourse.vit import VisionTransformer

RECIPE = TrainConfig(epochs=4, lr=3e-3, warmup=0.1)


def new_trainer(config=RECIPE, callbacks=(), seed=0):
    torch.manual_seed(seed)
    model = VisionTransformer(TINY_VIT)  # the seed only changes the initial weights, not the data
    return Trainer(model, make_toy_loaders(), config, list(callbacks), "cpu")


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


def test_evaluate_metrics_on_a_known_case():
    class Fixed(torch.nn.Module):  # predicts class 0 always
        config = SimpleNamespace(num_classes=2)

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return torch.tensor([[1.0, 0.0]]).expand(len(x), 2) + self.w

    labels = torch.tensor([0, 0, 0, 1])
    loader = DataLoader(TensorDataset(torch.zeros(4, 1), labels), batch_size=3)
    m = evaluate(Fixed(), loader)
    assert m["acc"] == 0.75
    assert m["confusion"].tolist() == [[3, 0], [1, 0]]
    assert m["precision"].tolist() == pytest.approx([0.75, 0.0])
    assert m["recall"].tolist() == pytest.approx([1.0, 0.0])
    assert m["f1"][0].item() == pytest.approx(2 * 0.75 / 1.75)
    expected_loss = torch.nn.functional.cross_entropy(torch.tensor([[1.0, 0.0]] * 4), labels)
    assert m["loss"] == pytest.approx(expected_loss.item())


def test_time_budget_drives_the_schedule_and_stops(monkeypatch):
    """With a stand-in clock on which every step takes 10 ms, the run is the same on any
    machine, busy or not: the budget, not the speed of the computer, decides."""
    from vitcourse import clock

    monkeypatch.setattr(clock, "now", lambda: trainer.step * 0.01)
    config = TrainConfig(minutes=0.5 / 60, lr=1e-3, warmup=0.2)  # half a (stand-in) second
    trainer = new_trainer(config)
    seen = []

    class Watch(Callback):
        def on_step_end(self, trainer, loss):
            seen.append((trainer.progress(), trainer.optimizer.param_groups[0]["lr"]))

    trainer.callbacks.append(Watch())
    trainer.fit()
    assert trainer.progress() == 1.0 and 0.5 <= trainer.elapsed < 0.6
    assert len(seen) > 20 and trainer.epoch >= 2  # several epochs fit in the budget
    progress = [p for p, _ in seen]
    # Callbacks see the time up to date, this step included: 10 ms of the budget per step.
    assert progress == [min(0.02 * (i + 1), 1.0) for i in range(len(seen))]
    rates = [lr for _, lr in seen]  # warm-up, then decay, over the budget
    peak = rates.index(max(rates))
    assert 0 < peak < len(rates) - 1 and max(rates) <= config.lr
    assert rates[:peak] == sorted(rates[:peak]) and rates[peak:] == sorted(
        rates[peak:], reverse=True
    )
    # Each step's learning rate is the schedule's at the progress made before that step.
    for before, (_, lr) in zip([0.0, *progress], seen, strict=False):
        assert lr == pytest.approx(learning_rate(before, config))


class StopAt(Callback):
    """Press Ctrl-C at a given step."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer, loss):
        if trainer.step == self.step:
            raise KeyboardInterrupt


def test_interrupt_keeps_the_model_and_resume_continues(tmp_path, toy_loaders):
    path = tmp_path / "run" / "checkpoint.pt"
    steps_per_epoch = len(toy_loaders().train)
    full = new_trainer()
    full.fit()

    first = new_trainer(callbacks=[CheckpointCallback(path), StopAt(steps_per_epoch * 2 + 2)])
    history = first.fit()
    assert first.interrupted and first.epoch == 2 and first.step == 2 * steps_per_epoch + 2
    assert len(history.epochs) == 2  # the model and history are kept
    assert path.exists() and not path.with_name("checkpoint.pt.tmp").exists()

    # The run from the last complete epoch: its checkpoint holds epoch 2 and the optimizer state.
    state = load_checkpoint(path)
    assert state["schedule"]["step"] == 2 * steps_per_epoch + 2
    resumed = new_trainer(seed=123)  # different init: everything must come from the checkpoint
    resumed.resume(path)
    assert resumed.epoch == 2 and resumed.step == first.step
    for a, b in zip(resumed.optimizer.state.values(), first.optimizer.state.values(), strict=True):
        assert torch.equal(a["exp_avg"], b["exp_avg"])
    resumed.fit()
    assert [r["epoch"] for r in resumed.history.epochs] == [1, 2, 3, 4]
    assert resumed.step == full.step


def test_resume_from_an_epoch_boundary_matches_an_uninterrupted_run(tmp_path):
    path = tmp_path / "checkpoint.pt"
    full = new_trainer()
    full.fit()

    class StopAfterEpoch(Callback):
        def on_epoch_end(self, trainer, record):
            if trainer.epoch == 2:
                raise KeyboardInterrupt

    first = new_trainer(callbacks=[StopAfterEpoch(), CheckpointCallback(path)])
    first.fit()
    resumed = new_trainer(seed=5)
    resumed.resume(path)
    resumed.fit()
    torch.testing.assert_close(resumed.history.step_losses, full.history.step_losses)
    for a, b in zip(resumed.model.parameters(), full.model.parameters(), strict=True):
        torch.testing.assert_close(a, b)


# --- attention rollout ------------------------------------------------------------------------


def test_learning_rate_is_finite_everywhere():
    c = TrainConfig(warmup=0.0)
    assert all(math.isfinite(learning_rate(p / 10, c)) for p in range(11))


# --- the live plot --------------------------------------------------------------------------


# --- the command line ------------------------------------------------------------------------


def test_timeline_measures_accuracy_over_training_time(monkeypatch, tiny_cnn, toy_loaders):
    """A stand-in clock moves 10 ms per reading; evaluations are paused time."""
    from vitcourse import clock

    ticks = iter(range(10**6))
    monkeypatch.setattr(clock, "now", lambda: next(ticks) * 0.01)
    torch.manual_seed(0)
    loaders = toy_loaders()
    timeline = Timeline(loaders.val, every_seconds=0.2)
    trainer = Trainer(
        SmallCNN(tiny_cnn), loaders, TrainConfig(minutes=1 / 60, lr=3e-3), [timeline], "cpu"
    )
    trainer.fit()
    seconds = [s for s, _ in timeline.points]
    assert seconds[0] == 0 and seconds == sorted(seconds) and len(seconds) >= 5
    gaps = [b - a for a, b in zip(seconds[:-2], seconds[1:-1], strict=True)][1:]
    assert all(0.2 <= g < 0.3 for g in gaps)  # one evaluation every 0.2 s of training
    # Evaluating reads the clock too; paused, it takes nothing from the one-second budget.
    assert 1.0 <= trainer.elapsed < 1.1 and seconds[-1] == trainer.elapsed
    first, last = timeline.points[0][1], timeline.points[-1][1]
    assert last > first and last == evaluate(trainer.model, loaders.val)["acc"]


def test_progress_prints_a_line_every_few_epochs(capsys):
    """Under pytest the output is not a terminal: tqdm's bar stays silent, the epoch lines come."""
    trainer = new_trainer(TrainConfig(epochs=5, lr=3e-3), [ProgressCallback(every_epochs=2)])
    trainer.fit()
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if line.startswith("epoch")]
    # Epochs 2 and 4, and the last one, 5, whatever the interval.
    assert [int(line.split()[1]) for line in lines] == [2, 4, 5]
    assert "val acc" in lines[-1] and "%|" not in captured.err  # no bar drawn in a log
    with pytest.raises(ValueError, match="every_epochs and every_steps must be at least 1"):
        ProgressCallback(every_epochs=0)


def test_progress_bar_counts_steps_or_budget_seconds(monkeypatch):
    from vitcourse import callbacks, clock

    # Draw the bar into a string even though pytest's output is not a terminal.
    class Drawn(callbacks.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "disable": False, "file": io.StringIO()})

    monkeypatch.setattr(callbacks, "tqdm", Drawn)
    bar = ProgressCallback()
    trainer = new_trainer(TrainConfig(epochs=2), [bar])
    trainer.fit()
    assert bar.bar.total == bar.bar.n == trainer.step == 2 * trainer.steps_per_epoch
    # A budget: the bar counts its seconds (a stand-in clock: every step takes 0.1 s).
    monkeypatch.setattr(clock, "now", lambda: trainer.step * 0.1)
    bar = ProgressCallback()
    trainer = new_trainer(TrainConfig(minutes=3 / 60), [bar])
    trainer.fit()
    assert bar.bar.total == bar.bar.n == 3 and trainer.step == 30
