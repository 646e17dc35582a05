"""The masked autoencoder: a ViT that learns from images without labels (notebook 09).

The ViT paper tried self-supervision in section 4.6: predict the mean colour of corrupted patches.
He et al. 2022 ("Masked Autoencoders Are Scalable Vision Learners", MAE) made it work: hide most of
the patches, let the encoder see only the visible ones, and have a small decoder paint the hidden
pixels back. The loss counts the hidden patches only (MAE's footnote 1: a loss on every pixel cost
about 0.5% accuracy). Afterwards the decoder is thrown away and the encoder is fine-tuned on labels
(`python -m vitcourse.train --init DIR/model.pt`). Its trainer is in
`vitcourse.training.pretraining`.

    random_masking      which patches each image keeps visible and which it hides
    masked_patch_loss   mean squared error on the hidden patches only
    MaskedAutoencoder   the course's ViT as the encoder, plus a small decoder

Shapes: B images, N patches of P*P*C numbers each, V = N - hidden visible patches, D the
encoder's width, d the decoder's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn

from vitcourse.block import TransformerBlock
from vitcourse.language import _
from vitcourse.patching import patchify, unpatchify
from vitcourse.vit import VisionTransformer, ViTConfig


def hidden_count(num_patches: int, mask_ratio: float) -> int:
    """How many of `num_patches` patches a `mask_ratio` hides (rounded), at least one of each kind."""
    if not 0 < mask_ratio < 1:
        message = _("mask_ratio is the share of patches hidden, in (0, 1); got {mask_ratio}")
        raise ValueError(message.format(mask_ratio=mask_ratio))
    hidden = round(num_patches * mask_ratio)
    if not 0 < hidden < num_patches:
        message = _(
            "a mask_ratio of {mask_ratio} hides {hidden} of {count} patches; at least one "
            "must be hidden and one visible"
        )
        raise ValueError(message.format(mask_ratio=mask_ratio, hidden=hidden, count=num_patches))
    return hidden


def random_masking(
    batch_size: int,
    num_patches: int,
    mask_ratio: float,
    generator: torch.Generator | None = None,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick, for each image independently, which patches stay visible (notebook 09's exercise).

    Returns `visible` (B, V): the indices of the visible patches, in increasing order, and `mask`
    (B, N): True where a patch is hidden. Each image hides exactly `hidden_count(N, mask_ratio)`
    patches, chosen uniformly at random (MAE's "random sampling", section 3).
    """
    hidden = hidden_count(num_patches, mask_ratio)
    noise = torch.rand(batch_size, num_patches, generator=generator).to(device)
    order = noise.argsort(dim=1)  # a random permutation of the patches, one per image
    visible = order[:, : num_patches - hidden].sort(dim=1).values  # (B, V)
    mask = torch.ones(batch_size, num_patches, dtype=torch.bool, device=visible.device)
    mask.scatter_(1, visible, False)  # (B, N): True = hidden
    return visible, mask


