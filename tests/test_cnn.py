"""vitcourse.cnn: the small CNN notebook 08 races against the ViT, and the trainer's Timeline."""

import dataclasses
import json

import pytest
import torch

from tests.test_training import TINY, toy_loaders
from vitcourse.cnn import CNN_PRESETS, CNNConfig, SmallCNN, conv_bn_relu
from vitcourse.training import (
    CheckpointError,
    Timeline,
    TrainConfig,
    Trainer,
    build_model,
    evaluate,
    load_model,
    save_model,
)
from vitcourse.vit import PRESETS, VisionTransformer, preset

TINY_CNN = CNNConfig(image_size=8, in_channels=1, num_classes=3, widths=(8, 16), depths=(1, 1))


def test_presets_match_the_vits_parameter_count():
    for cnn_name, vit_name in (("cnn-28", "course-28/4"), ("cnn-32", "course-32/4")):
        cnn = SmallCNN(CNN_PRESETS[cnn_name])
        vit = VisionTransformer(preset(vit_name))
        assert abs(cnn.num_parameters() / vit.num_parameters() - 1) < 0.02, cnn_name
        c = cnn.config
        assert (c.image_size, c.in_channels) == (vit.config.image_size, vit.config.in_channels)


def test_shapes_through_the_stages():
    model = SmallCNN(CNN_PRESETS["cnn-28"])
    images = torch.randn(3, 1, 28, 28)
    # 28 -> 14 -> 7 -> 4: three poolings, the last rounding up (ceil_mode).
    assert model.forward_features(images).shape == (3, 192, 4, 4)
    assert model(images).shape == (3, 10)
    convs = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == sum(model.config.depths) and all(c.bias is None for c in convs)


def test_parameter_count_worked_by_hand():
    # conv 1->8: 72 + BN 16; conv 8->16: 1152 + BN 32; head 16*3 + 3.
    assert SmallCNN(TINY_CNN).num_parameters() == 72 + 16 + 1152 + 32 + 48 + 3
    block = conv_bn_relu(3, 4)
    assert block(torch.randn(1, 3, 5, 5)).shape == (1, 4, 5, 5)


def test_a_convolution_is_translation_equivariant():
    """Shift the image, and the first stage's features shift with it (away from the border):
    the built-in assumption a ViT lacks."""
    torch.manual_seed(0)
    stage = SmallCNN(CNN_PRESETS["cnn-28"]).stages[0].eval()
    image = torch.zeros(1, 1, 28, 28)
    image[0, 0, 8:14, 9:12] = torch.rand(6, 3)
    shifted = torch.roll(image, shifts=(5, 7), dims=(2, 3))
    a, b = stage(image), stage(shifted)
    torch.testing.assert_close(
        torch.roll(a, shifts=(5, 7), dims=(2, 3))[..., 2:-2, 2:-2], b[..., 2:-2, 2:-2]
    )


def test_bad_configs_and_inputs_say_what_was_expected():
    with pytest.raises(ValueError, match="one entry per stage"):
        CNNConfig(widths=(8, 16), depths=(1,))
    with pytest.raises(ValueError, match="at least one channel and one convolution"):
        CNNConfig(widths=(8, 0), depths=(1, 1))
    with pytest.raises(ValueError, match="image_size must be at least 8, got 4"):
        CNNConfig(image_size=4)
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 1, 28, 28\), got"):
        SmallCNN()(torch.randn(2, 3, 28, 28))
    assert CNNConfig(widths=[8, 16], depths=[1, 2]).widths == (8, 16)  # lists from JSON


def test_the_same_trainer_trains_it():
    torch.manual_seed(0)
    trainer = Trainer(SmallCNN(TINY_CNN), toy_loaders(), TrainConfig(epochs=4, lr=3e-3), [], "cpu")
    before = evaluate(trainer.model, trainer.loaders.val)["loss"]
    trainer.fit()
    after = evaluate(trainer.model, trainer.loaders.val)
    assert after["loss"] < before and after["acc"] > 0.9


def test_checkpoints_remember_the_architecture(tmp_path):
    torch.manual_seed(0)
    trainer = Trainer(SmallCNN(TINY_CNN), toy_loaders(), TrainConfig(epochs=1), [], "cpu")
    trainer.fit()
    trainer.save(tmp_path / "cnn.pt")
    loaded = load_model(tmp_path / "cnn.pt")
    assert isinstance(loaded, SmallCNN) and loaded.config == TINY_CNN
    images = torch.randn(4, 1, 8, 8)
    torch.testing.assert_close(loaded(images), trainer.model.eval()(images))
    save_model(VisionTransformer(TINY), tmp_path / "vit.pt")
    assert isinstance(load_model(tmp_path / "vit.pt"), VisionTransformer)
    with pytest.raises(CheckpointError, match="cnn.pt holds a cnn training run; .* trains a vit"):
        Trainer(VisionTransformer(TINY), toy_loaders(), device="cpu").resume(tmp_path / "cnn.pt")
    with pytest.raises(ValueError, match="unknown architecture 'mlp'"):
        build_model("mlp", {})


def test_timeline_measures_accuracy_over_training_time(monkeypatch):
    """A stand-in clock moves 10 ms per reading; evaluations are paused time."""
    from vitcourse import training

    ticks = iter(range(10**6))
    monkeypatch.setattr(training, "_now", lambda: next(ticks) * 0.01)
    torch.manual_seed(0)
    loaders = toy_loaders()
    timeline = Timeline(loaders.val, every_seconds=0.2)
    trainer = Trainer(
        SmallCNN(TINY_CNN), loaders, TrainConfig(minutes=1 / 60, lr=3e-3), [timeline], "cpu"
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


def test_cli_trains_the_cnn_on_a_fraction_and_resumes_it(tmp_path, capsys):
    from vitcourse import train

    out = tmp_path / "cnn"
    metrics = train.main(["--model", "cnn", "--fraction", "0.25", "--out", str(out)])
    assert metrics["architecture"] == "cnn" and metrics["train_images"] == 256
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
    assert again["architecture"] == "cnn" and again["train_images"] == 256
    assert "resuming" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="--patch-size set the ViT; --model cnn does not use"):
        train.main(["--model", "cnn", "--patch-size", "4", "--out", str(tmp_path / "x")])


def test_cli_hybrid_stem(tmp_path, capsys):
    from vitcourse import train

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
