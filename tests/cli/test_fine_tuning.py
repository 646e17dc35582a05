"""vitcourse.cli.fine_tuning: --init's ViT checked against the dataset, its weights copied but the
head, --freeze. (The whole command, from pre-training to fine-tuning, is in test_pretrain.py.)"""

import dataclasses

import pytest
import torch

from tests.conftest import TINY_VIT
from vitcourse.checkpoints import save_model
from vitcourse.cli.fine_tuning import init_config, start_from
from vitcourse.data.loading import dataset_info
from vitcourse.presets import preset
from vitcourse.vit import VisionTransformer


@pytest.fixture
def trained(tmp_path):
    """A tiny ViT for 16 x 16 grey images, saved as a trained model."""
    torch.manual_seed(0)
    model = VisionTransformer(TINY_VIT)
    return model, save_model(model, tmp_path / "model.pt")


def test_the_config_is_the_models_with_the_datasets_classes(trained, tmp_path):
    _, path = trained
    info = dataset_info("fashion-mnist")  # 1 x 28 x 28 images, 10 classes
    side = TINY_VIT.image_size
    with pytest.raises(SystemExit, match=f"holds a ViT for 1x{side}x{side} images.*has 1x28x28"):
        init_config(path, info, [], {})
    small = preset("course-28/7", dim=16, depth=1, num_heads=2, mlp_dim=32, num_classes=3)
    fitting = save_model(VisionTransformer(small), tmp_path / "fits.pt")
    config = init_config(fitting, info, [], {"pool": "mean"})
    assert config == dataclasses.replace(small, num_classes=10, pool="mean")
    with pytest.raises(SystemExit, match="sets the model's sizes; drop --dim"):
        init_config(fitting, info, ["--dim"], {})


def test_start_from_copies_all_but_the_head_and_freeze_trains_the_head_alone(trained, tmp_path):
    model, path = trained
    torch.manual_seed(1)
    fresh = VisionTransformer(TINY_VIT)
    start_from(fresh, path, freeze=True)
    weights = zip(model.state_dict().items(), fresh.state_dict().values(), strict=True)
    copied = {name for (name, theirs), ours in weights if torch.equal(theirs, ours)}
    assert copied >= {n for n in model.state_dict() if not n.startswith("head")}
    assert "head.weight" not in copied  # the new head keeps its own start
    training = {n for n, p in fresh.named_parameters() if p.requires_grad}
    assert training == {"head.weight", "head.bias"}
