"""vitcourse.data.folders: a folder of your own images, one sub-folder per class, read as a dataset.

Every folder here is written by the test itself with PIL, in tmp_path."""

import contextlib
import json
import math
from pathlib import Path

import pytest
import torch
from PIL import Image, ImageDraw

from vitcourse.cli import train, train_run
from vitcourse.cnn import SmallCNN, cnn_preset_for
from vitcourse.data import folders
from vitcourse.data.folders import FolderError
from vitcourse.data.loading import (
    dataset_info,
    denormalize,
    image_transform,
    load_dataset,
    make_loaders,
)
from vitcourse.presets import preset_for
from vitcourse.vit import VisionTransformer

RED, GREEN, BLUE, WHITE = (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)


def _shape(kind: str, colour, size: tuple[int, int], mode: str = "RGB", seed: int = 0):
    """A shape drawn on a plain background: a class a model can learn."""
    image = Image.new("RGB", size, (40 + 20 * seed % 60, 40, 40))
    w, h = size
    box = (w // 4, h // 4, 3 * w // 4, 3 * h // 4)
    draw = ImageDraw.Draw(image)
    (draw.ellipse if kind == "circles" else draw.rectangle)(box, fill=colour)
    return image.convert(mode)


def _mixed_folder(root: Path, per_class: int = 10) -> Path:
    """Two classes of mixed sizes and modes (RGB JPEG, grayscale PNG, RGBA PNG, palette PNG), a
    text file named .jpg, an empty file, a cut-off JPEG, and a .DS_Store."""
    kinds = [("RGB", "jpg"), ("L", "png"), ("RGBA", "png"), ("P", "png")]
    for label, kind in enumerate(("circles", "squares")):
        folder = root / kind
        folder.mkdir(parents=True)
        for i in range(per_class):
            mode, ext = kinds[i % len(kinds)]
            size = (24 + 13 * i, 20 + 7 * (i + label))
            _shape(kind, (200, 180, 20), size, mode, seed=i).save(folder / f"{i:02d}.{ext}")
        (folder / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (root / "circles" / "notes.jpg").write_text("not a picture")
    (root / "circles" / "empty.png").write_bytes(b"")
    jpeg = (root / "squares" / "00.jpg").read_bytes()
    (root / "squares" / "cut.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    return root


@pytest.fixture
def mixed(tmp_path) -> Path:
    return _mixed_folder(tmp_path / "shapes")


def _solid(path: Path, colour, size=(32, 32), mode="RGB") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).convert(mode).save(path)


def test_a_mixed_folder_is_read_and_its_unreadable_files_named_and_skipped(mixed):
    with pytest.warns(UserWarning, match="skipped 3 files that are not readable images") as said:
        info = dataset_info(str(mixed))
    message = str(said[0].message)
    for name in ("circles/notes.jpg", "circles/empty.png", "squares/cut.jpg"):
        assert name in message
    assert "DS_Store" not in message  # hidden files are ignored silently
    assert info.classes == ("circles", "squares") and info.name == "shapes"
    assert (info.image_size, info.channels, info.hflip) == (32, 3, True)
    assert info.folder == mixed.resolve() and len(info.mean) == len(info.std) == 3
    train_set, test_set = load_dataset(str(mixed)), load_dataset(str(mixed), train=False)
    assert len(train_set) + len(test_set) == 20  # every readable image, once
    assert len(test_set) == 4  # one in five of each class, held out
    image, label = train_set[0]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32 and label == 0
    assert train_set.data.shape == (16, 32, 32, 3) and train_set.classes == ["circles", "squares"]
    assert sorted(train_set.targets) == train_set.targets == [0] * 8 + [1] * 8


def test_the_held_out_test_images_are_the_same_every_time(mixed):
    with pytest.warns(UserWarning):
        first = load_dataset(str(mixed), train=False).images.clone()
    folders._READ.clear()  # decode again from the files
    with pytest.warns(UserWarning):
        again = load_dataset(str(mixed), train=False).images
    assert torch.equal(first, again)


def test_images_are_resized_around_their_centre_and_laid_on_white(tmp_path):
    root = tmp_path / "pics"
    wide = Image.new("RGB", (64, 32), RED)  # red, green in the middle half
    ImageDraw.Draw(wide).rectangle((16, 0, 47, 31), fill=GREEN)
    (root / "a").mkdir(parents=True)
    wide.save(root / "a" / "wide.png")
    Image.new("RGBA", (50, 50), (0, 0, 255, 0)).save(root / "a" / "clear.png")  # transparent
    palette = Image.new("RGB", (20, 20), BLUE).convert("P")
    palette.save(root / "a" / "palette.png")
    for i in range(5):
        _solid(root / "b" / f"{i}.png", WHITE)
    decoded = {
        name: folders.prepare_image(Image.open(root / "a" / name), 32, 3)
        for name in ("wide.png", "clear.png", "palette.png")
    }
    assert (decoded["wide.png"] == torch.tensor(GREEN).view(3, 1, 1)).all()  # no red edges left
    assert (decoded["clear.png"] == 255).all()  # a transparent picture shows white, not blue
    assert (decoded["palette.png"] == torch.tensor(BLUE).view(3, 1, 1)).all()
    deep = Image.new("I;16", (32, 32), 40000)  # 16-bit grayscale: 40000 / 256, not clipped at 255
    assert (folders.prepare_image(deep, 32, 1) == 156).all()
    # A phone's photo: stored on its side, with an EXIF tag that says to turn it a quarter.
    sideways, exif = Image.new("RGB", (64, 32), RED), Image.Exif()
    ImageDraw.Draw(sideways).rectangle((32, 0, 63, 31), fill=BLUE)  # left red, right blue
    exif[0x0112] = 6  # orientation: rotate 90 degrees clockwise to show it
    sideways.save(root / "a" / "phone.jpg", exif=exif, quality=95)
    upright = folders.prepare_image(Image.open(root / "a" / "phone.jpg"), 32, 3).float()
    assert upright[:, :8].mean(dim=(1, 2)).tolist() == pytest.approx(RED, abs=8)  # red on top
    assert upright[:, -8:].mean(dim=(1, 2)).tolist() == pytest.approx(BLUE, abs=8)
    # A new picture of yours, made as the folder's were and normalised with its statistics.
    new = image_transform(str(root))(wide)
    assert new.shape == (3, 32, 32)
    torch.testing.assert_close(denormalize(new, str(root)), decoded["wide.png"] / 255)


def test_statistics_are_those_of_the_training_split_alone(tmp_path):
    root = tmp_path / "split"
    # Training: four 32 x 32 images of one colour each. Test: white, which must not count.
    for name, colour in [("cats/0", RED), ("cats/1", (0, 0, 0)), ("dogs/0", (0, 255, 51))]:
        _solid(root / "train" / f"{name}.png", colour)
    _solid(root / "train" / "dogs" / "1.png", (0, 0, 0))
    _solid(root / "test" / "cats" / "0.png", WHITE)
    _solid(root / "test" / "dogs" / "0.png", WHITE)
    info = dataset_info(str(root))
    n = 4 * 32 * 32  # pixels per channel

    def by_hand(values):  # one value per image, each on all its 1,024 pixels
        mean = sum(values) / 4
        squares = sum((v - mean) ** 2 for v in values) * 32 * 32
        return mean, math.sqrt(squares / (n - 1))  # Bessel's n - 1, as torch.std

    expected = [by_hand([1, 0, 0, 0]), by_hand([0, 0, 1, 0]), by_hand([0, 0, 0.2, 0])]
    assert info.mean == pytest.approx([m for m, _ in expected], abs=1e-4)
    assert info.std == pytest.approx([s for _, s in expected], abs=1e-4)
    assert info.mean[0] == 0.25  # white test images would have lifted it to 0.5
    normalised = load_dataset(str(root))[0][0]  # red: (1 - 0.25) / std on the first channel
    assert normalised[0, 0, 0].item() == pytest.approx((1 - info.mean[0]) / info.std[0], abs=1e-5)


def test_grayscale_training_images_give_one_channel(tmp_path):
    root = tmp_path / "digits"
    for label, level in (("one", 30), ("two", 220)):
        for i in range(5):
            _solid(root / "train" / label / f"{i}.png", (level,) * 3, size=(28 + i, 30), mode="L")
        _solid(root / "test" / label / "0.png", (level,) * 3, mode="L")
    _solid(root / "train" / "two" / "5.png", (0, 0, 0), mode="LA")  # gray with an alpha channel
    info = dataset_info(str(root))
    assert info.channels == 1 and len(info.mean) == 1 and info.classes == ("one", "two")
    assert load_dataset(str(root)).data.ndim == 3  # (N, H, W), as MNIST keeps it
    assert preset_for(str(root)).in_channels == 1 and cnn_preset_for(str(root)).in_channels == 1
    # One colour image among the training images: all go to three channels.
    _solid(root / "train" / "two" / "6.jpg", (200, 30, 30))
    assert dataset_info(str(root)).channels == 3


def test_a_colour_test_image_is_made_gray_as_pil_does(tmp_path):
    root = tmp_path / "gray"
    for label in ("a", "b"):
        for i in range(2):
            _solid(root / "train" / label / f"{i}.png", (90,) * 3, mode="L")
    _solid(root / "test" / "a" / "colour.png", (200, 30, 30))
    info = dataset_info(str(root))
    test_set = load_dataset(str(root), train=False)
    assert info.channels == 1 and test_set.images.shape == (1, 1, 32, 32)
    by_pil = Image.new("RGB", (1, 1), (200, 30, 30)).convert("L").getpixel((0, 0))
    assert (test_set.images == by_pil).all()


def _splits(root: Path, counts: dict[str, int]) -> Path:
    """Split folders: `counts` images of each class a and b in each split."""
    for split, count in counts.items():
        for label in ("a", "b"):
            for i in range(count):
                _solid(root / split / label / f"{i}.png", (10 * i, 0, 0 if label == "a" else 200))
    return root


def test_split_folders(tmp_path):
    three = _splits(tmp_path / "three", {"train": 12, "val": 3, "test": 2})
    loaders = make_loaders(str(three), batch_size=4)  # val/ beside test/: the validation split
    assert (len(loaders.train.dataset), len(loaders.val.dataset)) == (24, 6)
    assert len(loaders.test.dataset) == 4 and loaders.info.classes == ("a", "b")
    assert [loaders.val.dataset[i][1] for i in range(6)] == [0, 0, 0, 1, 1, 1]
    assert not loaders.val.dataset.dataset.augment
    two = _splits(tmp_path / "two", {"train": 12, "val": 3})  # val/ alone: the test split
    assert len(load_dataset(str(two), train=False)) == 6 and len(load_dataset(str(two))) == 24
    alone = _splits(tmp_path / "alone", {"train": 12})  # train/ alone: one in five held out
    assert len(load_dataset(str(alone), train=False)) == 2 * (12 // 5)


@pytest.mark.parametrize(
    ("layout", "match"),
    [
        ({"cats/0.png"}, r"found 1 class \(cats\) in .*: a classifier needs at least two"),
        ({"0.png", "1.png"}, "found no class sub-folders in"),
        ({"cats/a.txt", "dogs/.hidden.png"}, "found no readable images in"),
        ({"train/cats/0.png", "test/cats/0.png", "test/dogs/0.png"}, "class dogs has no training"),
        ({"cats/0.png", "cats/1.png", "dogs/0.png"}, "too few images to set some aside"),
        ({"train/a/0.png", "test/a/0.png", "b/0.png"}, "has split folders .* and also b"),
    ],
)
def test_a_folder_that_cannot_be_a_dataset_says_what_it_found(tmp_path, layout, match):
    root = tmp_path / "mine"
    root.mkdir()
    for name in layout:
        if name.endswith(".txt"):
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text("hello")
        else:
            _solid(root / name, RED)
    with pytest.warns(UserWarning) if "cats/a.txt" in layout else contextlib.nullcontext():
        with pytest.raises(FolderError, match=match) as raised:
            dataset_info(str(root))
    assert "\n" not in str(raised.value) and isinstance(raised.value, ValueError)


def test_paths_sizes_and_names_that_are_refused(tmp_path, monkeypatch, mixed):
    with pytest.raises(FolderError, match="is a file, not a folder"):
        dataset_info(str(mixed / "circles" / "00.jpg"))
    with pytest.raises(FolderError, match="no course model fits 30 x 30 images: sizes 28, or a"):
        dataset_info(str(mixed), image_size=30)
    with pytest.raises(ValueError, match="unknown dataset .*nowhere.*or the path of a folder"):
        dataset_info(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="image_size resizes a folder of your own images"):
        dataset_info("cifar10", image_size=64)
    # The course's names win over a folder of that name; the folder is "./mnist" then.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mnist").symlink_to(mixed)
    with pytest.warns(UserWarning):
        assert dataset_info("./mnist").name == "mnist-folder"
    assert dataset_info("mnist").folder is None


def test_a_folder_is_decoded_once_per_size_until_files_come_or_go(mixed, monkeypatch):
    opened = []
    real_open = Image.open
    monkeypatch.setattr(folders.Image, "open", lambda f: opened.append(f) or real_open(f))
    with pytest.warns(UserWarning):
        info = dataset_info(str(mixed))
    count = len(opened)
    assert count == 23  # 20 images and the 3 files that are none
    assert dataset_info(str(mixed)) is info
    make_loaders(str(mixed), batch_size=4)
    denormalize(load_dataset(str(mixed))[0][0], str(mixed))
    assert len(opened) == count  # nothing decoded twice
    with pytest.warns(UserWarning):
        assert dataset_info(str(mixed), image_size=28).image_size == 28  # another size: decoded
    _solid(mixed / "squares" / "new.png", RED)
    with pytest.warns(UserWarning):
        assert len(load_dataset(str(mixed))) + len(load_dataset(str(mixed), train=False)) == 21


@pytest.mark.parametrize("size", [16, 24, 28, 32, 48, 64])
def test_every_size_that_works_gets_the_course_models(tmp_path, size):
    root = tmp_path / f"size{size}"
    for label, colour in (("a", RED), ("b", BLUE)):
        for i in range(5):
            _solid(root / label / f"{i}.png", colour, size=(size + i, size))
    info = dataset_info(str(root), image_size=size)
    assert info.vit_preset == ("course-28/7" if size == 28 else "course-32/4")
    assert info.crop_padding == (2 if size == 28 else size // 8)
    images = make_loaders(info, batch_size=2).train.dataset[0][0].unsqueeze(0)
    assert images.shape == (1, 3, size, size)
    for name in (info.vit_preset, info.train_preset, info.hybrid_preset):
        model = VisionTransformer(preset_for(info, name)).eval()
        assert model(images).shape == (1, 2)
    assert SmallCNN(cnn_preset_for(info)).eval()(images).shape == (1, 2)


def test_notebooks_take_a_folder_where_they_take_a_name(mixed):
    """The calls notebooks 00-09 make with DATASET, here a path."""
    DATASET = str(mixed)
    with pytest.warns(UserWarning):
        info = dataset_info(DATASET)
    train_set = load_dataset(DATASET, train=True)
    test_set = load_dataset(DATASET, train=False)
    targets = torch.as_tensor(train_set.targets)  # notebook 00
    assert torch.bincount(targets, minlength=len(info.classes)).tolist() == [8, 8]
    raw = torch.as_tensor(train_set.data).float() / 255  # notebook 00 recomputes the statistics
    mean, std = raw.mean(dim=(0, 1, 2)), raw.std(dim=(0, 1, 2))
    assert mean.tolist() == pytest.approx(info.mean, abs=1e-4)
    assert std.tolist() == pytest.approx(info.std, abs=1e-4)
    picture = denormalize(train_set[3][0], DATASET)  # back to the bytes, as [0, 1]
    torch.testing.assert_close(picture, train_set.images[3].float() / 255, atol=1e-4, rtol=0)
    augmented = load_dataset(DATASET, train=True, augment=True)
    assert augmented[0][0].shape == (3, 32, 32) and test_set.classes == list(info.classes)
    P = preset_for(DATASET).patch_size  # notebook 01
    assert info.image_size % P == 0
    batch = torch.stack([test_set[i][0] for i in range(4)])  # notebooks 02, 07
    model = VisionTransformer(preset_for(DATASET)).eval()  # notebooks 06-09
    assert model(batch).shape == (4, 2)
    hybrid = VisionTransformer(preset_for(DATASET, dataset_info(DATASET).hybrid_preset)).eval()
    assert hybrid(batch).shape == (4, 2)
    assert SmallCNN(cnn_preset_for(DATASET)).eval()(batch).shape == (4, 2)
    loaders = make_loaders(DATASET, batch_size=128)  # notebooks 00, 06
    images, labels = next(iter(loaders.train))
    assert images.shape == (15, 3, 32, 32) and len(loaders.val.dataset) == 1  # a tenth of 16
    assert len(loaders.test.dataset) == 4 and loaders.info is info
    few = make_loaders(DATASET, batch_size=128, fraction=0.5, val_size=1000)  # notebooks 08, 09
    assert (len(few.train.dataset), len(few.val.dataset)) == (8, 1)  # val_size: a tenth at most
    assert denormalize(images, DATASET).shape == images.shape


def test_a_run_plans_with_the_folder_and_refuses_what_does_not_fit(tmp_path, mixed):
    out = ["--out", str(tmp_path / "run"), "--device", "cpu"]
    with pytest.warns(UserWarning):
        run = train_run.plan(
            train.parse_args(["--dataset", str(mixed), "--image-size", "28", *out])
        )
    assert run.info.image_size == 28 and run.model_config.image_size == 28
    assert run.model_config.num_classes == 2 and run.dataset == str(mixed.resolve())
    assert run.settings()["image_folder"]["mean"] == list(run.info.mean)
    with pytest.warns(UserWarning):  # read again at 32 pixels
        default = train_run.plan(train.parse_args(["--dataset", str(mixed), "--device", "cpu"]))
    assert default.folder.path == Path("runs") / "shapes"  # not inside the images' folder
    with pytest.raises(SystemExit, match="--image-size resizes a folder of your own images"):
        train_run.plan(train.parse_args(["--image-size", "28", *out]))
    with pytest.raises(SystemExit, match="error: no course model fits 100 x 100 images"):
        train_run.plan(train.parse_args(["--dataset", str(mixed), "--image-size", "100", *out]))
    _solid(tmp_path / "one" / "cats" / "0.png", RED)
    with pytest.raises(SystemExit, match=r"error: found 1 class \(cats\)"):
        train_run.plan(train.parse_args(["--dataset", str(tmp_path / "one"), *out]))


@pytest.mark.slow  # trains a course model for an epoch, twice
def test_the_command_line_trains_on_a_folder_and_resumes_with_its_statistics(
    tmp_path, mixed, capsys
):
    out = tmp_path / "run"
    argv = ["--dataset", str(mixed), "--epochs", "1", "--out", str(out), "--device", "cpu"]
    with pytest.warns(UserWarning, match="skipped 3 files"):
        metrics = train.main(argv)
    assert {"run.json", "checkpoint.pt", "metrics.json", "model.pt"} <= {
        p.name for p in out.iterdir()
    }
    info = dataset_info(str(mixed))
    kept = json.loads((out / "run.json").read_text())
    assert kept["dataset"] == str(mixed.resolve())
    assert kept["image_folder"] == {
        "image_size": 32,
        "channels": 3,
        "mean": list(info.mean),
        "std": list(info.std),
        "classes": ["circles", "squares"],
    }
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["dataset"] == "shapes" and set(saved["per_class"]) == {"circles", "squares"}
    assert saved["test_images"] == 4 and saved["test_acc"] == metrics["test_acc"]
    assert "shapes: 2 classes (circles, squares), 32 x 32 pixels" in capsys.readouterr().out
    # New images change the folder's statistics; the resumed run keeps run.json's.
    for i in range(5):
        _solid(mixed / "circles" / f"white{i}.png", WHITE)
    with pytest.warns(UserWarning):  # read again: files came
        resumed = train_run.plan(
            train.parse_args(["--out", str(out), "--resume", "--device", "cpu"])
        )
    assert resumed.info.mean == info.mean != dataset_info(str(mixed)).mean
    train.main(["--out", str(out), "--resume", "--epochs", "2", "--device", "cpu"])
    assert "resuming" in capsys.readouterr().out
    assert len(json.loads((out / "metrics.json").read_text())["epochs"]) == 2
    (mixed / "triangles").mkdir()
    _solid(mixed / "triangles" / "0.png", GREEN)
    with (
        pytest.raises(SystemExit, match="the classes in .* changed since"),
        pytest.warns(UserWarning),
    ):
        train_run.plan(train.parse_args(["--out", str(out), "--resume", "--device", "cpu"]))
