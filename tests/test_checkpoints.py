"""vitcourse.checkpoints: safe files for models and training runs, and the registry of model
kinds."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from vitcourse.checkpoints import (
    ARCHITECTURES,
    TRAINED_DIR,
    TRAINED_MODEL,
    CheckpointError,
    build_model,
    load_checkpoint,
    load_model,
    register_architecture,
    save_model,
    shipped_model,
)
from vitcourse.cnn import SmallCNN
from vitcourse.data.loading import load_dataset
from vitcourse.presets import preset_for
from vitcourse.training.loop import TrainConfig, Trainer
from vitcourse.vit import VisionTransformer


def test_corrupt_and_mismatched_checkpoints_name_the_file(tmp_path, tiny_vit, toy_loaders):
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"\x80\x02 definitely not a checkpoint")
    with pytest.raises(CheckpointError, match=r"broken.pt is not a readable checkpoint"):
        load_checkpoint(broken)
    with pytest.raises(CheckpointError, match="no checkpoint at"):
        load_checkpoint(tmp_path / "missing.pt")
    other = tmp_path / "other.pt"
    trainer = Trainer(
        VisionTransformer(dataclasses.replace(tiny_vit, dim=24, num_heads=2)),
        toy_loaders(),
        TrainConfig(epochs=1),
        device="cpu",
    )
    trainer.save(other)
    with pytest.raises(CheckpointError, match=r"other.pt does not fit this model.*another shape"):
        Trainer(VisionTransformer(tiny_vit), toy_loaders(), device="cpu").resume(other)
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(other.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="truncated.pt is not a readable checkpoint"):
        load_checkpoint(truncated)


def test_load_model_rebuilds_the_trained_model(tmp_path, tiny_vit, toy_loaders):
    torch.manual_seed(0)
    trainer = Trainer(VisionTransformer(tiny_vit), toy_loaders(), TrainConfig(epochs=1), [], "cpu")
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
    assert model.config == preset_for("fashion-mnist"), "the README and notebook 07 describe it"
    test = load_dataset("fashion-mnist", train=False)
    images = torch.stack([test[i][0] for i in range(1000)])
    labels = torch.tensor([test[i][1] for i in range(1000)])
    with torch.no_grad():
        accuracy = (model(images).argmax(-1) == labels).float().mean().item()
    # The README quotes its accuracy on all 10,000 test images; 1,000 of them land within a point
    # or two of it (a wrong or untrained file would score near 10%).
    assert abs(accuracy - info["test_acc"]) < 0.03 and accuracy > 0.85


def test_checkpoints_remember_the_architecture(tmp_path, tiny_vit, tiny_cnn, toy_loaders):
    torch.manual_seed(0)
    trainer = Trainer(SmallCNN(tiny_cnn), toy_loaders(), TrainConfig(epochs=1), [], "cpu")
    trainer.fit()
    trainer.save(tmp_path / "cnn.pt")
    loaded = load_model(tmp_path / "cnn.pt")
    assert isinstance(loaded, SmallCNN) and loaded.config == tiny_cnn
    images = torch.randn(4, 1, 8, 8)
    torch.testing.assert_close(loaded(images), trainer.model.eval()(images))
    save_model(VisionTransformer(tiny_vit), tmp_path / "vit.pt")
    assert isinstance(load_model(tmp_path / "vit.pt"), VisionTransformer)
    with pytest.raises(CheckpointError, match="cnn.pt holds a cnn training run; .* trains a vit"):
        Trainer(VisionTransformer(tiny_vit), toy_loaders(), device="cpu").resume(
            tmp_path / "cnn.pt"
        )
    with pytest.raises(ValueError, match="unknown architecture 'rnn'"):
        build_model("rnn", {})


@dataclasses.dataclass(frozen=True)
class _LinearConfig:
    features: int = 4
    num_classes: int = 3


class _Linear(torch.nn.Module):
    """A stand-in for a new kind of model (notebook 09 adds some)."""

    architecture = "linear-test"

    def __init__(self, config: _LinearConfig):
        super().__init__()
        self.config = config
        self.fc = torch.nn.Linear(config.features, config.num_classes)

    def forward(self, x):
        return self.fc(x)


def test_a_new_kind_of_model_is_one_registration(tmp_path, monkeypatch):
    monkeypatch.setattr("vitcourse.checkpoints.ARCHITECTURES", dict(ARCHITECTURES))
    with pytest.raises(ValueError, match="unknown architecture 'linear-test'"):
        build_model("linear-test", {})
    register_architecture(_Linear, _LinearConfig)
    model = _Linear(_LinearConfig(features=5))
    save_model(model, tmp_path / "linear.pt", note="a stand-in")
    loaded = load_model(tmp_path / "linear.pt")
    assert isinstance(loaded, _Linear) and loaded.config == _LinearConfig(features=5)
    assert not loaded.training  # ready to use: eval mode
    torch.testing.assert_close(loaded.fc.weight, model.fc.weight)
    assert load_checkpoint(tmp_path / "linear.pt")["note"] == "a stand-in"
    with pytest.raises(TypeError, match="needs a class attribute `architecture`"):
        register_architecture(torch.nn.Linear, _LinearConfig)


def test_files_are_written_atomically(tmp_path, monkeypatch, tiny_vit):
    """A crash in the middle of writing leaves the previous file whole, not half a new one."""
    path = save_model(VisionTransformer(tiny_vit), tmp_path / "model.pt")
    before = path.read_bytes()

    def crash(obj, f, *args, **kwargs):
        Path(f).write_bytes(b"half a file")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError, match="disk full"):
        save_model(VisionTransformer(tiny_vit), path)
    assert path.read_bytes() == before
    assert isinstance(load_model(path), VisionTransformer)


def test_shipped_model_by_dataset():
    assert shipped_model("fashion-mnist") == TRAINED_MODEL and TRAINED_MODEL.exists()
    assert shipped_model("Fashion_MNIST") == TRAINED_MODEL  # the dataset's name as data spells it
    assert shipped_model("cifar10") is None  # none ships: the notebooks train one
    assert shipped_model("fashion-mnist", "no-such-purpose") is None
    with pytest.raises(ValueError, match="unknown dataset 'imagenet'"):
        shipped_model("imagenet")


def test_the_shipped_inside_model_has_room_to_look_inside():
    """Notebook 07's model: a pure ViT with at least a 7 x 7 grid and 6 blocks, above 90%."""
    path = shipped_model("fashion-mnist", "inside")
    info = load_checkpoint(path)
    model = load_model(path)
    c = model.config
    assert c.grid_size >= 7 and c.depth >= 6 and not c.stem_channels
    assert info["test_acc"] >= 0.90 and info["command"].startswith("python -m vitcourse.train")
    assert len(info["epochs"]) > 1  # its history travels with it
    test = load_dataset("fashion-mnist", train=False)
    images = torch.stack([test[i][0] for i in range(1000)])
    labels = torch.tensor([test[i][1] for i in range(1000)])
    with torch.no_grad():
        accuracy = (model(images).argmax(-1) == labels).float().mean().item()
    assert abs(accuracy - info["test_acc"]) < 0.03


def test_every_shipped_model_loads_in_a_fresh_process():
    """With nothing imported but the checkpoints module: every model kind is registered where
    checkpoints are read (the masked autoencoder once needed
    `import vitcourse.training.pretraining`)."""
    files = sorted(str(p) for p in TRAINED_DIR.glob("*.pt"))
    code = (
        "import sys\nfrom vitcourse.checkpoints import load_model\n"
        f"print([load_model(f).architecture for f in {files!r}])\n"
        "print('vitcourse.training.pretraining' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    kinds, trainer_loaded = done.stdout.split("\n")[:2]
    assert "mae" in kinds and "vit" in kinds and trainer_loaded == "False", done.stdout


def test_the_checkpoint_errors_are_in_the_translation_template():
    """What a learner reads when a checkpoint will not load goes through `_` (vitcourse.language)."""
    from vitcourse.translation.catalogs import package_template

    catalog = package_template()
    for message in (
        "no checkpoint at {path}",
        "{path} is not a readable checkpoint ({error})",
        "{path} holds a model that cannot be rebuilt: {error}",
    ):
        assert catalog.get(message) is not None, message
