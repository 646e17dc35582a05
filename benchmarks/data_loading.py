"""Data loading: augmented training batches from torchvision's PIL transforms vs `make_loaders`.

The old way, and torchvision's usual one, reads a training image at a time: a PIL image, a random
crop, a flip, ToTensor and Normalize, then the DataLoader stacks 128 of them. `make_loaders` keeps
the images in memory as bytes and crops, flips and normalises a whole batch in a few tensor
operations (`vitcourse.data.batching.InMemoryImages`). Both read the same shuffled batches of the
training split in the main process, as training on a CPU does; the two take turns round by round,
and the script reports the median seconds per pass over the data (an "epoch" of loading only) and
their ratio.

    python benchmarks/data_loading.py                   # Fashion-MNIST, 5 rounds of 100 batches
    python benchmarks/data_loading.py --rounds 5 --batches 100 --json data_loading.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from torch.utils.data import DataLoader

from vitcourse.data.loading import dataset_info, load_dataset, make_loaders


def seconds_per_batch(loader: DataLoader, batches: int) -> float:
    start = time.perf_counter()
    for index, _batch in enumerate(loader):
        if index + 1 == batches:
            break
    return (time.perf_counter() - start) / batches


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="fashion-mnist")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=100, help="batches read per round")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)

    info = dataset_info(args.dataset)
    fast = make_loaders(info.name, args.batch_size, device="cpu").train
    pil = DataLoader(
        load_dataset(info.name, train=True, augment=True),
        args.batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    images_per_epoch = len(fast.dataset)
    times = {"pil": [], "in_memory": []}
    for _ in range(args.rounds):
        times["pil"].append(seconds_per_batch(pil, args.batches))
        times["in_memory"].append(seconds_per_batch(fast, args.batches))
    epoch = {k: statistics.median(v) * images_per_epoch / args.batch_size for k, v in times.items()}
    result = {
        "dataset": info.name,
        "batch_size": args.batch_size,
        "images_per_epoch": images_per_epoch,
        "seconds_per_epoch": epoch,
        "ratio": epoch["pil"] / epoch["in_memory"],
        "per_round_ratios": [p / m for p, m in zip(times["pil"], times["in_memory"], strict=True)],
        "torch_threads": torch.get_num_threads(),
    }
    print(
        f"{info.name}, batch {args.batch_size}, one pass over {images_per_epoch:,} training images "
        f"(median of {args.rounds} rounds of {args.batches} batches):\n"
        f"  PIL transforms, image by image: {epoch['pil']:6.2f} s\n"
        f"  in memory, a batch at a time:   {epoch['in_memory']:6.2f} s\n"
        f"  ratio {result['ratio']:.1f}x (per round "
        f"{min(result['per_round_ratios']):.1f}x to {max(result['per_round_ratios']):.1f}x)"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
