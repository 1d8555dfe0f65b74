"""PyTorch's `DistributedSampler`: each rank's share of a dataset's indices, the same split as PyTorch's
(padded by repeating the first indices, or cut with `drop_last`, then every num_replicas-th index from
the rank's). The shuffled order is a permutation drawn from verigrad's generator seeded with
seed + epoch: the same on every rank, not PyTorch's permutation (its generator is another)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sized

from ...distributed import get_rank, get_world_size
from ...ops.creation import Generator, randperm
from .sampler import Sampler


class DistributedSampler(Sampler):
    """DistributedSampler(dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False);
    call `set_epoch(epoch)` before each epoch for a new order."""

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        num_replicas = get_world_size() if num_replicas is None else num_replicas
        rank = get_rank() if rank is None else rank
        if isinstance(num_replicas, bool) or not isinstance(num_replicas, int) or num_replicas < 1:
            raise ValueError(
                f"DistributedSampler: num_replicas must be a positive integer, got {num_replicas!r}"
            )
        if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        self.dataset, self.num_replicas, self.rank = dataset, num_replicas, rank
        self.epoch, self.shuffle, self.seed, self.drop_last = 0, shuffle, seed, drop_last
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            indices = randperm(n, generator=Generator(self.seed + self.epoch)).tolist()
        else:
            indices = list(range(n))
        if self.drop_last:
            indices = indices[: self.total_size]
        elif indices:
            padding = self.total_size - len(indices)
            indices += (indices * math.ceil(padding / len(indices)))[:padding]
        return iter(indices[self.rank : self.total_size : self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order to give (with shuffle, the same on every rank for the same epoch)."""
        self.epoch = epoch
