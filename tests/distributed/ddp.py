"""Run by tests/test_distributed.py under mpiexec: DistributedDataParallel against one process that
sums the ranks' shard gradients in rank order (`ordered_reduce`), bit for bit."""

from __future__ import annotations

import numpy as np

import verigrad as vg
import verigrad.distributed as dist
from verigrad import nn
from verigrad.distributed import ordered_reduce
from verigrad.nn.parallel import DistributedDataParallel as DDP

BATCH = 12


def make_model(seed: int, width: int = 16) -> nn.Module:
    vg.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(6, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(), nn.Linear(width, 3)
    )


def data(step: int) -> tuple[vg.Tensor, vg.Tensor]:
    rng = np.random.default_rng(100 + step)
    return vg.tensor(rng.standard_normal((BATCH, 6)).astype(np.float32)), vg.tensor(rng.integers(0, 3, BATCH))


def shard(t: vg.Tensor, r: int, n: int) -> vg.Tensor:
    k = BATCH // n
    return t[r * k : (r + 1) * k]


def simulated(n: int, steps: int, width: int = 16) -> list[np.ndarray]:
    """One process: each step the n shards' gradients summed in rank order, divided by n; SGD."""
    model = make_model(0, width)
    opt = vg.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for step in range(steps):
        x, y = data(step)
        per_rank = []
        for r in range(n):
            opt.zero_grad()
            loss_fn(model(shard(x, r, n)), shard(y, r, n)).backward()
            per_rank.append([p.grad for p in model.parameters()])
        for p, gs in zip(model.parameters(), zip(*per_rank)):
            p.grad = ordered_reduce(list(gs), "avg")
        opt.step()
    return [p.detach().numpy().copy() for p in model.parameters()]


def trained(r: int, n: int, steps: int, compiled: bool = False, width: int = 16, **ddp) -> list[np.ndarray]:
    model = DDP(make_model(r, width), **ddp)  # each rank starts elsewhere: rank 0's values are broadcast
    opt = vg.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    def step(xb, yb):
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    run = vg.compile(step) if compiled else step
    for s in range(steps):
        x, y = data(s)
        run(shard(x, r, n), shard(y, r, n))
    return [p.detach().numpy().copy() for p in model.module.parameters()]


def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


def main() -> None:
    dist.init_process_group("mpi")
    r, n = dist.get_rank(), dist.get_world_size()
    want = simulated(n, 4)
    assert same(trained(r, n, 4), want), "one bucket"
    assert same(trained(r, n, 4, bucket_cap_mb=0.0005), want), "a bucket per parameter or two"
    assert same(trained(r, n, 4, compiled=True), want), "compiled"
    # buckets over comm.SPLIT_BYTES: a reduce-scatter then an all-gather, the same bits
    wide = simulated(n, 2, width=160)
    assert same(trained(r, n, 2, width=160), wide), "wide, eager"
    assert same(trained(r, n, 2, width=160, compiled=True), wide), "wide, compiled"

    # no_sync: the first micro-batch accumulates locally, the second's backward reduces the sum
    model = DDP(make_model(0), bucket_cap_mb=0.0005)
    loss_fn = nn.CrossEntropyLoss()
    x0, y0 = data(0)
    x1, y1 = data(1)
    with model.no_sync():
        loss_fn(model(shard(x0, r, n)), shard(y0, r, n)).backward()
    loss_fn(model(shard(x1, r, n)), shard(y1, r, n)).backward()
    mine = [p.grad.numpy() for p in model.module.parameters()]
    reference = make_model(0)
    sums = []
    for k in range(n):
        for p in reference.parameters():
            p.grad = None
        loss_fn(reference(shard(x0, k, n)), shard(y0, k, n)).backward()
        loss_fn(reference(shard(x1, k, n)), shard(y1, k, n)).backward()
        sums.append([p.grad for p in reference.parameters()])
    assert same(mine, [ordered_reduce(list(gs), "avg").numpy() for gs in zip(*sums)]), "no_sync"

    # a compiled step traced outside no_sync() is traced again inside it (and a step holding no_sync
    # itself is traced once)
    model = DDP(make_model(0))
    params = list(model.module.parameters())

    def grads(xb, yb):
        for p in params:
            p.grad = None
        loss_fn(model(xb), yb).backward()
        return [p.grad for p in params]

    compiled = vg.compile(grads)
    xs, ys = shard(x0, r, n), shard(y0, r, n)
    synced = [g.numpy().copy() for g in compiled(xs, ys)]
    with model.no_sync():
        local = [g.numpy().copy() for g in compiled(xs, ys)]
        assert same(local, [g.numpy() for g in grads(xs, ys)]), "compiled inside no_sync"
    assert same([g.numpy() for g in compiled(xs, ys)], synced), "compiled after no_sync"
    assert n == 1 or not same(local, synced)

    # an unused parameter: refused on the next forward without find_unused_parameters, zeros with it
    class Branchy(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = nn.Linear(6, 3), nn.Linear(6, 3)

        def forward(self, x):
            return self.used(x)

    for find in (True, False):
        model = DDP(Branchy(), find_unused_parameters=find, bucket_cap_mb=0.0001)
        model(shard(x0, r, n)).sum().backward()
        try:
            model(shard(x0, r, n))
            assert find, "an unfinished reduction must be refused"
        except RuntimeError as e:
            assert not find and "find_unused_parameters=True" in str(e)
        if find:
            assert np.array_equal(model.module.unused.weight.grad.numpy(), np.zeros((3, 6), np.float32))
    dist.barrier()
    if r == 0:
        print("ddp ok", n)


if __name__ == "__main__":
    main()
