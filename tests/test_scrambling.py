"""vitcourse.scrambling and the scrambled datasets: the same images, every patch and every pixel
in a patch moved by one fixed permutation; to the course's ViT the same problem, to a CNN not."""

import copy

import pytest
import torch
from PIL import Image

from vitcourse.data.batching import InMemoryImages
from vitcourse.data.loading import dataset_info, image_transform, load_dataset, make_loaders
from vitcourse.patching import patchify
from vitcourse.presets import preset_for
from vitcourse.scrambling import scramble, scramble_fixed, scramble_orders
from vitcourse.vit import VisionTransformer


def test_scramble_moves_patches_and_pixels_by_the_orders_and_loses_nothing():
    images = torch.rand(3, 3, 8, 12)
    patch_order, pixel_order = scramble_orders(6, 48, seed=3)
    out = scramble(images, 4, patch_order, pixel_order)
    assert out.shape == images.shape
    assert torch.equal(patchify(out, 4), patchify(images, 4)[:, patch_order][:, :, pixel_order])
    back = patchify(out, 4)[:, patch_order.argsort()][:, :, pixel_order.argsort()]
    assert torch.equal(back, patchify(images, 4))  # undone: nothing lost
    with pytest.raises(ValueError, match="need a patch_order of 6 and a pixel_order of 48"):
        scramble(images, 4, pixel_order, patch_order)


