"""vitcourse: the tested reference package behind the Vision Transformer course.

Each module is one concept, introduced by one notebook (Dosovitskiy et al., "An Image is Worth
16x16 Words", ICLR 2021):

    environment, data   notebook 00: the machine, the datasets, normalisation

Shape legend, used in every docstring and comment:

    B  batch size            C  image channels       H, W  image height and width
    P  patch size            N  patches = (H/P)(W/P) T     tokens = N + 1 (the cls token)
    D  model width           h  attention heads      d     head width = D / h
"""

__version__ = "0.1.0"
