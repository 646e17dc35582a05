"""Training speed by precision and compilation: what the trainer's GPU paths do on this device.

Times the trainer's own step (`vitcourse.training.loop.train_step`: forward, loss, backward,
clipping, AdamW) on one random batch, for float32, bfloat16 autocast, float16 autocast with a
gradient scaler, and float32 after `torch.compile`; interleaved round by round so that a noisy
shared machine slows each alike. Reports the median images per second of each, its ratio to float32,
and how long compiling took.

    python benchmarks/precision.py                       # the course's ViT, this machine's device
    python benchmarks/precision.py --preset course-28/conv --batch-size 512 --device cuda

On a CPU without native bfloat16 the autocast paths are expected to be slow: that is why the
trainer keeps float32 there.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from vitcourse.environment import pick_device
from vitcourse.presets import PRESETS
from vitcourse.training.loop import TrainConfig, make_optimizer, train_step
from vitcourse.vit import VisionTransformer

KINDS = ("fp32", "bf16", "fp16", "compiled")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="course-28/7", choices=list(PRESETS))
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="steps per kind per round")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--device", help="default: picked automatically")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    device = pick_device(args.device)
    config = PRESETS[args.preset]
    images = torch.randn(
        args.batch_size, config.in_channels, config.image_size, config.image_size, device=device
    )
    labels = torch.randint(0, config.num_classes, (args.batch_size,), device=device)

    steps, compile_seconds = {}, None
    for kind in args.kinds:
        torch.manual_seed(0)
        model = VisionTransformer(config).to(device).train()
        optimizer = make_optimizer(model, TrainConfig())
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(kind)
        scaler = torch.amp.GradScaler(device.type) if kind == "fp16" else None
        network = torch.compile(model) if kind == "compiled" else model

        def step(network=network, optimizer=optimizer, dtype=dtype, scaler=scaler):
            train_step(network, optimizer, images, labels, 0.1, 1.0, amp_dtype=dtype, scaler=scaler)

        start = time.perf_counter()
        step()  # warm-up: allocations, first-call overheads, and the compile
        _sync(device)
        if kind == "compiled":
            compile_seconds = time.perf_counter() - start
        steps[kind] = step

    speeds = {kind: [] for kind in steps}
    for _ in range(args.rounds):
        for kind, step in steps.items():  # interleaved: each round times every kind
            _sync(device)
            start = time.perf_counter()
            for _ in range(args.steps):
                step()
            _sync(device)
            speeds[kind].append(args.steps * args.batch_size / (time.perf_counter() - start))
    medians = {kind: statistics.median(s) for kind, s in speeds.items()}
    base = medians.get("fp32")
    print(
        f"{args.preset}, batch {args.batch_size}, device {device}, {torch.get_num_threads()} "
        f"threads, torch {torch.__version__}; median of {args.rounds} interleaved rounds"
    )
    for kind, median in medians.items():
        ratio = f"{median / base:6.2f}x float32" if base else ""
        print(f"{kind:<10}{median:>9.1f} images/s  {ratio}")
    if compile_seconds is not None:
        print(f"compiling took {compile_seconds:.0f} s (the first step)")
    if args.json:
        results = {
            "preset": args.preset,
            "batch_size": args.batch_size,
            "device": str(device),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "rounds": args.rounds,
            "images_per_second": medians,
            "all": speeds,
            "compile_seconds": compile_seconds,
        }
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
