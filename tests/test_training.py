"""vitcourse.training, vitcourse.analysis.attention_rollout, vitcourse.live and the CLI."""

import dataclasses
import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from vitcourse.analysis import attention_rollout
from vitcourse.data import load_dataset
from vitcourse.training import (
    TRAINED_MODEL,
    Callback,
    CheckpointCallback,
    CheckpointError,
    TrainConfig,
    Trainer,
    evaluate,
    learning_rate,
    load_checkpoint,
    load_model,
    make_optimizer,
)
from vitcourse.vit import VisionTransformer, ViTConfig, preset

TINY = ViTConfig(
    image_size=8,
    patch_size=4,
    in_channels=1,
    num_classes=3,
    dim=16,
    depth=2,
    num_heads=2,
    mlp_dim=32,
)


def toy_loaders(n=160, seed=0, batch_size=16):
    """A learnable toy task: the class is which third of the image is bright."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=gen)
    images = torch.randn(n, 1, 8, 8, generator=gen) * 0.3
    for i, y in enumerate(labels.tolist()):
        images[i, 0, :, 3 * y : 3 * y + 2] += 2.0
    data = TensorDataset(images, labels)
    train = DataLoader(
        data, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    val = DataLoader(TensorDataset(images[:32], labels[:32]), batch_size=32)
    return SimpleNamespace(train=train, val=val, test=val)


RECIPE = TrainConfig(epochs=4, lr=3e-3, warmup=0.1)


def new_trainer(config=RECIPE, callbacks=(), seed=0):
    torch.manual_seed(seed)
    model = VisionTransformer(TINY)  # the seed only changes the initial weights, not the data
    return Trainer(model, toy_loaders(), config, list(callbacks), "cpu")


def test_learning_rate_warms_up_then_decays():
    c = TrainConfig(lr=1.0, warmup=0.1, min_lr_ratio=0.01)
    assert learning_rate(0.0, c) == 0.0
    assert learning_rate(0.05, c) == pytest.approx(0.5)
    assert learning_rate(0.1, c) == pytest.approx(1.0)
    assert learning_rate(0.55, c) == pytest.approx(0.01 + 0.99 * 0.5)
    assert learning_rate(1.0, c) == pytest.approx(0.01)
    values = [learning_rate(p / 100, c) for p in range(10, 101)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))


def test_weight_decay_only_on_weight_matrices():
    model = VisionTransformer(TINY)
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
    """With a stand-in clock that moves 10 ms at every reading, the run is the same on any
    machine, busy or not: the budget, not the speed of the computer, decides."""
    from vitcourse import training

    ticks = iter(range(10**6))
    monkeypatch.setattr(training, "_now", lambda: next(ticks) * 0.01)
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
    assert progress == sorted(progress) and progress[-1] > 0.9
    rates = [lr for _, lr in seen]  # warm-up, then decay, over the budget
    peak = rates.index(max(rates))
    assert 0 < peak < len(rates) - 1 and max(rates) <= config.lr
    assert rates[:peak] == sorted(rates[:peak]) and rates[peak:] == sorted(
        rates[peak:], reverse=True
    )
    for p, lr in seen:
        assert lr == pytest.approx(learning_rate(p, config), abs=config.lr * 0.05)


class StopAt(Callback):
    """Press Ctrl-C at a given step."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer, loss):
        if trainer.step == self.step:
            raise KeyboardInterrupt


def test_interrupt_keeps_the_model_and_resume_continues(tmp_path):
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


def test_corrupt_and_mismatched_checkpoints_name_the_file(tmp_path):
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"\x80\x02 definitely not a checkpoint")
    with pytest.raises(CheckpointError, match=r"broken.pt is not a readable checkpoint"):
        load_checkpoint(broken)
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.pt")
    other = tmp_path / "other.pt"
    trainer = Trainer(
        VisionTransformer(dataclasses.replace(TINY, dim=24, num_heads=2)),
        toy_loaders(),
        TrainConfig(epochs=1),
        device="cpu",
    )
    trainer.save(other)
    with pytest.raises(CheckpointError, match=r"other.pt does not fit this model.*another shape"):
        new_trainer().resume(other)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(other.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="truncated.pt is not a readable checkpoint"):
        load_checkpoint(truncated)


