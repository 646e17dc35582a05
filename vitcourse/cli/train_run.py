"""The run `python -m vitcourse.train` trains, settled once before it starts (notebooks 06-09).

`plan` makes a frozen `TrainRun` from the parsed arguments and, on --resume, from the run folder
(`vitcourse.cli.runs`: run.json's settings, the checkpoint's model and recipe). Every default that
depends on another value is resolved there: the batch per process, the learning rate scaled to
it, the dataset (a folder of your own images: with run.json's size and statistics on --resume),
its preset (or --init's ViT), the device. Nothing changes the run afterwards; it
builds its pieces (`TrainRun.loaders`, `new_model`, `new_trainer`), and `vitcourse.cli.train`, the
command line, runs them.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from vitcourse.checkpoints import CheckpointError, build_model, load_model
from vitcourse.cli.fine_tuning import init_config, start_from
from vitcourse.cli.runs import RunFolder, command_line, resumed_train_config, run_length
from vitcourse.cnn import CNNConfig, cnn_preset_for
from vitcourse.data.datasets import DatasetInfo
from vitcourse.data.folders import folder_name, is_image_folder, kept_info, kept_settings
from vitcourse.data.loading import Loaders, dataset_info, denormalize, make_loaders
from vitcourse.environment import pick_device
from vitcourse.language import _
from vitcourse.live import LivePlot
from vitcourse.presets import preset_for
from vitcourse.training.distillation import DistillationTrainer
from vitcourse.training.loop import TrainConfig, Trainer
from vitcourse.vit import ViTConfig

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


# What run.json keeps and --resume takes back from it, so an interrupted run continues on the
# same data. Its key names are the file's: runs written before stay readable.
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
# The options that size a ViT: --model cnn refuses them all, --init all but --pool and --drop-path.
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


@dataclass(frozen=True)
class TrainRun:
    """One run of `python -m vitcourse.train`, settled before it starts (`plan` makes it)."""

    folder: RunFolder  # OUT: run.json, checkpoint.pt, metrics.json, attention.png, model.pt
    resume: bool  # continue the checkpoint in the folder
    dataset: str  # the dataset's name as given, a folder's full path (run.json's on --resume)
    info: DatasetInfo  # its entry; a folder's with its size, classes and statistics (run.json's)
    model: str  # "vit" or "cnn" (a resumed run's: its checkpoint's)
    model_config: ViTConfig | CNNConfig  # the preset (and overrides), --init's, the checkpoint's
    train_config: TrainConfig  # length, peak lr (scaled to the batch unless given), seed, ...
    fraction: float  # the share of the training images trained on
    val_size: int  # training images held out for validation
    batch_size: int  # images per step, all processes together
    no_augment: bool  # True: no random crops and flips
    init: Path | None  # the ViT (or pre-training run) whose weights the model starts from
    freeze: bool  # with init: the new head alone trains (a linear probe)
    teacher: Path | None  # the trained model distilled into a DeiT student
    distillation: str  # "hard" or "soft"
    alpha: float | None  # weight of the teacher's loss (None: DeiT's for the kind)
    tau: float | None  # soft distillation's temperature (None: DeiT's)
    device: torch.device  # where this process trains
    precision: str  # "auto", "fp32", "bf16" or "fp16"
    compile: bool  # torch.compile the model
    tensorboard: bool = False  # also write TensorBoard event files into the folder
    export: str | None = None  # "transformers": also write the model in that format
    rank: int = 0  # this process's place under torchrun; 0 prints and writes the files
    world_size: int = 1  # how many processes train together
    command: str = "python -m vitcourse.train"  # the command line, recorded in model.pt

    @property
    def lead(self) -> bool:
        """True for the one process that prints and writes files."""
        return self.rank == 0

    @property
    def architecture(self) -> str:
        """The kind of model trained: "vit", "cnn", or "deit" (a ViT student of a teacher)."""
        return "deit" if self.teacher else self.model

    def settings(self) -> dict:
        """What run.json holds; for a folder of your own images, also the size, classes and
        statistics it is read with, which --resume and a later evaluation take back."""
        settings = {name: getattr(self, name) for name in RUN_ARGS}
        if self.info.folder is not None:
            settings["image_folder"] = kept_settings(self.info)
        return settings

    def loaders(self) -> Loaders:
        """This process's share of the data: the run's dataset, fraction and batches."""
        return make_loaders(
            self.info,
            batch_size=self.batch_size // self.world_size,
            rank=self.rank,
            world_size=self.world_size,
            augment=not self.no_augment,
            seed=self.train_config.seed,
            device=self.device,
            on_device=self.device.type == "cuda",  # the data stays on the GPU
            fraction=self.fraction,
            val_size=self.val_size,
        )

    def new_model(self) -> nn.Module:
        """A new model of the run's kind, with --init's weights (and --freeze) where asked."""
        model = build_model(self.architecture, dataclasses.asdict(self.model_config))
        if self.init and not self.resume:
            start_from(model, self.init, self.freeze)
        elif self.freeze:  # a resumed linear probe: the same parameters train as before the stop
            start_from(model, self.folder.checkpoint, freeze=True)
        return model

    def new_trainer(self, model: nn.Module, loaders: Loaders) -> Trainer:
        """The trainer, with the lead process's callbacks; a `DistillationTrainer` for --teacher."""
        callbacks = self.folder.callbacks() if self.lead else []
        if self.model == "vit" and self.lead:  # a CNN has no attention maps to draw
            shown = range(min(4, len(loaders.val.dataset)))  # a small folder may hold out fewer
            samples = torch.stack([loaders.val.dataset[i][0] for i in shown])
            plot = LivePlot(
                samples,
                denormalize(samples, loaders.info),
                every_seconds=float("inf"),
                png=self.folder.path / "attention.png",
                show=False,
            )
            callbacks.append(plot)
        if self.tensorboard and self.lead:  # a CNN: the scalars only
            callbacks.append(self.folder.tensorboard(loaders))
        common = dict(
            callbacks=callbacks, device=self.device, precision=self.precision, compile=self.compile
        )
        if not self.teacher:
            return Trainer(model, loaders, self.train_config, **common)
        try:
            teacher = load_model(self.teacher)
        except CheckpointError as e:
            raise SystemExit(f"error: --teacher: {e}") from None
        return DistillationTrainer(
            model,
            loaders,
            self.train_config,
            teacher,
            self.distillation,
            self.alpha,
            self.tau,
            **common,
        )


