"""The course's named ViT sizes, and the ViT for each dataset (`preset_for`).

The paper's Table 1 sizes (`vit-base/16`, with DeiT's tiny and small) and the course's small
models for a laptop CPU (`course-28/7`, `course-28/conv`, ...). Why each exists is written beside
it; what they reached is in `docs/results.md` and `benchmarks/README.md`.
"""

from __future__ import annotations

from dataclasses import replace

from vitcourse.language import _
from vitcourse.vit import ViTConfig

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
        raise ValueError(
            _("unknown preset {name!r}: expected one of {presets}").format(
                name=name, presets=", ".join(PRESETS)
            )
        )
    return replace(PRESETS[name], **changes)


def preset_for(dataset: str, name: str | None = None, **changes) -> ViTConfig:
    """The course's ViT for a dataset, sized for its images and classes.

    By default the dataset's `vit_preset` (the pure ViT of notebooks 06-08: `course-28/7` for
    Fashion-MNIST, `course-32/4` for CIFAR); `name` picks another preset, e.g. the dataset's
    `train_preset`. `preset_for("cifar100")` has 3 input channels, 32 x 32 images, 100 classes.
    """
    from vitcourse.data.loading import dataset_info  # here: the sizes alone need no data layer

    info = dataset_info(dataset)
    fitted = {
        "image_size": info.image_size,
        "in_channels": info.channels,
        "num_classes": len(info.classes),
    }
    return preset(name or info.vit_preset, **{**fitted, **changes})
