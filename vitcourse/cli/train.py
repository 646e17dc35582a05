"""Train the course's ViT (or its CNN rival) from the command line.

    python -m vitcourse.train --dataset fashion-mnist --minutes 10 --out runs/fashion
    python -m vitcourse.train --out runs/fashion --resume        # continue an interrupted run
    python -m vitcourse.train --model cnn --minutes 10 --fraction 0.1   # the CNN, 10% of the data
    python -m vitcourse.train --init runs/mae/model.pt --fraction 0.01  # fine-tune a pre-trained ViT
    python -m vitcourse.train --teacher runs/cnn/model.pt --minutes 10  # distil a CNN into a ViT
    python -m vitcourse.train --dataset my_photos --minutes 5   # your own: one sub-folder per class

Writes OUT/run.json (the data and model kind, which --resume reuses), OUT/checkpoint.pt (after
every epoch and on Ctrl-C), OUT/metrics.json (per-epoch losses and accuracies, the final test
accuracy, per-class precision/recall/F1, the confusion matrix), OUT/attention.png (a ViT's curves
and attention maps of a few validation images) and OUT/model.pt (the trained model alone, for
`vitcourse.checkpoints.load_model`); with --tensorboard, TensorBoard's event files, and with
--export transformers, OUT/transformers/ for Hugging Face. The model is the dataset's entry in
`vitcourse.data.datasets` (`train_preset` for the ViT, `cnn_preset` for --model cnn) unless --preset
says otherwise. A folder of your own images is resized to --image-size pixels and normalised with
its training images' statistics, which run.json keeps. Quick mode (VITCOURSE_QUICK=1): a small
subset, one epoch unless --epochs or --minutes say otherwise.

--init PATH starts from a trained or pre-trained ViT's weights (`python -m vitcourse.pretrain`
writes one) with a new head for the dataset's classes; --freeze then trains the head alone (a
linear probe). --teacher PATH trains a DeiT student (`vitcourse.deit.DistilledViT`) against the
trained model in PATH (the course's CNN, say): `vitcourse.training.distillation`.

On a GPU it computes in bfloat16 or float16 (--precision) and keeps the data on the GPU; --compile
asks torch.compile for a faster model. On several GPUs (or CPU processes), start it with torchrun:

    torchrun --nproc_per_node=4 -m vitcourse.train --minutes 10 --out runs/four

Each process trains a copy of the model (DistributedDataParallel) on its share of every batch.
By default each process takes 128 images a step on a CPU, 512 on a GPU, with the learning rate
scaled to the whole batch; a --batch-size given is the batch of all processes together, so N
processes then take the same steps as one. Only the first process (rank 0) writes files;
metrics.json records `world_size`.

The run is settled once, before it starts, into a frozen `vitcourse.cli.train_run.TrainRun` (its
defaults resolved, on --resume with run.json's settings); `vitcourse.cli.runs` writes its folder.
"""

from __future__ import annotations

import argparse
import dataclasses

import torch
import torch.distributed as dist

from vitcourse.checkpoints import load_checkpoint
from vitcourse.cli import runs
from vitcourse.cli.train_options import add_options
from vitcourse.cli.train_run import TrainRun, folder_line, plan
from vitcourse.data.datasets import table_classes
from vitcourse.language import _, number
from vitcourse.training.distillation import DistillationTrainer
from vitcourse.training.evaluation import evaluate
from vitcourse.training.loop import Trainer
from vitcourse.training.scaling import init_distributed


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m vitcourse.train", description=__doc__.split("\n\n")[0]
    )
    add_options(parser)  # vitcourse.cli.train_options: in the groups --help shows
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    try:
        rank, world_size, device = init_distributed(args.device)
    except ValueError as e:  # e.g. --device mps under torchrun
        raise SystemExit(f"error: {e}") from None
    try:
        return _train(plan(args, rank, world_size, device, argv))
    finally:
        if world_size > 1:
            dist.destroy_process_group()


