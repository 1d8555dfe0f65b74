"""Data-parallel training for the trainers (`verigrad train`, `verigrad train lm`).

A step's global batch is split into `shards` equal shards; each shard's gradient is computed alone and
the step's gradient is their average, summed in rank order ((g0 + g1) + g2 ...) then divided by the
count (the all_reduce op's reference). Under `mpiexec -n N` each of the N ranks computes its shard and
`DistributedDataParallel` averages the gradients; in one process `--ranks N` computes the N shards one
after the other and averages them with `ordered_reduce`: both give the same bits. Every rank reads the
whole global batch (the same order from the same seed) and takes its shard; rank 0 alone prints and
writes files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..distributed import (
    barrier,
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
    ops,
    ordered_reduce,
)
from ..distributed.world import launched_size
from ..tensor import Tensor

T = TypeVar("T")


@dataclass(frozen=True)
class Ranks:
    shards: int  # equal shards of each global batch
    rank: int  # this process's shard under mpiexec (0 in one process)
    world: int  # MPI ranks; 1: this process computes every shard

    @property
    def leader(self) -> bool:
        """Whether this process prints and writes files (rank 0)."""
        return self.rank == 0


def setup(ranks: int | None) -> Ranks:
    """The ranks of this run: mpiexec's (and the process group initialized), else `ranks` (default 1)
    simulated in this process."""
    started = launched_size()
    if started > 1:
        if ranks not in (None, started):
            raise ValueError(
                f"--ranks {ranks}: mpiexec started {started} ranks; give --ranks {started} or none"
            )
        if not is_initialized():
            init_process_group("mpi")
        return Ranks(started, get_rank(), started)
    if ranks is not None and (isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1):
        raise ValueError(f"--ranks must be a positive integer, got {ranks!r}")
    return Ranks(ranks or 1, 0, 1)


def current(shards: int) -> Ranks:
    """The ranks of a run of `shards` shards: the process group's, where one is initialized (its size
    must be `shards`), else simulated in this process."""
    if not is_initialized() or get_world_size() == 1:
        return Ranks(shards, 0, 1)
    if get_world_size() != shards:
        raise ValueError(f"ranks {shards}: the process group has {get_world_size()} ranks")
    return Ranks(shards, get_rank(), shards)


def leader_first(make: Callable[[], T], ranks: Ranks) -> T:
    """`make()` on rank 0, then on the others (what it caches on disk, rank 0 alone writes)."""
    if ranks.world == 1:
        return make()
    if ranks.leader:
        try:
            return make()
        finally:
            barrier()
    barrier()
    return make()


def check_batch(batch: int, shards: int, option: str) -> None:
    """Refuse, before training, a global batch the ranks cannot share equally."""
    if batch % shards:
        raise ValueError(
            f"{option} {batch} is not divisible by the {shards} ranks: each rank takes an equal "
            f"shard of the global batch (use a multiple of {shards})"
        )


def shard(t: Tensor, index: int, ranks: Ranks, axis: int = 0) -> Tensor:
    """Shard `index` of `t` along `axis`."""
    k = t.shape[axis] // ranks.shards
    picks = [slice(None)] * axis + [slice(index * k, (index + 1) * k)]
    return t[tuple(picks)]


def averaged(
    compute: Callable[[int], Sequence[Tensor]], params: Sequence[Tensor], ranks: Ranks
) -> list[Tensor]:
    """`compute(s)` runs shard s's forward and backward (gradients from none) and returns its detached
    scalars; afterwards each parameter's .grad is the shards' gradients averaged in rank order (under
    mpiexec, by DistributedDataParallel's hooks), and the scalars are so averaged too."""
    if ranks.world > 1:
        return [ops.all_reduce(v, op="avg") for v in compute(ranks.rank)]
    if ranks.shards == 1:
        return list(compute(0))
    grads, values = [], []
    for s in range(ranks.shards):
        for p in params:
            p.grad = None
        values.append(compute(s))
        grads.append([p.grad for p in params])
    for p, gs in zip(params, zip(*grads)):
        p.grad = None if any(g is None for g in gs) else ordered_reduce(list(gs), "avg")
    return [ordered_reduce(list(vs), "avg") for vs in zip(*values)]
