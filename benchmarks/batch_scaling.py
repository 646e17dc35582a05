"""Batch size and learning rate: what a larger batch (a GPU's, or several GPUs') asks of the rate.

Trains the course's pure ViT on Fashion-MNIST for the same number of passes (--epochs) with each
batch size and peak learning rate given, and prints the test accuracy of each. With the same
passes, a batch 4 times larger takes 4 times fewer steps: the question is which learning rate
makes up for it (unchanged, times the square root of 4, or times 4).

    python benchmarks/batch_scaling.py                                    # the README's runs
    python benchmarks/batch_scaling.py --settings 128:2e-3 512:4e-3 --epochs 2   # a quick look

Writes OUT/batch_scaling.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from vitcourse.cli import train


def _setting(text: str) -> tuple[int, float]:
    batch, lr = text.split(":")
    return int(batch), float(lr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-batch-scaling"))
    parser.add_argument(
        "--settings",
        nargs="+",
        type=_setting,
        default=[(128, 2e-3), (512, 2e-3), (512, 4e-3), (512, 8e-3)],
        help="BATCH:LR pairs (default: 128:2e-3 512:2e-3 512:4e-3 512:8e-3)",
    )
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--preset", default="course-28/7")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    results = []
    for batch, lr in args.settings:
        out = args.out / f"b{batch}-lr{lr:g}"
        start = time.perf_counter()
        metrics = train.main(
            [
                "--preset", args.preset,
                "--epochs", str(args.epochs),
                "--batch-size", str(batch),
                "--lr", str(lr),
                "--seed", str(args.seed),
                "--out", str(out),
            ]
        )  # fmt: skip
        results.append(
            {
                "batch_size": batch,
                "lr": lr,
                "epochs": args.epochs,
                "steps": metrics["epochs"][-1]["steps"],
                "test_acc": metrics["test_acc"],
                "train_seconds": metrics["train_seconds"],
                "wall_seconds": time.perf_counter() - start,
            }
        )
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "batch_scaling.json").write_text(json.dumps(results, indent=2))
    print(f"\n{'batch':>6} {'lr':>8} {'steps':>6} {'test acc':>9} {'train s':>8}")
    for r in results:
        print(
            f"{r['batch_size']:>6} {r['lr']:>8g} {r['steps']:>6} {100 * r['test_acc']:>8.2f}% "
            f"{r['train_seconds']:>8.0f}"
        )


if __name__ == "__main__":
    main()
