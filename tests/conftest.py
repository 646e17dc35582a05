"""Shared test pieces: tiny model configs and a toy task small enough to train in a second.

Tests take them as fixtures (`tiny_vit`, `tiny_rgb_vit`, `tiny_cnn`, `toy_loaders`); code that
runs outside a test function (a notebook a test executes, a parametrize list) imports the
constants from `tests.conftest`.
"""

from types import SimpleNamespace

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from vitcourse.cnn import CNNConfig
from vitcourse.training.callbacks import Callback
from vitcourse.vit import ViTConfig

# 8 x 8 grayscale images, a 2 x 2 grid of 4 x 4 patches, 3 classes: the toy task's ViT.
TINY_VIT = ViTConfig(
    image_size=8,
    patch_size=4,
    in_channels=1,
    num_classes=3,
    dim=16,
    depth=2,
    num_heads=2,
    mlp_dim=32,
)
# 16 x 16 colour images, a 4 x 4 grid, 5 classes: for shapes and equalities with timm/torchvision.
TINY_RGB_VIT = ViTConfig(
    image_size=16,
    patch_size=4,
    in_channels=3,
    num_classes=5,
    dim=32,
    depth=2,
    num_heads=4,
    mlp_dim=64,
)
# The toy task's CNN: two stages, 8 -> 4 pixels.
TINY_CNN = CNNConfig(image_size=8, in_channels=1, num_classes=3, widths=(8, 16), depths=(1, 1))


def make_toy_loaders(n: int = 160, seed: int = 0, batch_size: int = 16) -> SimpleNamespace:
    """A learnable toy task on 8 x 8 images: the class is which third of the image is bright."""
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 3, (n,), generator=gen)
    images = torch.randn(n, 1, 8, 8, generator=gen) * 0.3
    for i, y in enumerate(labels.tolist()):
        images[i, 0, :, 3 * y : 3 * y + 2] += 2.0
    data = TensorDataset(images, labels)
    train = DataLoader(
        data, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    val = DataLoader(TensorDataset(images[:32], labels[:32]), batch_size=32)
    return SimpleNamespace(train=train, val=val, test=val)


@pytest.fixture(scope="session", autouse=True)
def _sandboxes_unmounted(tmp_path_factory):
    """The tmpfs a root grader mounts on a sandbox's output (`sandbox_disk`) stays until the
    folder is removed with `sandbox.remove_tree`; the tests' folders are pytest's: unmounted at
    the end, so that nothing is left mounted under them."""
    yield
    from vitcourse.classroom import sandbox_disk

    sandbox_disk.release(tmp_path_factory.getbasetemp())


@pytest.fixture
def tiny_vit() -> ViTConfig:
    return TINY_VIT


@pytest.fixture
def tiny_rgb_vit() -> ViTConfig:
    return TINY_RGB_VIT


@pytest.fixture
def tiny_cnn() -> CNNConfig:
    return TINY_CNN


@pytest.fixture
def toy_loaders():
    """The toy task's loaders: call it, `toy_loaders(n=..., seed=...)`, for a fresh set."""
    return make_toy_loaders


def new_trainer(config=None, callbacks=(), seed=0):
    """A Trainer of a tiny ViT on the toy data, on the CPU (the recipe of
    tests/training/test_loop.py unless `config` says otherwise)."""
    from vitcourse.training.loop import TrainConfig, Trainer
    from vitcourse.vit import VisionTransformer

    torch.manual_seed(seed)
    model = VisionTransformer(TINY_VIT)  # the seed only changes the initial weights, not the data
    config = config or TrainConfig(epochs=4, lr=3e-3, warmup=0.1)
    return Trainer(model, make_toy_loaders(), config, list(callbacks), "cpu")


# The packages of requirements-extras.txt, and the notebooks that need them.
EXTRAS = ("transformers", "tensorboard", "lightning", "torchmetrics")
NEEDS_EXTRAS = ("10_bridges.ipynb",)


def missing_extras() -> list[str]:
    import importlib.util

    return [name for name in EXTRAS if importlib.util.find_spec(name) is None]


def need(module: str, install: str = "pip install -r requirements-extras.txt"):
    """Import an optional package for a test: skipped with the reason without it, except under
    CI (the `CI` variable set, as .ci/run sets it), where a missing package fails the test."""
    import importlib
    import os

    try:
        return importlib.import_module(module)
    except ImportError:
        message = f"this test needs {module} ({install})"
        if os.environ.get("CI"):
            pytest.fail(message + "; under CI a missing package is a failure", pytrace=False)
        pytest.skip(message, allow_module_level=True)  # in a test, a fixture or a module


def need_root() -> None:
    """Root, as the platforms run their graders: a user of its own for the student's code needs
    it. Skip without it, except under CI, where .ci/run runs as root and its absence fails."""
    import os

    if os.geteuid() == 0:
        return
    why = "this test needs the grader run as root, as Gradescope and PrairieLearn run it"
    if os.environ.get("CI"):
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def need_sandbox() -> None:
    """The grader's sandbox (Linux with bubblewrap) and cloudpickle: skip without them, except
    under CI, where .ci/run installs both and their absence fails the test."""
    import os

    from vitcourse.classroom import sandbox

    need("cloudpickle", "pip install -r requirements-teachers.txt")

    why = sandbox.bubblewrap()
    if why is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"this test needs the grader's sandbox: {why}", pytrace=False)
    pytest.skip(f"this test needs the grader's sandbox: {why}")


