"""python -m vitcourse.pretrain, and train's --init, --freeze and --teacher (quick mode)."""

import dataclasses
import json

import pytest
import torch

from vitcourse.checkpoints import load_checkpoint, load_model, save_model
from vitcourse.cli import pretrain, train
from vitcourse.deit import DistilledViT
from vitcourse.presets import preset, preset_for
from vitcourse.vit import VisionTransformer

pytestmark = pytest.mark.slow  # each test trains through the real data pipeline: seconds each


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    """A quick-mode pre-training run's folder (one epoch on the small subset)."""
    out = tmp_path_factory.mktemp("mae")
    pretrain.main(["--out", str(out), "--device", "cpu"])
    return out


def test_pretrain_writes_the_encoder_the_figure_and_the_losses(pretrained):
    assert {p.name for p in pretrained.iterdir()} == {
        "run.json",
        "checkpoint.pt",
        "metrics.json",
        "reconstructions.png",
        "model.pt",
    }
    encoder = load_model(pretrained / "model.pt")
    assert type(encoder) is VisionTransformer
    assert encoder.config == preset_for("fashion-mnist")  # the dataset's pure ViT by default
    metrics = json.loads((pretrained / "metrics.json").read_text())
    assert metrics["val_loss"] > 0 and metrics["epochs"][0]["val_acc"] is None
    assert metrics["model_config"]["mask_ratio"] == 0.75
    saved = load_checkpoint(pretrained / "model.pt")
    assert saved["pretrained"] == "masked-patch prediction"
    assert saved["command"] == f"python -m vitcourse.pretrain --out {pretrained} --device cpu"
    assert saved["val_loss"] == metrics["val_loss"]
    assert (pretrained / "reconstructions.png").stat().st_size > 10_000


def test_pretrain_resumes_and_trains_the_epochs_asked_for(tmp_path, capsys):
    out = tmp_path / "mae"
    pretrain.main(["--out", str(out), "--epochs", "1", "--mask-ratio", "0.5", "--device", "cpu"])
    metrics = pretrain.main(["--out", str(out), "--resume", "--epochs", "2"])
    assert "resuming" in capsys.readouterr().out
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2]
    assert metrics["model_config"]["mask_ratio"] == 0.5  # from the checkpoint, not the default
    with pytest.raises(SystemExit, match="cannot resume: no checkpoint"):
        pretrain.main(["--out", str(tmp_path / "none"), "--resume"])
    with pytest.raises(SystemExit, match="needs a pure ViT"):
        pretrain.main(["--out", str(tmp_path / "x"), "--preset", "course-28/conv"])


def test_init_copies_every_weight_but_the_head(pretrained, tmp_path):
    out = tmp_path / "ft"
    # No training at all would be the cleanest check; one epoch moves every weight a little.
    metrics = train.main(["--init", str(pretrained / "model.pt"), "--out", str(out)])
    assert metrics["init"] == str(pretrained / "model.pt") and not metrics["freeze"]
    assert metrics["model_config"] == dataclasses.asdict(preset_for("fashion-mnist"))
    start = load_model(pretrained / "model.pt")
    tuned = load_model(out / "model.pt")
    # Fine-tuning moved the weights, but they started from the encoder's: far closer to them
    # than a fresh model's are.
    fresh = VisionTransformer(start.config)
    for name in ("blocks.2.mlp.fc1.weight", "patch_embed.proj.weight", "pos_embed"):
        near = (tuned.state_dict()[name] - start.state_dict()[name]).norm()
        far = (fresh.state_dict()[name] - start.state_dict()[name]).norm()
        assert near < 0.5 * far, name


