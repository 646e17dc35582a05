"""Train the course's ViT (or its CNN rival) from the command line.

    python -m vitcourse.train --dataset fashion-mnist --minutes 10 --out runs/fashion
    python -m vitcourse.train --out runs/fashion --resume        # continue an interrupted run
    python -m vitcourse.train --model cnn --minutes 10 --fraction 0.1   # the CNN, 10% of the data
    python -m vitcourse.train --init runs/mae/model.pt --fraction 0.01  # fine-tune a pre-trained ViT
    python -m vitcourse.train --teacher runs/cnn/model.pt --minutes 10  # distil a CNN into a ViT

Writes OUT/run.json (the data and model kind, which --resume reuses), OUT/checkpoint.pt (after
every epoch and on Ctrl-C), OUT/metrics.json (per-epoch losses and accuracies, the final test
accuracy, per-class precision/recall/F1, the confusion matrix), OUT/attention.png (a ViT's curves
and attention maps of a few validation images) and OUT/model.pt (the trained model alone, for
`vitcourse.checkpoints.load_model`). The model is the dataset's entry in `vitcourse.data`
(`train_preset` for the ViT, `cnn_preset` for --model cnn) unless --preset says otherwise. In quick
mode (VITCOURSE_QUICK=1) the data shrinks to a small subset and the default length to one epoch;
--epochs and --minutes are honoured as given.

--init PATH starts from a trained or pre-trained ViT's weights (`python -m vitcourse.pretrain`
writes one) with a new head for the dataset's classes; --freeze then trains the head alone (a
linear probe). --teacher PATH trains a DeiT student (`vitcourse.vit.DistilledViT`) against the
trained model in PATH (the course's CNN, say): `vitcourse.distillation`.

On a GPU it computes in bfloat16 or float16 (--precision) and keeps the data on the GPU; --compile
asks torch.compile for a faster model. On several GPUs (or CPU processes), start it with torchrun:

    torchrun --nproc_per_node=4 -m vitcourse.train --minutes 10 --out runs/four

Each process trains a copy of the model (DistributedDataParallel) on its share of every batch.
By default each process takes 128 images a step on a CPU, 512 on a GPU, with the learning rate
scaled to the whole batch; a --batch-size given is the batch of all processes together, so N
processes then take the same steps as one. Only the first process (rank 0) writes files;
metrics.json records `world_size`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist

from vitcourse.checkpoints import (
    CheckpointError,
    build_model,
    load_checkpoint,
    load_model,
    save_model,
)
from vitcourse.cnn import CNNConfig, cnn_preset_for
from vitcourse.data import dataset_info, denormalize, make_loaders
from vitcourse.distillation import DistillationTrainer
from vitcourse.environment import pick_device, quick_mode
from vitcourse.live import LivePlot
from vitcourse.training import (
    PRECISIONS,
    CheckpointCallback,
    ProgressCallback,
    TrainConfig,
    Trainer,
    evaluate,
    init_distributed,
)
from vitcourse.vit import PRESETS, ViTConfig, copy_encoder, preset_for


def _channels(text: str) -> tuple[int, ...]:
    """The --stem value: "16,32" becomes (16, 32)."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected channel counts separated by commas, such as 16,32; got {text!r}"
        ) from None


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m vitcourse.train", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--dataset",
        default="fashion-mnist",
        help="fashion-mnist (default), mnist, cifar10, cifar100",
    )
    length = parser.add_mutually_exclusive_group()
    length.add_argument(
        "--epochs",
        type=int,
        help=f"passes over the data (default {TrainConfig.epochs}; 1 in quick mode)",
    )
    length.add_argument("--minutes", type=float, help="a time budget instead of epochs")
    parser.add_argument("--out", type=Path, help="output folder (default runs/DATASET)")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    parser.add_argument(
        "--model",
        choices=["vit", "cnn"],
        default="vit",
        help="vit (default) or cnn: a small CNN (vitcourse.cnn)",
    )
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        help="ViT size (default: the dataset's train_preset in vitcourse.data)",
    )
    parser.add_argument("--patch-size", type=int, help="override the preset's patch size")
    parser.add_argument("--dim", type=int, help="override the preset's width D")
    parser.add_argument("--depth", type=int, help="override the preset's number of blocks")
    parser.add_argument("--heads", dest="num_heads", type=int, help="override the preset's heads")
    parser.add_argument("--mlp-dim", type=int, help="override the preset's MLP width")
    parser.add_argument("--pool", choices=["cls", "mean"], help="override the preset's pooling")
    parser.add_argument("--drop-path", type=float, help="stochastic depth rate of the last block")
    parser.add_argument(
        "--stem",
        dest="stem_channels",
        type=_channels,
        help="a hybrid ViT: 3x3 convolutions of these channels before the patches, e.g. 32 or 16,32 "
        "(each keeps the image size, or halves it with the preset's or --stem-stride's 2)",
    )
    parser.add_argument(
        "--stem-stride",
        type=int,
        choices=[1, 2],
        help="1: the stem keeps the image size; 2: each stem convolution halves it",
    )
    parser.add_argument(
        "--fraction",
        type=float,
        default=1.0,
        help="train on this share of the training images, e.g. 0.1 (default 1)",
    )
    parser.add_argument(
        "--val-size",
        type=int,
        default=5000,
        help="training images held out for validation after every epoch (default 5000)",
    )
    parser.add_argument(
        "--batch-size",
        type=int,
        help=f"images per step, all processes together under torchrun (default {CPU_BATCH} per "
        f"process on a CPU, {GPU_BATCH} per CUDA GPU)",
    )
    parser.add_argument(
        "--lr",
        type=float,
        help=f"peak learning rate (default {TrainConfig.lr:g} at a batch of {CPU_BATCH}, times "
        "the square root of how many times larger the batch is)",
    )
    parser.add_argument("--weight-decay", type=float, default=TrainConfig.weight_decay)
    parser.add_argument("--warmup", type=float, default=TrainConfig.warmup)
    parser.add_argument("--label-smoothing", type=float, default=TrainConfig.label_smoothing)
    parser.add_argument(
        "--no-augment", action="store_true", help="train without random crops and flips"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", help="cpu, cuda, mps (default: picked automatically)")
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="auto",
        help="auto (default): bf16 on a CUDA GPU that has it, else fp16 there; fp32 elsewhere",
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model: compiles first (23 s on a 2-core CPU), then steps faster "
        "(5%% there; benchmarks/precision.py)",
    )
    start = parser.add_argument_group("pre-trained weights and teachers (notebook 09)")
    start.add_argument(
        "--init",
        type=Path,
        help="start from this ViT's weights (a model.pt from vitcourse.pretrain or train); its "
        "sizes replace the preset's and its head is replaced by a new one",
    )
    start.add_argument(
        "--freeze", action="store_true", help="with --init: train the new head only (linear probe)"
    )
    start.add_argument(
        "--teacher",
        type=Path,
        help="distil from this trained model (a model.pt, e.g. the CNN's): DeiT's distillation token",
    )
    start.add_argument("--distillation", choices=["hard", "soft"], default="hard")
    start.add_argument(
        "--alpha", type=float, help="weight of the teacher's loss (DeiT: 0.5 hard, 0.1 soft)"
    )
    start.add_argument("--tau", type=float, help="soft distillation's temperature (DeiT: 3)")
    return parser.parse_args(argv)


