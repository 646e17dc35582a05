"""python -m vitcourse.train: the command-line trainer (runs in quick mode: a small subset of the
data)."""

import dataclasses
import json

import pytest
import torch

from vitcourse.checkpoints import CheckpointError, load_checkpoint, load_model
from vitcourse.cli import train
from vitcourse.cnn import SmallCNN
from vitcourse.data.loading import QUICK_SIZES
from vitcourse.presets import PRESETS
from vitcourse.training.loop import Trainer
from vitcourse.vit import VisionTransformer

pytestmark = pytest.mark.slow  # each test trains through the real data pipeline: seconds each


def test_cli_writes_checkpoint_metrics_and_figure_and_resumes(tmp_path, capsys, toy_loaders):

    out = tmp_path / "run"
    argv = ["--dataset", "fashion-mnist", "--out", str(out), "--device", "cpu"]
    metrics = train.main(argv)
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
    # model.pt records the command that trained it, as typed.
    assert load_checkpoint(out / "model.pt")["command"] == " ".join(
        ["python -m vitcourse.train", *argv]
    )
    train.main(["--out", str(out), "--resume", "--epochs", "2", "--device", "cpu"])
    assert "resuming" in capsys.readouterr().out


def test_cli_resume_without_a_checkpoint_is_a_clear_error(tmp_path):

    with pytest.raises(SystemExit, match="cannot resume: no checkpoint at"):
        train.main(["--out", str(tmp_path / "nothing"), "--resume"])


def test_cli_trains_the_cnn_on_a_fraction_and_resumes_it(tmp_path, capsys):

    out = tmp_path / "cnn"
    metrics = train.main(["--model", "cnn", "--fraction", "0.25", "--out", str(out)])
    quarter = QUICK_SIZES[0] // 4  # a quarter of quick mode's training images
    assert metrics["architecture"] == "cnn" and metrics["train_images"] == quarter
    assert {p.name for p in out.iterdir()} == {
        "run.json",
        "checkpoint.pt",
        "metrics.json",
        "model.pt",
    }
    assert json.loads((out / "run.json").read_text())["fraction"] == 0.25
    assert isinstance(load_model(out / "model.pt"), SmallCNN)
    # --resume reads the model kind and the data from run.json: no need to repeat them.
    again = train.main(["--out", str(out), "--resume", "--epochs", "2"])
    assert again["architecture"] == "cnn" and again["train_images"] == quarter
    assert "resuming" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--patch-size set the ViT; --model cnn does not use"):
        train.main(["--model", "cnn", "--patch-size", "4", "--out", str(tmp_path / "x")])


def test_cli_hybrid_stem(tmp_path, capsys):

    # The default for Fashion-MNIST is the hybrid course-28/conv; --preset course-28/7 is pure.
    default = train.main(["--out", str(tmp_path / "default")])
    assert default["model_config"] == dataclasses.asdict(PRESETS["course-28/conv"])
    assert "stem 16,32,64 stride 2, 4x4 patches" in capsys.readouterr().out
    out = tmp_path / "hybrid"
    metrics = train.main(["--preset", "course-28/7", "--stem", "8,16", "--out", str(out)])
    assert tuple(metrics["model_config"]["stem_channels"]) == (8, 16)
    assert metrics["model_config"]["stem_stride"] == 1
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["model_config"]["stem_channels"] == [8, 16]
    assert load_model(out / "model.pt").config.stem_channels == (8, 16)
    # A stride-2 stem of two convolutions: 28 -> 14 -> 7, cut into 7 x 7 one-cell patches.
    strided = train.main(["--stem", "8,16", "--out", str(tmp_path / "strided")])
    assert load_model(tmp_path / "strided" / "model.pt").config.grid_size == 7
    assert strided["model_config"]["stem_stride"] == 2
    with pytest.raises(SystemExit, match="error: stem_stride=2 needs stem convolutions"):
        train.main(["--preset", "course-28/7", "--stem-stride", "2", "--out", str(out)])
    with pytest.raises(SystemExit, match="error: image_size 28 is not a multiple of patch_size 5"):
        train.main(["--preset", "course-28/7", "--patch-size", "5", "--out", str(out)])
    with pytest.raises(SystemExit):
        train.main(["--stem", "8,x", "--out", str(out)])
    assert "expected channel counts separated by commas, such as 16,32; got '8,x'" in (
        capsys.readouterr().err
    )


def test_a_quick_mode_resume_trains_the_epochs_asked_for(tmp_path, capsys):
    """Quick mode shrinks the data, not the training asked for: --resume --epochs 3 after one
    epoch trains epochs 2 and 3."""
    out = tmp_path / "run"
    first = train.main(["--epochs", "1", "--out", str(out), "--device", "cpu"])
    assert [r["epoch"] for r in first["epochs"]] == [1]
    steps_per_epoch = first["epochs"][0]["steps"]
    again = train.main(["--out", str(out), "--resume", "--epochs", "3", "--device", "cpu"])
    assert [r["epoch"] for r in again["epochs"]] == [1, 2, 3]
    assert again["epochs"][-1]["steps"] == 3 * steps_per_epoch
    assert load_checkpoint(out / "checkpoint.pt")["schedule"]["epoch"] == 3
    assert "resuming" in capsys.readouterr().out
    # Without a length, quick mode's default is one epoch (ten otherwise).
    default = train.main(["--out", str(tmp_path / "default"), "--device", "cpu"])
    assert len(default["epochs"]) == 1


def test_cli_writes_tensorboard_events_and_a_transformers_model(tmp_path, capsys):
    """--tensorboard and --export transformers: the run read back by TensorBoard's own reader,
    and the exported model loaded by transformers gives the same logits as model.pt."""
    from tests.conftest import need

    need("tensorboard")
    transformers = need("transformers")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from vitcourse.bridges.transformers import from_transformers
    from vitcourse.data.loading import make_loaders

    out = tmp_path / "run"
    argv = ["--out", str(out), "--device", "cpu", "--preset", "course-28/7"]
    train.main([*argv, "--tensorboard", "--export", "transformers"])
    assert "for transformers" in capsys.readouterr().out
    events = EventAccumulator(str(out), size_guidance={"scalars": 0, "images": 0})
    events.Reload()
    assert {"train/loss", "epoch/val_acc"} <= set(events.Tags()["scalars"])
    assert events.Tags()["images"] == ["attention"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert events.Scalars("epoch/val_acc")[-1].value == pytest.approx(
        metrics["epochs"][-1]["val_acc"]
    )

    ours = load_model(out / "model.pt").eval()
    hf = transformers.ViTForImageClassification.from_pretrained(out / "transformers").eval()
    images, _ = next(iter(make_loaders("fashion-mnist", batch_size=16).test))
    with torch.no_grad():
        assert torch.allclose(hf(pixel_values=images).logits, ours(images), atol=1e-4)
        assert torch.equal(from_transformers(hf)(images), ours(images))


def test_cli_export_refuses_what_transformers_cannot_hold(tmp_path):
    from tests.conftest import need

    need("transformers")
    argv = ["--out", str(tmp_path / "cnn"), "--device", "cpu", "--model", "cnn"]
    with pytest.raises(SystemExit, match="error: --export transformers: .*VisionTransformer"):
        train.main([*argv, "--export", "transformers"])
