"""The ViT paper's published results, and the charts that draw them (notebooks 08 and 09).

Dosovitskiy et al., "An Image is Worth 16x16 Words: Transformers for Image Recognition at Scale"
(ICLR 2021, arXiv 2010.11929). Every number here is copied from the table named beside it; none
is measured by the course. Figures 3 and 5 of the paper are plots of these tables:

- `PRETRAINING_IMAGES`: section 4.1, the three pre-training datasets ("ImageNet dataset with 1k
  classes and 1.3M images", "ImageNet-21k with 21k classes and 14M images", "JFT ... with 18k
  classes and 303M high-resolution images").
- `TABLE_5_IMAGENET`: appendix C, Table 5, its ImageNet rows: top-1 accuracy (%) on ImageNet
  after fine-tuning at 384 resolution, for each ViT and pre-training dataset. "These values
  correspond to Figure 3 in the main text." Figure 3 also shades the range of BiT ResNets; their
  numbers are not in Table 5, so `data_scaling_figure` does not draw them.
- `TABLE_6`: appendix C, Table 6: ImageNet top-1 (%) after transfer and the pre-training compute
  (exaFLOPs) of ViTs, ResNets and hybrids, all pre-trained on JFT-300M. "These correspond to
  Figure 5 in the main paper"; `compute_figure` draws its ImageNet column.
- `DEIT_B`: Touvron et al., "Training data-efficient image transformers & distillation through
  attention" (ICML 2021, arXiv 2012.12877), Table 5: DeiT-B↑384, ViT-B's architecture trained on
  ImageNet alone with strong augmentation and regularisation, then fine-tuned at 384 x 384 (as
  Table 5 of the ViT paper's models were): 83.1% top-1, the number DeiT's abstract quotes
  (DeiT-B at 224 x 224: 81.8%).
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from vitcourse.language import _

# Section 4.1: images in each pre-training dataset.
PRETRAINING_IMAGES = {"ImageNet": 1.3e6, "ImageNet-21k": 14e6, "JFT-300M": 303e6}

# Table 5, rows "ImageNet": model -> {pre-training dataset: ImageNet top-1 %}. ViT-H/14 was not
# pre-trained on ImageNet (its cell is empty).
TABLE_5_IMAGENET = {
    "ViT-B/32": {"ImageNet": 73.38, "ImageNet-21k": 81.28, "JFT-300M": 80.73},
    "ViT-B/16": {"ImageNet": 77.91, "ImageNet-21k": 83.97, "JFT-300M": 84.15},
    "ViT-L/32": {"ImageNet": 71.16, "ImageNet-21k": 80.99, "JFT-300M": 84.37},
    "ViT-L/16": {"ImageNet": 76.53, "ImageNet-21k": 85.15, "JFT-300M": 87.12},
    "ViT-H/14": {"ImageNet-21k": 85.13, "JFT-300M": 88.04},
}

# Table 6: (model, pre-training epochs on JFT-300M, ImageNet top-1 %, pre-training exaFLOPs).
TABLE_6 = [
    ("ViT-B/32", 7, 80.73, 55),
    ("ViT-B/16", 7, 84.15, 224),
    ("ViT-L/32", 7, 84.37, 196),
    ("ViT-L/16", 7, 86.30, 783),
    ("ViT-L/16", 14, 87.12, 1567),
    ("ViT-H/14", 14, 88.08, 4262),
    ("ResNet50x1", 7, 77.54, 50),
    ("ResNet50x2", 7, 82.12, 199),
    ("ResNet101x1", 7, 80.67, 96),
    ("ResNet152x1", 7, 81.88, 141),
    ("ResNet152x2", 7, 84.97, 563),
    ("ResNet152x2", 14, 85.56, 1126),
    ("ResNet200x3", 14, 87.22, 3306),
    ("R50x1+ViT-B/32", 7, 84.90, 106),
    ("R50x1+ViT-B/16", 7, 85.58, 274),
    ("R50x1+ViT-L/32", 7, 85.68, 246),
    ("R50x1+ViT-L/16", 7, 86.60, 859),
    ("R50x1+ViT-L/16", 14, 87.12, 1668),
]

# DeiT's Table 5, DeiT-B↑384: ViT-B's architecture (86M parameters), ImageNet only, fine-tuned
# at 384 x 384 (at 224 x 224, DeiT-B: 81.8).
DEIT_B = 83.1


def family(model: str) -> str:
    """'ViT', 'ResNet' or 'hybrid' for a row of Table 6."""
    return "hybrid" if "+" in model else "ResNet" if model.startswith("ResNet") else "ViT"


def _finish(fig: plt.Figure, ax: plt.Axes, xlabel: str, title: str) -> plt.Figure:
    """What both charts share: the accuracy axis, a grid, and the legend below the axes, never
    over the data."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(_("ImageNet top-1 accuracy (%)"))
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=9, frameon=False)
    fig.tight_layout()
    return fig


