"""Bridges: the course's training in the tools a learner meets next (notebook 10)::

    tensorboard   a training run written for TensorBoard: its curves and attention maps
    lightning     the course's recipe as a PyTorch Lightning module and data module

Both need the extras (`requirements-extras.txt`). Nothing else in the package imports
`lightning`; `tensorboard` is loaded by the command line's run folder only for `--tensorboard`.
"""
