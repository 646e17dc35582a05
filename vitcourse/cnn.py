"""A small convolutional network to race the ViT against (notebook 08).

Introduced in notebook 08. `SmallCNN` is the classic recipe: stages of 3 x 3 convolutions, each
followed by batch normalisation and a ReLU, with 2 x 2 max-pooling between stages, then the mean
over the last feature map and one linear classifier. It is built, like the ViT, from a frozen
config, and it has the same `config`, `num_parameters` and `(B, C, H, W) -> (B, num_classes)`
interface, so `vitcourse.training.loop.Trainer` trains it with the very same loop.

What a convolution assumes and a ViT does not (its "inductive bias"):

- locality: a 3 x 3 filter sees only neighbouring pixels; a ViT's attention may mix any patches.
- translation equivariance: the same filter slides over every pixel, so a shifted image gives a
  shifted feature map. A ViT's patch embedding is a convolution too, but one that moves a whole
  patch at a time (equivariant only to whole-patch shifts), and its position embeddings give each
  place its own vector: it must learn from data that a sleeve on the left and a sleeve on the
  right are the same kind of thing (notebook 08 measures both with `analysis.equivariance_error`).
- a hierarchy: pooling grows the field of view stage by stage, from edges to parts to objects.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import nn

from vitcourse.data.loading import dataset_info
from vitcourse.embedding import conv_bn_relu
from vitcourse.language import _


@dataclass(frozen=True)
class CNNConfig:
    """Every size of the small CNN. The defaults (preset `cnn-28`): 796,266 parameters, about those
    of the 6-block `course-28/4` (805,130) and twice the 3-block `course-28/7` that notebook 08 races."""

    image_size: int = 28  # side of the square input image, in pixels
    in_channels: int = 1  # 3 for colour, 1 for grayscale
    num_classes: int = 10  # outputs of the classifier head
    widths: tuple[int, ...] = (32, 64, 128, 192)  # channels of each stage's convolutions
    depths: tuple[int, ...] = (1, 1, 2, 2)  # 3 x 3 convolutions in each stage

    def __post_init__(self):
        # Lists (from JSON or a checkpoint) become tuples, so the config stays hashable.
        object.__setattr__(self, "widths", tuple(self.widths))
        object.__setattr__(self, "depths", tuple(self.depths))
        widths, depths = self.widths, self.depths
        if len(widths) != len(depths) or not widths:
            message = _(
                "widths and depths need one entry per stage, got {widths_count} widths "
                "{widths} and {depths_count} depths {depths}"
            )
            raise ValueError(
                message.format(
                    widths_count=len(widths),
                    widths=widths,
                    depths_count=len(depths),
                    depths=depths,
                )
            )
        if min(widths) < 1 or min(depths) < 1:
            message = _(
                "every stage needs at least one channel and one convolution, "
                "got widths {widths} and depths {depths}"
            )
            raise ValueError(message.format(widths=widths, depths=depths))
        smallest = 2 ** (len(widths) - 1)
        if self.image_size < smallest:
            message = _(
                "{stages} stages halve the image {halvings} times: "
                "image_size must be at least {smallest}, got {image_size}"
            )
            raise ValueError(
                message.format(
                    stages=len(widths),
                    halvings=len(widths) - 1,
                    smallest=smallest,
                    image_size=self.image_size,
                )
            )


class SmallCNN(nn.Module):
    """(B, C, H, W) images -> (B, num_classes) logits."""

    architecture = "cnn"  # the name checkpoints store, to rebuild the right model

    def __init__(self, config: CNNConfig = CNNConfig()):
        super().__init__()
        self.config = c = config
        stages, channels = [], c.in_channels
        for index, (width, depth) in enumerate(zip(c.widths, c.depths, strict=True)):
            layers = []
            if index > 0:
                # Halve height and width (28 -> 14 -> 7 -> 4): each later filter sees further.
                layers.append(nn.MaxPool2d(2, ceil_mode=True))
            for _conv in range(depth):
                layers.append(conv_bn_relu(channels, width))
                channels = width
            stages.append(nn.Sequential(*layers))
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(channels, c.num_classes)

    def forward_features(self, images: torch.Tensor) -> torch.Tensor:
        """(B, C, H, W) -> (B, widths[-1], h, w): the last stage's feature map."""
        c = self.config
        if images.ndim != 4 or images.shape[1:] != (c.in_channels, c.image_size, c.image_size):
            message = _("expected images of shape (B, {channels}, {size}, {size}), got {shape}")
            shape = tuple(images.shape)
            raise ValueError(message.format(channels=c.in_channels, size=c.image_size, shape=shape))
        return self.stages(images)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        features = self.forward_features(images)
        return self.head(features.mean(dim=(2, 3)))  # the mean over positions, then classify

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


# The CNN the course compares with each dataset's ViT: the same image size, channels and classes.
CNN_PRESETS: dict[str, CNNConfig] = {
    # 796,266 parameters, next to the 6-block course-28/4's 805,130 (the course's ViT in notebooks
    # 06-08, course-28/7, has 3 blocks and 407,690: fewer blocks, more steps in a time budget).
    "cnn-28": CNNConfig(),
    # Colour 32 x 32 images (CIFAR): 1,789,690 parameters, next to course-32/4's 1,806,538.
    "cnn-32": CNNConfig(image_size=32, in_channels=3, widths=(48, 96, 192, 288)),
}


def cnn_preset_for(dataset: str, name: str | None = None, **changes) -> CNNConfig:
    """The course's CNN for a dataset (its `DatasetInfo.cnn_preset`, or preset `name`), sized for
    the dataset's images and classes: `cnn_preset_for("cifar100")` has 100 outputs."""
    info = dataset_info(dataset)
    name = name or info.cnn_preset
    if name not in CNN_PRESETS:
        message = _("unknown CNN preset {name}: expected one of {names}")
        raise ValueError(message.format(name=repr(name), names=", ".join(CNN_PRESETS)))
    fitted = {
        "image_size": info.image_size,
        "in_channels": info.channels,
        "num_classes": len(info.classes),
    }
    return replace(CNN_PRESETS[name], **{**fitted, **changes})