def test_load_model_rebuilds_the_trained_model(tmp_path):
    trainer = new_trainer(TrainConfig(epochs=1))
    trainer.fit()
    path = trainer.save(tmp_path / "checkpoint.pt")
    model = load_model(path)
    images = torch.randn(2, 1, 8, 8)
    trainer.model.eval()
    torch.testing.assert_close(model(images), trainer.model(images))


def test_the_shipped_model_is_the_course_vit_and_trained():
    """data/trained/: loads safely, is the pure ViT notebook 07 looks inside, classifies well."""
    info = load_checkpoint(TRAINED_MODEL)
    model = load_model(TRAINED_MODEL).eval()
    assert model.config == preset("course-28/7"), "the README and notebook 07 describe this model"
    test = load_dataset("fashion-mnist", train=False)
    images = torch.stack([test[i][0] for i in range(1000)])
    labels = torch.tensor([test[i][1] for i in range(1000)])
    with torch.no_grad():
        accuracy = (model(images).argmax(-1) == labels).float().mean().item()
    # The README quotes its accuracy on all 10,000 test images; 1,000 of them land within a point
    # or two of it (a wrong or untrained file would score near 10%).
    assert abs(accuracy - info["test_acc"]) < 0.03 and accuracy > 0.85


# --- attention rollout ------------------------------------------------------------------------


def test_rollout_of_identity_attention_is_identity():
    maps = torch.eye(5).expand(3, 2, 4, 5, 5)  # every token attends only to itself
    torch.testing.assert_close(attention_rollout(maps), torch.eye(5).expand(2, 5, 5))


def test_rollout_worked_by_hand():
    # One layer, two heads: their mean is uniform over 2 tokens; with the residual,
    # A = (U + I) / 2 = [[0.75, 0.25], [0.25, 0.75]].
    heads = torch.tensor([[[1.0, 0.0], [0.0, 1.0]], [[0.0, 1.0], [1.0, 0.0]]])
    one = attention_rollout(heads[None, None])
    a = torch.tensor([[0.75, 0.25], [0.25, 0.75]])
    torch.testing.assert_close(one[0], a)
    two = attention_rollout(heads[None, None].expand(2, 1, 2, 2, 2))
    torch.testing.assert_close(two[0], a @ a)  # layers multiply
    torch.testing.assert_close(two.sum(-1), torch.ones(1, 2))