def randomize(model):
    """Random values in every parameter, so that equal outputs mean equal computations
    (fresh torchvision heads are all zeros, which would make any two models agree)."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.2)
    return model.eval()


class StopAt(Callback):
    """Press Ctrl-C at a given step (a KeyboardInterrupt, as the notebook's Stop button sends), for
    the tests of stopping and resuming."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer, loss):
        if trainer.steps_done == self.step:
            raise KeyboardInterrupt


# A notebook's questions, one of each kind, for the tests of vitcourse.quiz and its grading.
SAMPLE_QUIZ = {
    "questions": [
        {
            "id": "sqrt_d",
            "kind": "choice",
            "why": True,
            "ask": "Why divide by `√d`?",
            "options": [
                {"text": "So rows sum to 1.", "feedback": "That is the softmax's doing."},
                {
                    "text": "So the spread stays put.",
                    "right": True,
                    "feedback": "Right: variance d.",
                },
                {"text": "To save memory.", "feedback": "A division saves nothing."},
            ],
        },
        {
            "id": "tokens",
            "kind": "number",
            "predict": True,
            "ask": "How many patches?",
            "answer": 196,
            "right": "Right: 14 × 14 = 196.",
            "mistakes": [{"answer": 197, "feedback": "No cls token yet."}],
            "otherwise": "Count one side first.",
            "verify": "196",
        },
        {
            "id": "ratio",
            "kind": "number",
            "ask": "The ratio?",
            "answer": 0.5,
            "tolerance": 0.01,
            "right": "Right: half.",
            "otherwise": "Divide.",
        },
        {
            "id": "scores",
            "kind": "shape",
            "ask": "The scores' shape?",
            "answer": [2, 5, 5],
            "right": "Right: B, T, T.",
            "mistakes": [{"answer": [2, 5], "feedback": "One T short."}],
            "otherwise": "Which axes?",
        },
    ]
}


@pytest.fixture
def sample(tmp_path, monkeypatch):
    """A made-up notebook "99_sample" with the four questions above, in place of the course's
    (`vitcourse.quiz.questions.QUIZZES`): {id: question}."""
    import json

    from vitcourse.quiz import questions as quiz

    folder = tmp_path / "quizzes"
    folder.mkdir()
    (folder / "99_sample.json").write_text(json.dumps(SAMPLE_QUIZ))
    monkeypatch.setattr(quiz, "QUIZZES", folder)
    quiz.questions.cache_clear()
    yield quiz.questions("99_sample")
    quiz.questions.cache_clear()


def right_quiz_answers(name: str) -> dict:
    """{question: its right answer} of notebook `name`'s quiz, as a learner writes them."""
    from vitcourse.quiz.questions import questions

    return {
        k: q.right_letter if q.kind == "choice" else q.answer for k, q in questions(name).items()
    }


def with_quiz_answers(notebook: dict, name: str, answers: dict | None = None) -> dict:
    """A copy of `notebook` (a notebook's JSON) whose quiz cells hold `answers` (default: every
    question of notebook `name` answered right), as a learner writes them."""
    import json

    from vitcourse.quiz.questions import questions

    answers = right_quiz_answers(name) if answers is None else answers
    copy = json.loads(json.dumps(notebook))
    for cell in copy["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] != "code" or "quiz(" not in source:
            continue
        head, _, rest = source.partition("quiz(")
        asked = [k for k in questions(name) if f'"{k}"' in rest]
        mine = {k: answers.get(k) for k in asked}
        cell["source"] = f"{head}quiz({name!r}, {mine!r})\n"
    return copy
