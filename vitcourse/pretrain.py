"""Pre-train the course's ViT without labels, by masked-patch prediction (notebook 09).

    python -m vitcourse.pretrain --dataset fashion-mnist --minutes 5 --out runs/mae
    python -m vitcourse.pretrain --out runs/mae --resume          # continue an interrupted run
    python -m vitcourse.train --init runs/mae/model.pt --fraction 0.01 --minutes 2   # fine-tune

Writes OUT/run.json (the data, which --resume reuses), OUT/checkpoint.pt (the whole masked
autoencoder and the training state, after every epoch and on Ctrl-C), OUT/metrics.json (per-epoch
reconstruction losses), OUT/reconstructions.png (original, what the encoder saw, reconstruction)
and OUT/model.pt: the encoder alone, a plain ViT for `vitcourse.checkpoints.load_model` and for
`python -m vitcourse.train --init`. The encoder is the dataset's pure ViT (`vit_preset` in
`vitcourse.data`) unless --preset says otherwise. The labels are never read. Quick mode
(VITCOURSE_QUICK=1) shrinks the data and the default length to one epoch.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from vitcourse.checkpoints import CheckpointError, load_checkpoint, save_model
from vitcourse.data import dataset_info, denormalize, make_loaders
from vitcourse.environment import pick_device, quick_mode
from vitcourse.pretraining import (
    PRETRAIN_RECIPE,
    MAEConfig,
    MaskedAutoencoder,
    PretrainTrainer,
    plot_reconstructions,
)
from vitcourse.training import CheckpointCallback, ProgressCallback, TrainConfig
from vitcourse.vit import PRESETS, preset_for


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m vitcourse.pretrain", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--dataset", default="fashion-mnist", help="default fashion-mnist")
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--epochs", type=int, help="passes over the images (default 10)")
    length.add_argument("--minutes", type=float, help="a time budget instead of epochs")
    parser.add_argument("--out", type=Path, help="output folder (default runs/mae-DATASET)")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        help="the encoder, a pure ViT (default: the dataset's vit_preset)",
    )
    parser.add_argument(
        "--mask-ratio",
        type=float,
        default=MAEConfig.mask_ratio,
        help=f"share of the patches hidden (default {MAEConfig.mask_ratio})",
    )
    parser.add_argument("--decoder-dim", type=int, default=MAEConfig.decoder_dim)
    parser.add_argument("--decoder-depth", type=int, default=MAEConfig.decoder_depth)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=PRETRAIN_RECIPE.lr)
    parser.add_argument("--weight-decay", type=float, default=PRETRAIN_RECIPE.weight_decay)
    parser.add_argument("--no-augment", action="store_true", help="no random crops and flips")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", help="cpu, cuda, mps (default: picked automatically)")
    return parser.parse_args(argv)


RUN_ARGS = ("dataset", "batch_size", "no_augment")


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # started by torchrun with several processes
        raise SystemExit(
            "error: pre-training runs in one process; several processes (torchrun) would each "
            "pre-train alone and write the same files. Run python -m vitcourse.pretrain instead"
        )
    info = dataset_info(args.dataset)
    out = args.out or Path("runs") / f"mae-{info.name}"
    checkpoint, run_file = out / "checkpoint.pt", out / "run.json"
    if args.resume:
        try:
            state = load_checkpoint(checkpoint)
        except CheckpointError as e:
            sys.exit(f"error: cannot resume: {e}")
        if state.get("architecture") != MaskedAutoencoder.architecture:
            sys.exit(f"error: cannot resume: {checkpoint} is not a pre-training run")
        if run_file.exists():
            vars(args).update(json.loads(run_file.read_text()))
        info = dataset_info(args.dataset)
        config = MAEConfig(**state["model_config"])
        stored = state["train_config"]
        if args.epochs or args.minutes:  # asked to train longer than first planned
            stored.update(epochs=args.epochs or stored["epochs"], minutes=args.minutes)
        train_config = TrainConfig(**stored)
    else:
        try:
            config = MAEConfig(
                encoder=preset_for(info.name, args.preset),
                decoder_dim=args.decoder_dim,
                decoder_depth=args.decoder_depth,
                mask_ratio=args.mask_ratio,
            )
        except ValueError as e:
            raise SystemExit(f"error: {e}") from None
        default_epochs = 1 if quick_mode() else 10
        length = (
            {"minutes": args.minutes} if args.minutes else {"epochs": args.epochs or default_epochs}
        )
        train_config = dataclasses.replace(
            PRETRAIN_RECIPE, **length, lr=args.lr, weight_decay=args.weight_decay, seed=args.seed
        )
        out.mkdir(parents=True, exist_ok=True)
        run_file.write_text(json.dumps({name: getattr(args, name) for name in RUN_ARGS}, indent=2))
    if quick_mode():
        print("quick mode: a small subset of the data")

    torch.manual_seed(train_config.seed)
    loaders = make_loaders(
        info.name,
        batch_size=args.batch_size,
        augment=not args.no_augment,
        seed=train_config.seed,
        device=args.device,
        on_device=pick_device(args.device).type == "cuda",  # the data stays on the GPU
    )
    model = MaskedAutoencoder(config)
    callbacks = [ProgressCallback(), CheckpointCallback(checkpoint)]
    trainer = PretrainTrainer(model, loaders, train_config, callbacks=callbacks, device=args.device)
    if args.resume:
        trainer.resume(checkpoint)
        print(f"resuming {checkpoint} after epoch {trainer.epoch} ({trainer.elapsed:.0f}s trained)")
    e = config.encoder
    print(
        f"masked autoencoder: a ViT encoder ({e.depth} blocks, width {e.dim}, {e.grid_size}x"
        f"{e.grid_size} patches), {model.num_parameters():,} parameters with the decoder; "
        f"{round(100 * config.mask_ratio)}% of the patches hidden; "
        f"{len(loaders.train.dataset):,} images, no labels; device {trainer.device}"
    )
    start = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - start
    if trainer.interrupted:
        print(f"stopped early; resume with: python -m vitcourse.pretrain --out {out} --resume")
    samples = torch.stack([loaders.val.dataset[i][0] for i in range(8)])
    figure = plot_reconstructions(
        trainer.model, samples, denormalize(samples, info.name), lambda x: denormalize(x, info.name)
    )
    figure.savefig(out / "reconstructions.png", dpi=120)
    plt.close(figure)
    metrics = {
        "dataset": info.name,
        "architecture": MaskedAutoencoder.architecture,
        "train_images": len(loaders.train.dataset),
        "model_config": dataclasses.asdict(config),
        "train_config": dataclasses.asdict(train_config),
        "parameters": model.num_parameters(),
        "encoder_parameters": model.encoder.num_parameters(),
        "epochs": trainer.history.epochs,
        "train_seconds": trainer.elapsed,
        "val_loss": trainer.history.epochs[-1]["val_loss"] if trainer.history.epochs else None,
        "interrupted": trainer.interrupted,
        "wall_seconds_this_run": seconds,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    save_model(
        trainer.model.encoder,
        out / "model.pt",
        pretrained="masked-patch prediction",
        command=" ".join(
            ["python -m vitcourse.pretrain", *(sys.argv[1:] if argv is None else argv)]
        ),
        train_seconds=trainer.elapsed,
        val_loss=metrics["val_loss"],
    )
    print(
        f"reconstruction loss {metrics['val_loss']:.4f} on the validation images (hidden patches,"
        f" normalised pixels); wrote {out}/ (the encoder: {out / 'model.pt'})"
    )
    return metrics


if __name__ == "__main__":
    main()
