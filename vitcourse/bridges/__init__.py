"""Bridges: the course's training in the tools a learner meets next (notebook 10)::

    tensorboard   a training run written for TensorBoard: its curves and attention maps
    lightning     the course's recipe as a PyTorch Lightning module and data module
    transformers  the course's ViT as Hugging Face transformers' ViT, and back

All need the extras (`requirements-extras.txt`). Nothing else in the package imports
`lightning`; the command line's run folder loads `tensorboard` only for `--tensorboard`, and
`transformers` only for `--export transformers`.
"""