def plan(
    args: argparse.Namespace,
    rank: int = 0,
    world_size: int = 1,
    device: str | None = None,
    argv: list[str] | None = None,
) -> TrainRun:
    """The run `args` ask for, as process `rank` of `world_size` on `device` (where torchrun put
    it; None: --device's). On --resume, run.json's settings and the checkpoint's model and recipe
    stand. Refuses, saying why, options that do not go together."""
    folder = RunFolder(args.out or Path("runs") / _dataset_name(args.dataset))
    given = {**{name: getattr(args, name) for name in RUN_ARGS}, "image_folder": None}
    state, settings = folder.resume(given) if args.resume else (None, given)
    info = _dataset(settings, args.image_size)
    if state is not None:  # the kind of model the checkpoint holds, whatever run.json says
        settings["model"] = "cnn" if state.get("architecture") == "cnn" else "vit"
    _check_combinations(settings)
    device = pick_device(device or args.device)
    if settings["batch_size"] is None:  # (a resumed run keeps its own, from run.json)
        per_process = GPU_BATCH if device.type == "cuda" else CPU_BATCH
        settings["batch_size"] = per_process * world_size
    model_config = _model_config(args, settings, info)
    train_config = _train_config(args, settings["batch_size"])
    if state is not None:
        config_class = CNNConfig if settings["model"] == "cnn" else ViTConfig
        model_config = config_class(**state["model_config"])
        train_config = resumed_train_config(state, args.epochs, args.minutes)
    if settings["batch_size"] % world_size:
        raise SystemExit(
            _(
                "error: --batch-size {batch} is the batch of all {processes} processes together; "
                "give a multiple of {processes}"
            ).format(batch=settings["batch_size"], processes=world_size)
        )
    paths = {n: Path(settings[n]) for n in ("init", "teacher") if settings[n] is not None}
    return TrainRun(
        **{**settings, **paths},
        info=info,
        folder=folder,
        resume=args.resume,
        model_config=model_config,
        train_config=train_config,
        device=device,
        precision=args.precision,
        compile=args.compile,
        tensorboard=args.tensorboard,
        export=args.export,
        rank=rank,
        world_size=world_size,
        command=command_line("python -m vitcourse.train", argv),
    )


def _dataset_name(dataset: str) -> str:
    """The dataset's name, for the default run folder (runs/NAME), without reading a folder."""
    try:
        return folder_name(dataset) if is_image_folder(dataset) else dataset_info(dataset).name
    except ValueError as e:  # an unknown name
        raise SystemExit(f"error: {e}") from None


