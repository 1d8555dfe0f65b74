"""GEMM on the cpu backend: NumPy's matmul against the fast path (OpenBLAS through verigrad) and the exact
path (double accumulation in C), f32, on the matrix products of the digits CNN's training step.

    python benchmarks/gemm.py [--repeat 15] [--threads 1 2]

Each row interleaves the three (so a busy machine slows all of them alike) and prints medians, GFLOP/s
and the ratio to NumPy (above 1: faster than NumPy).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from _common import console
from rich.table import Table

import verigrad
from verigrad.backends.cpu import linalg

SHAPES = [(6272, 144, 32), (1568, 288, 64), (3136, 32, 128), (32, 3136, 128)]  # M x K x N


def medians(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, float]:
    """The median seconds of each function, the functions run in turn (after one warm-up call each)."""
    times: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    if not verigrad.backends.cpu.available():
        raise SystemExit("the cpu backend could not be built here")
    table = Table(title="f32 GEMM: median ms, GFLOP/s, ratio to NumPy")
    for col in ("threads", "M x K x N", "NumPy", "fast", "exact", "fast / NumPy", "exact / NumPy"):
        table.add_column(col, justify="right")
    rng = np.random.default_rng(0)
    for threads in args.threads:
        verigrad.set_threads(threads)
        for m, k, n in SHAPES:
            a = rng.standard_normal((m, k)).astype(np.float32)
            b = rng.standard_normal((k, n)).astype(np.float32)
            t = medians(
                {
                    "numpy": lambda: np.matmul(a, b),
                    "fast": lambda: linalg.matmul(a, b, exact=False),
                    "exact": lambda: linalg.matmul(a, b, exact=True),
                },
                args.repeat,
            )
            gflop = 2 * m * k * n / 1e9
            cell = {name: f"{s * 1e3:.3f} ms, {gflop / s:.1f}" for name, s in t.items()}
            ratio = {name: f"{t['numpy'] / t[name]:.2f}x" for name in ("fast", "exact")}
            table.add_row(
                str(threads), f"{m} x {k} x {n}", cell["numpy"], cell["fast"], cell["exact"], *ratio.values()
            )
    verigrad.set_threads(1)
    console(120).print(table)


if __name__ == "__main__":
    main()
