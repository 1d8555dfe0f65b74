"""qmatmul (f32 activations) on each GGUF block format: SmolLM2-135M's MLP down projection (576 x 1536)
against 1, 2, 4 and 8 activation rows (a decode step of that many sequences: the "per row" column is the
cost of each) and a 64-token prompt, the cpu kernel on each
vector path against NumPy de-quantizing the weight and multiplying (`x @ dequantize(w).T` in f32). For the
formats `qmatmul_q8` takes (8-bit activations, llama.cpp's scheme) its kernel is timed too ("q8 ..."): in
`--activations q8` mode a model's layers run it, where the others run the f32 kernel. A q8 row is named by
the code it runs (`quant.q8_path`: "q8 kernel vnni" is quant_vnni.c's; a level without code of its own for a
format runs a lower one's, timed once). An f32 row names what its level runs (`f32_code`): "decode" (each
block de-quantized in registers), "rows" (rows de-quantized into the tiles), or "avx2 rows" where the
level has no row de-quantization of its own for the format and runs a lower level's.

    python benchmarks/qmatmul_formats.py [--repeat 9] [--threads 1 2] [--formats q4_k q5_k q6_k]
    python benchmarks/qmatmul_formats.py --formats q8_0 --shape 49152 576 --threads 1   # the output head
    python benchmarks/qmatmul_formats.py --q8 --tokens 1 8 --formats q4_0 q4_k iq4_xs  # the q8 kernels alone

A format whose blocks do not divide k (the k-quants' 256 values, e.g. `--shape 1536 576`) is skipped, with
the reason printed.

Random blocks with small finite scales. The ways take turns within each repetition (a busy machine slows
them alike); each row gives the median wall milliseconds, the speedup over NumPy and the median CPU time.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import console, table
from qmatmul import medians

import verigrad
from verigrad.backends.cpu import quant as cpu_quant
from verigrad.ops.quant import (
    BLOCK_QTYPES,
    FORMATS,
    Q8_QTYPES,
    dequantize,
    qmatmul,
    qmatmul_q8,
    random_blocks,
)

N, K = 576, 1536  # SmolLM2-135M's ffn_down: rows of 1536 values (whole blocks of 256)


def f32_code(qtype: str, path: str, tokens: int) -> str:
    """What qmatmul's f32 kernel runs for `qtype` on the vector path `path` ("avx2" or "avx512") with `tokens`
    activation rows: "decode" (the level's fused decode kernel), "rows" (its row de-quantization feeding the
    tiles) or "<lower level> rows" where the level has none of its own for the format."""
    if tokens == 1 and "decode" in cpu_quant.f32_kernels(qtype, path):
        return "decode"
    levels = ("avx512", "avx2")[("avx512", "avx2").index(path) :]
    found = next((p for p in levels if "rows" in cpu_quant.f32_kernels(qtype, p)), "scalar")
    return "rows" if found == path else f"{found} rows"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--formats", nargs="+", default=["q4_k", "q5_k", "q6_k"], choices=BLOCK_QTYPES)
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 2, 4, 8, 64], help="activation rows")
    parser.add_argument("--shape", type=int, nargs=2, default=[N, K], metavar=("N", "K"), help="w rows, k")
    parser.add_argument("--q8", action="store_true", help="the q8 kernels alone (and NumPy)")
    args = parser.parse_args()
    n, k = args.shape
    if not verigrad.backends.cpu.available():
        raise SystemExit("the cpu backend could not be built here")
    kernel = verigrad.backends.cpu.cpu.native(qmatmul, verigrad.f32)
    q8_kernel = verigrad.backends.cpu.cpu.native(qmatmul_q8, verigrad.f32)
    paths = [p for p in cpu_quant.PATHS[::-1] if cpu_quant.path(p) == p]
    cpu_quant.simd(True)
    rng = np.random.default_rng(0)
    out = table(
        f"qmatmul, f32 activations, w {n} x {k}: median of {args.repeat}",
        ["format", "tokens", "threads", "way", "ms", "per row", "vs NumPy", "CPU ms"],
    )
    skipped = []
    formats = [q for q in args.formats if q in Q8_QTYPES] if args.q8 else args.formats
    for qtype in formats:
        block = FORMATS[qtype].block
        if k % block:
            skipped.append(f"{qtype}: k = {k} is not a whole number of its {block}-value blocks")
            continue
        raw = random_blocks(rng, qtype, n, k)
        for tokens in args.tokens:
            x = rng.standard_normal((tokens, k)).astype(np.float32)
            for threads in args.threads:
                verigrad.set_threads(threads)

                def on(path: str, kernel=kernel):
                    return lambda: (cpu_quant.path(path), kernel(x, raw, qtype=qtype))

                ways = {"NumPy": lambda: x @ dequantize(raw, qtype, (n, k)).T}
                if not args.q8:
                    for p in (p for p in paths if p != "vnni"):  # f32: AVX-512 code
                        code = "" if p == "scalar" else f": {f32_code(qtype, p, tokens)}"
                        ways[f"kernel {p}{code}"] = on(p)
                if qtype in Q8_QTYPES:
                    for p in paths:  # the code each level runs, once each
                        cpu_quant.path(p)
                        ways.setdefault(f"q8 kernel {cpu_quant.q8_path(qtype, tokens)}", on(p, q8_kernel))
                    cpu_quant.simd(True)
                times = medians(ways, args.repeat)
                cpu_quant.simd(True)
                base = times["NumPy"][0]
                for way, (wall, cpu_time) in times.items():
                    cells = [f"{wall * 1e3:.3f}", f"{wall * 1e3 / tokens:.3f}", f"{base / wall:.1f}x"]
                    cells.append(f"{cpu_time * 1e3:.3f}")
                    out.add_row(qtype, str(tokens), str(threads), way, *cells)
    verigrad.set_threads(1)
    console(100).print(out)
    for line in skipped:
        print(f"skipped {line}")


if __name__ == "__main__":
    main()
