"""The Vision Transformer: embed, a stack of transformer blocks, and a classifier head (ViT paper, section 3.1).

Introduced in notebook 05. The forward pass has three stages, one per notebook that built them:

    embed            (B, C, H, W) -> (B, T, D)  patches + cls token + positions  (notebooks 01-02)
    forward_features (B, T, D) -> (B, T, D)     the transformer blocks, then a LayerNorm (03-04)
    forward_head     (B, T, D) -> (B, classes)  pool (cls token or mean of patches), then classify

Submodule names follow timm (`patch_embed`, `cls_token`, `pos_embed`, `blocks`, `norm`, `head`),
so `from_timm` copies a timm ViT's weights by name; `from_torchvision` maps torchvision's names.
A "hybrid" ViT (`stem_channels`, notebook 08) runs a few convolutions in `stem` before `embed`
cuts patches; for a pure ViT, the default, `stem` is empty. With `stem_stride=2` each convolution
halves the image, so the stem itself makes the token grid (Xiao et al. 2021, "Early convolutions
help transformers see better"): `course-28/conv`, the trainer's default for 28 x 28 images.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from vitcourse.block import TransformerBlock
from vitcourse.data import dataset_info
from vitcourse.embedding import (
    PatchEmbedding,
    conv_bn_relu,
    embed_tokens,
    resize_pos_embed,
    sincos_2d_position_embedding,
)
from vitcourse.environment import is_online

if TYPE_CHECKING:  # for the annotations only: transformers is an optional extra
    from transformers import ViTForImageClassification


@dataclass(frozen=True)
class ViTConfig:
    """Every size and switch of a ViT. The defaults are the paper's ViT-Base/16."""

    image_size: int = 224  # side of the square input image, in pixels
    patch_size: int = 16  # side of one square patch, in pixels
    in_channels: int = 3  # 3 for colour, 1 for grayscale
    num_classes: int = 1000  # outputs of the classifier head
    dim: int = 768  # D: width of every token
    depth: int = 12  # number of transformer blocks
    num_heads: int = 12  # h: attention heads per block (D must divide by h)
    mlp_dim: int = 3072  # hidden width of each block's MLP (the paper uses 4D)
    qkv_bias: bool = True  # biases on the query/key/value projection
    dropout: float = 0.0  # dropout after embeddings, attention projection and MLP layers
    attn_dropout: float = 0.0  # dropout on the attention weights
    drop_path: float = 0.0  # stochastic depth of the last block; earlier blocks get less, linearly
    pool: str = "cls"  # "cls": classify the cls token; "mean": the mean of the patch tokens
    pos_embed: str = "learned"  # "learned", or "sincos" for fixed 2-D sine-cosine embeddings
    # The paper's "hybrid" (section 3.1): 3 x 3 convolutions (channels of each) before the patch
    # embedding, which then cuts the feature map into patches. Empty: a pure ViT (the default).
    stem_channels: tuple[int, ...] = ()
    # 1: the stem keeps the image size. 2: each stem convolution halves it (rounding up), and
    # patch_size counts pixels of the stem's output, not of the image.
    stem_stride: int = 1
    # LayerNorm's epsilon, added to the variance before dividing by its square root. timm and
    # torchvision use 1e-6; Hugging Face's ViT uses 1e-12 (`from_transformers` carries it).
    norm_eps: float = 1e-6

    def __post_init__(self):
        # A list (from JSON or a checkpoint) becomes a tuple, so the config stays hashable.
        object.__setattr__(self, "stem_channels", tuple(self.stem_channels))
        if any(c < 1 for c in self.stem_channels):
            raise ValueError(f"stem_channels must be positive, got {self.stem_channels}")
        if self.stem_stride not in (1, 2):
            raise ValueError(f"stem_stride must be 1 or 2, got {self.stem_stride}")
        if self.stem_stride == 2 and not self.stem_channels:
            raise ValueError("stem_stride=2 needs stem convolutions: set stem_channels too")
        if self.stem_size % self.patch_size:
            what = "image_size" if self.stem_size == self.image_size else "the stem's output size"
            raise ValueError(
                f"{what} {self.stem_size} is not a multiple of patch_size {self.patch_size}"
            )
        if self.dim % self.num_heads:
            raise ValueError(f"dim {self.dim} is not divisible by num_heads {self.num_heads}")
        if self.pool not in ("cls", "mean"):
            raise ValueError(f"pool must be 'cls' or 'mean', got {self.pool!r}")
        if self.pos_embed not in ("learned", "sincos"):
            raise ValueError(f"pos_embed must be 'learned' or 'sincos', got {self.pos_embed!r}")
        if self.pos_embed == "sincos" and self.dim % 4:
            raise ValueError(f"sincos position embeddings need dim divisible by 4, got {self.dim}")
        if self.norm_eps <= 0:
            raise ValueError(f"norm_eps must be positive, got {self.norm_eps}")

    @property
    def stem_size(self) -> int:
        """Side of the feature map the patches are cut from: the image, or the stem's output."""
        size = self.image_size
        if self.stem_stride == 2:
            for _ in self.stem_channels:
                size = (size + 1) // 2  # a 3 x 3 convolution, stride 2, padding 1
        return size

    @property
    def grid_size(self) -> int:
        """Patches along each side of the image."""
        return self.stem_size // self.patch_size

    @property
    def token_pixels(self) -> int:
        """Pixels of the image between the centres of two neighbouring tokens: the patch size for a
        pure ViT; for a stride-2 stem, a patch of its output covers 2 x 2 per convolution (each
        cell of `course-28/conv`'s 4 x 4 grid is 8 pixels apart from the next)."""
        return self.patch_size * (2 ** len(self.stem_channels) if self.stem_stride == 2 else 1)

    @property
    def num_patches(self) -> int:
        """N: patches per image."""
        return self.grid_size**2

    @property
    def num_tokens(self) -> int:
        """T = N + 1: the patches and the cls token."""
        return self.num_patches + 1


