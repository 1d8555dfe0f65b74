"""The LoRA step's products with its quantized base (issue 30): the packed GEMM that de-quantizes W's
blocks as it packs them (matmul_dequant.c, "fused") against the path before it ("de-quantize": W written
into a reused f32 buffer by the `dequantize` kernel, then the f32 matmul) and against an f32 copy of W
kept in memory ("kept": the product alone, what the step did before its base stayed quantized).

Products: SmolLM2-135M's shapes with 256 tokens, x @ W^T and g @ W of qkv, o, gate_up and down (Q4_1,
random blocks; 30 a step each) and the tied Q8_0 head's (128 answer rows, once), one thread, CPU time
(`time.process_time`), the ways alternating in one process, the median of `--repeats` rounds (after one
untimed round); each way's result checked bit for bit against the others'.

`--step`: verigrad's eager LoRA step (benchmarks/lm_train.py's, SmolLM2's Q4_1 GGUF from verigrad's
cache) with the fused products and with the path before, steps alternating in one process, CPU time, one
thread; the two losses compared bit for bit.

    python benchmarks/lora_products.py --repeats 15
    python benchmarks/lora_products.py --step --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

LAYER_SHAPES = {"qkv": (960, 576), "o": (576, 576), "gate_up": (3072, 576), "down": (576, 1536)}
HEAD = (49152, 576)
TOKENS, ANSWER_ROWS, LAYERS = 256, 128, 30


def median_ms(calls: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Each call's median CPU milliseconds over `repeats` rounds, the order reversed every other round."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(repeats + 1):
        for name, call in list(calls.items())[:: 1 if round_ % 2 else -1]:
            start = time.process_time()
            call()
            if round_:
                times[name].append((time.process_time() - start) * 1e3)
    return {name: statistics.median(t) for name, t in times.items()}


def products(repeats: int) -> None:
    import verigrad
    from verigrad.backends.cpu import matmul as cpu_matmul
    from verigrad.backends.cpu.quant import dequantize_into, dequantized_matmul
    from verigrad.ops.quant import dequantize_op, random_blocks

    verigrad.set_threads(1)
    with verigrad.backend("cpu"):
        (verigrad.zeros(2) + 1).numpy()  # the library loaded
    rng = np.random.default_rng(0)
    buffer = np.empty(HEAD[0] * HEAD[1], np.float32)
    shapes = {name: (*shape, "q4_1", TOKENS, LAYERS) for name, shape in LAYER_SHAPES.items()}
    shapes["head"] = (*HEAD, "q8_0", ANSWER_ROWS, 1)
    print(
        f"{'ms, median':16s} {'fused':>8s} {'dequant.':>8s} {'kept':>8s} {'vs dequant.':>11s} {'vs kept':>8s}"
    )
    totals = dict.fromkeys(("fused", "de-quantize", "kept"), 0.0)
    for name, (n, k, qtype, rows, count) in shapes.items():
        blocks = random_blocks(rng, qtype, n, k)
        kept = dequantize_op.reference(blocks, qtype=qtype)
        x, g = (rng.standard_normal((rows, size), dtype=np.float32) for size in (k, n))
        for way, a, transposed in (("x W^T", x, True), ("g W", g, False)):

            def dequantized(a: np.ndarray = a, transposed: bool = transposed) -> np.ndarray:
                w = dequantize_into(blocks, qtype, buffer[: n * k].reshape(n, k))
                return cpu_matmul.matmul(a, w.T if transposed else w, exact=False)

            calls = {
                "fused": lambda a=a, transposed=transposed: dequantized_matmul(a, blocks, qtype, transposed),
                "de-quantize": dequantized,
                "kept": lambda a=a, transposed=transposed: cpu_matmul.matmul(
                    a, kept.T if transposed else kept, exact=False
                ),
            }
            results = [call() for call in calls.values()]
            assert results[0] is not None, "the fused product was not taken (no AVX-512?)"
            assert all(np.array_equal(results[0], r) for r in results[1:]), f"{name} {way}: bits differ"
            ms = median_ms(calls, repeats)
            for key in totals:
                totals[key] += count * ms[key]
            row = f"{name + ' ' + way:16s} {ms['fused']:8.2f} {ms['de-quantize']:8.2f} {ms['kept']:8.2f}"
            print(f"{row} {ms['fused'] / ms['de-quantize']:10.3f}x {ms['fused'] / ms['kept']:7.3f}x")
    row = f"{'a step':16s} {totals['fused']:8.1f} {totals['de-quantize']:8.1f} {totals['kept']:8.1f}"
    print(f"{row} {totals['fused'] / totals['de-quantize']:10.3f}x {totals['fused'] / totals['kept']:7.3f}x")


def step(repeats: int) -> None:
    import lm_train

    from verigrad.nn import dequantized_product

    fused = dequantized_product.dequantized_matmul
    ways = {"fused": fused, "de-quantize": lambda *args: None}
    losses = {}
    for way, product in ways.items():  # a fresh model each: two steps' losses (the second after AdamW)
        dequantized_product.dequantized_matmul = product
        train, x, y, tokens = lm_train.lora_step("verigrad eager", 1)
        losses[way] = [float(train(x, y).detach()) for _ in range(2)]
    same = losses["fused"] == losses["de-quantize"]
    print(f"losses {losses['fused']} and {losses['de-quantize']}: the same bits {same}")

    def run(product: Callable) -> Callable[[], None]:
        def call() -> None:
            dequantized_product.dequantized_matmul = product
            train(x, y)

        return call

    ms = median_ms({way: run(product) for way, product in ways.items()}, repeats)
    dequantized_product.dequantized_matmul = fused
    for way, t in ms.items():
        print(f"{way:12s} {t:8.1f} ms a step  {tokens / t * 1e3:7.1f} tokens/s (CPU time)")
    print(f"fused / de-quantize: {ms['fused'] / ms['de-quantize']:.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds (default 9)")
    parser.add_argument("--step", action="store_true", help="the eager LoRA step, fused against before")
    args = parser.parse_args()
    step(args.repeats) if args.step else products(args.repeats)


if __name__ == "__main__":
    main()
