"""Training throughput: the course's ViT against timm's VisionTransformer of the same configuration.

Both models take the same training steps (forward, cross-entropy, backward, AdamW) on the same
random batch, interleaved round by round so that a noisy shared machine slows both alike. Reports
the median images per second of each and the ratio of the medians. `--against PRESET` times a
course preset against another one instead of timm's, to see what a change costs per step.

    python benchmarks/throughput.py                      # the three course presets, CPU
    python benchmarks/throughput.py --preset course-28/4 --rounds 7 --steps 10 --batch-size 128
    python benchmarks/throughput.py --preset course-28/conv --against course-28/7  # a stem's cost
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import timm
import torch

from vitcourse.environment import pick_device
from vitcourse.presets import PRESETS
from vitcourse.vit import VisionTransformer, ViTConfig


def timm_twin(config: ViTConfig) -> torch.nn.Module:
    """timm's VisionTransformer with the same sizes as a course config."""
    return timm.models.VisionTransformer(
        img_size=config.image_size,
        patch_size=config.patch_size,
        in_chans=config.in_channels,
        num_classes=config.num_classes,
        embed_dim=config.dim,
        depth=config.depth,
        num_heads=config.num_heads,
        mlp_ratio=config.mlp_dim / config.dim,
        qkv_bias=config.qkv_bias,
        global_pool="token" if config.pool == "cls" else "avg",
        fc_norm=False,
    )


def images_per_second(model, optimizer, images, labels, steps: int) -> float:
    def step():
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    step()  # warm-up: allocations, first-call overheads
    if images.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    if images.device.type == "cuda":
        torch.cuda.synchronize()
    return steps * images.shape[0] / (time.perf_counter() - start)


def compare(
    preset: str,
    rounds: int,
    steps: int,
    batch_size: int,
    device: torch.device,
    against: str = "timm",
) -> dict:
    """Interleaved timings of a course preset and `against`: timm's twin of it, or another preset."""
    config = PRESETS[preset]
    torch.manual_seed(0)
    models = {"ours": VisionTransformer(config)}
    if against == "timm":
        models["theirs"] = timm_twin(config)
    else:  # what a change costs per step, e.g. course-28/conv (a stem) against course-28/7
        models["theirs"] = VisionTransformer(PRESETS[against])
    counts = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
    if against == "timm":
        assert counts["ours"] == counts["theirs"], counts  # a true twin: the same parameters
    images = torch.randn(
        batch_size, config.in_channels, config.image_size, config.image_size, device=device
    )
    labels = torch.randint(0, config.num_classes, (batch_size,), device=device)
    optimizers = {}
    for name, model in models.items():
        model.to(device).train()
        optimizers[name] = torch.optim.AdamW(model.parameters(), lr=1e-4)
    speeds = {name: [] for name in models}
    for _ in range(rounds):
        for name, model in models.items():  # interleaved: each round times both
            speeds[name].append(images_per_second(model, optimizers[name], images, labels, steps))
    ours, theirs = (statistics.median(speeds[n]) for n in ("ours", "theirs"))
    return {
        "preset": preset,
        "against": against,
        "parameters": counts["ours"],
        "against_parameters": counts["theirs"],
        "batch_size": batch_size,
        "device": str(device),
        "threads": torch.get_num_threads(),
        "rounds": rounds,
        "steps_per_round": steps,
        "vitcourse_img_s": ours,
        "against_img_s": theirs,
        "ratio": ours / theirs,
        "vitcourse_all": speeds["ours"],
        "against_all": speeds["theirs"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--preset",
        action="append",
        choices=list(PRESETS),
        help="course preset(s) to time (default: course-28/7, course-28/4 and course-32/4)",
    )
    parser.add_argument(
        "--against",
        default="timm",
        choices=["timm", *PRESETS],
        help="time against timm's ViT of the same size (default) or another course preset",
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10, help="training steps per model per round")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--device", default=None, help="default: picked automatically")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    device = pick_device(args.device)
    results = [
        compare(p, args.rounds, args.steps, args.batch_size, device, args.against)
        for p in args.preset or ["course-28/7", "course-28/4", "course-32/4"]
    ]
    print(
        f"device {device}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"timm {timm.__version__}; median of {args.rounds} interleaved rounds"
    )
    print(
        f"{'preset':<15}{'params':>10}{'img/s':>9}   {'against':<15}{'params':>10}{'img/s':>9}"
        f"{'ratio':>8}"
    )
    for r in results:
        print(
            f"{r['preset']:<15}{r['parameters']:>10,}{r['vitcourse_img_s']:>9.1f}   "
            f"{r['against']:<15}{r['against_parameters']:>10,}{r['against_img_s']:>9.1f}"
            f"{r['ratio']:>8.3f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
