"""vitcourse.bridges.lightning: the course's recipe in PyTorch Lightning is the same training.

From the same seed, initial weights and batches, N steps of `lightning.Trainer` give the weights
that N steps of the course's `Trainer` give; the metrics it logs are `evaluate`'s; the DataModule
gives `make_loaders`' batches. Lightning and torchmetrics are extras: without them these tests
are skipped with the reason (and fail under CI), except the first, which needs neither.
"""

import importlib
import os

import pytest
import torch
from torch.backends import cudnn
from torch.utils.data import DataLoader, Sampler

from tests.conftest import TINY_CNN, TINY_VIT, make_toy_loaders, need
from tests.test_package import import_graph
from vitcourse.cnn import SmallCNN
from vitcourse.data.loading import make_loaders
from vitcourse.training.evaluation import evaluate
from vitcourse.training.loop import TrainConfig, Trainer, learning_rate
from vitcourse.vit import VisionTransformer, ViTConfig

RECIPE = TrainConfig(epochs=2, lr=3e-3, warmup=0.1)  # the toy task's: 2 epochs, 20 steps
MODELS = {"vit": (VisionTransformer, TINY_VIT), "cnn": (SmallCNN, TINY_CNN)}
# A ViT for Fashion-MNIST's 28 x 28 images, as small as the toy task's.
TINY_28 = ViTConfig(
    image_size=28, patch_size=7, in_channels=1, num_classes=10, dim=16, depth=1, num_heads=2,
    mlp_dim=32,
)  # fmt: skip
FASHION = {"batch_size": 16, "limit": 64, "val_size": 500, "augment": True, "seed": 3}


def test_nothing_in_the_package_imports_the_lightning_bridge():
    """It imports lightning at its top: the course must run without the extras. (Notebook 10
    imports it, when the extras are there.)"""
    graph = import_graph()
    assert "vitcourse.bridges.lightning" in graph
    importers = [
        module for module, imports in graph.items() if "vitcourse.bridges.lightning" in imports
    ]
    assert importers == []


@pytest.fixture
def L():
    """The lightning package. A trainer with `deterministic=True` switches torch to deterministic
    algorithms for the whole process (and sets CUBLAS_WORKSPACE_CONFIG) and leaves it so: the
    tests that follow get back what they had."""
    need("torchmetrics")
    lightning = need("lightning")
    deterministic, benchmark = torch.are_deterministic_algorithms_enabled(), cudnn.benchmark
    workspace = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
    yield lightning
    torch.use_deterministic_algorithms(deterministic)
    cudnn.benchmark = benchmark
    if workspace is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = workspace


@pytest.fixture
def bridge(L):
    return importlib.import_module("vitcourse.bridges.lightning")


def lightning_trainer(L, **settings):
    """A quiet Lightning trainer on the CPU: no logger files, checkpoints or progress bars."""
    return L.Trainer(
        accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False, deterministic=True, **settings,
    )  # fmt: skip


class OneDrawPerEpoch(Sampler):
    """Shuffles with exactly one permutation drawn from its generator per epoch.

    torch's RandomSampler draws a spare permutation when its iterator is run to the end. The
    course's `for` loop runs it to the end; Lightning, which knows the loader's length, stops after
    `len(loader)` batches without asking for more. From the second epoch on their orders would
    then differ (a test below shows it): with this sampler both see the same shuffled batches in
    every epoch. The DataLoader draws its own seed from the same generator as each epoch begins,
    which both do alike.
    """

    def __init__(self, n: int, generator: torch.Generator):
        self.n, self.generator = n, generator

    def __len__(self) -> int:
        return self.n

    def __iter__(self):
        yield from torch.randperm(self.n, generator=self.generator).tolist()


