"""DeiT's distilled ViT: the course's ViT with a second extra token that learns from a teacher.

Notebook 09 distils notebook 08's CNN into it (`vitcourse.training.distillation` trains it).
"""

from __future__ import annotations

import torch
from torch import nn

from vitcourse.language import _
from vitcourse.vit import VisionTransformer, ViTConfig


class DistilledViT(VisionTransformer):
    """DeiT's ViT (Touvron et al. 2021, section 4): a second extra token, the distillation token,
    sits next to the cls token and has its own head, trained to agree with a teacher
    (`vitcourse.training.distillation`). Tokens: [cls, dist, patches], so T = N + 2.

    In training mode `forward` returns both heads' logits, (cls, dist); in eval mode their mean.
    That is what DeiT's code does (`facebookresearch/deit`, models.py); the paper says it adds the
    two softmax outputs (section 4, "joint classifiers"; Table 3's last row).
    """

    architecture = "deit"
    num_prefix_tokens = 2  # the cls token and the distillation token

    def __init__(self, config: ViTConfig):
        if config.pool != "cls" or config.pos_embed != "learned":
            message = _(
                "a distilled ViT classifies its cls and distillation tokens with learned "
                "positions: needs pool='cls' and pos_embed='learned', got {pool} and {pos_embed}"
            )
            raise ValueError(
                message.format(pool=repr(config.pool), pos_embed=repr(config.pos_embed))
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
        raise NotImplementedError(_("a distilled ViT runs at the size it was trained at"))