def test_freeze_trains_the_head_alone(pretrained, tmp_path):
    out = tmp_path / "probe"
    metrics = train.main(["--init", str(pretrained / "model.pt"), "--freeze", "--out", str(out)])
    assert metrics["parameters"] == 128 * 10 + 10  # the head: D x classes + biases
    start, probed = load_model(pretrained / "model.pt"), load_model(out / "model.pt")
    for name, value in probed.state_dict().items():
        if name.startswith("head"):
            assert not torch.equal(value, start.state_dict()[name])
        else:
            assert torch.equal(value, start.state_dict()[name]), name
    # Resuming a linear probe keeps it one.
    again = train.main(["--out", str(out), "--resume", "--epochs", "2"])
    assert again["parameters"] == 1290
    after = load_model(out / "model.pt")
    assert torch.equal(after.blocks[0].attn.qkv.weight, start.blocks[0].attn.qkv.weight)


def test_init_with_a_model_of_other_images_names_both_shapes(tmp_path):
    save_model(VisionTransformer(preset("course-32/4")), tmp_path / "cifar.pt")
    with pytest.raises(SystemExit, match=r"ViT for 3x32x32 images .*fashion-mnist has 1x28x28"):
        train.main(["--init", str(tmp_path / "cifar.pt"), "--out", str(tmp_path / "x")])
    with pytest.raises(SystemExit, match="sets the model's sizes; drop --preset"):
        train.main(["--init", str(tmp_path / "cifar.pt"), "--preset", "course-28/4"])
    with pytest.raises(SystemExit, match="--init: no checkpoint at"):
        train.main(["--init", str(tmp_path / "missing.pt"), "--out", str(tmp_path / "x")])
    with pytest.raises(SystemExit, match="--freeze trains the head on top of --init"):
        train.main(["--freeze", "--out", str(tmp_path / "x")])


def test_teacher_trains_a_distilled_vit_and_reports_the_teachers_time(tmp_path, capsys):
    teacher = tmp_path / "cnn"
    train.main(["--model", "cnn", "--out", str(teacher)])
    out = tmp_path / "deit"
    args = ["--teacher", str(teacher / "model.pt"), "--preset", "course-28/7", "--out", str(out)]
    metrics = train.main([*args, "--distillation", "soft"])
    assert metrics["architecture"] == "deit"
    assert type(load_model(out / "model.pt")) is DistilledViT
    facts = metrics["teacher"]
    assert facts["distillation"] == "soft" and (facts["alpha"], facts["tau"]) == (0.1, 3.0)
    assert facts["train_seconds"] == load_checkpoint(teacher / "model.pt")["train_seconds"] > 0
    assert 0 <= facts["test_acc"] <= 1
    assert "the teacher:" in capsys.readouterr().out
    again = train.main(["--out", str(out), "--resume", "--epochs", "2"])
    assert again["architecture"] == "deit" and again["teacher"]["distillation"] == "soft"
    with pytest.raises(SystemExit, match="--init and --teacher together are not supported"):
        train.main([*args, "--init", str(teacher / "model.pt")])
    with pytest.raises(SystemExit, match="--model cnn does not use them"):
        train.main(["--model", "cnn", "--teacher", str(teacher / "model.pt")])


def test_init_also_takes_a_whole_pretraining_run(pretrained, tmp_path):
    """--init on pretrain's checkpoint.pt (the masked autoencoder, decoder included), or on the
    course's shipped one, keeps the encoder's weights."""
    out = tmp_path / "probe"
    train.main(
        [
            "--init",
            str(pretrained / "checkpoint.pt"),
            "--freeze",
            "--out",
            str(out),
            "--epochs",
            "1",
        ]
    )
    encoder = load_model(pretrained / "model.pt")
    probed = load_model(out / "model.pt")
    assert torch.equal(probed.pos_embed, encoder.pos_embed)
    assert torch.equal(probed.blocks[1].mlp.fc2.weight, encoder.blocks[1].mlp.fc2.weight)


def test_pretrain_refuses_several_processes(monkeypatch, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun --nproc_per_node=2 sets it
    with pytest.raises(SystemExit, match="pre-training runs in one process"):
        pretrain.main(["--out", str(tmp_path / "run")])
