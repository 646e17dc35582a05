"""vitcourse: the tested reference package behind the Vision Transformer course.

Read it in the order the notebooks build the model (Dosovitskiy et al., "An Image is Worth 16x16
Words", ICLR 2021): each file imports only the ones before it, and torch::

    patching            notebook 01: an image as a sequence of patches
    embedding           notebook 02: patch embedding, position embeddings
    attention           notebook 03: scaled dot-product and multi-head self-attention
    block               notebook 04: the pre-norm transformer block
    vit                 notebook 05: the whole model (`ViTConfig`, `VisionTransformer`)

Beside it, the other models and what the notebooks use to look at them::

    presets             the named sizes (the paper's, the course's) and `preset_for(dataset)`
    cnn                 notebook 08: a small CNN, to race the ViT
    mlp                 notebook 09: an MLP on the flattened image, a model with no spatial
                        prior, raced beside them
    deit, mae           notebook 09: the distilled ViT (DeiT) and the masked autoencoder
    pretrained          weights from timm and torchvision (transformers: bridges/)
    checkpoints         model files saved and loaded safely, for every kind of model; the
                        shipped trained models
    widgets, diagrams   notebooks 00-07: interactive explorers; the model drawn with its shapes
    live                notebook 06: the live plot of curves and attention maps
    analysis            notebooks 07-09: attention rollout, attention distance, Figure 7;
                        equivariance, shifted images, FLOPs per image
    scrambling          notebook 09: images scrambled in fixed patches, where a CNN's
                        assumptions are false and a ViT's are not
    paper               notebooks 08-09: the paper's published results, and their charts
    environment         notebook 00: the machine (quick mode, the data folder, the device) and
                        every notebook's set-up cell (`setup`)
    hosting             Colab and Kaggle: the packages around their torch, the course files
    language            the language the course speaks: English, or Spanish
                        (`VITCOURSE_LANG=es`, `set_language("es")`), and the notebooks'
                        tables, sized by their words in either

And the machinery, in subpackages named for who uses it (each opens with a map of its rooms)::

    checks/             notebooks 01-09: the exercises' checks and hints (one module per module
                        it checks), their harness and registry
    quiz/               notebooks 00-10: the questions on the why (`quiz`), their data, their
                        feedback, and how they look in JupyterLab, the book and the slides
    data/               `load_dataset` and `make_loaders`, the dataset table, the files on
                        disk, in-memory batching, your own image folders, photos
    training/           notebook 06's loop (`Trainer`), its callbacks, evaluation, clock,
                        resuming and scaling; notebook 09's pre-training and distillation
    cli/                python -m vitcourse.train / vitcourse.pretrain and their run folder
    classroom/          student copies, and a class graded, each notebook in a sandbox
    bridges/            notebook 10: TensorBoard, PyTorch Lightning, Hugging Face (the extras)
    translation/        the course in Spanish: catalogs of what the notebooks and the package
                        say, and python -m vitcourse.translate

Commands: `train`, `pretrain`, `grade`, `student` and `translate` are files of a few lines, so
that the documented commands (`python -m vitcourse.train`) are short; each runs the module of that
name in its subpackage. Every other name has one home, and the notebooks import it from there or
from its package's front door (`vitcourse`, `vitcourse.data`, `vitcourse.training`,
`vitcourse.checks`).

Imports flow one way, from the bottom up (tests/test_package.py checks there is no cycle,
subpackages included): hosting and environment; then patching and scrambling (a scrambled
dataset is cut in patches), `data` (nothing of `training`), the rest of the model (embedding to
vit; then presets, cnn, mlp, deit, mae, pretrained), checkpoints, the training rooms and the loop;
then live, the bridges, pre-training and distillation, and the command lines. analysis, widgets
and diagrams read the model only; `checks` reads the model and the reference solutions it checks
(in analysis, scrambling, presets, mae, and the loop and distillation in `training`);
`classroom` reads the checks and `environment`.

Shape legend, used in every docstring and comment::

    B  batch size            C  image channels       H, W  image height and width
    P  patch size            N  patches = (H/P)(W/P) T     tokens = N + 1 (the cls token)
    D  model width           h  attention heads      d     head width = D / h
"""

__version__ = "0.1.0"

# Names documented in their modules, reachable from the top too: vitcourse.set_language("es").
_ROOMS = {"ViTConfig": "vit", "VisionTransformer": "vit", "set_language": "language"}

# The documented commands, `python -m vitcourse.NAME`: each file runs the module named here.
COMMANDS = {
    "train": "cli.train",
    "pretrain": "cli.pretrain",
    "grade": "classroom.grade",
    "student": "classroom.student",
    "translate": "translation.cli",
}


def front_door(package: str, rooms: dict[str, str]):
    """A package's `__getattr__` and `__dir__` (PEP 562) for its front door: each name of `rooms`
    is found in the module named there (under vitcourse: "data.loading") when first asked for, so
    importing one module (`vitcourse.patching`, the grader's worker) loads that module and what it
    needs, not the whole model with its data layer and torchvision (seconds on a laptop)."""
    import importlib
    import sys

    def __getattr__(name: str):
        if name in rooms:
            return getattr(importlib.import_module(f"vitcourse.{rooms[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(rooms))  # tab completion shows them

    return __getattr__, __dir__


__getattr__, __dir__ = front_door(__name__, _ROOMS)