def _dataset(settings: dict, image_size: int | None) -> DatasetInfo:
    """The run's dataset. A folder's is read at --image-size, or on --resume with the size and
    statistics of run.json's "image_folder" (taken out of `settings`); its path is then kept
    whole in `settings`, so the run resumes from any working directory."""
    kept, dataset = settings.pop("image_folder"), settings["dataset"]
    try:
        if kept is not None:
            info = kept_info(dataset, kept)
        elif image_size is not None and not is_image_folder(dataset):
            info = dataset_info(dataset)
            raise SystemExit(
                _(
                    "error: --image-size resizes a folder of your own images; {dataset}'s are "
                    "{size} x {size}"
                ).format(dataset=info.name, size=info.image_size)
            )
        else:
            info = dataset_info(dataset, image_size)
    except ValueError as e:  # an unknown name; a folder that cannot be a dataset says why
        raise SystemExit(f"error: {e}") from None
    if info.folder is not None:
        settings["dataset"] = str(info.folder)
    return info


def folder_line(info: DatasetInfo) -> str:
    """What was read from a folder of your own images, and how it is normalised (the line
    `python -m vitcourse.train` prints)."""
    classes = ", ".join(info.classes[:8]) + (", ..." if info.classes[8:] else "")
    numbers = ", ".join(f"{m:.3f}/{s:.3f}" for m, s in zip(info.mean, info.std, strict=True))
    channels = _("{count} channels") if info.channels > 1 else _("{count} channel")
    return _(
        "{folder}: {count} classes ({classes}), {size} x {size} pixels, {channels}, mean/std "
        "{numbers} (kept in run.json)"
    ).format(
        folder=info.folder,
        count=len(info.classes),
        classes=classes,
        size=info.image_size,
        channels=channels.format(count=info.channels),
        numbers=numbers,
    )


def _check_combinations(settings: dict) -> None:
    """Refuse options that do not go together, saying why."""
    if settings["freeze"] and not settings["init"]:
        raise SystemExit(
            _("error: --freeze trains the head on top of --init's weights; give --init")
        )
    if settings["model"] == "cnn" and (settings["init"] or settings["teacher"]):
        raise SystemExit(
            _("error: --init and --teacher start a ViT; --model cnn does not use them")
        )
    if settings["init"] and settings["teacher"]:
        raise SystemExit(
            _(
                "error: --init and --teacher together are not supported: the distilled ViT has an "
                "extra token the pre-trained one lacks"
            )
        )


def _flags(args: argparse.Namespace, names: tuple[str, ...]) -> list[str]:
    """The options among `names` given on the command line, as typed: ["--patch-size", ...]."""
    return [f"--{n.replace('_', '-')}" for n in names if getattr(args, n) is not None]


def _model_config(
    args: argparse.Namespace, settings: dict, info: DatasetInfo
) -> ViTConfig | CNNConfig:
    """The model the arguments ask for: the dataset's CNN, --init's ViT, or the dataset's ViT
    preset (or --preset) with the sizes given."""
    if settings["model"] == "cnn":
        given = _flags(args, VIT_ONLY)
        if given:
            raise SystemExit(
                _("error: {options} set the ViT; --model cnn does not use them").format(
                    options=", ".join(given)
                )
            )
        return cnn_preset_for(info)
    if settings["init"] and not args.resume:  # a resumed run's sizes come from its checkpoint
        sizes = [flag for flag in _flags(args, VIT_ONLY) if flag not in ("--drop-path", "--pool")]
        changes = {n: getattr(args, n) for n in ("drop_path", "pool") if getattr(args, n)}
        return init_config(args.init, info, sizes, changes)
    changes = {n: getattr(args, n) for n in VIT_ONLY[1:] if getattr(args, n) is not None}
    try:
        return preset_for(info, args.preset or info.train_preset, **changes)
    except ValueError as e:  # sizes that do not fit together, e.g. --patch-size 5 on 28 pixels
        raise SystemExit(f"error: {e}") from None


def _train_config(args: argparse.Namespace, batch_size: int) -> TrainConfig:
    """The recipe the arguments ask for; the peak learning rate, unless given, scaled to the
    batch of all processes."""
    return TrainConfig(
        **run_length(args.epochs, args.minutes, TrainConfig.epochs),
        lr=args.lr or scaled_lr(batch_size),
        weight_decay=args.weight_decay,
        warmup=args.warmup,
        label_smoothing=args.label_smoothing,
        seed=args.seed,
    )
