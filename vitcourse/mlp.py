"""A model with no spatial prior at all: a multilayer perceptron on the flattened image
(notebook 09's control).

Introduced in notebook 09. `SmallMLP` flattens each image into one vector of C*H*W numbers and
sends it through fully connected layers, each followed by a GELU, then one linear classifier. For
it the pixels' order is only the order of its first layer's weight columns: it assumes nothing
about which pixels are neighbours, and nothing about patches either. So any fixed permutation of
the pixels (notebook 09's scramble among them) is, to it, the same problem as the images
themselves, as it is to a ViT whose patches are the scramble's squares; to a CNN it is a harder
one. Racing it beside the two tells what "no assumption" buys and what it costs.

It has the CNN's and the ViT's `config`, `num_parameters` and `(B, C, H, W) -> (B, num_classes)`
interface, so `vitcourse.training.loop.Trainer` trains it with the same loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from vitcourse.language import _


@dataclass(frozen=True)
class MLPConfig:
    """Every size of the small MLP. The defaults: 28 x 28 grayscale images, two hidden layers of
    384, 453,130 parameters, about those of the ViT that notebook 09 races (course-28/14:
    424,970)."""

    image_size: int = 28  # side of the square input image, in pixels
    in_channels: int = 1  # 3 for colour, 1 for grayscale
    num_classes: int = 10  # outputs of the classifier head
    widths: tuple[int, ...] = (384, 384)  # the hidden layers' sizes

    def __post_init__(self):
        object.__setattr__(self, "widths", tuple(self.widths))  # lists from JSON become tuples
        if not self.widths or min(self.widths) < 1:
            message = _("widths needs at least one hidden layer of at least 1, got {widths}")
            raise ValueError(message.format(widths=self.widths))


class SmallMLP(nn.Module):
    """(B, C, H, W) images -> (B, num_classes) logits, through the flattened image."""

    architecture = "mlp"  # the name checkpoints store, to rebuild the right model

    def __init__(self, config: MLPConfig = MLPConfig()):
        super().__init__()
        self.config = c = config
        layers, width = [], c.in_channels * c.image_size * c.image_size
        for hidden in c.widths:
            layers += [nn.Linear(width, hidden), nn.GELU()]
            width = hidden
        self.layers = nn.Sequential(*layers)
        self.head = nn.Linear(width, c.num_classes)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        c = self.config
        if images.ndim != 4 or images.shape[1:] != (c.in_channels, c.image_size, c.image_size):
            message = _("expected images of shape (B, {channels}, {size}, {size}), got {shape}")
            shape = tuple(images.shape)
            raise ValueError(message.format(channels=c.in_channels, size=c.image_size, shape=shape))
        return self.head(self.layers(images.flatten(1)))  # (B, C*H*W) -> (B, num_classes)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def mlp_config_for(info, **changes) -> MLPConfig:
    """The course's MLP sized for a dataset's images and classes (`info`: its `DatasetInfo`)."""
    fitted = {
        "image_size": info.image_size,
        "in_channels": info.channels,
        "num_classes": len(info.classes),
    }
    return MLPConfig(**{**fitted, **changes})
