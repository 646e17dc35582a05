"""Where the CNN's assumptions stop helping: the course's ViT against notebook 08's CNN and an MLP
on scrambled images (notebook 09, section 5).

For each seed, trains each model of --models one after the other with notebook 06's recipe
(`Trainer`, `TrainConfig`: the same loop, augmentation, batch size and learning-rate schedule),
on the same images of --dataset (default fashion-mnist-scrambled: `vitcourse.scrambling`):

- vit: the course's ViT (the dataset's pure ViT, course-28/7 for Fashion-MNIST) with patches as
  large as the scramble's squares: 14 x 14 (preset course-28/14), 4 tokens and the cls token;
- cnn: the CNN notebook 08 races (cnn-28);
- mlp: `vitcourse.mlp.SmallMLP`, about the ViT's parameters on the flattened image: no spatial
  prior at all.

The budget is the same for every model: --minutes of training (the default, 3), or --epochs
passes over the training images (equal passes: the same images seen, whatever each step costs).
A `Timeline` measures each model's accuracy on 2,000 validation images every 10 s of training
(paused time; every 60 s with --epochs, where the curve is the measurement after each pass), and
the same images are measured after every pass. Each model's FLOPs for one image (forward pass,
`analysis.flops_per_image`) and its steps are recorded. The CNN trains in channels-last memory
layout: the same arithmetic as the default layout (equal to 1e-14 in float64), 1.31 times faster
a step on our 2-core CPU (benchmarks/README.md); each run records its layout. Each seed ends with one line:

    vit 86.3% cnn 85.4% mlp 90.0% (fashion-mnist-scrambled, 3 minutes, seed 2)

    python benchmarks/vit_wins.py --seed 0                      # one seed, 3 minutes a model
    python benchmarks/vit_wins.py --seed 0 --epochs 5          # 5 passes a model instead
    python benchmarks/vit_wins.py --seed 0 --dataset fashion-mnist     # the same, unscrambled
    python benchmarks/vit_wins.py --seed 0 --models vit cnn    # two of the three
    python benchmarks/vit_wins.py --seed 0 --squares 7     # 7 x 7 squares, and the ViT's patches
    python benchmarks/vit_wins.py --seed 0 1 2 3 4 --out data/trained/vit_wins_fashion-mnist-scrambled_3-minutes.json
    python benchmarks/vit_wins.py --merge seed0.json seed1.json --out both.json  # one file

`--out` writes every run (test accuracy, curves, steps, seconds, FLOPs) as JSON: the files
notebook 09 loads (`data/trained/`, named by `race_file`). Test accuracy is on all 10,000 test
images. Seeds raced by separate commands (on separate machines, or one after another) are joined
into one such file by `--merge`, which refuses files of different datasets or budgets and a model
raced twice with the same seed, and prints the summary over every seed.
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

from vitcourse.analysis import flops_per_image
from vitcourse.cnn import SmallCNN, cnn_preset_for
from vitcourse.data.datasets import DatasetInfo, scrambled_twin
from vitcourse.data.loading import dataset_info, make_loaders
from vitcourse.environment import pick_device
from vitcourse.mlp import SmallMLP, mlp_config_for
from vitcourse.presets import preset_for
from vitcourse.training.callbacks import Timeline
from vitcourse.training.evaluation import evaluate
from vitcourse.training.loop import TrainConfig, Trainer
from vitcourse.vit import VisionTransformer

MODELS = ("vit", "cnn", "mlp")


def race_file(dataset: str, minutes: float | None = None, epochs: int | None = None) -> str:
    """The name of a race's file in `data/trained/`: the dataset and the budget, for example
    `vit_wins_fashion-mnist-scrambled_3-minutes.json` or `..._10-passes.json`."""
    budget = f"{minutes:g}-minutes" if epochs is None else f"{epochs}-passes"
    return f"vit_wins_{dataset}_{budget}.json"


def build(kind: str, info: DatasetInfo) -> torch.nn.Module:
    """A new model of `kind` ("vit", "cnn" or "mlp") for the images of `info`."""
    base = info.name.removesuffix("-scrambled")
    if kind == "vit":  # unscrambled, the patches the scrambled twin would use: the same model
        patch = info.scramble or scrambled_twin(info).scramble
        return VisionTransformer(preset_for(base, patch_size=patch))
    if kind == "cnn":
        return SmallCNN(cnn_preset_for(base))
    if kind == "mlp":
        return SmallMLP(mlp_config_for(info))
    raise ValueError(f"unknown model {kind!r}: expected one of {', '.join(MODELS)}")


def race_model(kind: str, info: DatasetInfo, budget: dict, seed: int) -> dict:
    """Train one model of `kind` on the dataset `info` for `budget` ({"minutes": m} or
    {"epochs": n}); its row of results."""
    torch.manual_seed(seed)
    loaders = make_loaders(info, batch_size=128, seed=seed)
    val = Subset(loaders.val.dataset, range(min(2000, len(loaders.val.dataset))))
    loaders = loaders._replace(val=DataLoader(val, batch_size=500))
    model = build(kind, info)
    flops = flops_per_image(model)
    layout = torch.channels_last if kind == "cnn" else torch.contiguous_format
    model = model.to(memory_format=layout)  # the CNN: the same sums, in a faster order on a CPU
    every = 60 if "epochs" in budget else 10  # passes: the measurement after each pass is the curve
    timeline = Timeline(loaders.val, every_seconds=every)
    trainer = Trainer(model, loaders, TrainConfig(**budget, seed=seed), [timeline])
    trainer.fit()
    return {
        "model": kind,
        "seed": seed,
        "parameters": model.num_parameters(),
        "flops": flops,
        "memory_format": str(layout).removeprefix("torch."),
        "curve": timeline.points,  # (seconds of training, validation accuracy)
        "passes": [[r["epoch"], r["steps"], r["val_acc"]] for r in trainer.history.epochs],
        "steps": trainer.steps_done,
        "steps_per_pass": trainer.steps_per_epoch,
        "seconds": trainer.elapsed,
        "test_acc": evaluate(trainer.model, loaders.test, trainer.device)["acc"],
    }


def summary(results: list[dict], models: list[str]) -> list[str]:
    """Each model's mean test accuracy and spread over the seeds, and each paired difference."""
    seeds = sorted({r["seed"] for r in results})
    acc = {(r["model"], r["seed"]): 100 * r["test_acc"] for r in results}
    lines = []
    for kind in models:
        runs = [acc[kind, s] for s in seeds if (kind, s) in acc]
        spread = statistics.stdev(runs) if len(runs) > 1 else 0.0
        lines.append(
            f"{kind}: mean {statistics.mean(runs):.2f}% ± {spread:.2f} (sd), "
            f"{min(runs):.2f} to {max(runs):.2f}, {len(runs)} seeds"
        )
    for i, first in enumerate(models):
        for second in models[i + 1 :]:
            both = [s for s in seeds if (first, s) in acc and (second, s) in acc]
            diffs = [acc[first, s] - acc[second, s] for s in both]
            if len(diffs) > 1:
                lines.append(
                    f"{first} minus {second}: mean {statistics.mean(diffs):+.2f} ± "
                    f"{statistics.stdev(diffs):.2f} (sd), {min(diffs):+.2f} to "
                    f"{max(diffs):+.2f}, {len(diffs)} seeds"
                )
    return lines


