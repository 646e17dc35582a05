"""vitcourse: the tested reference package behind the Vision Transformer course.

Each module is one concept, introduced by one notebook (Dosovitskiy et al., "An Image is Worth
16x16 Words", ICLR 2021):

    environment, data   notebook 00: the machine, the data folder, the datasets and each one's
                        course models (`DatasetInfo.vit_preset`, `train_preset`, `cnn_preset`);
                        every notebook's set-up cell (`setup`: Colab, Kaggle, a laptop)
    patching            notebook 01: an image as a sequence of patches
    embedding           notebook 02: patch embedding, position embeddings
    attention           notebook 03: scaled dot-product and multi-head self-attention
    block               notebook 04: the pre-norm transformer block
    vit                 notebook 05: the whole model, its presets (`preset_for(dataset)`),
                        `count_parameters`, timm/torchvision weights
    checks, widgets     notebooks 01-05: exercise checks with hints; interactive explorers
    student             student copies of the notebooks, solutions removed
    training, live      notebook 06: the trainer and its callbacks; the live attention plot;
                        mixed precision, torch.compile and torchrun (the README's "Scaling up")
    checkpoints         notebook 06: model files and training runs, saved and loaded safely;
                        the registry of model kinds (ViT, CNN); the shipped trained model
    train               the command-line trainer, python -m vitcourse.train
    analysis            notebooks 06-07: attention rollout, attention distance, Figure 7
    cnn                 notebook 08: a small CNN, to race the ViT
    pretraining         notebook 09: masked-patch pre-training (MAE): masking, loss, model, trainer
    pretrain            python -m vitcourse.pretrain, pre-training from the command line
    distillation        notebook 09: DeiT's distillation losses and trainer (the student,
                        `DistilledViT`, lives in vit)
    diagrams            notebooks 03-05: the model drawn from its config, with its shapes

Imports flow one way, from the bottom up (a test checks there is no cycle): environment, then
data, then the model pieces (patching, embedding, attention, block, then vit and cnn), then
checkpoints, training, live, pretraining and distillation, and the command lines (train,
pretrain). analysis and widgets read the model pieces only; checks reads them and the references
of training, pretraining and distillation; student reads nothing of the package.

Shape legend, used in every docstring and comment:

    B  batch size            C  image channels       H, W  image height and width
    P  patch size            N  patches = (H/P)(W/P) T     tokens = N + 1 (the cls token)
    D  model width           h  attention heads      d     head width = D / h
"""

from vitcourse.vit import VisionTransformer, ViTConfig

__all__ = ["ViTConfig", "VisionTransformer"]
__version__ = "0.1.0"
