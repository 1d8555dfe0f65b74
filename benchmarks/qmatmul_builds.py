"""qmatmul's f32 kernel (vg_qmatmul_f32) of two builds of the cpu library in one process, e.g. before and
after a change to the quantized kernels: both libraries are loaded through ctypes and called in turn on
the same inputs (one thread, each vector path forced with the library's own vg_quant_simd), so a busy
machine slows both alike; each row gives the median milliseconds of each build, their ratio and whether
both gave the same bits.

    python benchmarks/qmatmul_builds.py OLD.so NEW.so [--formats q2_k q3_k] [--tokens 1 8] [--repeat 60]

`--step` times a whole decode step's products instead (qmatmul.py's: SmolLM2-135M's 30 layers in Q4_1
and the Q8_0 head, 96 MB of random blocks, streamed from memory as a model's are) for each `--tokens`
count, in the thread's CPU time (a busy machine's neighbours move it much less than the wall clock):

    python benchmarks/qmatmul_builds.py OLD.so NEW.so --step --tokens 1 4 8 --repeat 7

`--q8` times qmatmul_q8's kernel (vg_qmatmul_q8: the activations quantized to 8 bits) instead, where
`--paths vnni` is the AVX-512 VNNI level (quant_vnni.c, quant_k8.c):

    python benchmarks/qmatmul_builds.py OLD.so --q8 --step --tokens 1 5 8 --paths vnni avx2 --repeat 7

A build's library is the file `verigrad.backends.cpu.build_info()["path"]` names, run from that checkout
(the library of the current sources: NEW.so can be left out).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time

import numpy as np
from _common import console, table
from qmatmul import random_weights

import verigrad
from verigrad.backends.cpu.quant import PATHS, QTYPES
from verigrad.ops.quant import BLOCK_QTYPES, FORMATS, random_blocks

N, K = 576, 1536  # SmolLM2-135M's ffn_down, as qmatmul_formats.py


def load(path: str, kernel: str) -> ctypes.CDLL:
    """The library at `path`, its vg_quant_simd and its `kernel` (vg_qmatmul_f32 or vg_qmatmul_q8, the same
    arguments) typed, the latter as `lib.product`."""
    lib = ctypes.CDLL(path)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    lib.product = getattr(lib, kernel)
    lib.product.argtypes = [ctypes.c_int, ptr, i64, i64, ptr, i64, ptr, i64, ctypes.c_int]
    lib.vg_quant_simd.argtypes = [ctypes.c_int]
    return lib


def step(libs: dict[str, ctypes.CDLL], counts: list[int], paths: list[str], repeat: int, kernel: str) -> None:
    """Each build's decode-step products (qmatmul.py's random weights) for each activation row count and
    path, alternated, in thread CPU time: median ms per step, the ratio, whether the bits agree."""
    rng = np.random.default_rng(0)
    weights = random_weights(rng)
    out = table(
        f"{kernel} of two builds, a decode step's {len(weights)} products, 1 thread: "
        f"median CPU ms of {repeat}",
        ["tokens", "path", "old ms", "new ms", "old / new", "same bits"],
    )
    for tokens in counts:
        xs = {k: rng.standard_normal((tokens, k)).astype(np.float32) for k in {k for _, _, k in weights}}
        for path in paths:
            times: dict[str, list[float]] = {name: [] for name in libs}
            results: dict[str, list[np.ndarray]] = {name: [] for name in libs}
            for _ in range(repeat):
                for name, lib in libs.items():
                    taken = PATHS[lib.vg_quant_simd(PATHS.index(path))]
                    ys = [np.empty((tokens, raw.shape[0]), np.float32) for _, raw, _ in weights]
                    start = time.thread_time()
                    for (qtype, raw, k), y in zip(weights, ys):
                        lib.product(QTYPES[qtype], raw.ctypes.data, raw.shape[0], k, xs[k].ctypes.data,
                                           tokens, y.ctypes.data, raw.shape[0], 1)  # fmt: skip
                    times[name].append(time.thread_time() - start)
                    results[name] = ys
            old, new = (statistics.median(times[name]) * 1e3 for name in libs)
            same = all(a.tobytes() == b.tobytes() for a, b in zip(results["old"], results["new"]))
            cells = [f"{old:.2f}", f"{new:.2f}", f"{old / new:.2f}x", "yes" if same else "NO"]
            out.add_row(str(tokens), taken, *cells)
    console(100).print(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new", nargs="?", help="default: the library of this checkout's sources")
    parser.add_argument("--repeat", type=int, default=60)
    parser.add_argument("--formats", nargs="+", default=list(BLOCK_QTYPES), choices=BLOCK_QTYPES)
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 8], help="activation rows")
    parser.add_argument("--paths", nargs="+", default=["avx512", "avx2"], choices=PATHS)
    parser.add_argument("--shape", type=int, nargs=2, default=[N, K], metavar=("N", "K"), help="w rows, k")
    parser.add_argument("--step", action="store_true", help="a decode step's products (see above)")
    parser.add_argument("--q8", action="store_true", help="qmatmul_q8's kernel (8-bit activations)")
    args = parser.parse_args()
    n, k = args.shape
    if args.new is None:
        if not verigrad.backends.cpu.available():
            raise SystemExit("the cpu backend could not be built here")
        args.new = verigrad.backends.cpu.build_info()["path"]
    kernel = "vg_qmatmul_q8" if args.q8 else "vg_qmatmul_f32"
    libs = {"old": load(args.old, kernel), "new": load(args.new, kernel)}
    if args.step:
        step(libs, args.tokens, args.paths, args.repeat, kernel)
        return
    out = table(
        f"{kernel} of two builds, w {n} x {k}, 1 thread: median of {args.repeat}",
        ["format", "tokens", "path", "old ms", "new ms", "old / new", "same bits"],
    )
    rng = np.random.default_rng(0)
    for qtype in args.formats:
        block = FORMATS[qtype].block
        if k % block:
            print(f"skipped {qtype}: k = {k} is not a whole number of its {block}-value blocks")
            continue
        raw = random_blocks(rng, qtype, n, k)
        for tokens in args.tokens:
            x = rng.standard_normal((tokens, k)).astype(np.float32)
            for path in args.paths:
                times: dict[str, list[float]] = {name: [] for name in libs}
                results = {name: np.empty((tokens, n), np.float32) for name in libs}
                for _ in range(args.repeat):
                    for name, lib in libs.items():
                        taken = PATHS[lib.vg_quant_simd(PATHS.index(path))]
                        y = results[name]
                        start = time.perf_counter()
                        lib.product(QTYPES[qtype], raw.ctypes.data, n, k, x.ctypes.data, tokens,
                                           y.ctypes.data, n, 1)  # fmt: skip
                        times[name].append(time.perf_counter() - start)
                old, new = (statistics.median(times[name]) * 1e3 for name in libs)
                same = results["old"].tobytes() == results["new"].tobytes()
                cells = [f"{old:.3f}", f"{new:.3f}", f"{old / new:.2f}x", "yes" if same else "NO"]
                out.add_row(qtype, str(tokens), taken, *cells)
    console(100).print(out)


if __name__ == "__main__":
    main()
