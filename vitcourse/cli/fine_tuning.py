"""--init: a training run that starts from a ViT trained or pre-trained elsewhere (a
`python -m vitcourse.pretrain` run's masked autoencoder, or a trained ViT). Its config is checked
against the dataset's images and given the dataset's classes; its weights are copied but its
head's, and with --freeze only the new head trains (a linear probe).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from vitcourse.checkpoints import CheckpointError, load_checkpoint
from vitcourse.language import _
from vitcourse.vit import ViTConfig, copy_encoder


def init_config(path: Path, info, sizes: list[str], changes: dict) -> ViTConfig:
    """The config of the ViT in `path` (--init), with the dataset's classes and `changes` (--pool,
    --drop-path); a clear error if it cannot read the dataset's images, or if `sizes` (the model's
    sizes asked for on the command line) are not empty."""
    if sizes:
        raise SystemExit(
            _("error: --init {path} sets the model's sizes; drop {options}").format(
                path=path, options=", ".join(sizes)
            )
        )
    try:
        state = load_checkpoint(path)
    except CheckpointError as e:
        raise SystemExit(f"error: --init: {e}") from None
    architecture = state.get("architecture", "vit")
    if architecture not in ("vit", "mae"):
        raise SystemExit(
            _(
                "error: --init expects a ViT or a pre-training run (vitcourse.pretrain's model.pt "
                "or checkpoint.pt); {path} holds a {architecture!r} model"
            ).format(path=path, architecture=architecture)
        )
    config = state["model_config"]
    encoder = ViTConfig(**(config["encoder"] if architecture == "mae" else config))
    wanted = (info.channels, info.image_size, info.image_size)
    found = (encoder.in_channels, encoder.image_size, encoder.image_size)
    if wanted != found:
        raise SystemExit(
            _(
                "error: --init {path} holds a ViT for {found} images (channels x height x width); "
                "{dataset} has {wanted} images"
            ).format(
                path=path,
                found="x".join(map(str, found)),
                dataset=info.name,
                wanted="x".join(map(str, wanted)),
            )
        )
    return dataclasses.replace(encoder, num_classes=len(info.classes), **changes)


def start_from(model: torch.nn.Module, path: Path, freeze: bool) -> None:
    """Copy every weight of the ViT in `path` into `model` except its head (the classes change);
    with `freeze`, only the new head will train."""
    state = load_checkpoint(path)
    weights = state["model"]
    if state.get("architecture") == "mae":  # a whole masked autoencoder: keep its encoder
        weights = {k[len("encoder.") :]: v for k, v in weights.items() if k.startswith("encoder.")}
    try:
        copy_encoder(model, weights)
    except ValueError as e:
        raise SystemExit(f"error: --init {path}: {e}") from None
    if freeze:
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(name.startswith("head"))
