"""The f32-activation decode step's products (one activation row) of a GGUF file, by format and shape:
each group (e.g. the 30 layers' q5_0 ffn_gate, 1536 x 576) runs its matrices in turn, so the weights come
from memory as in a model's decode step, on each vector path the machine has (AVX-512, AVX2, portable).

    python benchmarks/qdecode_f32.py --gguf SmolLM2.Q4_K_M.gguf [--repeat 15] [--threads 1 2]
    python benchmarks/qdecode_f32.py --gguf SmolLM2.Q4_K_M.gguf --paths avx2 scalar

A path is named with what it runs (qmatmul_formats.py's `f32_code`: "decode" for its fused kernel). Each
row gives the median CPU milliseconds of one step's products of the group (the paths take turns
within each repetition; on a busy machine a one-thread run's CPU time is the better guide to a quiet
machine's wall time), the bytes read per CPU second, and the median wall milliseconds.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
from _common import console, table
from qmatmul import medians
from qmatmul_formats import f32_code

import verigrad
from verigrad.backends.cpu import quant as cpu_quant
from verigrad.ops.quant import qmatmul


def groups(path: str) -> dict[tuple[str, tuple[int, int]], list[np.ndarray]]:
    """The file's 2-D quantized weights, grouped by (format, shape)."""
    found: dict[tuple[str, tuple[int, int]], list[np.ndarray]] = defaultdict(list)
    for t in verigrad.io.read_gguf(path).tensors.values():
        if len(t.shape) == 2 and t.qtype not in ("f32", "f16", "bf16"):
            found[(t.qtype, tuple(t.shape))].append(t.raw)
    return dict(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gguf", required=True)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--threads", type=int, nargs="+", default=[1])
    parser.add_argument("--paths", nargs="+", default=list(cpu_quant.PATHS[:0:-1]), choices=cpu_quant.PATHS)
    args = parser.parse_args()
    if not verigrad.backends.cpu.available():
        raise SystemExit("the cpu backend could not be built here")
    kernel = verigrad.backends.cpu.cpu.native(qmatmul, verigrad.f32)
    paths = [p for p in args.paths if cpu_quant.path(p) == p]
    rng = np.random.default_rng(0)
    out = table(
        f"f32 decode step's products of {args.gguf}: median of {args.repeat}",
        ["format", "shape", "count", "threads", "path", "CPU ms", "GB/CPU s", "wall ms"],
    )
    found = groups(args.gguf)
    totals: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for (qtype, (n, k)), ws in sorted(found.items()):
        x = rng.standard_normal((1, k)).astype(np.float32)
        size = sum(w.nbytes for w in ws)
        for threads in args.threads:
            verigrad.set_threads(threads)

            def on(path: str, ws: list[np.ndarray] = ws, x: np.ndarray = x, qtype: str = qtype) -> object:
                return lambda: (cpu_quant.path(path), [kernel(x, w, qtype=qtype) for w in ws])

            times = medians({p: on(p) for p in paths}, args.repeat)
            for p, (wall, cpu_time) in times.items():
                totals[(threads, p)][0] += cpu_time
                totals[(threads, p)][1] += wall
                rate = size / max(cpu_time, 1e-9) / 1e9
                cells = [f"{cpu_time * 1e3:.3f}", f"{rate:.1f}", f"{wall * 1e3:.3f}"]
                way = p if p == "scalar" else f"{p}: {f32_code(qtype, p, 1)}"
                out.add_row(qtype, f"{n} x {k}", str(len(ws)), str(threads), way, *cells)
    for (threads, p), (cpu_time, wall) in totals.items():
        out.add_row("all", "", "", str(threads), p, f"{cpu_time * 1e3:.3f}", "", f"{wall * 1e3:.3f}")
    cpu_quant.simd(True)
    verigrad.set_threads(1)
    console(100).print(out)


if __name__ == "__main__":
    main()