# How the trainer computes, in words.
PRECISION_NAMES = {None: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def _train(run: TrainRun) -> dict:
    """Train as `run` says; the first process writes the run folder."""
    say = print if run.lead else (lambda *a, **k: None)
    runs.begin(run, say)
    loaders = run.loaders()
    if run.info.folder is not None:
        say(folder_line(run.info))
    model = run.new_model()
    trainer = run.new_trainer(model, loaders)
    seconds = runs.fit(run, trainer, lambda: _describe(run, model, loaders, trainer), say)
    if trainer.interrupted and run.world_size > 1:
        # Each process stopped at its own point: no more steps or measurements together.
        say(run.folder.stopped_early("torchrun ... -m vitcourse.train"))
        return {"interrupted": True, "world_size": run.world_size}
    if trainer.interrupted:
        say(run.folder.stopped_early("python -m vitcourse.train"))
    test = evaluate(trainer.model, loaders.test, trainer.device)
    metrics = _metrics(run, trainer, loaders, test, seconds)
    if run.teacher:
        metrics["teacher"] = _teacher_facts(run, trainer, loaders)
    if not run.lead:
        return metrics  # the first process writes the files
    run.folder.write_results(
        metrics,
        trainer.model,
        test_acc=test["acc"],
        command=run.command,
        epochs=trainer.history.epochs,
        train_config=dataclasses.asdict(run.train_config),
        train_seconds=trainer.elapsed,
    )
    if run.teacher:
        say(_teacher_line(metrics["teacher"], trainer.elapsed))
    if run.export:
        say(
            _("wrote {folder} for transformers").format(
                folder=run.folder.export_transformers(trainer.model)
            )
        )
    say(
        _("test accuracy {percent:.2f}% on {images} images; wrote {folder}/").format(
            percent=100 * test["acc"], images=number(metrics["test_images"]), folder=run.folder.path
        )
    )
    return metrics


def _describe(run: TrainRun, model: torch.nn.Module, loaders, trainer: Trainer) -> str:
    """The line that says what trains, on what, and how."""
    config = run.model_config
    if run.model == "vit":
        shape = _("ViT, {depth} blocks, width {dim}, {side}x{side} patches")
        if config.stem_channels:
            shape = _(
                "ViT, {depth} blocks, width {dim}, stem {stem} stride {stride}, "
                "{side}x{side} patches"
            )
        stem = ",".join(map(str, config.stem_channels))
        shape = shape.format(
            depth=config.depth,
            dim=config.dim,
            side=config.grid_size,
            stem=stem,
            stride=config.stem_stride,
        )
    else:
        shape = _("CNN, widths {widths}, convolutions {depths}").format(
            widths=config.widths, depths=config.depths
        )
    if run.init:
        start = _("{shape}, starting from {init}")
        if run.freeze:
            start = _("{shape}, starting from {init} (frozen: the head alone trains)")
        shape = start.format(shape=shape, init=run.init)
    if run.teacher:
        shape = _(
            "DeiT {shape} with a distillation token, {kind} distillation from {teacher}"
        ).format(shape=shape, kind=run.distillation, teacher=run.teacher)
    line = _(
        "{shape}: {parameters} parameters that train; {images} training images; device "
        "{device}, {precision}, batch {batch}, peak lr {lr:.2g}"
    ).format(
        shape=shape,
        parameters=number(model.num_parameters()),
        images=number(len(loaders.train.dataset)),
        device=trainer.device,
        precision=PRECISION_NAMES[trainer.amp_dtype],
        batch=run.batch_size,
        lr=run.train_config.lr,
    )
    if run.world_size > 1:
        line += _(", {processes} processes of {each} images a step each").format(
            processes=run.world_size, each=run.batch_size // run.world_size
        )
    return line + (_(", compiled") if run.compile else "")


def _metrics(run: TrainRun, trainer: Trainer, loaders, test: dict, seconds: float) -> dict:
    """metrics.json: the run, the model, the epochs, and the scores on the test split."""
    return {
        "dataset": loaders.info.name,
        "architecture": run.architecture,
        "fraction": run.fraction,
        "init": str(run.init) if run.init else None,
        "freeze": run.freeze,
        "train_images": len(loaders.train.dataset),
        "world_size": run.world_size,
        "batch_size": run.batch_size,
        "device": str(trainer.device),
        "precision": PRECISION_NAMES[trainer.amp_dtype],
        "compiled": run.compile,
        "model_config": dataclasses.asdict(run.model_config),
        "train_config": dataclasses.asdict(run.train_config),
        "parameters": trainer.model.num_parameters(),
        "epochs": trainer.history.epochs,
        "train_seconds": trainer.elapsed,
        "test_acc": test["acc"],
        "test_loss": test["loss"],
        "test_images": len(loaders.test.dataset),
        "per_class": {
            name: {
                "precision": test["precision"][i].item(),
                "recall": test["recall"][i].item(),
                "f1": test["f1"][i].item(),
            }
            for i, name in enumerate(table_classes(loaders.info))  # English, in any language
        },
        "confusion": test["confusion"].tolist(),
        "interrupted": trainer.interrupted,
        "wall_seconds_this_run": seconds,
    }


def _teacher_facts(run: TrainRun, trainer: DistillationTrainer, loaders) -> dict:
    """The teacher's score and training time: a budget comparison must count them too."""
    facts = load_checkpoint(run.teacher)
    return {
        "path": str(run.teacher),
        "architecture": trainer.teacher.architecture,
        "test_acc": evaluate(trainer.teacher, loaders.test, trainer.device)["acc"],
        "train_seconds": facts.get("train_seconds"),
        "distillation": trainer.kind,
        "alpha": trainer.alpha,
        "tau": trainer.tau,
    }


def _teacher_line(teacher: dict, student_seconds: float) -> str:
    seconds = teacher["train_seconds"]
    minutes = _("{minutes} minutes").format(minutes=f"{seconds / 60:.1f}") if seconds else None
    return _(
        "the teacher: {percent:.2f}% test accuracy, trained for {time}; the student trained "
        "{minutes:.1f} minutes"
    ).format(
        percent=100 * teacher["test_acc"],
        time=minutes or _("unknown time"),
        minutes=student_seconds / 60,
    )


if __name__ == "__main__":
    main()