_COURSE_28 = ViTConfig(
    image_size=28,
    patch_size=4,
    in_channels=1,
    num_classes=10,
    dim=128,
    depth=6,
    num_heads=4,
    mlp_dim=256,
)

_COURSE_32 = ViTConfig(
    image_size=32,
    patch_size=4,
    in_channels=3,
    num_classes=10,
    dim=192,
    depth=6,
    num_heads=6,
    mlp_dim=384,
)

PRESETS: dict[str, ViTConfig] = {
    # The paper's Table 1 sizes (Ti and S from DeiT), on 224 x 224 ImageNet images.
    "vit-tiny/16": ViTConfig(dim=192, depth=12, num_heads=3, mlp_dim=768),
    "vit-small/16": ViTConfig(dim=384, depth=12, num_heads=6, mlp_dim=1536),
    "vit-base/16": ViTConfig(dim=768, depth=12, num_heads=12, mlp_dim=3072),
    # The course's small models, sized for a laptop CPU: 7 x 7 = 49 patches of 4 x 4 pixels.
    "course-28/4": _COURSE_28,
    # The course's pure ViT for 28 x 28 images (notebooks 06-08): 7 x 7 patches (16 tokens) and 3
    # blocks, about 2.5x and then 2x as many steps in the same time on a CPU as 4 x 4 patches and 6
    # blocks. In a 10-minute budget more steps beat finer patches and more blocks (benchmarks/).
    "course-28/7": replace(_COURSE_28, patch_size=7, depth=3),
    # The trainer's default for 28 x 28 images: course-28/7 with a convolutional stem in place of
    # the 7 x 7 patches. Three 3 x 3 convolutions of stride 2 take 28 x 28 pixels to a 4 x 4 grid of
    # 64 features (16 tokens, as with 7 x 7 patches); each "patch" is one cell of that grid. A fifth
    # slower per step, but it learns far more per step: 91.1% to 91.6% in three 10-minute runs
    # against 90.1% for course-28/7, 93.1% in 60 minutes against 92.5% (benchmarks/README.md).
    "course-28/conv": replace(
        _COURSE_28, patch_size=1, depth=3, stem_channels=(16, 32, 64), stem_stride=2
    ),
    # course-28/7 with 2 x 2 = 4 patches of 14 x 14 pixels: the ViT notebook 09 races on scrambled
    # images, whose squares are its patches (`vitcourse.scrambling`).
    "course-28/14": replace(_COURSE_28, patch_size=14, depth=3),
    # 8 x 8 = 64 patches of 4 x 4 pixels for 32 x 32 colour images (CIFAR).
    "course-32/4": _COURSE_32,
    # Its 2 x 2 patches of 16 x 16 pixels, for scrambled CIFAR (as course-28/14).
    "course-32/16": replace(_COURSE_32, patch_size=16),
    # Its hybrid (notebook 08 on CIFAR): two stride-2 convolutions take 32 x 32 pixels to the same
    # 8 x 8 grid of tokens. Untuned: no CIFAR accuracy has been measured for it.
    "course-32/conv": replace(_COURSE_32, patch_size=1, stem_channels=(32, 64), stem_stride=2),
}