def data_scaling_figure(with_deit: bool = True) -> plt.Figure:
    """The paper's Figure 3 without its BiT band: ImageNet accuracy of each ViT against the size
    of the dataset it was pre-trained on (Table 5), and DeiT-B's ImageNet-only result."""
    fig, ax = plt.subplots(figsize=(7, 4.6))
    for model, row in TABLE_5_IMAGENET.items():
        sizes = [PRETRAINING_IMAGES[d] / 1e6 for d in row]
        ax.plot(sizes, list(row.values()), "o-", label=model)
    if with_deit:
        deit = _("{model}: ImageNet only, strong augmentation").format(model="DeiT-B↑384")
        ax.plot([PRETRAINING_IMAGES["ImageNet"] / 1e6], [DEIT_B], "k*", markersize=13, label=deit)
    ax.set_xscale("log")
    ticks = {name: size / 1e6 for name, size in PRETRAINING_IMAGES.items()}
    images = _("{name}\n{millions:g}M images")
    names = [images.format(name=name, millions=t) for name, t in ticks.items()]
    ax.set_xticks(list(ticks.values()), names)
    ax.minorticks_off()
    title = _("ViT paper, Table 5 (the numbers behind Figure 3)")
    return _finish(fig, ax, _("pre-training dataset (log scale)"), title)


def compute_figure() -> plt.Figure:
    """Table 6's ImageNet column, as the paper's Figure 5 draws transfer accuracy: against the
    pre-training compute, for ViTs, ResNets and hybrids all pre-trained on JFT-300M."""
    fig, ax = plt.subplots(figsize=(7, 4.6))
    styles = {"ViT": ("tab:blue", "o"), "ResNet": ("tab:orange", "s"), "hybrid": ("tab:green", "^")}
    labels = {"ViT": _("ViTs"), "ResNet": _("ResNets (BiT)"), "hybrid": _("hybrids")}
    for kind, (colour, marker) in styles.items():
        rows = sorted((r for r in TABLE_6 if family(r[0]) == kind), key=lambda r: r[3])
        ax.plot(
            [r[3] for r in rows],
            [r[2] for r in rows],
            marker,
            color=colour,
            markersize=7,
            label=labels[kind],
        )
        name, _epochs, acc, flops = rows[-1]  # the family's biggest model, named to find one's way
        ax.annotate(
            name,
            (flops, acc),
            textcoords="offset points",
            xytext=(-6, 6),
            ha="right",
            fontsize=8,
            color=colour,
        )
    ax.set_ylim(top=max(r[2] for r in TABLE_6) + 1.5)  # room for the names
    ax.set_xscale("log")
    title = _("ViT paper, Table 6 (the numbers behind Figure 5): all on {dataset}").format(
        dataset="JFT-300M"
    )
    return _finish(fig, ax, _("pre-training compute (exaFLOPs, log scale)"), title)
