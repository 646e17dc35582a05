"""The Vision Transformer: embed, a stack of transformer blocks, and a classifier head (ViT paper, section 3.1).

Introduced in notebook 05. The forward pass has three stages, one per notebook that built them:

    embed            (B, C, H, W) -> (B, T, D)  patches + cls token + positions  (notebooks 01-02)
    forward_features (B, T, D) -> (B, T, D)     the transformer blocks, then a LayerNorm (03-04)
    forward_head     (B, T, D) -> (B, classes)  pool (cls token or mean of patches), then classify

Submodule names follow timm (`patch_embed`, `cls_token`, `pos_embed`, `blocks`, `norm`, `head`),
so `vitcourse.pretrained.from_timm` copies a timm ViT's weights by name (`from_torchvision`,
and `from_transformers` in `vitcourse.bridges.transformers`, map other names). The named sizes
are in `vitcourse.presets`, DeiT's distilled ViT in `vitcourse.deit`: this file imports only the
model's own pieces and torch.
A "hybrid" ViT (`stem_channels`, notebook 08) runs a few convolutions in `stem` before `embed`
cuts patches; for a pure ViT, the default, `stem` is empty. With `stem_stride=2` each convolution
halves the image, so the stem itself makes the token grid (Xiao et al. 2021, "Early convolutions
help transformers see better"): `course-28/conv`, the trainer's default for 28 x 28 images.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from vitcourse.block import TransformerBlock
from vitcourse.embedding import (
    PatchEmbedding,
    check_images,
    conv_bn_relu,
    embed_tokens,
    resize_pos_embed,
    sincos_2d_position_embedding,
)
from vitcourse.language import _


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
            message = _("{argument} must be positive, got {value}")
            raise ValueError(message.format(argument="stem_channels", value=self.stem_channels))
        if self.stem_stride not in (1, 2):
            message = _("stem_stride must be 1 or 2, got {stem_stride}")
            raise ValueError(message.format(stem_stride=self.stem_stride))
        if self.stem_stride == 2 and not self.stem_channels:
            raise ValueError(_("stem_stride=2 needs stem convolutions: set stem_channels too"))
        if self.stem_size % self.patch_size:
            if self.stem_size == self.image_size:
                message = _("image_size {size} is not a multiple of patch_size {patch_size}")
            else:
                message = _(
                    "the stem's output size {size} is not a multiple of patch_size {patch_size}"
                )
            raise ValueError(message.format(size=self.stem_size, patch_size=self.patch_size))
        if self.dim % self.num_heads:
            message = _("dim {dim} is not divisible by num_heads {num_heads}")
            raise ValueError(message.format(dim=self.dim, num_heads=self.num_heads))
        if self.pool not in ("cls", "mean"):
            message = _("pool must be 'cls' or 'mean', got {pool}")
            raise ValueError(message.format(pool=repr(self.pool)))
        if self.pos_embed not in ("learned", "sincos"):
            message = _("pos_embed must be 'learned' or 'sincos', got {pos_embed}")
            raise ValueError(message.format(pos_embed=repr(self.pos_embed)))
        if self.pos_embed == "sincos" and self.dim % 4:
            message = _("sincos position embeddings need dim divisible by 4, got {dim}")
            raise ValueError(message.format(dim=self.dim))
        if self.norm_eps <= 0:
            message = _("{argument} must be positive, got {value}")
            raise ValueError(message.format(argument="norm_eps", value=self.norm_eps))

    @property
    def stem_size(self) -> int:
        """Side of the feature map the patches are cut from: the image, or the stem's output."""
        size = self.image_size
        if self.stem_stride == 2:
            for _width in self.stem_channels:
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


def count_parameters(config: ViTConfig) -> int:
    """A pure ViT's trainable parameters, counted from its sizes (notebook 05's exercise)."""
    if config.stem_channels:
        message = _(
            "count_parameters counts a pure ViT; this config has a convolutional stem "
            "{stem_channels} (count a hybrid with VisionTransformer(config).num_parameters())"
        )
        raise ValueError(message.format(stem_channels=config.stem_channels))
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
        check_images(images, c.in_channels)  # (B, C, H, W), with the model's channels
        H, W = images.shape[2:]
        if (H, W) != (c.image_size, c.image_size):
            message = _(
                "expected {size}x{size} images, got {height}x{width}; "
                "to run at another resolution, call model.set_image_size(new_size) first"
            )
            raise ValueError(message.format(size=c.image_size, height=H, width=W))
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
        shapes = _("{key}: checkpoint {saved}, model {own}")
        wrong = [
            shapes.format(key=key, saved=tuple(value.shape), own=tuple(own[key].shape))
            for key, value in state_dict.items()
            if key in own and value.shape != own[key].shape
        ]
        if wrong:
            message = _(
                "the weights were saved from a model of another shape (compare the configs):\n"
                "  {tensors}"
            )
            raise ValueError(message.format(tensors="\n  ".join(wrong)))
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
        message = _(
            "these weights do not fit the model beyond its head: missing {missing}, "
            "unexpected {unexpected}"
        )
        raise ValueError(message.format(missing=missing, unexpected=unexpected))
