"""vitcourse.mlp: notebook 09's control, a model with no spatial prior at all."""

import pytest
import torch

from vitcourse.checkpoints import load_model, save_model
from vitcourse.data.loading import dataset_info
from vitcourse.mlp import MLPConfig, SmallMLP, mlp_config_for
from vitcourse.presets import preset_for
from vitcourse.scrambling import scramble_fixed
from vitcourse.training.evaluation import evaluate
from vitcourse.training.loop import TrainConfig, Trainer
from vitcourse.vit import VisionTransformer


def test_about_the_parameters_of_the_vit_it_races():
    mlp = SmallMLP(mlp_config_for(dataset_info("fashion-mnist")))
    vit = VisionTransformer(preset_for("fashion-mnist", patch_size=14))
    assert mlp.num_parameters() == 784 * 384 + 384 + 384 * 384 + 384 + 384 * 10 + 10 == 453_130
    assert abs(mlp.num_parameters() / vit.num_parameters() - 1) < 0.1
    colour = mlp_config_for(dataset_info("cifar100"))
    assert (colour.image_size, colour.in_channels, colour.num_classes) == (32, 3, 100)
    assert SmallMLP(colour)(torch.zeros(2, 3, 32, 32)).shape == (2, 100)


def test_a_fixed_permutation_of_the_pixels_is_the_same_problem_to_it():
    """Permute the first layer's columns as the scramble permutes the pixels: the same outputs on
    scrambled images as the first model gives on the images. It assumes nothing about order."""
    torch.manual_seed(0)
    mlp, twin = SmallMLP().eval(), SmallMLP().eval()
    twin.load_state_dict(mlp.state_dict())
    where = scramble_fixed(torch.arange(784.0).view(1, 1, 28, 28), 14).flatten().long()
    with torch.no_grad():
        twin.layers[0].weight.copy_(mlp.layers[0].weight[:, where])
    images = torch.randn(3, 1, 28, 28)
    torch.testing.assert_close(twin(scramble_fixed(images, 14)), mlp(images))


def test_bad_configs_and_inputs_say_what_was_expected():
    with pytest.raises(ValueError, match=r"at least one hidden layer of at least 1, got \(\)"):
        MLPConfig(widths=())
    with pytest.raises(
        ValueError, match=r"expected images of shape \(B, 1, 28, 28\), got \(2, 28, 28\)"
    ):
        SmallMLP()(torch.zeros(2, 28, 28))


def test_the_same_trainer_trains_it_and_a_file_holds_it(toy_loaders, tmp_path):
    torch.manual_seed(0)
    mlp = SmallMLP(MLPConfig(image_size=8, num_classes=3, widths=[32]))
    trainer = Trainer(mlp, toy_loaders(), TrainConfig(epochs=4, lr=3e-3), [], "cpu")
    before = evaluate(mlp, trainer.loaders.val)["loss"]
    trainer.fit()
    after = evaluate(mlp, trainer.loaders.val)
    assert after["loss"] < before and after["acc"] > 0.9
    back = load_model(save_model(mlp, tmp_path / "mlp.pt"))
    assert isinstance(back, SmallMLP) and back.config == mlp.config
    images = torch.randn(2, 1, 8, 8)
    torch.testing.assert_close(back.eval()(images), mlp.eval()(images))