def _budget(race: dict) -> str:
    """A race file's dataset and budget, in words: "5 passes on fashion-mnist"."""
    given = f"{race['epochs']} passes" if race.get("epochs") else f"{race.get('minutes'):g} minutes"
    return f"{given} on {race.get('dataset')}"


def merge(paths: list[Path]) -> dict:
    """The races in the files at `paths` (written by `--out`) as one: their runs together, sorted by
    seed. The files must hold the same dataset and budget, and no model twice with one seed."""
    races = [(path, json.loads(path.read_text())) for path in paths]
    first, race = races[0]
    for path, other in races[1:]:
        if [other.get(k) for k in ("dataset", "minutes", "epochs")] != [
            race.get(k) for k in ("dataset", "minutes", "epochs")
        ]:
            raise ValueError(
                f"{path} holds a race of {_budget(other)}, {first} one of {_budget(race)}: "
                "only races of the same dataset and budget can be merged"
            )
    runs, seen = [], {}
    for path, other in races:
        for run in other["results"]:
            key = (run["model"], run["seed"])
            if key in seen:
                raise ValueError(
                    f"{run['model']} with seed {run['seed']} is in {seen[key]} and {path}"
                )
            seen[key] = path
            runs.append(run)
    machines = list(dict.fromkeys(other["machine"] for _, other in races))
    runs.sort(key=lambda run: (run["seed"], MODELS.index(run["model"])))
    return {**race, "machine": "; ".join(machines), "results": runs}


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, nargs="+", default=[0], help="one or more seeds")
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--minutes", type=float, help="each model's minutes (default 3)")
    budget.add_argument("--epochs", type=int, help="each model's passes over the training images")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--dataset", default="fashion-mnist-scrambled")
    parser.add_argument("--out", type=Path, help="write every run here, as JSON")
    parser.add_argument(
        "--merge", type=Path, nargs="+", help="join these files' races into --out; train nothing"
    )
    parser.add_argument(
        "--squares",
        type=int,
        help="the scramble's squares (and the ViT's "
        "patches), in pixels: default half the image's side",
    )
    args = parser.parse_args(argv)
    if args.merge:
        if not args.out:
            parser.error("--merge needs --out, the file to write")
        merged = merge(args.merge)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(merged, indent=1))
        print("\n".join(summary(merged["results"], list(MODELS))))
        return merged["results"]
    info = dataset_info(args.dataset)
    if args.squares:  # the same dataset, scrambled in other squares
        info = replace(info if info.scramble else scrambled_twin(info), scramble=args.squares)
    name = info.name + (f" in {args.squares} x {args.squares} squares" if args.squares else "")
    budget = {"epochs": args.epochs} if args.epochs else {"minutes": args.minutes or 3.0}
    said = f"{args.epochs} passes" if args.epochs else f"{budget['minutes']:g} minutes"
    threads = torch.get_num_threads()
    machine = (
        f"{os.cpu_count()} CPUs, {threads} thread{'' if threads == 1 else 's'}, {pick_device()}"
    )
    results = []
    for seed in args.seed:
        runs = [race_model(kind, info, budget, seed) for kind in args.models]
        results += runs
        scores = " ".join(f"{r['model']} {100 * r['test_acc']:.1f}%" for r in runs)
        print(f"{scores} ({name}, {said}, seed {seed})", flush=True)
        for r in runs:
            print(
                f"  {r['model']}: {r['parameters']:,} parameters, {r['flops'] / 1e6:.1f} MFLOPs "
                f"an image, {r['steps']:,} steps ({r['steps'] / r['steps_per_pass']:.1f} "
                f"passes) in {r['seconds']:.0f} s",
                flush=True,
            )
        if args.out:  # after every seed: an interrupted run keeps what it measured
            args.out.parent.mkdir(parents=True, exist_ok=True)
            record = {
                "dataset": name,
                **{"minutes": None, "epochs": None, **budget},
                "machine": machine,
            }
            args.out.write_text(json.dumps({**record, "results": results}, indent=1))
    if len(args.seed) > 1:
        print("\n".join(summary(results, args.models)))
    return results


if __name__ == "__main__":
    main()
