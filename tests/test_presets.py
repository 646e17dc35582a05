"""vitcourse.presets: the named sizes (the paper's, DeiT's, the course's) and the course ViT for
each dataset."""

import pytest
import timm
import torch

from vitcourse.presets import PRESETS, preset, preset_for
from vitcourse.vit import VisionTransformer


@pytest.mark.parametrize(
    "name, timm_name",
    [
        ("vit-tiny/16", "vit_tiny_patch16_224"),
        ("vit-small/16", "vit_small_patch16_224"),
        pytest.param("vit-base/16", "vit_base_patch16_224", marks=pytest.mark.slow),
    ],
)
def test_preset_parameter_counts_equal_timm(name, timm_name):
    ours = VisionTransformer(PRESETS[name]).num_parameters()
    theirs = sum(p.numel() for p in timm.create_model(timm_name, pretrained=False).parameters())
    assert ours == theirs


@pytest.mark.parametrize(
    "name, shape", [("course-28/4", (1, 28)), ("course-28/7", (1, 28)), ("course-32/4", (3, 32))]
)
def test_course_presets_fit_their_datasets(name, shape):
    channels, side = shape
    model = VisionTransformer(PRESETS[name])
    assert model(torch.randn(2, channels, side, side)).shape == (2, 10)
    assert model.num_parameters() < 3_000_000  # small enough for a laptop CPU


def test_preset_changes_and_unknown_names():
    assert preset("course-28/4", depth=2).depth == 2
    with pytest.raises(ValueError, match="unknown preset 'vit-huge'.*vit-tiny/16"):
        preset("vit-huge")


@pytest.mark.parametrize("name", ["fashion-mnist", "mnist", "cifar10", "cifar100"])
def test_preset_for_fits_each_dataset(name):
    from vitcourse.data.loading import dataset_info

    info = dataset_info(name)
    config = preset_for(name)
    assert config == preset(info.vit_preset, num_classes=len(info.classes))
    assert (config.image_size, config.in_channels) == (info.image_size, info.channels)
    assert not config.stem_channels  # the notebooks' ViT is a pure one
    images = torch.zeros(2, info.channels, info.image_size, info.image_size)
    assert VisionTransformer(config).eval()(images).shape == (2, len(info.classes))
    trainer_default = preset_for(name, info.train_preset, depth=1)
    assert trainer_default.depth == 1 and trainer_default.num_classes == len(info.classes)
    with pytest.raises(ValueError, match="unknown preset 'course-99'"):
        preset_for(name, "course-99")