def test_rollout_order_matters():
    first = torch.tensor([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # all read token 0
    second = torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # token 0 reads 2
    maps = torch.stack([first, second])[:, None, None]  # (L=2, B=1, h=1, 3, 3)
    a1 = (first + torch.eye(3)) / (first + torch.eye(3)).sum(-1, keepdim=True)
    a2 = (second + torch.eye(3)) / (second + torch.eye(3)).sum(-1, keepdim=True)
    torch.testing.assert_close(attention_rollout(maps)[0], a2 @ a1)
    with pytest.raises(ValueError, match=r"expected maps \(layers, B, heads, T, T\)"):
        attention_rollout(torch.rand(2, 3, 3))


def test_learning_rate_is_finite_everywhere():
    c = TrainConfig(warmup=0.0)
    assert all(math.isfinite(learning_rate(p / 10, c)) for p in range(11))


# --- the live plot --------------------------------------------------------------------------


LIVE_NOTEBOOK = """
import torch
from tests.test_training import TINY, toy_loaders
from vitcourse.live import LivePlot
from vitcourse.training import TrainConfig, Trainer
from vitcourse.vit import VisionTransformer

torch.manual_seed(0)
loaders = toy_loaders()
live = LivePlot(next(iter(loaders.val))[0][:3], every_steps=1, every_seconds=1e9)
trainer = Trainer(VisionTransformer(TINY), loaders, TrainConfig(epochs=3), [live], device="cpu")
trainer.fit()
print("updates", live.updates)
"""


def test_live_plot_updates_one_display_when_executed_headless(tmp_path):
    """Executed as a notebook (nbclient, as nbmake does): one image output however many updates."""
    import nbformat
    from nbclient import NotebookClient

    root = Path(__file__).resolve().parent.parent
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell(f"import sys; sys.path.insert(0, {str(root)!r})"),
        nbformat.v4.new_code_cell(LIVE_NOTEBOOK),
    ]
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = nb.cells[1].outputs
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    updates = int(printed.split("updates")[1])
    assert updates >= 3 * len(toy_loaders().train)  # refreshed after every step...
    assert len(images) == 1  # ...into one display, not one image per update
    assert images[0].get("transient", {}).get("display_id") or images[0].metadata is not None


def test_live_plot_draws_attention_and_saves_png(tmp_path):
    from vitcourse.live import LivePlot, cls_attention

    torch.manual_seed(0)
    loaders = toy_loaders()
    images = next(iter(loaders.val))[0][:2]
    model = VisionTransformer(TINY)
    panels = cls_attention(model, images)
    assert panels["heads"].shape == (2, 2, 2, 2)  # (B, h, g, g) for a 2x2 patch grid
    assert panels["layers"].shape == (2, 2, 2, 2)  # (B, L, g, g)
    maps = model.eval().attention_maps(images)
    torch.testing.assert_close(panels["heads"][:, 1], maps[-1, :, 1, 0, 1:].reshape(2, 2, 2))
    torch.testing.assert_close(
        panels["rollout"], attention_rollout(maps)[:, 0, 1:].reshape(2, 2, 2)
    )
    live = LivePlot(images, png=tmp_path / "attention.png", show=False)
    trainer = Trainer(model, loaders, TrainConfig(epochs=1), [live], device="cpu")
    trainer.fit()
    assert (tmp_path / "attention.png").stat().st_size > 10_000
    assert live.val_acc_line.get_ydata()[-1] == trainer.history.epochs[-1]["val_acc"]


# --- the command line ------------------------------------------------------------------------


def test_cli_writes_checkpoint_metrics_and_figure_and_resumes(tmp_path, capsys):
    from vitcourse import train

    out = tmp_path / "run"
    metrics = train.main(["--dataset", "fashion-mnist", "--out", str(out), "--device", "cpu"])
    assert {p.name for p in out.iterdir()} == {
        "run.json",
        "checkpoint.pt",
        "metrics.json",
        "attention.png",
        "model.pt",
    }
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["test_acc"] == metrics["test_acc"] and 0.0 <= saved["test_acc"] <= 1.0
    record = saved["epochs"][0]
    assert {"epoch", "train_loss", "val_loss", "val_acc", "seconds"} <= record.keys()
    assert set(saved["per_class"]) == {
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    }
    assert sum(map(sum, saved["confusion"])) == saved["test_images"]
    assert load_model(out / "checkpoint.pt").config.num_classes == 10
    with pytest.raises(CheckpointError, match="model.pt holds a model but not a training run"):
        Trainer(
            VisionTransformer(load_model(out / "model.pt").config), toy_loaders(), device="cpu"
        ).resume(out / "model.pt")
    slim = load_model(out / "model.pt")
    torch.testing.assert_close(slim.head.weight, load_model(out / "checkpoint.pt").head.weight)
    assert (out / "model.pt").stat().st_size < (out / "checkpoint.pt").stat().st_size / 2
    train.main(["--out", str(out), "--resume", "--epochs", "2", "--device", "cpu"])
    assert "resuming" in capsys.readouterr().out


def test_cli_resume_without_a_checkpoint_is_a_clear_error(tmp_path):
    from vitcourse import train

    with pytest.raises(SystemExit, match="cannot resume: no checkpoint at"):
        train.main(["--out", str(tmp_path / "nothing"), "--resume"])
