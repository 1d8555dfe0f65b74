"""Quantized matrix-vector products on the cpu backend: one decode step's worth of SmolLM2-135M's products
(30 layers of q, k, v, o, gate, up, down in Q4_1, then the 49152 x 576 Q8_0 output head; 96 MB of blocks).

    python benchmarks/qmatmul.py [--repeat 7] [--threads 1 2] [--gguf MODEL.gguf]

The weights are random blocks of the model's shapes (or, with --gguf, the file's own tensors). Each row
gives the median milliseconds of one decode's products and the weight bytes read per second: the q8
kernel (activations quantized to 8 bits, llama.cpp's scheme), the f32-activation kernel, the q8 path
through verigrad's eager op (what a model pays per call), and NumPy reading the same bytes once
(`np.maximum.reduce` over them: the machine's single-thread read bandwidth, a ceiling for comparison).
The paths take turns within each repetition, so a busy machine slows all of them alike; the last column is
the CPU time (of all threads), which on a busy machine is the better guide to a quiet machine's 1-thread time.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np
from _common import console, table

import verigrad
from verigrad.ops.quant import FORMATS, qmatmul, qmatmul_q8

LAYERS, D, FFN, KV = 30, 576, 1536, 192
LAYER_SHAPES = [
    (D, D),
    (KV, D),
    (KV, D),
    (D, D),
    (FFN, D),
    (FFN, D),
    (D, FFN),
]  # (N, K): q k v o gate up down
NAMES = ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]
HEAD = (49152, D)


def random_weights(rng: np.random.Generator) -> list[tuple[str, np.ndarray, int]]:
    """(qtype, u8 blocks, K) per product, with small finite f16 scales."""
    out = []
    for qtype, (n, k) in [("q4_1", s) for _ in range(LAYERS) for s in LAYER_SHAPES] + [("q8_0", HEAD)]:
        fmt = FORMATS[qtype]
        raw = rng.integers(0, 256, (n, fmt.row_bytes(k)), dtype=np.uint8)
        raw.reshape(-1, fmt.nbytes)[:, : 4 if qtype == "q4_1" else 2] = np.frombuffer(
            np.float16([0.01, 0.001]).tobytes()[: 4 if qtype == "q4_1" else 2], np.uint8
        )
        out.append((qtype, raw, k))
    return out


def file_weights(path: str) -> list[tuple[str, np.ndarray, int]]:
    f = verigrad.io.read_gguf(path)
    names = [f"blk.{i}.{n}.weight" for i in range(LAYERS) for n in NAMES] + ["token_embd.weight"]
    return [(f.tensors[n].qtype, f.tensors[n].raw, f.tensors[n].shape[1]) for n in names]


def medians(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, tuple[float, float]]:
    """The median wall and CPU seconds of each function, the functions run in turn (after one warm-up
    call each). On a busy machine the CPU time of a one-thread run is closer to what a quiet one takes."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()
    for _ in range(repeat):
        for name, fn in fns.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            times[name].append((time.perf_counter() - wall, time.process_time() - cpu))
    return {name: tuple(statistics.median(x) for x in zip(*t)) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--gguf", help="take the weights from this SmolLM2-135M GGUF file")
    args = parser.parse_args()
    if not verigrad.backends.cpu.available():
        raise SystemExit("the cpu backend could not be built here")
    rng = np.random.default_rng(0)
    weights = file_weights(args.gguf) if args.gguf else random_weights(rng)
    total = sum(w.nbytes for _, w, _ in weights)
    xs = {k: rng.standard_normal((1, k)).astype(np.float32) for k in (D, FFN)}
    cpu = verigrad.backends.cpu.cpu
    q8, f32 = cpu.native(qmatmul_q8, verigrad.f32), cpu.native(qmatmul, verigrad.f32)
    tensors = [(q, verigrad.tensor(w, dtype="u8"), k) for q, w, k in weights]
    xt = {k: verigrad.from_numpy(x) for k, x in xs.items()}

    def eager() -> None:
        with verigrad.backend("cpu"):
            for qtype, w, k in tensors:
                qmatmul_q8(xt[k], w, qtype=qtype)

    paths: dict[str, Callable[[], object]] = {
        "q8 kernel": lambda: [q8(xs[k], w, qtype=q) for q, w, k in weights],
        "f32 kernel": lambda: [f32(xs[k], w, qtype=q) for q, w, k in weights],
        "q8 eager op": eager,
        "NumPy read": lambda: [np.maximum.reduce(w.reshape(-1)) for _, w, _ in weights],
    }
    out = table(
        f"one decode step's products ({len(weights)} calls, {total / 1e6:.1f} MB): median",
        ["threads", "path", "ms", "GB/s", "steps/s", "CPU ms (all threads)"],
    )
    for threads in args.threads:
        verigrad.set_threads(threads)
        for name, (wall, cpu_time) in medians(paths, args.repeat).items():
            rate, steps = f"{total / wall / 1e9:.1f}", f"{1 / wall:.0f}"
            out.add_row(str(threads), name, f"{wall * 1e3:.2f}", rate, steps, f"{cpu_time * 1e3:.2f}")
    verigrad.set_threads(1)
    console(100).print(out)


if __name__ == "__main__":
    main()