def preset(name: str, **changes) -> ViTConfig:
    """A named config, with any fields changed: `preset("course-28/4", depth=4)`."""
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}: expected one of {', '.join(PRESETS)}")
    return replace(PRESETS[name], **changes)


def preset_for(dataset: str, name: str | None = None, **changes) -> ViTConfig:
    """The course's ViT for a dataset, sized for its images and classes.

    By default the dataset's `vit_preset` (the pure ViT of notebooks 06-08: `course-28/7` for
    Fashion-MNIST, `course-32/4` for CIFAR); `name` picks another preset, e.g. the dataset's
    `train_preset`. `preset_for("cifar100")` has 3 input channels, 32 x 32 images, 100 classes.
    """
    info = dataset_info(dataset)
    fitted = {
        "image_size": info.image_size,
        "in_channels": info.channels,
        "num_classes": len(info.classes),
    }
    return preset(name or info.vit_preset, **{**fitted, **changes})


def count_parameters(config: ViTConfig) -> int:
    """A pure ViT's trainable parameters, counted from its sizes (notebook 05's exercise)."""
    if config.stem_channels:
        raise ValueError(
            f"count_parameters counts a pure ViT; this config has a convolutional stem "
            f"{config.stem_channels} (count a hybrid with VisionTransformer(config).num_parameters())"
        )
    D, C, P = config.dim, config.in_channels, config.patch_size
    patch_embed = P * P * C * D + D
    tokens = D + (config.num_tokens * D if config.pos_embed == "learned" else 0)  # cls + positions
    attn = D * 3 * D + (3 * D if config.qkv_bias else 0) + D * D + D
    mlp = D * config.mlp_dim + config.mlp_dim + config.mlp_dim * D + D
    per_block = 2 * (2 * D) + attn + mlp  # two LayerNorms, attention, MLP
    head = 2 * D + D * config.num_classes + config.num_classes  # final LayerNorm, classifier
    return patch_embed + tokens + config.depth * per_block + head


