"""GEMM on the cpu backend: NumPy's matmul against the fast path (OpenBLAS through verigrad) and the exact
path (double accumulation in C), f32.

    python benchmarks/gemm.py [--repeat 15] [--threads 1 2]

The first table: the matrix products of the digits CNN's training step (the four seed shapes), then a
K-heavy product with a small c (a convolution's weight gradient, g^T @ columns), an MLP's weight
gradient (x^T @ g, x of 64 x 784), its layer's forward product (x @ W^T, W of 256 x 784) and a
classifier's (the 28x28 CNN's last layer, W of 10 x 1568). Each row
interleaves the three (so a busy machine slows all of them alike), each run after a pause (`--pause`:
OpenBLAS's threads spin for about 0.1 s after NumPy's threaded product, on the cores the next run
needs), and prints medians, GFLOP/s and the ratio to NumPy (above 1: faster than NumPy).

The second table: the cost of one call on tiny products (an MLP layer at batch 64, a matrix-vector
product, 64^3 with b plain and transposed), where the per-call overhead is most of the time: the minimum
over repetitions of the mean microseconds per call, NumPy's matmul, verigrad's matmul (the function the
cpu backend's kernel calls) and its exact path.

    python benchmarks/gemm.py --training [--repeat 7] [--threads 1 2] [--gpt base]

The training steps' products instead (benchmarks/lm_train.py's small GPT, or with `--gpt base` its
10.1M one: x @ W^T, g @ W and g^T x of each layer's qkv, proj, up and down and of the head; the LoRA
step's x @ W^T and g @ W at 256 rows): verigrad's fast path against PyTorch's torch.matmul (MKL), the
two in turn, GFLOP/s from the median time: the calling thread's CPU time on one thread (the machine's
other load aside), wall time on more.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from _common import console, ensure_torch, ms_in_turns, table
from rich.table import Table

import verigrad
from verigrad.backends.cpu import matmul as cpu_matmul

SHAPES = [(6272, 144, 32), (1568, 288, 64), (3136, 32, 128), (32, 3136, 128)]  # M x K x N
# the last two: a backward's g @ W^T against the same product of a plain b (b^T copied plain first)
TINY = [(64, 10, 256, ""), (64, 256, 10, ""), (1, 576, 576, ""), (64, 64, 64, ""), (64, 64, 64, "b")]


def operands(rng: np.random.Generator, m: int, k: int, n: int, transposed: str = ""):
    """a[m, k] and b[k, n], f32; `transposed` "a" or "b": that one a transposed view of a row-major
    array."""
    a = rng.standard_normal((k, m) if transposed == "a" else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if transposed == "b" else (k, n)).astype(np.float32)
    return a.T if transposed == "a" else a, b.T if transposed == "b" else b


def medians(fns: dict[str, Callable[[], object]], repeat: int, pause: float, calls: int = 5) -> dict:
    """The median seconds per call of each function, the functions run in turn: each run one untimed call
    and `calls` timed ones, after a pause in which the other library's spinning threads go to sleep
    (OpenBLAS's spin about 0.1 s after a threaded call, and take a core from the next threaded run)."""
    return {name: statistics.median(ms) / 1e3 for name, ms in ms_in_turns(fns, repeat, calls, pause).items()}


def per_call(fns: dict[str, Callable[[], object]], calls: int, repeat: int) -> dict[str, float]:
    """The least mean seconds per call over `repeat` runs of `calls` calls, the functions in turn."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls)
    return best


def gemm_table(rng: np.random.Generator, threads: list[int], repeat: int, pause: float) -> Table:
    out = table(
        "f32 GEMM: median ms, GFLOP/s, ratio to NumPy",
        ["threads", "M x K x N", "NumPy", "fast", "exact", "fast / NumPy", "exact / NumPy"],
    )
    cases = [(f"{m} x {k} x {n}", m, k, n, "") for m, k, n in SHAPES]
    cases += [("16 x 50176 x 9, a^T", 16, 50176, 9, "a"), ("784 x 64 x 256, a^T", 784, 64, 256, "a")]
    cases += [("64 x 784 x 256, b^T", 64, 784, 256, "b"), ("64 x 1568 x 10, b^T", 64, 1568, 10, "b")]
    for n_threads in threads:
        verigrad.set_threads(n_threads)
        for label, m, k, n, transposed in cases:
            a, b = operands(rng, m, k, n, transposed)
            t = medians(
                {
                    "numpy": lambda: np.matmul(a, b),
                    "fast": lambda: cpu_matmul.matmul(a, b, exact=False),
                    "exact": lambda: cpu_matmul.matmul(a, b, exact=True),
                },
                repeat,
                pause,
            )
            gflop = 2 * m * k * n / 1e9
            cell = {name: f"{s * 1e3:.3f} ms, {gflop / s:.1f}" for name, s in t.items()}
            ratio = {name: f"{t['numpy'] / t[name]:.2f}x" for name in ("fast", "exact")}
            out.add_row(str(n_threads), label, cell["numpy"], cell["fast"], cell["exact"], *ratio.values())
    return out


def tiny_table(rng: np.random.Generator, threads: list[int], repeat: int) -> Table:
    out = table(
        "f32 tiny products: microseconds per call (least mean of runs), ratio to NumPy",
        ["threads", "M x K x N", "NumPy", "fast", "exact", "fast / NumPy"],
    )
    for n_threads in threads:
        verigrad.set_threads(n_threads)
        for m, k, n, transposed in TINY:
            a, b = operands(rng, m, k, n, transposed)
            t = per_call(
                {
                    "numpy": lambda: np.matmul(a, b),
                    "fast": lambda: cpu_matmul.matmul(a, b, exact=False),
                    "exact": lambda: cpu_matmul.matmul(a, b, exact=True),
                },
                calls=200,
                repeat=max(repeat, 5),
            )
            us = {name: f"{s * 1e6:.1f}" for name, s in t.items()}
            out.add_row(
                str(n_threads),
                f"{m} x {k} x {n}" + (f", {transposed}^T" if transposed else ""),
                us["numpy"],
                us["fast"],
                us["exact"],
                f"{t['numpy'] / t['fast']:.2f}x",
            )
    return out


GPTS = {"small": (1024, 128, 4096), "base": (2048, 320, 8192)}  # lm_train.py's: tokens, width, vocabulary


def training_products(gpt: str = "small") -> list[tuple[str, int, int, int, str]]:
    """(label, m, k, n, transposed) of lm_train.py's GPT `gpt` (small: 1024 tokens, width 128, vocabulary
    4096; base: 2048 tokens, width 320, vocabulary 8192) and the LoRA step's (256 tokens; SmolLM2-135M's
    widths)."""
    tokens, w, vocab = GPTS[gpt]
    cases = []
    for name, (n, k) in {"qkv": (3 * w, w), "proj": (w, w), "up": (4 * w, w), "down": (w, 4 * w)}.items():
        cases += [
            (f"{name} x W^T", tokens, k, n, "b"),
            (f"{name} g W", tokens, n, k, ""),
            (f"{name} g^T x", n, tokens, k, "a"),
        ]
    cases += [
        ("head x W^T", tokens, w, vocab, "b"),
        ("head g W", tokens, vocab, w, ""),
        ("head g^T x", vocab, tokens, w, "a"),
    ]
    for name, (n, k) in {
        "qkv": (960, 576),
        "o": (576, 576),
        "gate_up": (3072, 576),
        "down": (576, 1536),
    }.items():
        cases += [(f"LoRA {name} x W^T", 256, k, n, "b"), (f"LoRA {name} g W", 256, n, k, "")]
    return cases


def training_table(rng: np.random.Generator, threads: list[int], repeat: int, gpt: str = "small") -> Table:
    torch = ensure_torch()
    out = table(
        "f32 training products: GFLOP/s (median), ratio to PyTorch's (torch.matmul) time",
        ["threads", "product", "M x K x N", "verigrad", "PyTorch", "PyTorch time / ours"],
    )
    for n_threads in threads:
        verigrad.set_threads(n_threads)
        torch.set_num_threads(n_threads)
        clock = time.thread_time if n_threads == 1 else time.perf_counter
        for label, m, k, n, transposed in training_products(gpt):
            a, b = operands(rng, m, k, n, transposed)
            ta, tb = (
                torch.from_numpy(v) if v.flags.c_contiguous else torch.from_numpy(v.T).T for v in (a, b)
            )
            calls = max(1, int(4e8 / (2 * m * k * n)))
            times = ms_in_turns(
                {"ours": lambda: cpu_matmul.matmul(a, b, exact=False), "torch": lambda: ta @ tb},
                repeat,
                calls,
                clock=clock,
            )
            gflops = {way: 2 * m * k * n / statistics.median(ms) / 1e6 for way, ms in times.items()}
            out.add_row(
                str(n_threads),
                label,
                f"{m} x {k} x {n}",
                f"{gflops['ours']:.1f}",
                f"{gflops['torch']:.1f}",
                f"{gflops['ours'] / gflops['torch']:.2f}x",
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--pause", type=float, default=0.15, help="seconds before each timed run")
    parser.add_argument(
        "--training", action="store_true", help="the training steps' products against PyTorch"
    )
    parser.add_argument(
        "--gpt", choices=sorted(GPTS), default="small", help="--training's GPT (default small)"
    )
    args = parser.parse_args()
    if not verigrad.backends.cpu.available():
        raise SystemExit("the cpu backend could not be built here")
    rng = np.random.default_rng(0)
    if args.training:
        tables = [training_table(rng, args.threads, args.repeat, args.gpt)]
    else:
        tables = [gemm_table(rng, args.threads, args.repeat, args.pause)]
        tables.append(tiny_table(rng, args.threads, args.repeat))
    verigrad.set_threads(1)
    for printed in tables:
        console(120).print(printed)


if __name__ == "__main__":
    main()
