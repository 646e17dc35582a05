"""vitcourse.data.batching: images held in memory read exactly as torchvision's pipeline gives them,
and the batch augmentation that does RandomCrop and RandomHorizontalFlip's job."""

import pytest
import torch

from vitcourse.data.batching import InMemoryImages, random_crop_flip
from vitcourse.data.datasets import dataset_info
from vitcourse.data.loading import load_dataset


def test_in_memory_images_read_exactly_as_load_dataset():
    """The loaders' fast in-memory copy gives the same numbers as torchvision's PIL pipeline."""
    files = load_dataset("fashion-mnist", train=False)
    memory = InMemoryImages.from_torchvision(files, dataset_info("fashion-mnist"))
    assert len(memory) == len(files) == 10_000
    for i in (0, 1, 4321, 9999):
        (a, label_a), (b, label_b) = files[i], memory[i]
        assert torch.equal(a, b) and label_a == label_b and isinstance(label_b, int)
    batch = memory.__getitems__([3, 1, 4])
    assert [y for _, y in batch] == [files[i][1] for i in (3, 1, 4)]
    assert torch.equal(batch[2][0], files[4][0])
    with pytest.raises(ValueError, match="expected uint8 images .N, C, H, W. and N labels, got"):
        InMemoryImages(torch.zeros(3, 1, 28, 28), torch.zeros(3), dataset_info("mnist"), False)


def _shifted(image, dy, dx, padding):
    """`image` moved by the crop at (dy, dx) of its zero-padded copy, as RandomCrop does it."""
    h, w = image.shape[-2:]
    return torch.nn.functional.pad(image, (padding,) * 4)[:, dy : dy + h, dx : dx + w]


def test_random_crop_flip_shifts_and_mirrors_each_image():
    images = torch.randint(1, 256, (64, 1, 28, 28), dtype=torch.uint8)  # no zeros: shifts show
    torch.manual_seed(0)
    out = random_crop_flip(images, padding=2, hflip=True)
    assert out.shape == images.shape and out.dtype == torch.uint8
    seen = set()
    for image, result in zip(images, out, strict=True):
        matches = [
            (dy, dx, flip)
            for dy in range(5)
            for dx in range(5)
            for flip in (False, True)
            if torch.equal(result, _shifted(image.flip(-1) if flip else image, dy, dx, 2))
        ]
        assert len(matches) == 1, "each output is one shift (and maybe mirror) of its input"
        seen.add(matches[0])
    assert len({(dy, dx) for dy, dx, _ in seen}) >= 15, "offsets vary from image to image"
    assert {flip for _, _, flip in seen} == {False, True}
    torch.manual_seed(0)
    assert torch.equal(random_crop_flip(images, 2, True), out), "seeded: the same draws"
    torch.manual_seed(1)
    digits = random_crop_flip(images, 2, hflip=False)
    assert all(
        any(torch.equal(r, _shifted(i, dy, dx, 2)) for dy in range(5) for dx in range(5))
        for i, r in zip(images, digits, strict=True)
    ), "without hflip no image is mirrored"
    with pytest.raises(ValueError, match=r"expected a batch of images \(B, C, H, W\), got shape"):
        random_crop_flip(images[0], 2, True)
