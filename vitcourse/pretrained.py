"""Weights from elsewhere: a pretrained ViT from timm, torchvision or Hugging Face transformers
as the course's `VisionTransformer`, and the course's ViT back to transformers.

    load_pretrained     timm's ImageNet ViT-Ti/16 (notebook 09), or a file on disk
    from_timm           timm's VisionTransformer -> ours (the same names: copied as they are)
    from_torchvision    torchvision's vit_b_16 and kin -> ours (names mapped)
    from_transformers   transformers' ViTForImageClassification (or a hub name or folder) -> ours
    to_transformers     ours -> transformers' (notebook 10)

Each gives the same outputs as the model it came from (tested). timm, torchvision's weights and
transformers are imported only inside the function that needs them.
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
from vitcourse.vit import VisionTransformer, ViTConfig

if TYPE_CHECKING:  # for the annotations only: transformers is an optional extra
    from transformers import ViTForImageClassification


# The pretrained ViT that notebooks 09 loads when online: timm's ViT-Ti/16 (DeiT's "tiny" size,
# 5.7M parameters), pre-trained on ImageNet-21k and fine-tuned on ImageNet-1k (the AugReg weights
# of Steiner et al. 2021, "How to train your ViT?").
PRETRAINED = "vit_tiny_patch16_224.augreg_in21k_ft_in1k"


class PretrainedUnavailable(RuntimeError):
    """The pretrained weights cannot be had here (no network, or the download failed)."""


def load_pretrained(name: str = PRETRAINED, file: str | Path | None = None):
    """timm's pretrained ViT `name` as a course `VisionTransformer`, in eval mode, and the
    normalisation its images need: `(model, {"mean": ..., "std": ...})`.

    timm downloads the weights from the Hugging Face hub (then keeps them in its cache); `file`
    reads them from a file on disk instead (timm's model's state dict as `torch.save` writes it,
    saved on an online machine). The environment variable `VITCOURSE_PRETRAINED` names such a
    file for every notebook: a classroom without the network. Without the network (and no file)
    it raises `PretrainedUnavailable` at once, with a line a notebook can print before going on.
    """
    import timm  # only here: importing timm takes a second, and only this function needs it

    file = file or os.environ.get("VITCOURSE_PRETRAINED") or None
    if file is not None and not Path(file).exists():
        raise PretrainedUnavailable(
            _("no weights file at {file} (VITCOURSE_PRETRAINED or file=)").format(file=file)
        )

    if file is None and not is_online("https://huggingface.co/api/models/timm/" + name):
        raise PretrainedUnavailable(
            _("offline: timm's pretrained {name} cannot be downloaded (it needs "
              "huggingface.co)").format(name=name)
        )
    overlay = {"pretrained_cfg_overlay": {"file": str(file)}} if file is not None else {}
    try:
        model = timm.create_model(name, pretrained=True, **overlay)
    except Exception as e:  # noqa: BLE001 - a failed download can raise many kinds of error
        why = _("timm could not load {name}: {kind}: {error}")
        raise PretrainedUnavailable(why.format(name=name, kind=type(e).__name__, error=e)) from e
    config = model.pretrained_cfg
    return from_timm(model).eval(), {"mean": config["mean"], "std": config["std"]}


def from_timm(model: nn.Module) -> VisionTransformer:
    """A `VisionTransformer` with the weights of a timm `VisionTransformer` (same outputs).

    Supports the classic ViT: one cls token, learned position embeddings, LayerNorm, no layer
    scale or register tokens, "token" or "avg" pooling without timm's extra `fc_norm`.
    """
    attn, size = model.blocks[0].attn, model.patch_embed.img_size
    unsupported = {
        _("register tokens or no cls token"): getattr(model, "num_prefix_tokens", 1) != 1
        or getattr(model, "cls_token", None) is None,
        _("position embeddings without the cls token (no_embed_class)"): getattr(
            model, "no_embed_class", False
        ),
        _("fc_norm after pooling"): not isinstance(
            getattr(model, "fc_norm", nn.Identity()), nn.Identity
        ),
        _("layer scale"): not isinstance(model.blocks[0].ls1, nn.Identity),
        _("q/k normalisation"): not isinstance(attn.q_norm, nn.Identity),
        _("a pre-norm before the blocks"): not isinstance(model.norm_pre, nn.Identity),
        f"global_pool {model.global_pool!r}": model.global_pool not in ("token", "avg"),
        _("a non-square input"): size[0] != size[1],
    }
    problems = [name for name, present in unsupported.items() if present]
    if problems:
        raise ValueError(
            _("this timm ViT has features vitcourse does not model: {problems}").format(
                problems=", ".join(problems)
            )
        )
    config = ViTConfig(
        image_size=size[0],
        patch_size=model.patch_embed.patch_size[0],
        in_channels=model.patch_embed.proj.in_channels,
        num_classes=model.num_classes,
        dim=model.embed_dim,
        depth=len(model.blocks),
        num_heads=attn.num_heads,
        mlp_dim=model.blocks[0].mlp.fc1.out_features,
        qkv_bias=attn.qkv.bias is not None,
        pool="cls" if model.global_pool == "token" else "mean",
    )
    ours = VisionTransformer(config)
    # Our names are timm's; timm's extra modules here are parameter-free (Identity, Dropout).
    ours.load_state_dict(model.state_dict())
    return ours


def from_torchvision(model: nn.Module) -> VisionTransformer:
    """A `VisionTransformer` with the weights of a torchvision `VisionTransformer` (same outputs)."""
    if getattr(model, "representation_size", None) is not None:
        raise ValueError(
            _("torchvision ViTs with a representation (pre-logits) layer are not supported")
        )
    layers = list(model.encoder.layers)
    config = ViTConfig(
        image_size=model.image_size,
        patch_size=model.patch_size,
        in_channels=model.conv_proj.in_channels,
        num_classes=model.num_classes,
        dim=model.hidden_dim,
        depth=len(layers),
        num_heads=layers[0].self_attention.num_heads,
        mlp_dim=model.mlp_dim,
        qkv_bias=layers[0].self_attention.in_proj_bias is not None,
    )
    theirs = model.state_dict()
    state = {
        "patch_embed.proj.weight": theirs["conv_proj.weight"],
        "patch_embed.proj.bias": theirs["conv_proj.bias"],
        "cls_token": theirs["class_token"],
        "pos_embed": theirs["encoder.pos_embedding"],
        "norm.weight": theirs["encoder.ln.weight"],
        "norm.bias": theirs["encoder.ln.bias"],
        "head.weight": theirs["heads.head.weight"],
        "head.bias": theirs["heads.head.bias"],
    }
    names = {  # ours -> torchvision's, inside block i
        "norm1": "ln_1",
        "norm2": "ln_2",
        "attn.qkv": "self_attention.in_proj",
        "attn.proj": "self_attention.out_proj",
        "mlp.fc1": "mlp.0",
        "mlp.fc2": "mlp.3",
    }
    for i in range(config.depth):
        prefix = f"encoder.layers.encoder_layer_{i}."
        for ours, tv in names.items():
            for kind in ("weight", "bias"):
                # nn.MultiheadAttention stores its packed q, k, v projection as in_proj_weight.
                key = f"{tv}_{kind}" if tv.endswith("in_proj") else f"{tv}.{kind}"
                if prefix + key in theirs:
                    state[f"blocks.{i}.{ours}.{kind}"] = theirs[prefix + key]
    vit = VisionTransformer(config)
    vit.load_state_dict(state)
    return vit


# --- Hugging Face transformers --------------------------------------------------------------------

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
                _("offline: transformers' {name} is not in the Hugging Face cache and cannot be "
                  "downloaded (it needs huggingface.co)").format(name=name)
            ) from e
        why = _("transformers could not load {name}: {kind}: {error}")
        raise PretrainedUnavailable(why.format(name=name, kind=type(e).__name__, error=e)) from e


def _config_from_transformers(model: nn.Module) -> ViTConfig:
    """The `ViTConfig` of transformers' `ViTForImageClassification`; a clear error for anything
    else, and for what the course's ViT cannot model."""
    from transformers import ViTForImageClassification, ViTModel

    if isinstance(model, ViTModel):
        raise ValueError(
            _("expected a ViTForImageClassification, got a bare ViTModel, which has no "
              "classifier head: load its weights with ViTForImageClassification.from_pretrained("
              "name, num_labels=...) for a new head")
        )
    if not isinstance(model, ViTForImageClassification):
        raise ValueError(
            _("expected transformers' ViTForImageClassification (or its hub name), got "
              "{kind}").format(kind=f"{type(model).__module__}.{type(model).__name__}")
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
        (H % P, _("image size {height} not a multiple of patch size {patch} (transformers drops "
                  "the edge)")),
        (c.num_labels < 1, _("num_labels {labels} (expected a classifier, num_labels > 0)")),
        (head_dim * heads != c.hidden_size, _("head_dim {dim} (expected hidden_size / heads)")),
    ]
    found = dict(act=act, height=H, width=W, patch=P, patch_width=Q, labels=c.num_labels,
                 dim=head_dim)
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
    stem = _("a convolutional stem {channels} (transformers' ViT starts with the "
             "patches)").format(channels=c.stem_channels)
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
