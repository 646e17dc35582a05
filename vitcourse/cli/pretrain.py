"""Pre-train the course's ViT without labels, by masked-patch prediction (notebook 09).

    python -m vitcourse.pretrain --dataset fashion-mnist --minutes 5 --out runs/mae
    python -m vitcourse.pretrain --out runs/mae --resume          # continue an interrupted run
    python -m vitcourse.train --init runs/mae/model.pt --fraction 0.01 --minutes 2   # fine-tune

Writes OUT/run.json (the data, which --resume reuses), OUT/checkpoint.pt (the whole masked
autoencoder and the training state, after every epoch and on Ctrl-C), OUT/metrics.json (per-epoch
reconstruction losses), OUT/reconstructions.png (original, what the encoder saw, reconstruction)
and OUT/model.pt: the encoder alone, a plain ViT for `vitcourse.checkpoints.load_model` and for
`python -m vitcourse.train --init`. The encoder is the dataset's pure ViT (`vit_preset` in
`vitcourse.data.datasets`) unless --preset says otherwise. The labels are never read. Quick mode
(VITCOURSE_QUICK=1) shrinks the data and the default length to one epoch.

The run is settled once, before it starts: `plan` makes a frozen `PretrainRun` from the arguments
and, on --resume, from the run folder (`vitcourse.cli.runs`, which `python -m vitcourse.train`
writes the same way: run.json's settings, the checkpoint's model and recipe).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from vitcourse.cli import runs
from vitcourse.cli.runs import RunFolder, command_line, resumed_train_config, run_length
from vitcourse.data.loading import dataset_info, denormalize, make_loaders
from vitcourse.environment import pick_device
from vitcourse.language import _, number
from vitcourse.mae import MAEConfig, MaskedAutoencoder
from vitcourse.presets import PRESETS, preset_for
from vitcourse.training.loop import TrainConfig
from vitcourse.training.pretraining import PRETRAIN_RECIPE, PretrainTrainer, plot_reconstructions


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


# What run.json keeps and --resume takes back from it (the file's key names).
RUN_ARGS = ("dataset", "batch_size", "no_augment")


@dataclass(frozen=True)
class PretrainRun:
    """One run of `python -m vitcourse.pretrain`, settled before it starts (`plan` makes it)."""

    folder: RunFolder  # OUT: run.json, checkpoint.pt, metrics.json, reconstructions.png, model.pt
    resume: bool  # continue the checkpoint in the folder
    dataset: str  # the dataset's name as given (run.json's on --resume)
    # the encoder (a pure ViT) and the decoder; a resumed run's: its checkpoint's
    model_config: MAEConfig
    train_config: TrainConfig  # length, learning rate, seed, ...
    batch_size: int  # images per step
    no_augment: bool  # True: no random crops and flips
    device: torch.device  # where it trains
    command: str = "python -m vitcourse.pretrain"  # the command line, recorded in model.pt

    lead = True  # one process: it writes the run folder (`TrainRun.lead` under torchrun)

    def settings(self) -> dict:
        """What run.json holds."""
        return {name: getattr(self, name) for name in RUN_ARGS}


def plan(args: argparse.Namespace, argv: list[str] | None = None) -> PretrainRun:
    """The run `args` ask for; on --resume, run.json's settings and the checkpoint's model and
    recipe stand."""
    info = dataset_info(args.dataset)
    folder = RunFolder(args.out or Path("runs") / f"mae-{info.name}")
    given = {name: getattr(args, name) for name in RUN_ARGS}
    if args.resume:
        state, settings = folder.resume(given)
        if state.get("architecture") != MaskedAutoencoder.architecture:
            raise SystemExit(
                _("error: cannot resume: {checkpoint} is not a pre-training run").format(
                    checkpoint=folder.checkpoint
                )
            )
        config = MAEConfig(**state["model_config"])
        train_config = resumed_train_config(state, args.epochs, args.minutes)
    else:
        settings = given
        try:
            config = MAEConfig(
                encoder=preset_for(info.name, args.preset),
                decoder_dim=args.decoder_dim,
                decoder_depth=args.decoder_depth,
                mask_ratio=args.mask_ratio,
            )
        except ValueError as e:
            raise SystemExit(f"error: {e}") from None
        train_config = dataclasses.replace(
            PRETRAIN_RECIPE,
            **run_length(args.epochs, args.minutes, default_epochs=10),
            lr=args.lr,
            weight_decay=args.weight_decay,
            seed=args.seed,
        )
    return PretrainRun(
        **settings,
        folder=folder,
        resume=args.resume,
        model_config=config,
        train_config=train_config,
        device=pick_device(args.device),
        command=command_line("python -m vitcourse.pretrain", argv),
    )


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # started by torchrun with several processes
        raise SystemExit(
            _(
                "error: pre-training runs in one process; several processes (torchrun) would each "
                "pre-train alone and write the same files. Run {command} instead"
            ).format(command="python -m vitcourse.pretrain")
        )
    return _pretrain(plan(args, argv))


def _pretrain(run: PretrainRun) -> dict:
    """Pre-train as `run` says, and write the run folder."""
    runs.begin(run)
    info = dataset_info(run.dataset)
    loaders = make_loaders(
        info.name,
        batch_size=run.batch_size,
        augment=not run.no_augment,
        seed=run.train_config.seed,
        device=run.device,
        on_device=run.device.type == "cuda",  # the data stays on the GPU
    )
    model = MaskedAutoencoder(run.model_config)
    trainer = PretrainTrainer(
        model, loaders, run.train_config, callbacks=run.folder.callbacks(), device=run.device
    )
    seconds = runs.fit(run, trainer, lambda: _describe(run, model, loaders, trainer))
    if trainer.interrupted:
        print(run.folder.stopped_early("python -m vitcourse.pretrain"))
    _draw_reconstructions(trainer.model, loaders, info.name, run.folder.path)
    metrics = _metrics(run, trainer, loaders, seconds)
    run.folder.write_results(
        metrics,
        trainer.model.encoder,
        pretrained="masked-patch prediction",
        command=run.command,
        train_seconds=trainer.elapsed,
        val_loss=metrics["val_loss"],
    )
    print(
        _(
            "reconstruction loss {loss:.4f} on the validation images (hidden patches, normalised "
            "pixels); wrote {folder}/ (the encoder: {encoder})"
        ).format(loss=metrics["val_loss"], folder=run.folder.path, encoder=run.folder.model_file)
    )
    return metrics


def _describe(run: PretrainRun, model: MaskedAutoencoder, loaders, trainer) -> str:
    """The line that says what trains, on what."""
    config, e = run.model_config, run.model_config.encoder  # e: the encoder's sizes
    return _(
        "masked autoencoder: a ViT encoder ({depth} blocks, width {dim}, {side}x{side} patches), "
        "{parameters} parameters with the decoder; {percent}% of the patches hidden; "
        "{images} images, no labels; device {device}"
    ).format(
        depth=e.depth,
        dim=e.dim,
        side=e.grid_size,
        parameters=number(model.num_parameters()),
        percent=round(100 * config.mask_ratio),
        images=number(len(loaders.train.dataset)),
        device=trainer.device,
    )


def _draw_reconstructions(model: MaskedAutoencoder, loaders, name: str, out: Path) -> None:
    """OUT/reconstructions.png: eight validation images, what the encoder saw, the rebuilt ones."""
    samples = torch.stack([loaders.val.dataset[i][0] for i in range(8)])
    figure = plot_reconstructions(
        model, samples, denormalize(samples, name), lambda x: denormalize(x, name)
    )
    figure.savefig(out / "reconstructions.png", dpi=120)
    plt.close(figure)


def _metrics(run: PretrainRun, trainer: PretrainTrainer, loaders, seconds: float) -> dict:
    """metrics.json: the run, the model, and the reconstruction loss of every epoch."""
    epochs = trainer.history.epochs
    return {
        "dataset": loaders.info.name,
        "architecture": MaskedAutoencoder.architecture,
        "train_images": len(loaders.train.dataset),
        "model_config": dataclasses.asdict(run.model_config),
        "train_config": dataclasses.asdict(run.train_config),
        "parameters": trainer.model.num_parameters(),
        "encoder_parameters": trainer.model.encoder.num_parameters(),
        "epochs": epochs,
        "train_seconds": trainer.elapsed,
        "val_loss": epochs[-1]["val_loss"] if epochs else None,
        "interrupted": trainer.interrupted,
        "wall_seconds_this_run": seconds,
    }


if __name__ == "__main__":
    main()
