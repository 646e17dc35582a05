"""Weights from elsewhere: a pretrained ViT from timm or torchvision as the course's
`VisionTransformer`.

    load_pretrained     timm's ImageNet ViT-Ti/16 (notebook 09), or a file on disk
    from_timm           timm's VisionTransformer -> ours (the same names: copied as they are)
    from_torchvision    torchvision's vit_b_16 and kin -> ours (names mapped)

Each gives the same outputs as the model it came from (tested). timm and torchvision's weights
are imported only inside the function that needs them. Hugging Face transformers' ViT, both ways,
is `vitcourse.bridges.transformers` (notebook 10).
"""

from __future__ import annotations

import os
from pathlib import Path

from torch import nn

from vitcourse.environment import is_online
from vitcourse.language import _
from vitcourse.vit import VisionTransformer, ViTConfig

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
            _(
                "offline: timm's pretrained {name} cannot be downloaded (it needs huggingface.co)"
            ).format(name=name)
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