class VisionTransformer(nn.Module):
    """(B, C, H, W) images -> (B, num_classes) logits."""

    architecture = "vit"  # the name checkpoints store, to rebuild the right model
    num_prefix_tokens = 1  # tokens before the patches: the cls token (timm's name)

    def __init__(self, config: ViTConfig):
        super().__init__()
        self.config = c = config
        # A hybrid's convolutions keep the image size (stride 1) or halve it (stride 2); the
        # patches are cut from their output.
        layers, channels = [], c.in_channels
        for width in c.stem_channels:
            layers.append(conv_bn_relu(channels, width, stride=c.stem_stride))
            channels = width
        self.stem = nn.Sequential(*layers)  # empty (does nothing) for a pure ViT
        self.patch_embed = PatchEmbedding(c.stem_size, c.patch_size, channels, c.dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, c.dim))
        # Learned embeddings train; sin-cos ones are fixed (a parameter that does not train keeps
        # the state dict the same shape either way).
        self.pos_embed = nn.Parameter(
            torch.zeros(1, c.num_tokens, c.dim), requires_grad=c.pos_embed == "learned"
        )
        self.pos_drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(
                c.dim,
                c.num_heads,
                c.mlp_dim,
                qkv_bias=c.qkv_bias,
                dropout=c.dropout,
                attn_dropout=c.attn_dropout,
                drop_path=c.drop_path * i / max(c.depth - 1, 1),  # deeper blocks are skipped more
            )
            for i in range(c.depth)
        )
        for block in self.blocks:  # TransformerBlock builds its LayerNorms with eps 1e-6
            block.norm1.eps = block.norm2.eps = c.norm_eps
        self.norm = nn.LayerNorm(c.dim, eps=c.norm_eps)
        self.head = nn.Linear(c.dim, c.num_classes)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """timm's initialisation: small truncated-normal weights, zero biases."""
        if self.config.pos_embed == "sincos":
            pos = sincos_2d_position_embedding(self.config.grid_size, self.config.dim)
            with torch.no_grad():
                self.pos_embed[:, 1:] = pos  # the cls token's slot stays zero
                self.pos_embed[:, :1] = 0.0
        else:
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias) if module.bias is not None else None

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, T, D): patch tokens, the cls token in front, positions added."""
        x = self.patch_embed(self.stem(self.check_images(images)))  # (B, C, H, W) -> (B, N, D)
        x = embed_tokens(x, self.cls_token, self.pos_embed)  # cls in front, positions: (B, T, D)
        return self.pos_drop(x)

    def check_images(self, images: torch.Tensor) -> torch.Tensor:
        """`images` if they are (B, C, H, W) of this model's channels and size; else a clear error."""
        c = self.config
        if images.ndim != 4:
            raise ValueError(f"expected images (B, C, H, W), got shape {tuple(images.shape)}")
        B, C, H, W = images.shape
        if C != c.in_channels:
            raise ValueError(f"expected {c.in_channels} image channels, got {C}")
        if (H, W) != (c.image_size, c.image_size):
            raise ValueError(
                f"expected {c.image_size}x{c.image_size} images, got {H}x{W}; "
                "to run at another resolution, call model.set_image_size(new_size) first"
            )
        return images

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, T, D): every block in turn, then the final LayerNorm."""
        for block in self.blocks:
            x = block(x)
        return self.norm(x)

    def forward_head(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, D) -> (B, num_classes): pool the tokens into one vector, then classify it."""
        pooled = x[:, 0] if self.config.pool == "cls" else x[:, 1:].mean(dim=1)  # (B, D)
        return self.head(pooled)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.forward_head(self.forward_features(self.embed(images)))

    def attention_maps(self, images: torch.Tensor) -> torch.Tensor:
        """The attention weights of every block: (layers, B, h, T, T).

        Runs the written-out attention, so it is slower than `forward`; wrap it in
        `torch.no_grad()` when you only want to look.
        """
        x = self.embed(images)
        maps = []
        for block in self.blocks:
            x, weights = block(x, return_weights=True)
            maps.append(weights)
        return torch.stack(maps)

    def set_image_size(self, image_size: int) -> None:
        """Run at another resolution: the position embeddings are resized to the new patch grid."""
        new = replace(self.config, image_size=image_size)  # checks the new size against the patch
        if new.pos_embed == "sincos":
            pos = sincos_2d_position_embedding(new.grid_size, new.dim)[None]
            pos = torch.cat([self.pos_embed[:, :1].detach(), pos.to(self.pos_embed)], dim=1)
        else:
            pos = resize_pos_embed(self.pos_embed.detach(), new.grid_size)
        self.pos_embed = nn.Parameter(pos, requires_grad=self.pos_embed.requires_grad)
        self.patch_embed.image_size = new.stem_size
        self.patch_embed.grid_size = new.grid_size
        self.patch_embed.num_patches = new.num_patches
        self.config = new

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """As `nn.Module.load_state_dict`, but a tensor of the wrong shape gets a clear error."""
        own = self.state_dict()
        wrong = [
            f"{key}: checkpoint {tuple(value.shape)}, model {tuple(own[key].shape)}"
            for key, value in state_dict.items()
            if key in own and value.shape != own[key].shape
        ]
        if wrong:
            raise ValueError(
                "the weights were saved from a model of another shape (compare the configs):\n  "
                + "\n  ".join(wrong)
            )
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def num_parameters(self) -> int:
        """Parameters that train (sin-cos position embeddings do not)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad)


def copy_encoder(model: VisionTransformer, weights: dict) -> None:
    """Load a ViT's weights into `model`, all but its classifier head (`head.*`): the start of
    fine-tuning on new classes (notebook 09, `python -m vitcourse.train --init`). Anything else
    missing or extra is a ValueError naming it; shapes that differ are too."""
    kept = {k: v for k, v in weights.items() if not k.startswith("head")}
    missing, unexpected = model.load_state_dict(kept, strict=False)
    if unexpected or any(not k.startswith("head") for k in missing):
        raise ValueError(
            f"these weights do not fit the model beyond its head: missing {missing}, "
            f"unexpected {unexpected}"
        )


class DistilledViT(VisionTransformer):
    """DeiT's ViT (Touvron et al. 2021, section 4): a second extra token, the distillation token,
    sits next to the cls token and has its own head, trained to agree with a teacher
    (`vitcourse.distillation`). Tokens: [cls, dist, patches], so T = N + 2.

    In training mode `forward` returns both heads' logits, (cls, dist); in eval mode their mean.
    That is what DeiT's code does (`facebookresearch/deit`, models.py); the paper says it adds the
    two softmax outputs (section 4, "joint classifiers"; Table 3's last row).
    """

    architecture = "deit"
    num_prefix_tokens = 2  # the cls token and the distillation token

    def __init__(self, config: ViTConfig):
        if config.pool != "cls" or config.pos_embed != "learned":
            raise ValueError(
                "a distilled ViT classifies its cls and distillation tokens with learned "
                f"positions: needs pool='cls' and pos_embed='learned', got {config.pool!r} and "
                f"{config.pos_embed!r}"
            )
        super().__init__(config)
        self.dist_token = nn.Parameter(torch.zeros(1, 1, config.dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, config.num_tokens + 1, config.dim))
        self.head_dist = nn.Linear(config.dim, config.num_classes)
        nn.init.trunc_normal_(self.dist_token, std=0.02)
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.trunc_normal_(self.head_dist.weight, std=0.02)
        nn.init.zeros_(self.head_dist.bias)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, N + 2, D): cls and distillation tokens in front, positions added."""
        x = self.patch_embed(self.stem(self.check_images(images)))  # (B, N, D)
        prefix = torch.cat([self.cls_token, self.dist_token], dim=1).expand(len(x), -1, -1)
        return self.pos_drop(torch.cat([prefix, x], dim=1) + self.pos_embed)  # (B, N + 2, D)

    def forward_head(self, x: torch.Tensor):
        """(B, N + 2, D) -> (cls logits, dist logits) when training, else their mean (B, classes)."""
        cls_logits, dist_logits = self.head(x[:, 0]), self.head_dist(x[:, 1])
        if self.training:
            return cls_logits, dist_logits
        return (cls_logits + dist_logits) / 2

    def set_image_size(self, image_size: int) -> None:
        raise NotImplementedError("a distilled ViT runs at the size it was trained at")


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
    saved on an online machine). The environment
    variable `VITCOURSE_PRETRAINED` names such a file for every notebook: a classroom without
    the network. Without the network (and no file) it raises `PretrainedUnavailable` at once,
    with a line a notebook can print before going on.
    """
    import timm  # only here: importing timm takes a second, and only this function needs it

    file = file or os.environ.get("VITCOURSE_PRETRAINED") or None
    if file is not None and not Path(file).exists():
        raise PretrainedUnavailable(f"no weights file at {file} (VITCOURSE_PRETRAINED or file=)")

    if file is None and not is_online("https://huggingface.co/api/models/timm/" + name):
        raise PretrainedUnavailable(
            f"offline: timm's pretrained {name} cannot be downloaded (it needs huggingface.co)"
        )
    overlay = {"pretrained_cfg_overlay": {"file": str(file)}} if file is not None else {}
    try:
        model = timm.create_model(name, pretrained=True, **overlay)
    except Exception as e:  # noqa: BLE001 - a failed download can raise many kinds of error
        raise PretrainedUnavailable(f"timm could not load {name}: {type(e).__name__}: {e}") from e
    config = model.pretrained_cfg
    return from_timm(model).eval(), {"mean": config["mean"], "std": config["std"]}


def from_timm(model: nn.Module) -> VisionTransformer:
    """A `VisionTransformer` with the weights of a timm `VisionTransformer` (same outputs).

    Supports the classic ViT: one cls token, learned position embeddings, LayerNorm, no layer
    scale or register tokens, "token" or "avg" pooling without timm's extra `fc_norm`.
    """
    attn = model.blocks[0].attn
    unsupported = {
        "register tokens or no cls token": getattr(model, "num_prefix_tokens", 1) != 1
        or getattr(model, "cls_token", None) is None,
        "position embeddings without the cls token (no_embed_class)": getattr(
            model, "no_embed_class", False
        ),
        "fc_norm after pooling": not isinstance(
            getattr(model, "fc_norm", nn.Identity()), nn.Identity
        ),
        "layer scale": not isinstance(model.blocks[0].ls1, nn.Identity),
        "q/k normalisation": not isinstance(attn.q_norm, nn.Identity),
        "a pre-norm before the blocks": not isinstance(model.norm_pre, nn.Identity),
        f"global_pool {model.global_pool!r}": model.global_pool not in ("token", "avg"),
        "a non-square input": model.patch_embed.img_size[0] != model.patch_embed.img_size[1],
    }
    problems = [name for name, present in unsupported.items() if present]
    if problems:
        raise ValueError(
            f"this timm ViT has features vitcourse does not model: {', '.join(problems)}"
        )
    config = ViTConfig(
        image_size=model.patch_embed.img_size[0],
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
            "torchvision ViTs with a representation (pre-logits) layer are not supported"
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
                f"offline: transformers' {name} is not in the Hugging Face cache and cannot be "
                "downloaded (it needs huggingface.co)"
            ) from e
        raise PretrainedUnavailable(
            f"transformers could not load {name}: {type(e).__name__}: {e}"
        ) from e


def _config_from_transformers(model: nn.Module) -> ViTConfig:
    """The `ViTConfig` of transformers' `ViTForImageClassification`; a clear error for anything
    else, and for what the course's ViT cannot model."""
    from transformers import ViTForImageClassification, ViTModel

    if isinstance(model, ViTModel):
        raise ValueError(
            "expected a ViTForImageClassification, got a bare ViTModel, which has no classifier "
            "head: load its weights with ViTForImageClassification.from_pretrained(name, "
            "num_labels=...) for a new head"
        )
    if not isinstance(model, ViTForImageClassification):
        raise ValueError(
            "expected transformers' ViTForImageClassification (or its hub name), got "
            f"{type(model).__module__}.{type(model).__name__}"
        )
    c = model.config
    (H, W), (P, Q) = (  # transformers also takes (height, width) pairs
        (v, v) if isinstance(v, int) else tuple(v) for v in (c.image_size, c.patch_size)
    )
    act, heads = c.hidden_act, c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    unsupported = {
        f"hidden_act {act!r} (expected 'gelu', the exact GELU of ours)": act != "gelu",
        f"a non-square image {H}x{W}": H != W,
        f"non-square patches {P}x{Q}": P != Q,
        f"image size {H} not a multiple of patch size {P} (transformers drops the edge)": H % P,
        f"num_labels {c.num_labels} (expected a classifier, num_labels > 0)": c.num_labels < 1,
        f"head_dim {head_dim} (expected hidden_size / heads)": head_dim * heads != c.hidden_size,
    }
    problems = [name for name, present in unsupported.items() if present]
    if problems:
        raise ValueError(
            f"this transformers ViT has features vitcourse does not model: {', '.join(problems)}"
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
        raise ValueError(f"expected a vitcourse VisionTransformer, got {type(model).__name__}")
    c = model.config
    distilled = (
        "a distilled ViT (cls and distillation tokens, two heads; transformers' "
        "DeiTForImageClassificationWithTeacher is that model)"
    )
    mean = (
        "pool='mean' (transformers' ViT classifies the cls token and has no mean pooling: "
        "expected pool='cls')"
    )
    stem = f"a convolutional stem {c.stem_channels} (transformers' ViT starts with the patches)"
    unsupported = {
        distilled: isinstance(model, DistilledViT),
        mean: c.pool != "cls",
        stem: bool(c.stem_channels),
    }
    problems = [name for name, present in unsupported.items() if present]
    if problems:
        raise ValueError(
            f"transformers' ViTForImageClassification cannot hold this model: {', '.join(problems)}"
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
