"""Checkpoints: saving and loading models and training runs, safely, for every kind of model.

Introduced in notebook 06. Two kinds of file, both plain dicts written with `torch.save`:

- a *model file* (`save_model`): weights, config and architecture name, plus any plain facts you
  pass (test accuracy, the training command, the history); `load_model` rebuilds the model;
- a *training checkpoint* (`Trainer.save` in `vitcourse.training.loop`): the same, plus the
  optimizer, the schedule, the history and the random states, so `Trainer.resume` continues a run.

Files are written atomically (to a temporary file, then renamed into place), so a crash mid-write
never leaves a half-written checkpoint, and read with `weights_only=True`, so loading a file can
never run code. Every model a file can hold is registered in `ARCHITECTURES` under the name it
stores (`model.architecture`): a new kind of model is one `register_architecture` call.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from vitcourse.cnn import CNNConfig, SmallCNN
from vitcourse.data.loading import dataset_info
from vitcourse.deit import DistilledViT
from vitcourse.environment import default_root
from vitcourse.language import _
from vitcourse.mae import MAEConfig, MaskedAutoencoder
from vitcourse.mlp import MLPConfig, SmallMLP
from vitcourse.vit import VisionTransformer, ViTConfig

# Models trained by the command-line trainer and shipped with the course (the README says how).
TRAINED_DIR = Path(__file__).resolve().parent.parent / "data" / "trained"
TRAINED_MODEL = TRAINED_DIR / "course-28-7_fashion-mnist.pt"
# Which shipped file serves which dataset and purpose. "course": the dataset's course ViT
# (`vit_preset`), which notebook 06 evaluates and 08 races. "inside": a finer, deeper pure ViT
# for notebook 07 to look inside (a 7 x 7 grid of 4 x 4-pixel patches, 6 blocks). A dataset
# without one gets None, and the notebook trains a small model itself.
SHIPPED_MODELS = {
    ("fashion-mnist", "course"): TRAINED_MODEL.name,
    ("fashion-mnist", "inside"): "course-28-4-w64_fashion-mnist.pt",
    # "pretrained": a masked autoencoder around the dataset's course ViT, pre-trained without
    # labels (notebook 09): `python -m vitcourse.pretrain`, encoder and decoder both kept.
    ("fashion-mnist", "pretrained"): "mae-course-28-7_fashion-mnist.pt",
    # "cnn": notebook 08's CNN, trained as the course's ViT was (10 minutes, notebook 06's recipe:
    # `python -m vitcourse.train --model cnn --minutes 10`), to move test images under both.
    ("fashion-mnist", "cnn"): "cnn-28_fashion-mnist.pt",
}

# The architecture name a checkpoint stores -> (model class, config class).
ARCHITECTURES: dict[str, tuple[type[nn.Module], type]] = {}


def register_architecture(model_class: type[nn.Module], config_class: type) -> type[nn.Module]:
    """Let checkpoints hold `model_class`: built as `model_class(config_class(**config))`.

    The model class names itself in a class attribute `architecture` (stored in every file) and
    keeps its frozen dataclass config in `self.config`.
    """
    name = getattr(model_class, "architecture", None)
    if not isinstance(name, str):
        raise TypeError(
            _("{name} needs a class attribute {attribute} (a name)").format(
                name=model_class.__name__, attribute="`architecture`"
            )
        )
    ARCHITECTURES[name] = (model_class, config_class)
    return model_class


register_architecture(VisionTransformer, ViTConfig)
register_architecture(SmallCNN, CNNConfig)
register_architecture(SmallMLP, MLPConfig)  # notebook 09's control with no spatial prior
register_architecture(DistilledViT, ViTConfig)  # notebook 09's student of a CNN teacher
register_architecture(MaskedAutoencoder, MAEConfig)  # notebook 09's pre-training, decoder kept


def trained_dir() -> Path:
    """The folder of the shipped models and results: `trained/` in the data folder when it is there
    (on Colab and Kaggle, `environment.setup` fetches them into it), else the repository's."""
    folder = default_root() / "trained"
    return folder if folder.is_dir() else TRAINED_DIR


def shipped_model(dataset: str, purpose: str = "course") -> Path | None:
    """The trained model the course ships for `dataset` (its path), or None when it ships none:
    then a notebook trains a small model itself."""
    name = SHIPPED_MODELS.get((dataset_info(dataset).name, purpose))
    return trained_dir() / name if name and (trained_dir() / name).exists() else None


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be read or does not fit."""


def atomic_save(obj: dict, path: str | Path) -> Path:
    """torch.save to a temporary file, then rename it into place: never a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)
    return path


def model_state(model: nn.Module) -> dict:
    """What every file holds about a model: its weights, its config and its architecture name."""
    return {
        "model": model.state_dict(),
        "model_config": asdict(model.config),
        "architecture": model.architecture,
    }


def save_model(model: nn.Module, path: str | Path, **info) -> Path:
    """Write just the model (weights and config, plus any plain `info`), atomically.

    A fraction of a training checkpoint's size: no optimizer state. `load_model` reads it.
    """
    return atomic_save({**model_state(model), **info}, path)


def load_checkpoint(path: str | Path) -> dict:
    """Read a checkpoint safely (`weights_only=True`: tensors and plain data, never code)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(_("no checkpoint at {path}").format(path=path))
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, corrupt, or not a torch file at all
        raise CheckpointError(
            _("{path} is not a readable checkpoint ({error})").format(
                path=path, error=f"{type(e).__name__}: {e}"
            )
        ) from e
    missing = {"model", "model_config"} - set(state) if isinstance(state, dict) else {"model"}
    if missing:
        raise CheckpointError(
            _("{path} is not a vitcourse checkpoint: it lacks {missing}").format(
                path=path, missing=sorted(missing)
            )
        )
    return state


def build_model(architecture: str, config: dict) -> nn.Module:
    """A new, untrained model of a registered architecture ("vit", "cnn", ...), from its config as
    a plain dict (as checkpoints store it)."""
    if architecture not in ARCHITECTURES:
        raise ValueError(
            _("unknown architecture {name}: expected one of {names}").format(
                name=repr(architecture), names=list(ARCHITECTURES)
            )
        )
    model_class, config_class = ARCHITECTURES[architecture]
    return model_class(config_class(**config))


def load_model(path: str | Path) -> nn.Module:
    """The trained model saved in a model file or a training checkpoint, in eval mode."""
    state = load_checkpoint(path)
    try:
        # Checkpoints from before the CNN existed hold a ViT and do not say so.
        model = build_model(state.get("architecture", "vit"), state["model_config"])
        model.load_state_dict(state["model"])
    except (TypeError, ValueError, RuntimeError) as e:
        raise CheckpointError(
            _("{path} holds a model that cannot be rebuilt: {error}").format(path=path, error=e)
        ) from e
    return model.eval()
