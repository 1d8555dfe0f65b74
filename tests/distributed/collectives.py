"""Run by tests/test_distributed.py under mpiexec: every collective against `reduce_reference` on the
inputs of every rank (each rank can make all of them), bit for bit, eagerly and compiled."""

from __future__ import annotations

import numpy as np

import verigrad as vg
import verigrad.distributed as dist
from verigrad.distributed import ReduceOp, reduce_reference


def inputs(n: int, shape: tuple) -> list[np.ndarray]:
    """Rank r's input: values whose sum depends on the order of the additions."""
    return [
        (np.random.default_rng(r).standard_normal(shape) * 10.0 ** (r % 3 * 4)).astype(np.float32)
        for r in range(n)
    ]


def main() -> None:
    dist.init_process_group("mpi")
    r, n = dist.get_rank(), dist.get_world_size()
    every = inputs(n, (5, 7))
    for op in ReduceOp:
        x = vg.tensor(every[r].copy())
        dist.all_reduce(x, op=op)
        expected = reduce_reference(every, op)
        assert x.numpy().tobytes() == expected.tobytes(), op

    # over comm.SPLIT_BYTES (a reduce-scatter then an all-gather), a length no rank count divides
    large = inputs(n, (131, 129))
    for op in ReduceOp:
        x = vg.tensor(large[r].copy())
        dist.all_reduce(x, op=op)
        assert x.numpy().tobytes() == reduce_reference(large, op).tobytes(), op

    y = vg.tensor(every[r].copy())
    dist.broadcast(y, src=n - 1)
    assert np.array_equal(y.numpy(), every[n - 1])

    gathered = [vg.zeros(5, 7) for _ in range(n)]
    dist.all_gather(gathered, vg.tensor(every[r]))
    assert all(np.array_equal(g.numpy(), e) for g, e in zip(gathered, every))
    out = vg.zeros(5 * n, 7)
    dist.all_gather_into_tensor(out, vg.tensor(every[r]))
    assert np.array_equal(out.numpy(), np.concatenate(every))

    big = inputs(n, (2 * n, 3))
    chunk = vg.zeros(2, 3)
    dist.reduce_scatter_tensor(chunk, vg.tensor(big[r]))
    assert chunk.numpy().tobytes() == reduce_reference(big, "sum")[2 * r : 2 * r + 2].tobytes()
    pieces = vg.zeros(2, 3)
    dist.reduce_scatter(pieces, [vg.tensor(big[r][2 * k : 2 * k + 2]) for k in range(n)], op=ReduceOp.AVG)
    assert pieces.numpy().tobytes() == reduce_reference(big, "avg")[2 * r : 2 * r + 2].tobytes()

    # gradients through the ops: d/dx_r sum_s sum((sum_t x_t)^2) = 2 n sum_t x_t on every rank
    a = vg.tensor(every[r].astype(np.float64), requires_grad=True)
    total = dist.ops.all_reduce(a)
    (total * total).sum().backward()
    expected_total = reduce_reference([e.astype(np.float64) for e in every])
    assert np.allclose(a.grad.numpy(), 2 * n * expected_total)

    # a compiled function holds the collective as an instruction and gives the eager bits
    def step(x):
        return dist.ops.all_reduce(x * 2, op="avg")

    compiled = vg.compile(step)
    for _ in range(3):  # traced, planned, then replayed
        got = compiled(vg.tensor(every[r]))
        assert got.numpy().tobytes() == step(vg.tensor(every[r])).numpy().tobytes()
    assert "all_reduce" in str(vg.trace(step, vg.tensor(every[r])))
    dist.barrier()
    if r == 0:
        print("collectives ok", n)


if __name__ == "__main__":
    main()