# The default batch, per process: a GPU takes 4 times the CPU's batch of these small images.
CPU_BATCH, GPU_BATCH = 128, 512


def scaled_lr(batch_size: int) -> float:
    """The default peak learning rate for a batch: the recipe's rate at a batch of 128, times the
    square root of the batch's growth: the learning-rate part of the square-root scaling rule for
    Adam (Malladi et al., NeurIPS 2022, which also adjusts Adam's betas and epsilon; we do not).
    Measured on Fashion-MNIST, 5 passes, one seed (benchmarks/batch_scaling.py): at a batch of
    512 the square-root rate 4e-3 did best of three, 0.8 points above the unchanged 2e-3 and 3.2
    above the linear 8e-3."""
    return TrainConfig.lr * math.sqrt(batch_size / CPU_BATCH)


# What --resume takes from OUT/run.json, so an interrupted run continues on the same data.
RUN_ARGS = (
    "dataset",
    "model",
    "fraction",
    "val_size",
    "batch_size",
    "no_augment",
    "init",
    "freeze",
    "teacher",
    "distillation",
    "alpha",
    "tau",
)
VIT_ONLY = (
    "preset",
    "patch_size",
    "dim",
    "depth",
    "num_heads",
    "mlp_dim",
    "pool",
    "drop_path",
    "stem_channels",
    "stem_stride",
)