def toy_loaders(val_batch: int = 32):
    """The toy task's loaders, fresh (their generators at the start), shuffled by
    `OneDrawPerEpoch`. The toy task has no augmentation: nothing else draws random numbers."""
    loaders = make_toy_loaders()
    data, gen = loaders.train.dataset, torch.Generator().manual_seed(0)
    loaders.train = DataLoader(data, 16, sampler=OneDrawPerEpoch(len(data), gen), generator=gen)
    loaders.val = DataLoader(loaders.val.dataset, val_batch)
    return loaders


def new_model(kind: str, seed: int = 0):
    torch.manual_seed(seed)  # the same initial weights on both sides
    model_class, config = MODELS[kind]
    return model_class(config)


def max_difference(a: torch.nn.Module, b: torch.nn.Module) -> float:
    """The largest difference between two models' weights and buffers (BatchNorm's statistics)."""
    b_state = b.state_dict()
    return max(
        (t.double() - b_state[k].double()).abs().max().item() for k, t in a.state_dict().items()
    )


@pytest.mark.parametrize("kind", ["vit", "cnn"])
@pytest.mark.parametrize(
    "config",
    [RECIPE, TrainConfig(epochs=2, lr=3e-3, warmup=0.0, label_smoothing=0.0, grad_clip=0.0)],
    ids=["recipe", "no-smoothing-clipping-warmup"],
)
def test_n_lightning_steps_give_the_course_trainers_weights(L, bridge, kind, config):
    course = Trainer(new_model(kind), toy_loaders(), config, device="cpu")
    history = course.fit()
    model, loaders = new_model(kind), toy_loaders()
    steps = config.epochs * len(loaders.train)
    trainer = lightning_trainer(L, max_steps=steps)
    trainer.fit(bridge.ViTModule(model, config), loaders.train, loaders.val)
    assert trainer.global_step == course.steps_done == steps == 20
    assert max_difference(model, new_model(kind)) > 0.01  # it trained
    for name, weights in model.state_dict().items():
        torch.testing.assert_close(weights, course.model.state_dict()[name], rtol=1e-6, atol=1e-7)
    logged = trainer.callback_metrics  # the last step's and the last validation's
    assert logged["train_loss"].item() == pytest.approx(history.step_losses[-1], rel=1e-5)
    assert logged["lr"].item() == pytest.approx(learning_rate((steps - 1) / steps, config))
    assert logged["val_acc"].item() == history.epochs[-1]["val_acc"]
    assert logged["val_loss"].item() == pytest.approx(history.epochs[-1]["val_loss"], rel=1e-5)


def test_without_the_one_draw_sampler_the_second_epoch_is_shuffled_differently(L, bridge):
    """Why the test above shuffles with `OneDrawPerEpoch`: the toy task's own loader (torch's
    RandomSampler) gives the same first epoch and another second one (and the docstring of
    vitcourse.bridges.lightning says so)."""
    course = Trainer(new_model("vit"), make_toy_loaders(), RECIPE, device="cpu")
    course.fit()
    trainer, module = lightning_trainer(L, max_steps=20), bridge.ViTModule(new_model("vit"), RECIPE)
    losses = []
    module.on_train_batch_end = lambda outputs, batch, batch_idx: losses.append(outputs["loss"])
    trainer.fit(module, make_toy_loaders().train)
    assert torch.tensor(losses[:10]).tolist() == pytest.approx(course.history.step_losses[:10])
    assert torch.tensor(losses[10:]).tolist() != pytest.approx(course.history.step_losses[10:])


@pytest.mark.parametrize("val_batch", [32, 12])  # 12: batches of 12, 12 and 8 images
def test_logged_validation_and_test_metrics_are_evaluates(L, bridge, val_batch):
    model, loaders = new_model("vit"), toy_loaders(val_batch)
    module = bridge.ViTModule(model, TrainConfig(epochs=1, lr=3e-3, warmup=0.1))
    trainer = lightning_trainer(L, max_epochs=1)
    trainer.fit(module, loaders.train)  # one epoch: some images right, some wrong
    expected = evaluate(model, loaders.val)
    assert 0.4 < expected["acc"] < 1  # an accuracy that is neither trivial nor perfect
    (val,) = trainer.validate(module, loaders.val, verbose=False)
    (test,) = trainer.test(module, loaders.val, verbose=False)
    assert set(val) == {"val_loss", "val_acc"} and set(test) == {"test_loss", "test_acc"}
    assert val["val_acc"] == test["test_acc"] == pytest.approx(expected["acc"], abs=1e-7)
    assert val["val_loss"] == pytest.approx(expected["loss"], rel=1e-6)
    assert test["test_loss"] == pytest.approx(expected["loss"], rel=1e-6)


