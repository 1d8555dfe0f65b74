"""Run by tests/test_distributed.py under mpiexec: ZeroRedundancyOptimizer(Adam) under DDP against DDP
with the unsharded Adam: the same parameters, bit for bit, and about 1/N of the state on each rank."""

from __future__ import annotations

import numpy as np

import verigrad as vg
import verigrad.distributed as dist
from verigrad.distributed.optim import ZeroRedundancyOptimizer, state_bytes
from verigrad.nn.parallel import DistributedDataParallel as DDP

from .ddp import data, make_model, shard


def run(r: int, n: int, zero: bool) -> tuple[list[np.ndarray], int]:
    model = DDP(make_model(0))
    params = list(model.parameters())
    opt = ZeroRedundancyOptimizer(params, vg.optim.Adam, lr=0.01) if zero else vg.optim.Adam(params, lr=0.01)
    loss_fn = vg.nn.CrossEntropyLoss()
    for s in range(4):
        x, y = data(s)
        opt.zero_grad()
        loss_fn(model(shard(x, r, n)), shard(y, r, n)).backward()
        opt.step()
    state = opt.state_bytes() if zero else state_bytes(opt)
    return [p.detach().numpy().copy() for p in params], state


def main() -> None:
    dist.init_process_group("mpi")
    r, n = dist.get_rank(), dist.get_world_size()
    full, full_bytes = run(r, n, zero=False)
    sharded, mine = run(r, n, zero=True)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(full, sharded))
    every = [int(v) for v in dist.ops.all_gather(vg.tensor(np.array([mine], np.int64))).numpy()]
    assert sum(every) == full_bytes, (every, full_bytes)
    largest = max(2 * p.nbytes + 8 for p in full)  # exp_avg, exp_avg_sq and the step count
    assert max(every) <= full_bytes / n + largest, (every, full_bytes)
    dist.barrier()
    if r == 0:
        print("zero ok", n, every, full_bytes)


if __name__ == "__main__":
    main()
