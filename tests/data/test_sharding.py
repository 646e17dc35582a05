"""vitcourse.data.sharding: each process's share of a split under torchrun. (Training with
several processes is tested in tests/training/test_scaling.py.)"""

import pytest
import torch
from torch.utils.data import RandomSampler

from vitcourse.data.sharding import ShardSampler


def test_shard_sampler_splits_the_same_permutation_into_equal_disjoint_shares():

    size, world = 103, 4
    shares = [
        list(ShardSampler(size, rank, world, True, torch.Generator().manual_seed(7)))
        for rank in range(world)
    ]
    assert all(len(share) == size // world for share in shares)  # equal: the same steps for all
    together = [i for i in sum(shares, []) if i is not None]
    assert len(set(together)) == len(together) == size // world * world  # disjoint
    # Interleaved, they are the order one process's shuffled loader reads with the same seed.
    one = list(RandomSampler(range(size), generator=torch.Generator().manual_seed(7)))
    interleaved = [shares[i % world][i // world] for i in range(size // world * world)]
    assert interleaved == one[: len(interleaved)]


def test_shard_sampler_for_evaluation_reads_every_image_once():

    shares = [list(ShardSampler(10, rank, 3, shuffle=False)) for rank in range(3)]
    assert sorted(sum(shares, [])) == list(range(10))
    assert [len(ShardSampler(10, rank, 3, shuffle=False)) for rank in range(3)] == [4, 3, 3]
    with pytest.raises(ValueError, match="rank must be in \\[0, 3\\), got 3"):
        ShardSampler(10, 3, 3, shuffle=False)
    with pytest.raises(ValueError, match="2 processes cannot share 1 training images"):
        ShardSampler(1, 0, 2, shuffle=True)