@pytest.mark.parametrize("shape, patch", [((1, 28, 28), 7), ((5, 3, 32, 32), 4)])
def test_the_fixed_scramble_is_the_courses_orders_for_one_image_or_a_batch(shape, patch):
    images = torch.randint(0, 256, shape, dtype=torch.uint8)
    batch = images if images.ndim == 4 else images[None]
    grid = (shape[-1] // patch) ** 2
    expected = scramble(batch, patch, *scramble_orders(grid, patch * patch * shape[-3]))
    assert torch.equal(scramble_fixed(batch, patch), expected)
    assert torch.equal(scramble_fixed(images, patch), expected.view(shape))
    assert torch.equal(scramble_fixed(images, patch), scramble_fixed(images, patch))  # fixed


@pytest.mark.parametrize("seed", range(20))
def test_every_square_and_every_number_in_it_moves_for_every_seed(seed):
    for patches, numbers in ((4, 196), (2, 3), (16, 49)):
        patch_order, pixel_order = scramble_orders(patches, numbers, seed=seed)
        for order, n in ((patch_order, patches), (pixel_order, numbers)):
            assert sorted(order.tolist()) == list(range(n))  # a permutation
            assert not (order == torch.arange(n)).any()  # that moves every element
    again = scramble_orders(16, 49, seed=seed)  # the same seed, the same orders
    assert torch.equal(again[0], patch_order) and torch.equal(again[1], pixel_order)
    one = scramble_orders(1, 1, seed)  # nowhere to move a lone square: it stays
    assert one[0].tolist() == [0] and one[1].tolist() == [0]


def test_the_courses_scramble_moves_all_four_squares():
    patch_order, _pixels = scramble_orders(4, 196)  # seed 0, the data layer's
    assert all(patch_order[n] != n for n in range(4))


def test_neighbours_no_longer_belong_together():
    # A smooth image: each pixel close to the next. Scrambled, neighbours are far apart.
    ramp = torch.linspace(0, 1, 28).expand(28, 28).reshape(1, 1, 28, 28)
    before = (ramp.diff(dim=-1).abs().mean(), ramp.diff(dim=-2).abs().mean())
    after = scramble_fixed(ramp, 14)
    assert sum(before) < 0.04 < after.diff(dim=-1).abs().mean() + after.diff(dim=-2).abs().mean()


@pytest.mark.parametrize("patch", [7, 14])
def test_a_scrambled_image_is_the_same_problem_to_the_vit(patch):
    """A ViT whose patch embedding's columns and position embeddings are permuted by the two
    orders gives, on scrambled images, exactly what the first gives on the images: the scramble
    only relabels its weights (and their random start is alike in any order)."""
    torch.manual_seed(0)
    vit = VisionTransformer(preset_for("fashion-mnist", patch_size=patch)).eval()
    twin = copy.deepcopy(vit)
    patch_order, pixel_order = scramble_orders((28 // patch) ** 2, patch * patch)
    with torch.no_grad():
        D, P = vit.config.dim, patch
        columns = vit.patch_embed.as_linear().weight[:, pixel_order]  # (D, K), scrambled
        twin.patch_embed.proj.weight.copy_(columns.reshape(D, P, P, 1).permute(0, 3, 1, 2))
        twin.pos_embed[:, 1:] = vit.pos_embed[:, 1:][:, patch_order]
    images = torch.randn(4, 1, 28, 28)
    torch.testing.assert_close(twin(scramble_fixed(images, P)), vit(images))
    assert not torch.allclose(vit(scramble_fixed(images, P)), vit(images), atol=1e-3)


def test_every_dataset_has_a_scrambled_twin_with_its_files_and_models():
    for name in ("fashion-mnist", "mnist", "cifar10", "cifar100"):
        info, twin = dataset_info(name), dataset_info(f"{name}-scrambled")
        assert twin.scramble == info.image_size // 2 and info.scramble == 0  # a 2 x 2 grid
        assert preset_for(twin.name).patch_size == twin.scramble  # its ViT: the squares as patches
        assert preset_for(twin.name, twin.train_preset) == preset_for(twin.name)
        assert (twin.torchvision_class, twin.classes, twin.mean, twin.archives) == (
            info.torchvision_class,
            info.classes,
            info.mean,
            info.archives,
        )
    assert dataset_info("Fashion_MNIST-Scrambled").name == "fashion-mnist-scrambled"


def test_scrambled_fashion_mnist_loads_through_every_door():
    plain, scrambled = load_dataset(train=False), load_dataset("fashion-mnist-scrambled", False)
    for i in (0, 9):
        assert torch.equal(scrambled[i][0], scramble_fixed(plain[i][0], 14))
        assert scrambled[i][1] == plain[i][1]
    loaders = make_loaders("fashion-mnist-scrambled", limit=64, augment=False)
    images, labels = next(iter(loaders.test))
    assert torch.equal(images[0], scrambled[0][0]) and labels[0] == plain[0][1]


@pytest.mark.parametrize("name, shape", [("fashion-mnist", (1, 28)), ("cifar10", (3, 32))])
def test_training_images_are_augmented_and_normalised_first_then_scrambled(name, shape):
    """Each channel is normalised with its own statistics before a scramble moves its numbers,
    possibly to another channel."""
    channels, side = shape
    pixels = torch.randint(0, 256, (8, channels, side, side), dtype=torch.uint8)
    labels = torch.arange(8)
    plain = InMemoryImages(pixels, labels, dataset_info(name), augment=True)
    twin = InMemoryImages(pixels, labels, dataset_info(f"{name}-scrambled"), augment=True)
    torch.manual_seed(5)
    shifted = torch.stack([image for image, _ in plain.__getitems__(list(range(8)))])
    torch.manual_seed(5)  # the same crops and flips
    scrambled = torch.stack([image for image, _ in twin.__getitems__(list(range(8)))])
    assert torch.equal(scrambled, scramble_fixed(shifted, side // 2))
    one = image_transform(f"{name}-scrambled")  # the PIL path (load_dataset's)
    picture = Image.fromarray(pixels[0].permute(1, 2, 0).squeeze(-1).numpy())
    unscrambled = image_transform(name)(picture)
    torch.testing.assert_close(one(picture), scramble_fixed(unscrambled, side // 2))


@pytest.mark.slow
def test_the_trainer_takes_a_scrambled_dataset(tmp_path):
    from vitcourse.cli import train

    metrics = train.main(
        ["--dataset", "fashion-mnist-scrambled", "--model", "cnn",
         "--epochs", "1", "--out", str(tmp_path / "run"), "--device", "cpu"]
    )  # fmt: skip
    saved = (tmp_path / "run" / "run.json").read_text()
    assert "fashion-mnist-scrambled" in saved and 0 <= metrics["test_acc"] <= 1


def test_the_data_layer_scrambles_without_the_exercises_solution(monkeypatch):
    """The class grader runs notebook 09 with a package whose `scramble` is a stub: the scrambled
    datasets must load without it."""
    from vitcourse import scrambling

    def stub(*args, **kwargs):
        raise AssertionError("the data layer called the exercise's solution")

    monkeypatch.setattr(scrambling, "scramble", stub)
    scrambling._where_from.cache_clear()
    images = torch.randint(0, 256, (2, 1, 28, 28), dtype=torch.uint8)
    expected = patchify(images, 14)[:, scramble_orders(4, 196)[0]][:, :, scramble_orders(4, 196)[1]]
    assert torch.equal(patchify(scrambling.scramble_fixed(images, 14), 14), expected)
    scrambling._where_from.cache_clear()
