"""The course's ViT and Hugging Face transformers' `ViTForImageClassification`, both ways
(notebook 10): the same architecture under other names.

    from_transformers   transformers' ViTForImageClassification (or a hub name or folder) -> ours
    to_transformers     ours -> transformers'

Each gives the same outputs as the model it came from (tested). transformers is an extra
(`requirements-extras.txt`), imported only inside the function that needs it; the command line's
`--export transformers` loads this module only when asked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from vitcourse.deit import DistilledViT
from vitcourse.environment import is_online
from vitcourse.language import _
from vitcourse.pretrained import PretrainedUnavailable
from vitcourse.vit import VisionTransformer, ViTConfig

if TYPE_CHECKING:  # for the annotations only: transformers is an optional extra
    from transformers import ViTForImageClassification

# transformers' `ViTForImageClassification`, ours -> theirs. Its attention keeps the query, key and
# value projections apart (`_TRANSFORMERS_QKV`); ours stacks them in `attn.qkv`.
_TRANSFORMERS_NAMES = {
    "patch_embed.proj.weight": "vit.embeddings.patch_embeddings.projection.weight",
    "patch_embed.proj.bias": "vit.embeddings.patch_embeddings.projection.bias",
    "cls_token": "vit.embeddings.cls_token",
    "pos_embed": "vit.embeddings.position_embeddings",
    "norm.weight": "vit.layernorm.weight",
    "norm.bias": "vit.layernorm.bias",
    "head.weight": "classifier.weight",
    "head.bias": "classifier.bias",
}
# Inside block i: transformers 5 renamed its ViT's modules (`vit.layers.i.mlp.fc1`); the second
# name is version 4's (`vit.encoder.layer.i.intermediate.dense`).
_TRANSFORMERS_BLOCK = {
    "norm1": ("layernorm_before", "layernorm_before"),
    "attn.proj": ("attention.o_proj", "attention.output.dense"),
    "norm2": ("layernorm_after", "layernorm_after"),
    "mlp.fc1": ("mlp.fc1", "intermediate.dense"),
    "mlp.fc2": ("mlp.fc2", "output.dense"),
}
_TRANSFORMERS_QKV = (
    ("attention.q_proj", "attention.k_proj", "attention.v_proj"),
    ("attention.attention.query", "attention.attention.key", "attention.attention.value"),
)


def _transformers_names(theirs: dict, depth: int) -> tuple[dict[str, str], list[tuple[str, ...]]]:
    """Our state dict's names -> those in transformers' state dict `theirs` (either version's), and
    each block's (query, key, value) prefixes, the three parts of our `attn.qkv`."""
    old = "vit.layers.0.layernorm_before.weight" not in theirs  # transformers 4
    layer = "vit.encoder.layer" if old else "vit.layers"
    names, qkv = dict(_TRANSFORMERS_NAMES), []
    for i in range(depth):
        for ours, versions in _TRANSFORMERS_BLOCK.items():
            for kind in ("weight", "bias"):
                names[f"blocks.{i}.{ours}.{kind}"] = f"{layer}.{i}.{versions[old]}.{kind}"
        qkv.append(tuple(f"{layer}.{i}.{name}" for name in _TRANSFORMERS_QKV[old]))
    return names, qkv


def _transformers_pretrained(name: str) -> ViTForImageClassification:
    """transformers' `ViTForImageClassification` named `name` (on the hub, or a folder that
    `save_pretrained` wrote), or `PretrainedUnavailable` saying why it cannot be had."""
    from transformers import ViTForImageClassification

    try:
        return ViTForImageClassification.from_pretrained(name)
    except Exception as e:  # noqa: BLE001 - a failed download can raise many kinds of error
        told = any(
            os.environ.get(flag, "").upper() in ("1", "ON", "YES", "TRUE")
            for flag in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
        )
        if not Path(name).exists() and (
            told or not is_online("https://huggingface.co/api/models/" + name)
        ):
            raise PretrainedUnavailable(
                _(
                    "offline: transformers' {name} is not in the Hugging Face cache and cannot be "
                    "downloaded (it needs huggingface.co)"
                ).format(name=name)
            ) from e
        why = _("transformers could not load {name}: {kind}: {error}")
        raise PretrainedUnavailable(why.format(name=name, kind=type(e).__name__, error=e)) from e


def _config_from_transformers(model: nn.Module) -> ViTConfig:
    """The `ViTConfig` of transformers' `ViTForImageClassification`; a clear error for anything
    else, and for what the course's ViT cannot model."""
    from transformers import ViTForImageClassification, ViTModel

    if isinstance(model, ViTModel):
        raise ValueError(
            _(
                "expected a ViTForImageClassification, got a bare ViTModel, which has no "
                "classifier head: load its weights with ViTForImageClassification.from_pretrained("
                "name, num_labels=...) for a new head"
            )
        )
    if not isinstance(model, ViTForImageClassification):
        raise ValueError(
            _(
                "expected transformers' ViTForImageClassification (or its hub name), got {kind}"
            ).format(kind=f"{type(model).__module__}.{type(model).__name__}")
        )
    c = model.config
    (H, W), (P, Q) = (  # transformers also takes (height, width) pairs
        (v, v) if isinstance(v, int) else tuple(v) for v in (c.image_size, c.patch_size)
    )
    act, heads = c.hidden_act, c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    unsupported = [  # (present, what it is): a template filled with `found`
        (act != "gelu", _("hidden_act {act!r} (expected 'gelu', the exact GELU of ours)")),
        (H != W, _("a non-square image {height}x{width}")),
        (P != Q, _("non-square patches {patch}x{patch_width}")),
        (
            H % P,
            _(
                "image size {height} not a multiple of patch size {patch} (transformers drops "
                "the edge)"
            ),
        ),
        (c.num_labels < 1, _("num_labels {labels} (expected a classifier, num_labels > 0)")),
        (head_dim * heads != c.hidden_size, _("head_dim {dim} (expected hidden_size / heads)")),
    ]
    found = dict(
        act=act, height=H, width=W, patch=P, patch_width=Q, labels=c.num_labels, dim=head_dim
    )
    problems = [what.format(**found) for present, what in unsupported if present]
    if problems:
        raise ValueError(
            _("this transformers ViT has features vitcourse does not model: {problems}").format(
                problems=", ".join(problems)
            )
        )
    return ViTConfig(
        image_size=H,
        patch_size=P,
        in_channels=c.num_channels,
        num_classes=c.num_labels,
        dim=c.hidden_size,
        depth=c.num_hidden_layers,
        num_heads=c.num_attention_heads,
        mlp_dim=c.intermediate_size,
        qkv_bias=c.qkv_bias,
        dropout=c.hidden_dropout_prob,
        attn_dropout=c.attention_probs_dropout_prob,
        norm_eps=c.layer_norm_eps,
    )


def from_transformers(model: ViTForImageClassification | str | os.PathLike) -> VisionTransformer:
    """A `VisionTransformer` with the weights of Hugging Face transformers'
    `ViTForImageClassification` (same outputs), in the same mode (train or eval).

    `model` may also name one: `from_transformers("google/vit-base-patch16-224")` downloads it
    (transformers then keeps it in its cache), or a folder that `save_pretrained` wrote. Without
    the network, and not in the cache, that raises `PretrainedUnavailable` at once. A bare
    `ViTModel` is refused: it has no classifier head. Dropout rates carry across; ours also drops
    after the MLP's GELU, which changes training only. transformers' `encoder_stride` belongs to
    its masked-image-modelling decoder and is not needed.
    """
    if isinstance(model, (str, os.PathLike)):
        model = _transformers_pretrained(str(model))
    config = _config_from_transformers(model)
    theirs = model.state_dict()
    names, qkv = _transformers_names(theirs, config.depth)
    state = {ours: theirs[name] for ours, name in names.items()}
    for i, parts in enumerate(qkv):
        for kind in ("weight", "bias"):
            if f"{parts[0]}.{kind}" in theirs:  # no biases when qkv_bias is False
                # q, k and v one after another: the (3, h, d) order in which attn.qkv splits them.
                stacked = [theirs[f"{part}.{kind}"] for part in parts]  # 3 x (D, ...)
                state[f"blocks.{i}.attn.qkv.{kind}"] = torch.cat(stacked)  # -> (3D, ...)
    ours = VisionTransformer(config)
    ours.load_state_dict(state)
    return ours.train(model.training)


def _check_transformers_can_hold(model: nn.Module) -> None:
    """A clear error if transformers' `ViTForImageClassification` cannot hold `model`."""
    if not isinstance(model, VisionTransformer):
        raise ValueError(
            _("expected a vitcourse VisionTransformer, got {kind}").format(
                kind=type(model).__name__
            )
        )
    c = model.config
    distilled = _(
        "a distilled ViT (cls and distillation tokens, two heads; transformers' "
        "DeiTForImageClassificationWithTeacher is that model)"
    )
    mean = _(
        "pool='mean' (transformers' ViT classifies the cls token and has no mean pooling: "
        "expected pool='cls')"
    )
    stem = _("a convolutional stem {channels} (transformers' ViT starts with the patches)").format(
        channels=c.stem_channels
    )
    unsupported = {
        distilled: isinstance(model, DistilledViT),
        mean: c.pool != "cls",
        stem: bool(c.stem_channels),
    }
    problems = [name for name, present in unsupported.items() if present]
    if problems:
        raise ValueError(
            _("transformers' ViTForImageClassification cannot hold this model: {problems}").format(
                problems=", ".join(problems)
            )
        )


def to_transformers(model: VisionTransformer) -> ViTForImageClassification:
    """Hugging Face transformers' `ViTForImageClassification` with the weights of `model` (same
    outputs), in the same mode: to `save_pretrained` it, share it on the hub, or fine-tune it with
    transformers' tools.

    Refused, since transformers' ViT cannot hold them: mean pooling, a convolutional stem, a
    distilled ViT. Carried with a documented loss, as neither changes the outputs in eval mode:
    drop path (transformers' ViT has no stochastic depth, so training there runs without it), and
    sin-cos position embeddings, which become learned ones with the same values.
    """
    from transformers import ViTConfig as TransformersConfig
    from transformers import ViTForImageClassification

    _check_transformers_can_hold(model)
    c = model.config
    config = TransformersConfig(
        image_size=c.image_size,
        patch_size=c.patch_size,
        num_channels=c.in_channels,
        num_labels=c.num_classes,
        hidden_size=c.dim,
        num_hidden_layers=c.depth,
        num_attention_heads=c.num_heads,
        intermediate_size=c.mlp_dim,
        hidden_act="gelu",
        qkv_bias=c.qkv_bias,
        hidden_dropout_prob=c.dropout,
        attention_probs_dropout_prob=c.attn_dropout,
        layer_norm_eps=c.norm_eps,
    )
    theirs = ViTForImageClassification(config)
    names, qkv = _transformers_names(theirs.state_dict(), c.depth)
    ours = model.state_dict()
    state = {name: ours[key] for key, name in names.items()}
    for i, parts in enumerate(qkv):
        for kind in ("weight", "bias"):
            if f"blocks.{i}.attn.qkv.{kind}" in ours:
                split = ours[f"blocks.{i}.attn.qkv.{kind}"].chunk(3)  # (3D, ...) -> q, k, v
                state.update(
                    (f"{part}.{kind}", value) for part, value in zip(parts, split, strict=True)
                )
    theirs.load_state_dict(state)
    return theirs.train(model.training)
