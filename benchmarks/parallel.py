"""How much a second thread speeds up the cpu backend's big kernels: GEMM, element-wise and reductions over
4M elements, a convolution, quantized matrix-vector products (one decode step's kind).

    python benchmarks/parallel.py [--repeats 9] [--calls 5] [--threads 1,2]

Each row gives the median wall milliseconds per call at each thread count (the counts take turns within
each repeat, so a change in the machine's load falls on all of them), the speedup of the last count over
the first, and the chunks each pool thread ran in the timed calls at the last count (threadpool.c's
counts, the caller's first: a worker that wakes late leaves its chunk to the others, so on a busy machine
the caller runs more than its share). tests/test_parallel_kernels.py checks that each of these kernels
splits its work and gives the 1-thread bits.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Callable

import numpy as np
from _common import console, describe_machine, ms_per_call, positive_ints, table

import verigrad
import verigrad.nn.functional as F
from verigrad.backends import cpu
from verigrad.ops.quant import qmatmul, qmatmul_q8, random_blocks

BIG = 1 << 22  # 4M elements


def kernels() -> dict[str, Callable[[], object]]:
    """The kernels timed, on random inputs made once."""
    rng = np.random.default_rng(0)
    a, b = (verigrad.tensor(rng.standard_normal((512, 512)).astype(np.float32)) for _ in range(2))
    x, y = (verigrad.tensor(rng.standard_normal(BIG).astype(np.float32)) for _ in range(2))
    x64 = verigrad.tensor(rng.standard_normal(BIG))
    images = verigrad.tensor(rng.standard_normal((8, 32, 64, 64)).astype(np.float32))
    weight = verigrad.tensor(rng.standard_normal((64, 32, 3, 3)).astype(np.float32))
    v = verigrad.tensor(rng.standard_normal((1, 4096)).astype(np.float32))
    q4, q8 = (verigrad.tensor(random_blocks(rng, q, 4096, 4096), dtype="u8") for q in ("q4_0", "q8_0"))
    return {
        "matmul 512x512x512 f32": lambda: a @ b,
        "add, 4M f32": lambda: x + y,
        "exp, 4M f32": lambda: x.exp(),
        "sum of 4M f32": lambda: x.sum(),
        "sum of 4M f64": lambda: x64.sum(),
        "sum 2048x2048 f32, axis 1": lambda: x.reshape(2048, 2048).sum(1),
        "max of 4M f32": lambda: x.max(),
        "conv2d 8x32x64x64, 64 3x3 filters": lambda: F.conv2d(images, weight, padding=1),
        "qmatmul q4_0, 1x4096 by 4096x4096": lambda: qmatmul(v, q4, qtype="q4_0"),
        "qmatmul q8_0, 1x4096 by 4096x4096": lambda: qmatmul(v, q8, qtype="q8_0"),
        "qmatmul_q8 q4_0, 1x4096 by 4096x4096": lambda: qmatmul_q8(v, q4, qtype="q4_0"),
        "qmatmul_q8 q8_0, 1x4096 by 4096x4096": lambda: qmatmul_q8(v, q8, qtype="q8_0"),
    }


def medians(
    fn: Callable[[], object], counts: list[int], repeats: int, calls: int
) -> tuple[dict[int, float], tuple[int, ...]]:
    """Median wall ms per call of `fn` at each thread count, the counts taking turns in each repeat; and
    the chunks each thread ran in the timed calls at the last count."""
    times: dict[int, list[float]] = {n: [] for n in counts}
    ran = np.zeros(counts[-1], np.int64)
    for _ in range(repeats):
        for n in counts:
            verigrad.set_threads(n)
            cpu.chunks_run()
            times[n].append(ms_per_call(fn, calls))
            if n == counts[-1]:
                ran += np.array(cpu.chunks_run()[:n] + (0,) * n)[:n]
    return {n: statistics.median(ms) for n, ms in times.items()}, tuple(int(c) for c in ran)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--repeats", type=int, default=9, help="timed runs per measurement (default 9)")
    parser.add_argument("--calls", type=int, default=5, help="calls per timed run (default 5)")
    args = parser.parse_args(argv)
    counts = positive_ints(parser, args.threads, "--threads")
    if args.repeats < 1 or args.calls < 1:
        parser.error("--repeats and --calls must be at least 1")
    if not cpu.available():
        raise SystemExit("the cpu backend could not be built here")
    out = console(120)
    out.print(describe_machine())
    first, last = counts[0], counts[-1]
    columns = ["kernel", *(f"{n} thread{'s' if n > 1 else ''} ms" for n in counts)]
    columns += [f"speedup {last} vs {first}", f"chunks run per thread ({last})"]
    result = table(
        f"the cpu backend's kernels: median wall ms per call, {args.repeats} x {args.calls} calls",
        columns,
        left=("kernel",),
    )
    try:
        with verigrad.backend("cpu"):
            for name, fn in kernels().items():
                med, split = medians(fn, counts, args.repeats, args.calls)
                cells = [f"{med[n]:.3f}" for n in counts]
                result.add_row(name, *cells, f"{med[first] / med[last]:.2f}x", " ".join(map(str, split)))
    finally:
        verigrad.set_threads(1)
    out.print(result)


if __name__ == "__main__":
    main()
