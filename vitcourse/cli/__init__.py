"""The command lines: a training run from a terminal, written to a run folder::

    train          python -m vitcourse.train: the ViT (or its CNN rival), with live numbers
    pretrain       python -m vitcourse.pretrain: masked-patch pre-training, then fine-tuning
    train_options  `train`'s options, in the groups its --help shows
    train_run      the run `train` trains, settled once from the arguments before it starts
    fine_tuning    --init: a run that starts from a ViT trained or pre-trained elsewhere
    runs           the run folder both write (run.json, metrics, checkpoints, model.pt,
                   resuming), and what both runs do first and how they fit (`begin`, `fit`)

`python -m vitcourse.train` and `python -m vitcourse.pretrain` stay the documented commands: the
files of those names beside the package's modules start these.
"""
