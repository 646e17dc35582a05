"""Where the CNN's assumptions stop helping: the course's ViT against notebook 08's CNN on
scrambled images (notebook 09, section 5).

For each seed, trains for --minutes each, one after the other, with notebook 06's recipe
(`Trainer`, `TrainConfig`: the same loop, augmentation, batch size and learning-rate schedule):
the course's ViT (the dataset's pure ViT, course-28/7 for Fashion-MNIST, with patches as large as
the scramble's squares: 14 x 14, preset course-28/14) and the CNN notebook 08 races (cnn-28), on the same images of
--dataset (default fashion-mnist-scrambled: `vitcourse.scrambling`). A `Timeline` measures each
model's accuracy on 2,000 validation images every 10 s of training (paused time). Each seed
ends with one line:

    vit 85.1% cnn 81.9% (fashion-mnist-scrambled, 3.0 minutes, seed 0)

    python benchmarks/vit_wins.py --seed 0                      # one seed, 3 minutes a model
    python benchmarks/vit_wins.py --seed 0 --dataset fashion-mnist     # the same two, unscrambled
    python benchmarks/vit_wins.py --seed 0 --squares 7     # 7 x 7 squares, and the ViT's patches
    python benchmarks/vit_wins.py --seed 0 1 2 --out data/trained/vit_wins_fashion-mnist.json

`--out` writes every run (test accuracy, curve, steps, seconds) as JSON: the file notebook 09
loads (`data/trained/`). Test accuracy is on all 10,000 test images.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from dataclasses import replace
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Subset

from vitcourse.cnn import SmallCNN, cnn_preset_for
from vitcourse.data.datasets import DatasetInfo, scrambled_twin
from vitcourse.data.loading import dataset_info, make_loaders
from vitcourse.environment import pick_device
from vitcourse.presets import preset_for
from vitcourse.training.callbacks import Timeline
from vitcourse.training.evaluation import evaluate
from vitcourse.training.loop import TrainConfig, Trainer
from vitcourse.vit import VisionTransformer


def race_model(kind: str, info: DatasetInfo, minutes: float, seed: int) -> dict:
    """Train the ViT or the CNN on the dataset `info` for `minutes`; its row of results."""
    torch.manual_seed(seed)
    loaders = make_loaders(info, batch_size=128, seed=seed)
    val = Subset(loaders.val.dataset, range(min(2000, len(loaders.val.dataset))))
    loaders = loaders._replace(val=DataLoader(val, batch_size=500))
    base = info.name.removesuffix("-scrambled")
    if kind == "ViT":  # unscrambled, the patches the scrambled twin would use: the same model
        patch = info.scramble or scrambled_twin(info).scramble
        model = VisionTransformer(preset_for(base, patch_size=patch))
    else:
        model = SmallCNN(cnn_preset_for(base))
    timeline = Timeline(loaders.val, every_seconds=10)
    trainer = Trainer(model, loaders, TrainConfig(minutes=minutes, seed=seed), [timeline])
    trainer.fit()
    return {
        "model": kind,
        "seed": seed,
        "parameters": model.num_parameters(),
        "curve": timeline.points,
        "steps": trainer.steps_done,
        "seconds": trainer.elapsed,
        "test_acc": evaluate(trainer.model, loaders.test, trainer.device)["acc"],
    }


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, nargs="+", default=[0], help="one or more seeds")
    parser.add_argument("--minutes", type=float, default=3.0, help="each model's budget")
    parser.add_argument("--dataset", default="fashion-mnist-scrambled")
    parser.add_argument("--out", type=Path, help="write every run here, as JSON")
    parser.add_argument(
        "--squares", type=int, help="the scramble's squares (and the ViT's patches), in pixels: "
        "default half the image's side"
    )  # fmt: skip
    args = parser.parse_args(argv)
    info = dataset_info(args.dataset)
    if args.squares:  # the same dataset, scrambled in other squares
        info = replace(info if info.scramble else scrambled_twin(info), scramble=args.squares)
    name = info.name + (f" in {args.squares} x {args.squares} squares" if args.squares else "")
    machine = f"{os.cpu_count()} CPUs, {torch.get_num_threads()} threads, {pick_device()}"
    results = []
    for seed in args.seed:
        vit, cnn = (race_model(kind, info, args.minutes, seed) for kind in ("ViT", "CNN"))
        results += [vit, cnn]
        print(
            f"vit {100 * vit['test_acc']:.1f}% cnn {100 * cnn['test_acc']:.1f}% "
            f"({name}, {args.minutes} minutes, seed {seed})",
            flush=True,
        )
        if args.out:  # after every seed: an interrupted run keeps what it measured
            args.out.parent.mkdir(parents=True, exist_ok=True)
            record = {"dataset": name, "minutes": args.minutes, "machine": machine}
            args.out.write_text(json.dumps({**record, "results": results}, indent=1))
    if len(args.seed) > 1:
        for kind in ("ViT", "CNN"):
            accs = [100 * r["test_acc"] for r in results if r["model"] == kind]
            print(f"{kind}: mean {statistics.mean(accs):.2f}%, {min(accs):.2f} to {max(accs):.2f}")
    return results


if __name__ == "__main__":
    main()
