"""Train the course's ViT from the command line.

    python -m vitcourse.train --dataset fashion-mnist --minutes 10 --out runs/fashion
    python -m vitcourse.train --out runs/fashion --resume        # continue an interrupted run

Writes OUT/checkpoint.pt (after every epoch and on Ctrl-C), OUT/metrics.json (per-epoch losses
and accuracies, the final test accuracy, per-class precision/recall/F1, the confusion matrix),
OUT/attention.png (curves and attention maps of a few validation images) and OUT/model.pt (the
trained model alone, for `vitcourse.training.load_model`). In quick mode
(VITCOURSE_QUICK=1) it trains one epoch on a small subset: seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

from vitcourse.data import dataset_info, make_loaders
from vitcourse.environment import quick_mode
from vitcourse.live import LivePlot
from vitcourse.training import (
    CheckpointCallback,
    CheckpointError,
    ProgressCallback,
    TrainConfig,
    Trainer,
    evaluate,
    load_checkpoint,
    save_model,
)
from vitcourse.vit import PRESETS, VisionTransformer, ViTConfig, preset

DEFAULT_PRESET = {
    "fashion-mnist": "course-28/7",
    "mnist": "course-28/7",
    "cifar10": "course-32/4",
    "cifar100": "course-32/4",
}


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
        "--epochs", type=int, help=f"passes over the data (default {TrainConfig.epochs})"
    )
    length.add_argument("--minutes", type=float, help="a time budget instead of epochs")
    parser.add_argument("--out", type=Path, help="output folder (default runs/DATASET)")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        help="model size (default: the course model for the dataset)",
    )
    parser.add_argument("--patch-size", type=int, help="override the preset's patch size")
    parser.add_argument("--dim", type=int, help="override the preset's width D")
    parser.add_argument("--depth", type=int, help="override the preset's number of blocks")
    parser.add_argument("--heads", dest="num_heads", type=int, help="override the preset's heads")
    parser.add_argument("--mlp-dim", type=int, help="override the preset's MLP width")
    parser.add_argument("--pool", choices=["cls", "mean"], help="override the preset's pooling")
    parser.add_argument("--drop-path", type=float, help="stochastic depth rate of the last block")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=TrainConfig.lr)
    parser.add_argument("--weight-decay", type=float, default=TrainConfig.weight_decay)
    parser.add_argument("--warmup", type=float, default=TrainConfig.warmup)
    parser.add_argument("--label-smoothing", type=float, default=TrainConfig.label_smoothing)
    parser.add_argument(
        "--no-augment", action="store_true", help="train without random crops and flips"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", help="cpu, cuda, mps (default: picked automatically)")
    return parser.parse_args(argv)


def build(args: argparse.Namespace) -> tuple[ViTConfig, TrainConfig]:
    """The model and training configs the arguments ask for."""
    info = dataset_info(args.dataset)
    changes = {
        "num_classes": len(info.classes),
        "in_channels": info.channels,
        "image_size": info.image_size,
    }
    for name in ("patch_size", "dim", "depth", "num_heads", "mlp_dim", "pool", "drop_path"):
        if getattr(args, name) is not None:
            changes[name] = getattr(args, name)
    model_config = preset(args.preset or DEFAULT_PRESET[info.name], **changes)
    length = (
        {"minutes": args.minutes} if args.minutes else {"epochs": args.epochs or TrainConfig.epochs}
    )
    train_config = TrainConfig(
        **length,
        lr=args.lr,
        weight_decay=args.weight_decay,
        warmup=args.warmup,
        label_smoothing=args.label_smoothing,
        seed=args.seed,
    )
    return model_config, train_config


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    out = args.out or Path("runs") / dataset_info(args.dataset).name
    checkpoint = out / "checkpoint.pt"
    model_config, train_config = build(args)
    if args.resume:
        try:
            state = load_checkpoint(checkpoint)
        except CheckpointError as e:
            sys.exit(f"error: cannot resume: {e}")
        model_config = ViTConfig(**state["model_config"])
        stored = state["train_config"]
        if args.epochs or args.minutes:  # asked to train longer than first planned
            stored.update(epochs=args.epochs or stored["epochs"], minutes=args.minutes)
        train_config = TrainConfig(**stored)
    if quick_mode():
        train_config = dataclasses.replace(train_config, epochs=1, minutes=None)
        print("quick mode: one epoch on a small subset")

    torch.manual_seed(train_config.seed)
    loaders = make_loaders(
        args.dataset,
        batch_size=args.batch_size,
        augment=not args.no_augment,
        seed=train_config.seed,
        device=args.device,
    )
    model = VisionTransformer(model_config)
    samples = torch.stack([loaders.val.dataset[i][0] for i in range(4)])
    from vitcourse.data import denormalize

    live = LivePlot(
        samples,
        denormalize(samples, loaders.info.name),
        every_seconds=float("inf"),
        png=out / "attention.png",
        show=False,
    )
    trainer = Trainer(
        model,
        loaders,
        train_config,
        callbacks=[ProgressCallback(), CheckpointCallback(checkpoint), live],
        device=args.device,
    )
    if args.resume:
        trainer.resume(checkpoint)
        print(f"resuming {checkpoint} after epoch {trainer.epoch} ({trainer.elapsed:.0f}s trained)")
    print(
        f"{model_config.depth} blocks, width {model_config.dim}, patch {model_config.patch_size}: "
        f"{model.num_parameters():,} parameters; {len(loaders.train.dataset):,} training images; "
        f"device {trainer.device}"
    )
    start = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - start
    if trainer.interrupted:
        print(f"stopped early; resume with: python -m vitcourse.train --out {out} --resume")
    test = evaluate(trainer.model, loaders.test, trainer.device)
    metrics = {
        "dataset": loaders.info.name,
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
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    save_model(
        trainer.model,
        out / "model.pt",
        test_acc=test["acc"],
        command=" ".join(["python -m vitcourse.train", *(sys.argv[1:] if argv is None else argv)]),
        epochs=trainer.history.epochs,
        train_config=dataclasses.asdict(train_config),
    )
    print(
        f"test accuracy {100 * test['acc']:.2f}% on {metrics['test_images']:,} images; wrote {out}/"
    )
    return metrics


if __name__ == "__main__":
    main()
