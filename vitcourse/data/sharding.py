"""Sharding: each process's share of a split when several processes train together (torchrun,
the README's "Scaling up"). `make_loaders` gives each loader a `ShardSampler` when asked for a
`rank` of a `world_size`; in one process, the course's default, nothing here runs.
"""

from __future__ import annotations

import torch
from torch.utils.data import Sampler

from vitcourse.language import _

__all__ = ["ShardSampler"]


class ShardSampler(Sampler[int]):
    """One process's share of a split when `world_size` processes train together (torchrun): the
    job of torch's `DistributedSampler`, for the course's loaders.

    Training (`shuffle=True`): every process draws the same permutation of the split from
    `generator` (seeded alike in each), cuts it to a multiple of `world_size` (the few images left
    over sit out this epoch, as with `drop_last`) and takes every `world_size`-th image from `rank`
    on. The shares are equal and disjoint, so every process takes the same number of steps; together
    the processes' batches are the batch one process would read from that permutation.
    Evaluation (`shuffle=False`): images rank, rank + world_size, ...: each image is read by
    exactly one process, none twice (`DistributedSampler` would pad with repeats).
    """

    def __init__(
        self,
        size: int,
        rank: int,
        world_size: int,
        shuffle: bool,
        generator: torch.Generator | None = None,
    ):
        if not 0 <= rank < world_size:
            message = _("rank must be in [0, {world_size}), got {rank}")
            raise ValueError(message.format(world_size=world_size, rank=rank))
        if shuffle and size < world_size:
            message = _(
                "{world_size} processes cannot share {size} training images: each needs at least one"
            )
            raise ValueError(message.format(world_size=world_size, size=size))
        self.size, self.rank, self.world_size = size, rank, world_size
        self.shuffle, self.generator = shuffle, generator

    def __len__(self) -> int:
        if self.shuffle:
            return self.size // self.world_size
        return len(range(self.rank, self.size, self.world_size))

    def __iter__(self):
        if self.shuffle:
            order = torch.randperm(self.size, generator=self.generator)
            order = order[: len(self) * self.world_size]
        else:
            order = torch.arange(self.size)
        return iter(order[self.rank :: self.world_size].tolist())