def masked_patch_loss(
    predicted: torch.Tensor, target: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """Mean squared error over the hidden patches only (notebook 09's exercise).

    `predicted` and `target` are (B, N, P*P*C) patches, `mask` (B, N) is True where hidden. Each
    hidden patch's error is the mean over its numbers; the loss is the mean over hidden patches.
    """
    if predicted.shape != target.shape or mask.shape != predicted.shape[:2]:
        message = _(
            "expected predicted and target (B, N, K) and mask (B, N); got "
            "{predicted}, {target} and {mask}"
        )
        raise ValueError(
            message.format(
                predicted=tuple(predicted.shape),
                target=tuple(target.shape),
                mask=tuple(mask.shape),
            )
        )
    per_patch = (predicted - target).pow(2).mean(dim=-1)  # (B, N)
    mask = mask.to(per_patch.dtype)
    return (per_patch * mask).sum() / mask.sum()


@dataclass(frozen=True)
class MAEConfig:
    """A masked autoencoder: a pure ViT encoder and a small decoder (MAE's is 8 blocks of 512
    wide for ViT-L; ours, 1 block of 64, suits 16 tokens on a CPU)."""

    encoder: ViTConfig = ViTConfig()
    decoder_dim: int = 64  # d: width of the decoder's tokens
    decoder_depth: int = 1  # decoder blocks
    decoder_heads: int = 4
    mask_ratio: float = 0.75  # share of patches hidden (MAE's default, section 4)

    def __post_init__(self):
        if isinstance(self.encoder, dict):  # as checkpoints store it
            object.__setattr__(self, "encoder", ViTConfig(**self.encoder))
        if self.encoder.stem_channels:
            message = _(
                "masked-patch pre-training needs a pure ViT: a convolutional stem "
                "{stem_channels} would see the pixels of the hidden patches"
            )
            raise ValueError(message.format(stem_channels=self.encoder.stem_channels))
        if self.decoder_dim % self.decoder_heads:
            message = _(
                "decoder_dim {decoder_dim} is not divisible by decoder_heads {decoder_heads}"
            )
            raise ValueError(
                message.format(decoder_dim=self.decoder_dim, decoder_heads=self.decoder_heads)
            )
        hidden_count(self.encoder.num_patches, self.mask_ratio)


class MAEOutput(NamedTuple):
    loss: torch.Tensor  # scalar: the error on the hidden patches
    predicted: torch.Tensor  # (B, N, P*P*C): the decoder's pixels for every patch
    mask: torch.Tensor  # (B, N): True where the patch was hidden


class MaskedAutoencoder(nn.Module):
    """(B, C, H, W) images -> MAEOutput. `self.encoder` is a `VisionTransformer`; after
    pre-training it is what you keep (`save_model(mae.encoder, path)`)."""

    architecture = "mae"

    def __init__(self, config: MAEConfig = MAEConfig()):
        super().__init__()
        self.config = config
        e, d = config.encoder, config.decoder_dim
        self.encoder = VisionTransformer(e)
        self.decoder_embed = nn.Linear(e.dim, d)
        self.mask_token = nn.Parameter(torch.zeros(1, 1, d))  # stands in for every hidden patch
        self.decoder_pos_embed = nn.Parameter(torch.zeros(1, e.num_tokens, d))
        self.decoder_blocks = nn.ModuleList(
            TransformerBlock(d, config.decoder_heads, 4 * d)
            for _block in range(config.decoder_depth)
        )
        self.decoder_norm = nn.LayerNorm(d, eps=1e-6)
        self.decoder_pred = nn.Linear(d, e.patch_size**2 * e.in_channels)
        nn.init.trunc_normal_(self.decoder_pos_embed, std=0.02)
        nn.init.normal_(self.mask_token, std=0.02)
        for module in [self.decoder_embed, self.decoder_pred, *self.decoder_blocks.modules()]:
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                nn.init.zeros_(module.bias)

    def encode(self, images: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) images, (B, V) visible indices -> (B, 1 + V, D): the encoder reads the
        cls token and the visible patches only, each with its own position embedding."""
        vit = self.encoder
        vit.embed(images[:1])  # checks the image shape with the ViT's own clear errors
        x = vit.patch_embed(images) + vit.pos_embed[:, 1:]  # (B, N, D), positions added
        index = visible.unsqueeze(-1).expand(-1, -1, x.shape[-1])  # (B, V, D)
        x = x.gather(1, index)  # keep the visible patches: (B, N, D) -> (B, V, D)
        cls = (vit.cls_token + vit.pos_embed[:, :1]).expand(x.shape[0], -1, -1)  # (B, 1, D)
        return vit.forward_features(torch.cat([cls, x], dim=1))  # (B, 1 + V, D)

    def decode(self, latent: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        """(B, 1 + V, D) encoded tokens -> (B, N, P*P*C) pixels for every patch: the mask token
        fills each hidden patch's place, then the decoder sees all N positions."""
        x = self.decoder_embed(latent)  # (B, 1 + V, d)
        B, N, d = x.shape[0], self.config.encoder.num_patches, x.shape[-1]
        patches = self.mask_token.expand(B, N, d).clone()  # (B, N, d): all hidden to start
        patches.scatter_(1, visible.unsqueeze(-1).expand(-1, -1, d), x[:, 1:])  # visible back
        x = torch.cat([x[:, :1], patches], dim=1) + self.decoder_pos_embed  # (B, T, d)
        for block in self.decoder_blocks:
            x = block(x)
        return self.decoder_pred(self.decoder_norm(x))[:, 1:]  # drop the cls token: (B, N, K)

    def forward(
        self,
        images: torch.Tensor,
        mask_ratio: float | None = None,
        generator: torch.Generator | None = None,
    ) -> MAEOutput:
        ratio = self.config.mask_ratio if mask_ratio is None else mask_ratio
        N = self.config.encoder.num_patches
        visible, mask = random_masking(len(images), N, ratio, generator, images.device)
        predicted = self.decode(self.encode(images, visible), visible)
        target = patchify(images, self.config.encoder.patch_size)  # (B, N, P*P*C)
        return MAEOutput(masked_patch_loss(predicted, target, mask), predicted, mask)

    @torch.no_grad()
    def reconstruct(
        self, images: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, C, H, W) -> (mask (B, N), reconstructed (B, C, H, W)): which patches were hidden,
        and the visible patches with the decoder's guesses pasted into the hidden ones. (MAE's
        Figure 2 shows the raw output; its footnote says pasting looks better.)"""
        was_training = self.training
        self.eval()
        out = self(images, generator=generator)
        self.train(was_training)
        patches = patchify(images, self.config.encoder.patch_size)
        guessed = torch.where(out.mask.unsqueeze(-1), out.predicted.to(patches.dtype), patches)
        return out.mask, unpatchify(guessed, self.config.encoder.patch_size, images.shape[-1])

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad)
