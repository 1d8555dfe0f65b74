"""Data-parallel training for the trainers (`verigrad train`, `verigrad train lm`).

A step's global batch is split into `shards` equal shards (`--shards S`, default the ranks); each shard's
gradient is computed alone and the step's gradient is their average, summed in shard order
((g0 + g1) + g2 ...) then divided by S (`ordered_reduce`, the all-reduce's reference). Under
`mpiexec -n N` (N dividing S) rank r computes shards r*S/N to (r+1)*S/N - 1: with one shard a rank,
`DistributedDataParallel` averages the gradients (in rank order, which is shard order); with more, the
ranks all-gather their shards' gradients and every rank averages all S in shard order. So a run gives
the same bits on any N that divides S, one process included. Every rank reads the whole global batch
(the same order from the same seed) and takes its shards; rank 0 alone prints and writes files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ..distributed import (
    DistributedDataParallel,
    barrier,
    get_rank,
    get_world_size,
    init_process_group,
    is_initialized,
    ops,
    ordered_reduce,
)
from ..distributed.world import launched_size
from ..nn import Module
from ..ops.shaping import stack
from ..tensor import Tensor

T = TypeVar("T")


@dataclass(frozen=True)
class Ranks:
    shards: int  # equal shards of each global batch
    rank: int  # this process's rank under mpiexec (0 in one process)
    world: int  # MPI ranks (1: this process computes every shard)

    @property
    def leader(self) -> bool:
        """Whether this process prints and writes files (rank 0)."""
        return self.rank == 0

    @property
    def mine(self) -> range:
        """The shards this process computes."""
        k = self.shards // self.world
        return range(self.rank * k, (self.rank + 1) * k)

    @property
    def one_shard_a_rank(self) -> bool:
        """Whether DistributedDataParallel averages the gradients (several ranks, one shard each)."""
        return self.world > 1 and self.shards == self.world


def setup(shards: int | None) -> Ranks:
    """The ranks of this run: mpiexec's (and the process group initialized) or this one process, with
    `shards` shards a batch (default: the ranks)."""
    started = launched_size()
    if shards is not None and (isinstance(shards, bool) or not isinstance(shards, int) or shards < 1):
        raise ValueError(f"--shards must be a positive integer, got {shards!r}")
    if shards is not None and shards % started:
        raise ValueError(
            f"--shards {shards}: mpiexec started {started} ranks, which do not divide the shards "
            f"(give a multiple of {started})"
        )
    if started > 1 and not is_initialized():
        init_process_group("mpi")
    return current(shards or started)


def current(shards: int) -> Ranks:
    """The ranks of a run of `shards` shards: the process group's where one is initialized (its size
    must divide `shards`), else this one process."""
    if not is_initialized() or get_world_size() == 1:
        return Ranks(shards, 0, 1)
    world = get_world_size()
    if shards % world:
        raise ValueError(f"{shards} shards: the process group's {world} ranks do not divide them")
    return Ranks(shards, get_rank(), world)


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
    """Refuse, before training, a global batch the shards cannot split equally."""
    if batch % shards:
        raise ValueError(
            f"{option} {batch} is not divisible by the {shards} shards: each rank takes equal shards of "
            f"the global batch (use a multiple of {shards})"
        )


def shard(t: Tensor, index: int, ranks: Ranks, axis: int = 0) -> Tensor:
    """Shard `index` of `t` along `axis`."""
    k = t.shape[axis] // ranks.shards
    picks = [slice(None)] * axis + [slice(index * k, (index + 1) * k)]
    return t[tuple(picks)]


def wrap(model: Module, ranks: Ranks) -> Module:
    """`model` under DistributedDataParallel where it averages the gradients (one shard a rank)."""
    return DistributedDataParallel(model) if ranks.one_shard_a_rank else model


def averaged(
    compute: Callable[[int], Sequence[Tensor]], params: Sequence[Tensor], ranks: Ranks
) -> list[Tensor]:
    """`compute(s)` runs shard s's forward and backward (gradients from none; the model `wrap`ped) and
    returns its detached scalars; afterwards each parameter's .grad is the shards' gradients averaged in
    shard order, and the scalars are so averaged too."""
    if ranks.one_shard_a_rank:  # DDP's hooks averaged the gradients
        return [ops.all_reduce(v, op="avg") for v in compute(ranks.rank)]
    if ranks.shards == 1:
        return list(compute(0))
    grads, values = [], []
    for s in ranks.mine:
        for p in params:
            p.grad = None
        values.append(compute(s))
        grads.append([p.grad for p in params])
    for p, gs in zip(params, zip(*grads)):
        p.grad = None if any(g is None for g in gs) else _average(gs, ranks)
    return [_average(vs, ranks) for vs in zip(*values)]


def _average(parts: Sequence[Tensor], ranks: Ranks) -> Tensor:
    """This process's shards' `parts` and, under mpiexec, every other rank's, averaged in shard order."""
    if ranks.world > 1:
        every = ops.all_gather(stack(list(parts)))  # rank-major: the shards in order
        parts = [every[i] for i in range(ranks.shards)]
    return ordered_reduce(list(parts), "avg")
