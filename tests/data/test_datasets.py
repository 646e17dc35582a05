"""vitcourse.data.datasets: the dataset table, each entry's classes and course models."""

import pytest

from vitcourse.data.datasets import DATASETS, dataset_info
from vitcourse.data.loading import load_dataset


def test_unknown_dataset_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown dataset 'imagenet'.*fashion-mnist.*cifar10"):
        load_dataset("imagenet")
    assert dataset_info("Fashion_MNIST").name == "fashion-mnist"


def test_cifar100_has_its_100_classes_in_torchvisions_order():
    classes = dataset_info("cifar100").classes
    # torchvision reads the names from the archive's meta file, in alphabetical order; a missing
    # name would shift every label after it.
    assert len(classes) == len(set(classes)) == 100 and list(classes) == sorted(classes)
    assert classes[91] == "trout"  # its label in the official files


@pytest.mark.parametrize("name", list(DATASETS))
def test_every_dataset_entry_names_models_that_exist(name):
    from vitcourse.cnn import CNN_PRESETS
    from vitcourse.presets import PRESETS

    info = dataset_info(name)
    vits = [PRESETS[info.vit_preset], PRESETS[info.train_preset], PRESETS[info.hybrid_preset]]
    assert info.cnn_preset in CNN_PRESETS
    assert not vits[0].stem_channels and vits[2].stem_channels  # a pure ViT, and a hybrid
    for config in vits:
        assert config.image_size == info.image_size and config.in_channels == info.channels
    assert len(info.mean) == len(info.std) == info.channels
