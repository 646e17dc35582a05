"""vitcourse.cnn: the small CNN notebook 08 races against the ViT."""

import dataclasses

import pytest
import torch

from vitcourse.cnn import CNN_PRESETS, CNNConfig, SmallCNN, cnn_preset_for
from vitcourse.data.loading import dataset_info
from vitcourse.embedding import conv_bn_relu
from vitcourse.presets import preset
from vitcourse.training.evaluation import evaluate
from vitcourse.training.loop import TrainConfig, Trainer
from vitcourse.vit import VisionTransformer


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


def test_parameter_count_worked_by_hand(tiny_cnn):
    # conv 1->8: 72 + BN 16; conv 8->16: 1152 + BN 32; head 16*3 + 3.
    assert SmallCNN(tiny_cnn).num_parameters() == 72 + 16 + 1152 + 32 + 48 + 3


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


def test_the_same_trainer_trains_it(tiny_cnn, toy_loaders):
    torch.manual_seed(0)
    trainer = Trainer(SmallCNN(tiny_cnn), toy_loaders(), TrainConfig(epochs=4, lr=3e-3), [], "cpu")
    before = evaluate(trainer.model, trainer.loaders.val)["loss"]
    trainer.fit()
    after = evaluate(trainer.model, trainer.loaders.val)
    assert after["loss"] < before and after["acc"] > 0.9


@pytest.mark.parametrize("name", ["fashion-mnist", "mnist", "cifar10", "cifar100"])
def test_cnn_preset_for_fits_each_dataset(name):
    info = dataset_info(name)
    config = cnn_preset_for(name)
    assert config == dataclasses.replace(
        CNN_PRESETS[info.cnn_preset], num_classes=len(info.classes)
    )
    logits = SmallCNN(config).eval()(
        torch.zeros(2, info.channels, info.image_size, info.image_size)
    )
    assert logits.shape == (2, len(info.classes))
    with pytest.raises(ValueError, match="unknown CNN preset 'cnn-64': expected one of cnn-28"):
        cnn_preset_for(name, "cnn-64")


@pytest.mark.parametrize("stride, size, out", [(1, 5, 5), (2, 28, 14), (2, 7, 4)])
def test_conv_bn_relu_keeps_or_halves_the_size(stride, size, out):
    step = conv_bn_relu(3, 4, stride=stride)
    y = step(torch.randn(2, 3, size, size))
    assert y.shape == (2, 4, out, out) and (y >= 0).all()  # ReLU last
    assert step[0].bias is None  # the batch norm adds the bias
