"""Does masked-patch pre-training pay where labels are scarce? Pre-trained against from scratch.

For each seed: pre-train the course's pure ViT (course-28/7) for --pretrain-minutes on every
training image without labels (`python -m vitcourse.pretrain`), then for each share of the labels
train the same ViT for --minutes twice, taking turns: from scratch, and from the pre-trained
encoder (`--init`). Both use the trainer's recipe unchanged; the same seed picks the same
labelled images for both. The test accuracy is on all 10,000 test images.

    python benchmarks/pretraining.py --out runs/bench-pretraining          # 3 seeds, 1% and 10%
    python benchmarks/pretraining.py --seeds 0 --fractions 0.01 --pretrain-minutes 1 --minutes 0.5

Writes OUT/pretraining.json (every run's accuracy and seconds, and per fraction the mean gain and
its range over seeds) and prints a table. The pre-trained encoder of the first seed stays in
OUT/pretrain-s0/model.pt (notebook 09 ships one made this way).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from vitcourse.cli import pretrain, train


def run_train(out: Path, fraction: float, minutes: float, seed: int, init: Path | None) -> dict:
    args = ["--fraction", str(fraction), "--minutes", str(minutes), "--seed", str(seed)]
    args += ["--val-size", "1000", "--out", str(out), "--device", "cpu"]
    # The same ViT both ways: the pre-trained encoder's sizes are course-28/7's.
    args += ["--init", str(init)] if init else ["--preset", "course-28/7"]
    metrics = train.main(args)
    return {"test_acc": metrics["test_acc"], "train_seconds": metrics["train_seconds"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("runs/bench-pretraining"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.01, 0.1])
    parser.add_argument("--pretrain-minutes", type=float, default=5.0)
    parser.add_argument("--minutes", type=float, default=2.0, help="training on the labels")
    args = parser.parse_args()
    results = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "runs": [],
    }
    start = time.perf_counter()
    for seed in args.seeds:
        folder = args.out / f"pretrain-s{seed}"
        if (folder / "model.pt").exists():  # a finished pre-training from an earlier run: reuse it
            print(f"reusing {folder / 'model.pt'}")
        else:
            pretrain.main(
                ["--minutes", str(args.pretrain_minutes), "--seed", str(seed), "--out", str(folder)]
            )
        for fraction in args.fractions:
            # Taking turns (which goes first alternates) so drifts in the machine's speed
            # fall on both.
            order = [None, folder / "model.pt"]
            if seed % 2:
                order.reverse()
            for init in order:
                name = "pre-trained" if init else "scratch"
                out = args.out / f"{name}-f{fraction}-s{seed}"
                run = run_train(out, fraction, args.minutes, seed, init)
                results["runs"].append({"seed": seed, "fraction": fraction, "start": name, **run})
                print(f"seed {seed}, {100 * fraction:g}% of the labels, {name}: {run}", flush=True)
        (args.out / "pretraining.json").write_text(json.dumps(results, indent=2))
    summary = {}
    for fraction in args.fractions:
        acc = {
            (r["seed"], r["start"]): r["test_acc"]
            for r in results["runs"]
            if r["fraction"] == fraction
        }
        gains = [acc[s, "pre-trained"] - acc[s, "scratch"] for s in args.seeds]
        summary[str(fraction)] = {
            "scratch_mean": statistics.mean(acc[s, "scratch"] for s in args.seeds),
            "pretrained_mean": statistics.mean(acc[s, "pre-trained"] for s in args.seeds),
            "gain_mean": statistics.mean(gains),
            "gain_min": min(gains),
            "gain_max": max(gains),
        }
    results["summary"] = summary
    results["wall_seconds"] = time.perf_counter() - start
    (args.out / "pretraining.json").write_text(json.dumps(results, indent=2))
    print("\n| labels | from scratch | pre-trained | gain (mean, min to max over seeds) |")
    print("|---|---|---|---|")
    for fraction, s in summary.items():
        print(
            f"| {100 * float(fraction):g}% | {100 * s['scratch_mean']:.2f}% | "
            f"{100 * s['pretrained_mean']:.2f}% | {100 * s['gain_mean']:+.2f} points "
            f"({100 * s['gain_min']:+.2f} to {100 * s['gain_max']:+.2f}) |"
        )


if __name__ == "__main__":
    main()