def build(args: argparse.Namespace) -> tuple[ViTConfig | CNNConfig, TrainConfig]:
    """The model and training configs the arguments ask for."""
    info = dataset_info(args.dataset)
    if args.model == "cnn":
        given = [f"--{n.replace('_', '-')}" for n in VIT_ONLY if getattr(args, n) is not None]
        if given:
            raise SystemExit(
                f"error: {', '.join(given)} set the ViT; --model cnn does not use them"
            )
        model_config = cnn_preset_for(info.name)
    elif args.init and not args.resume:  # a resumed run's sizes come from its checkpoint
        model_config = _init_config(args, info)
    else:
        changes = {n: getattr(args, n) for n in VIT_ONLY[1:] if getattr(args, n) is not None}
        try:
            model_config = preset_for(info.name, args.preset or info.train_preset, **changes)
        except ValueError as e:  # sizes that do not fit together, e.g. --patch-size 5 on 28 pixels
            raise SystemExit(f"error: {e}") from None
    # Quick mode shrinks the data (make_loaders) and the default length; a length asked for stands.
    default_epochs = 1 if quick_mode() else TrainConfig.epochs
    length = (
        {"minutes": args.minutes} if args.minutes else {"epochs": args.epochs or default_epochs}
    )
    train_config = TrainConfig(
        **length,
        lr=args.lr or scaled_lr(args.batch_size),
        weight_decay=args.weight_decay,
        warmup=args.warmup,
        label_smoothing=args.label_smoothing,
        seed=args.seed,
    )
    return model_config, train_config


def _check_combinations(args: argparse.Namespace) -> None:
    """Refuse options that do not go together, saying why."""
    if args.freeze and not args.init:
        raise SystemExit("error: --freeze trains the head on top of --init's weights; give --init")
    if args.model == "cnn" and (args.init or args.teacher):
        raise SystemExit("error: --init and --teacher start a ViT; --model cnn does not use them")
    if args.init and args.teacher:
        raise SystemExit(
            "error: --init and --teacher together are not supported: the distilled ViT has an "
            "extra token the pre-trained one lacks"
        )


def _init_config(args: argparse.Namespace, info) -> ViTConfig:
    """The config of the ViT in --init, with the dataset's classes; a clear error if it cannot
    read the dataset's images or if sizes were asked for too."""
    sizes = [f"--{n.replace('_', '-')}" for n in VIT_ONLY if getattr(args, n) is not None]
    sizes = [flag for flag in sizes if flag not in ("--drop-path", "--pool")]
    if sizes:
        raise SystemExit(
            f"error: --init {args.init} sets the model's sizes; drop {', '.join(sizes)}"
        )
    try:
        state = load_checkpoint(args.init)
    except CheckpointError as e:
        raise SystemExit(f"error: --init: {e}") from None
    architecture = state.get("architecture", "vit")
    if architecture not in ("vit", "mae"):
        raise SystemExit(
            f"error: --init expects a ViT or a pre-training run (vitcourse.pretrain's model.pt "
            f"or checkpoint.pt); {args.init} holds a {architecture!r} model"
        )
    config = state["model_config"]
    encoder = ViTConfig(**(config["encoder"] if architecture == "mae" else config))
    wanted = (info.channels, info.image_size, info.image_size)
    found = (encoder.in_channels, encoder.image_size, encoder.image_size)
    if wanted != found:
        raise SystemExit(
            f"error: --init {args.init} holds a ViT for {'x'.join(map(str, found))} images "
            f"(channels x height x width); {info.name} has {'x'.join(map(str, wanted))} images"
        )
    changes = {"num_classes": len(info.classes)}
    changes.update({n: getattr(args, n) for n in ("drop_path", "pool") if getattr(args, n)})
    return dataclasses.replace(encoder, **changes)


