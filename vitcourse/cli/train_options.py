"""The options of `python -m vitcourse.train`, in the groups its --help shows: the run (data,
length, folder), the model, the recipe, the device, and where training starts from (--init,
--teacher). `vitcourse.cli.train.parse_args` reads them; `vitcourse.cli.train_run.plan` settles
what they leave open.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vitcourse.cli.train_run import CPU_BATCH, GPU_BATCH
from vitcourse.data.folders import SIZES_THAT_WORK
from vitcourse.language import _
from vitcourse.presets import PRESETS
from vitcourse.training.loop import TrainConfig
from vitcourse.training.scaling import PRECISIONS


def add_options(parser: argparse.ArgumentParser) -> None:
    """Every option, group by group."""
    _run_arguments(parser)
    _model_arguments(parser)
    _recipe_arguments(parser)
    _device_arguments(parser)
    _start_arguments(parser)


def _channels(text: str) -> tuple[int, ...]:
    """The --stem value: "16,32" becomes (16, 32)."""
    try:
        return tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            _("expected channel counts separated by commas, such as 16,32; got {text!r}").format(
                text=text
            )
        ) from None


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    """The data, the length, the run folder."""
    parser.add_argument(
        "--dataset",
        default="fashion-mnist",
        help="fashion-mnist (default), mnist, cifar10, cifar100, or a folder of your own images "
        "with one sub-folder per class",
    )
    parser.add_argument(
        "--image-size",
        type=int,
        metavar="N",
        help=f"a folder's images are resized to N x N pixels: {SIZES_THAT_WORK}",
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
    tensorboard = "also write TensorBoard event files into OUT (tensorboard --logdir runs/)"
    parser.add_argument("--tensorboard", action="store_true", help=tensorboard)
    parser.add_argument(
        "--export",
        choices=["transformers"],
        help="also write the trained model for Hugging Face transformers into OUT/transformers/",
    )


def _model_arguments(parser: argparse.ArgumentParser) -> None:
    """The model kind, and the ViT preset's sizes."""
    parser.add_argument(
        "--model",
        choices=["vit", "cnn"],
        default="vit",
        help="vit (default) or cnn: a small CNN (vitcourse.cnn)",
    )
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        help="ViT size (default: the dataset's train_preset in vitcourse.data.datasets)",
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


def _recipe_arguments(parser: argparse.ArgumentParser) -> None:
    """How much data, and the training recipe."""
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
        help="training images held out for validation after every epoch (default 5000; from a "
        "folder of your own, at most a tenth of its training images)",
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


def _device_arguments(parser: argparse.ArgumentParser) -> None:
    """Where and how fast: the device, its precision, torch.compile."""
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


def _start_arguments(parser: argparse.ArgumentParser) -> None:
    """Pre-trained weights (--init, --freeze) and teachers (--teacher)."""
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
