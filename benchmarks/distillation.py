"""Distillation (DeiT): a ViT taught by the course's CNN, against the plain ViT and the CNN itself.

Trains, on all of Fashion-MNIST's training images, for --minutes each: the CNN (which is then the
teacher), the course's pure ViT (course-28/7) from the labels alone, and the same ViT with a
distillation token taught by that CNN (`python -m vitcourse.train --teacher`), hard and soft. The
teacher's minutes are part of what distillation costs: the table states them.

    python benchmarks/distillation.py --out runs/bench-distillation        # 10 minutes each
    python benchmarks/distillation.py --minutes 0.5 --kinds hard           # a quick look
    python benchmarks/distillation.py --epochs 5 --teacher runs/bench-distillation/cnn/model.pt \
        --kinds hard --out runs/bench-distillation-epochs   # the same passes, not the same minutes

Writes OUT/distillation.json and prints a table.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from vitcourse.cli import train


def _plain(settings: dict) -> dict:
    return {k: str(v) if isinstance(v, Path) else v for k, v in settings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-distillation"))
    length = parser.add_mutually_exclusive_group()
    length.add_argument("--minutes", type=float, default=10.0)
    length.add_argument("--epochs", type=int, help="the same passes for every model instead")
    parser.add_argument("--teacher", type=Path, help="an already trained CNN (skips training one)")
    parser.add_argument("--kinds", nargs="+", default=["hard", "soft"], choices=["hard", "soft"])
    parser.add_argument("--preset", default="course-28/7", help="the ViT (default: pure)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    length = ["--epochs", str(args.epochs)] if args.epochs else ["--minutes", str(args.minutes)]
    common = [*length, "--seed", str(args.seed), "--device", "cpu"]
    start = time.perf_counter()
    rows = {}
    teacher = args.teacher or args.out / "cnn" / "model.pt"
    runs = (
        {}
        if args.teacher
        else {"CNN (the teacher)": ["--model", "cnn", "--out", str(teacher.parent)]}
    )
    runs["ViT"] = ["--preset", args.preset, "--out", str(args.out / "vit")]
    for kind in args.kinds:
        runs[f"ViT, {kind} distillation"] = [
            "--preset",
            args.preset,
            "--teacher",
            str(teacher),
            "--distillation",
            kind,
            "--out",
            str(args.out / f"deit-{kind}"),
        ]
    for name, extra in runs.items():
        metrics = train.main(common + extra)
        rows[name] = {
            "test_acc": metrics["test_acc"],
            "train_seconds": metrics["train_seconds"],
            "epochs": len(metrics["epochs"]),
            "teacher_seconds": metrics.get("teacher", {}).get("train_seconds"),
        }
        print(f"{name}: {rows[name]}", flush=True)
        (args.out / "distillation.json").write_text(
            json.dumps({"settings": _plain(vars(args)), "rows": rows}, indent=2)
        )
    wall = time.perf_counter() - start
    (args.out / "distillation.json").write_text(
        json.dumps(
            {"settings": _plain(vars(args)), "rows": rows, "wall_seconds": wall},
            indent=2,
        )
    )
    print("\n| model | test accuracy | its training | the teacher's | passes |")
    print("|---|---|---|---|---|")
    for name, row in rows.items():
        teacher_minutes = (
            f"{row['teacher_seconds'] / 60:.1f} min" if row["teacher_seconds"] else "-"
        )
        print(
            f"| {name} | {100 * row['test_acc']:.2f}% | {row['train_seconds'] / 60:.1f} min | "
            f"{teacher_minutes} | {row['epochs']} |"
        )


if __name__ == "__main__":
    main()
