"""Masked-patch pre-training: a ViT learns from images without labels (notebook 09).

The ViT paper tried self-supervision in section 4.6: predict the mean colour of corrupted patches.
He et al. 2022 ("Masked Autoencoders Are Scalable Vision Learners", MAE) made it work: hide most
of the patches, let the encoder see only the visible ones, and have a small decoder paint the
hidden pixels back. The loss counts the hidden patches only (MAE's footnote 1: a loss on every
pixel cost about 0.5% accuracy). Afterwards the decoder is thrown away and the encoder is fine-tuned on labels
(`python -m vitcourse.train --init DIR/model.pt`).

    PRETRAIN_RECIPE      MAE's pre-training recipe, as the course's TrainConfig
    PretrainTrainer      the course's Trainer, with this loss and a validation without labels
    plot_reconstructions the images, what the encoder saw, and what the decoder painted back

The model itself (`random_masking`, `masked_patch_loss`, `MaskedAutoencoder`) is in `vitcourse.mae`.

Shapes: B images, N patches of P*P*C numbers each, V = N - hidden visible patches, D the
encoder's width, d the decoder's.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from vitcourse.language import _
from vitcourse.mae import MaskedAutoencoder
from vitcourse.patching import patchify, unpatchify
from vitcourse.training.loop import TrainConfig, Trainer

# After MAE's pre-training setting (He et al. 2022, appendix A.1, Table 8): AdamW, weight decay
# 0.05, warm-up, cosine decay; no label smoothing (there are no labels). Three things differ from
# MAE, and stay because the shipped encoder and results were trained with them:
# - the learning rate: MAE's base rate, 1.5e-4 per 256 images, is for hundreds of epochs; for a
#   few minutes we take ten times that, untuned (no other rate was tried);
# - Adam's beta2: ours is PyTorch's default 0.999 (make_optimizer sets no betas), MAE's 0.95;
# - gradient clipping: ours clips the norm at 1 (TrainConfig's grad_clip), where MAE's A.1 says
#   "We do not use color jittering, drop path, or gradient clip."
PRETRAIN_RECIPE = TrainConfig(lr=1.5e-3, weight_decay=0.05, warmup=0.05, label_smoothing=0.0)


class PretrainTrainer(Trainer):
    """The course's Trainer for a `MaskedAutoencoder`: the labels are never read; the loss is the
    error on the hidden patches; validation measures it on the validation images, always with
    the same masks (a fixed seed), so epochs compare."""

    def loss_fn(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return self.network(images).loss

    @torch.no_grad()
    def validate(self) -> dict:
        was_training = self.model.training
        self.model.eval()
        generator = torch.Generator().manual_seed(0)
        total, count = 0.0, 0
        for images, _labels in self.loaders.val:
            out = self.model(images.to(self.device), generator=generator)
            total += out.loss.item() * len(images)
            count += len(images)
        self.model.train(was_training)
        return {"loss": total / max(count, 1)}


def plot_reconstructions(
    model: MaskedAutoencoder,
    images: torch.Tensor,
    pixels: torch.Tensor,
    denormalize,
    seed: int = 0,
):
    """A figure of three rows: the original images, what the encoder was shown (hidden patches
    grey), and the reconstruction (the decoder's guesses in the hidden patches).

    `images` are normalised as the model reads them; `pixels` the same images in [0, 1] for
    drawing; `denormalize` turns normalised images back into [0, 1] pixels.
    """
    device = next(model.parameters()).device
    mask, rebuilt = model.reconstruct(images.to(device), torch.Generator().manual_seed(seed))
    P, size = model.config.encoder.patch_size, images.shape[-1]
    hidden = mask.cpu().unsqueeze(-1)  # (B, N, 1)
    grey = unpatchify(patchify(pixels, P).masked_fill(hidden, 0.5), P, size)
    seen = 100 * (1 - model.config.mask_ratio)
    rows = {  # each row's label: its images
        _("original"): pixels,
        _("encoder sees ({percent:.0f}%)").format(percent=seen): grey,
        _("reconstruction"): denormalize(rebuilt.cpu()).clamp(0, 1),
    }
    B = len(images)
    fig, axes = plt.subplots(3, B, figsize=(1.4 * B, 4.6), squeeze=False)
    for r, (title, row) in enumerate(rows.items()):
        for b in range(B):
            ax = axes[r, b]
            picture = row[b].permute(1, 2, 0).numpy()
            picture = picture.squeeze(-1) if picture.shape[-1] == 1 else picture
            ax.imshow(picture, cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([]), ax.set_yticks([])
        axes[r, 0].set_ylabel(title, fontsize=9)
    fig.suptitle(_("Masked-patch pre-training: the hidden patches painted back"), fontsize=10)
    fig.tight_layout()
    return fig
