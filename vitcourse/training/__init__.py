"""Training: the loop notebook 06 prints, and a room for everything it leaves out::

    loop          notebook 06: `TrainConfig`, `train_step`, `History` and the `Trainer`'s loop
    callbacks     what happens around the loop: progress bars, checkpoints, timelines, live
                  plots (`Callback` and its events); `StopTraining` ends a fit cleanly
    evaluation    loss, accuracy and per-class scores on a split (`evaluate`)
    clock         the time budget: seconds of training, validation left out (`Clock`)
    resuming      what a checkpoint holds, and the rest of an interrupted epoch (`EpochReplay`)
    scaling       the README's "Scaling up": bfloat16/float16 on a GPU, torch.compile, torchrun
    pretraining   notebook 09: masked-patch pre-training (MAE), its recipe and trainer
    distillation  notebook 09: DeiT's distillation losses and trainer

Read `loop` first. The notebooks import the loop's names from here (`from vitcourse.training
import TrainConfig, Trainer, evaluate`): each is found in its room when first asked for, so
importing one room (`vitcourse.training.scaling`) loads that room alone.
"""

from vitcourse import front_door

# Where each name a notebook imports from `vitcourse.training` lives.
_ROOMS = {
    name: "training.loop"
    for name in ("History", "TrainConfig", "Trainer", "learning_rate", "make_optimizer",
                 "seed_everything", "train_step")
} | {
    name: "training.callbacks"
    for name in ("Callback", "CheckpointCallback", "ProgressCallback", "StopTraining", "Timeline")
} | {
    "evaluate": "training.evaluation", "accuracy": "training.evaluation",
} | {
    name: "training.scaling"
    for name in ("PRECISIONS", "autocast_dtype", "distributed", "init_distributed", "to_device")
}  # fmt: skip


__getattr__, __dir__ = front_door(__name__, _ROOMS)