def test_the_datamodule_gives_make_loaders_batches(L, bridge):
    data = bridge.CourseDataModule(**FASHION)
    data.prepare_data()
    data.setup("fit")
    loaders = make_loaders(**FASHION)
    assert data.info == loaders.info
    for mine, course in [
        (data.train_dataloader(), loaders.train),
        (data.val_dataloader(), loaders.val),
        (data.test_dataloader(), loaders.test),
    ]:
        torch.manual_seed(0)  # the random crops and flips draw from torch's generator
        got = list(mine)
        torch.manual_seed(0)
        expected = list(course)
        assert len(got) == len(expected) > 0
        for (images, labels), (images_ref, labels_ref) in zip(got, expected, strict=True):
            assert torch.equal(images, images_ref) and torch.equal(labels, labels_ref)


def test_an_epoch_of_fashion_mnist_with_augmentation_is_the_course_trainers(L, bridge, tmp_path):
    """The DataModule and the module together: the same shuffling, crops and flips, because the
    module seeds torch with `config.seed` as training starts, as `Trainer.fit` does. Lightning's
    checkpoint of the run loads back with torch's safe loader (plain types only)."""
    config = TrainConfig(epochs=1, lr=3e-3, warmup=0.25, seed=7)
    torch.manual_seed(0)
    course = Trainer(VisionTransformer(TINY_28), make_loaders(**FASHION), config, device="cpu")
    course.fit()
    torch.manual_seed(0)
    model = VisionTransformer(TINY_28)
    trainer, data = lightning_trainer(L, max_epochs=1), bridge.CourseDataModule(**FASHION)
    trainer.fit(bridge.ViTModule(model, config), datamodule=data)
    assert trainer.global_step == course.steps_done == 4
    for name, weights in model.state_dict().items():
        torch.testing.assert_close(weights, course.model.state_dict()[name], rtol=1e-6, atol=1e-7)
    trainer.save_checkpoint(tmp_path / "run.ckpt")
    loaded = bridge.ViTModule.load_from_checkpoint(
        tmp_path / "run.ckpt", model=VisionTransformer(TINY_28), weights_only=True
    )
    assert loaded.config == config
    assert all(torch.equal(w, model.state_dict()[k]) for k, w in loaded.model.state_dict().items())
    reloaded = bridge.CourseDataModule.load_from_checkpoint(
        tmp_path / "run.ckpt", weights_only=True
    )
    assert reloaded.hparams == data.hparams


def test_a_time_budget_is_refused_with_what_to_do_instead(bridge):
    with pytest.raises(ValueError, match=r"no time budget .*max_time=\{'minutes': 5\}"):
        bridge.ViTModule(new_model("vit"), TrainConfig(minutes=5))


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"max_epochs": 3}, r"TrainConfig\(epochs=2\) but lightning.Trainer\(max_epochs=3\)"),
        (
            {"max_epochs": 2, "gradient_clip_val": 0.5},
            r"gradient_clip_val=0.5\) but .*grad_clip=1.0",
        ),
    ],
    ids=["epochs", "clipping"],
)
def test_settings_that_disagree_with_the_train_config_are_refused(L, bridge, settings, message):
    trainer = lightning_trainer(L, num_sanity_val_steps=0, **settings)
    with pytest.raises(ValueError, match=message):
        trainer.fit(bridge.ViTModule(new_model("vit"), RECIPE), toy_loaders().train)
