"""vitcourse: the tested reference package behind the Vision Transformer course.

Each module is one concept, introduced by one notebook (Dosovitskiy et al., "An Image is Worth
16x16 Words", ICLR 2021):

    environment, data   notebook 00: the machine, the datasets, normalisation
    patching            notebook 01: an image as a sequence of patches
    embedding           notebook 02: patch embedding, position embeddings
    attention           notebook 03: scaled dot-product and multi-head self-attention
    block               notebook 04: the pre-norm transformer block
    vit                 notebook 05: the whole model, its presets, timm/torchvision weights
    checks, widgets     notebooks 01-05: exercise checks with hints; interactive explorers
    student             student copies of the notebooks, solutions removed
    training, live      notebook 06: the trainer and its callbacks; the live attention plot
    train               the command-line trainer, python -m vitcourse.train
    analysis            notebooks 06-07: attention rollout, attention distance, Figure 7
    cnn                 notebook 08: a small CNN, to race the ViT

Shape legend, used in every docstring and comment:

    B  batch size            C  image channels       H, W  image height and width
    P  patch size            N  patches = (H/P)(W/P) T     tokens = N + 1 (the cls token)
    D  model width           h  attention heads      d     head width = D / h
"""

from vitcourse.vit import VisionTransformer, ViTConfig

__all__ = ["ViTConfig", "VisionTransformer"]
__version__ = "0.1.0"