def start_from(model: torch.nn.Module, path: Path, freeze: bool) -> None:
    """Copy every weight of the ViT in `path` into `model` except its head (the classes change);
    with `freeze`, only the new head will train."""
    state = load_checkpoint(path)
    weights = state["model"]
    if state.get("architecture") == "mae":  # a whole masked autoencoder: keep its encoder
        weights = {k[len("encoder.") :]: v for k, v in weights.items() if k.startswith("encoder.")}
    try:
        copy_encoder(model, weights)
    except ValueError as e:
        raise SystemExit(f"error: --init {path}: {e}") from None
    if freeze:
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(name.startswith("head"))


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    try:
        rank, world_size, args.device = init_distributed(args.device)
    except ValueError as e:  # e.g. --device mps under torchrun
        raise SystemExit(f"error: {e}") from None
    try:
        return _train(args, argv, rank, world_size)
    finally:
        if world_size > 1:
            dist.destroy_process_group()


def _train(args: argparse.Namespace, argv, rank: int, world_size: int) -> dict:
    """Train as `args` say; under torchrun, as process `rank` of `world_size`."""
    lead = rank == 0  # the one process that prints and writes files
    say = print if lead else (lambda *a, **k: None)
    out = args.out or Path("runs") / dataset_info(args.dataset).name
    checkpoint, run_file = out / "checkpoint.pt", out / "run.json"
    if args.resume:
        try:
            state = load_checkpoint(checkpoint)
        except CheckpointError as e:
            sys.exit(f"error: cannot resume: {e}")
        # The same data as before the stop: the run's dataset, share of it, batches, model kind.
        if run_file.exists():
            vars(args).update(json.loads(run_file.read_text()))
        args.model = "cnn" if state.get("architecture") == "cnn" else "vit"
    _check_combinations(args)
    if args.batch_size is None:  # (a resumed run keeps its own, from run.json)
        on_gpu = pick_device(args.device).type == "cuda"
        args.batch_size = (GPU_BATCH if on_gpu else CPU_BATCH) * world_size
    model_config, train_config = build(args)
    if args.resume:
        model_config = build_model(args.model, state["model_config"]).config
        stored = state["train_config"]
        if args.epochs or args.minutes:  # asked to train longer than first planned
            stored.update(epochs=args.epochs or stored["epochs"], minutes=args.minutes)
        train_config = TrainConfig(**stored)
    elif lead:
        out.mkdir(parents=True, exist_ok=True)
        run = {name: getattr(args, name) for name in RUN_ARGS}
        run.update({k: str(v) for k, v in run.items() if isinstance(v, Path)})
        run_file.write_text(json.dumps(run, indent=2))
    if quick_mode():
        say("quick mode: a small subset of the data")
    if args.batch_size % world_size:
        raise SystemExit(
            f"error: --batch-size {args.batch_size} is the batch of all {world_size} processes "
            f"together; give a multiple of {world_size}"
        )

    torch.manual_seed(train_config.seed)
    loaders = make_loaders(
        args.dataset,
        batch_size=args.batch_size // world_size,
        rank=rank,
        world_size=world_size,
        augment=not args.no_augment,
        seed=train_config.seed,
        device=args.device,
        on_device=pick_device(args.device).type == "cuda",  # the data stays on the GPU
        fraction=args.fraction,
        val_size=args.val_size,
    )
    architecture = "deit" if args.teacher else args.model
    model = build_model(architecture, dataclasses.asdict(model_config))
    if args.init and not args.resume:
        start_from(model, args.init, args.freeze)
    elif args.freeze:  # a resumed linear probe: the same parameters train as before the stop
        start_from(model, checkpoint, freeze=True)
    callbacks = [ProgressCallback(), CheckpointCallback(checkpoint)] if lead else []
    if args.model == "vit" and lead:  # a CNN has no attention maps to draw
        samples = torch.stack([loaders.val.dataset[i][0] for i in range(4)])
        callbacks.append(
            LivePlot(
                samples,
                denormalize(samples, loaders.info.name),
                every_seconds=float("inf"),
                png=out / "attention.png",
                show=False,
            )
        )
    teacher = None
    if args.teacher:
        try:
            teacher = load_model(args.teacher)
        except CheckpointError as e:
            raise SystemExit(f"error: --teacher: {e}") from None
        trainer = DistillationTrainer(
            model,
            loaders,
            train_config,
            teacher,
            args.distillation,
            args.alpha,
            args.tau,
            callbacks=callbacks,
            device=args.device,
            precision=args.precision,
            compile=args.compile,
        )
    else:
        trainer = Trainer(
            model,
            loaders,
            train_config,
            callbacks=callbacks,
            device=args.device,
            precision=args.precision,
            compile=args.compile,
        )
    if args.resume:
        trainer.resume(checkpoint)
        say(f"resuming {checkpoint} after epoch {trainer.epoch} ({trainer.elapsed:.0f}s trained)")
    if args.model == "vit":
        shape = f"ViT, {model_config.depth} blocks, width {model_config.dim}, "
        if model_config.stem_channels:
            shape += (
                f"stem {','.join(map(str, model_config.stem_channels))} stride "
                f"{model_config.stem_stride}, "
            )
        shape += f"{model_config.grid_size}x{model_config.grid_size} patches"
    else:
        shape = f"CNN, widths {model_config.widths}, convolutions {model_config.depths}"
    if args.init:
        shape += f", starting from {args.init}" + (
            " (frozen: the head alone trains)" if args.freeze else ""
        )
    if teacher is not None:
        shape = f"DeiT {shape} with a distillation token, {args.distillation} distillation from {args.teacher}"
    precision = {None: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
    say(
        f"{shape}: {model.num_parameters():,} parameters that train; "
        f"{len(loaders.train.dataset):,} training images; device {trainer.device}, "
        f"{precision[trainer.amp_dtype]}, batch {args.batch_size}, peak lr {train_config.lr:.2g}"
        + (
            f", {world_size} processes of {args.batch_size // world_size} images a step each"
            if world_size > 1
            else ""
        )
        + (", compiled" if args.compile else "")
    )
    start = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - start
    if trainer.interrupted and world_size > 1:
        # Each process stopped at its own point: no more steps or measurements together.
        say(f"stopped early; resume with: torchrun ... -m vitcourse.train --out {out} --resume")
        return {"interrupted": True, "world_size": world_size}
    if trainer.interrupted:
        say(f"stopped early; resume with: python -m vitcourse.train --out {out} --resume")
    test = evaluate(trainer.model, loaders.test, trainer.device)
    metrics = {
        "dataset": loaders.info.name,
        "architecture": architecture,
        "fraction": args.fraction,
        "init": str(args.init) if args.init else None,
        "freeze": args.freeze,
        "train_images": len(loaders.train.dataset),
        "world_size": world_size,
        "batch_size": args.batch_size,
        "device": str(trainer.device),
        "precision": precision[trainer.amp_dtype],
        "compiled": args.compile,
        "model_config": dataclasses.asdict(model_config),
        "train_config": dataclasses.asdict(train_config),
        "parameters": model.num_parameters(),
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
            for i, name in enumerate(loaders.info.classes)
        },
        "confusion": test["confusion"].tolist(),
        "interrupted": trainer.interrupted,
        "wall_seconds_this_run": seconds,
    }
    if teacher is not None:
        # A budget comparison must count the teacher's training too.
        facts = load_checkpoint(args.teacher)
        metrics["teacher"] = {
            "path": str(args.teacher),
            "architecture": teacher.architecture,
            "test_acc": evaluate(teacher, loaders.test, trainer.device)["acc"],
            "train_seconds": facts.get("train_seconds"),
            "distillation": trainer.kind,
            "alpha": trainer.alpha,
            "tau": trainer.tau,
        }
    if not lead:
        return metrics  # the first process writes the files
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    save_model(
        trainer.model,
        out / "model.pt",
        test_acc=test["acc"],
        command=" ".join(["python -m vitcourse.train", *(sys.argv[1:] if argv is None else argv)]),
        epochs=trainer.history.epochs,
        train_config=dataclasses.asdict(train_config),
        train_seconds=trainer.elapsed,
    )
    if teacher is not None:
        t = metrics["teacher"]
        minutes = f"{t['train_seconds'] / 60:.1f} minutes" if t["train_seconds"] else "unknown time"
        print(
            f"the teacher: {100 * t['test_acc']:.2f}% test accuracy, trained for {minutes}; "
            f"the student trained {trainer.elapsed / 60:.1f} minutes"
        )
    print(
        f"test accuracy {100 * test['acc']:.2f}% on {metrics['test_images']:,} images; wrote {out}/"
    )
    return metrics


if __name__ == "__main__":
    main()
