"""Peak memory of SmolLM2-135M-Instruct decoding at a long context, for each KV cache storage (f32, f16,
q8_0): a fresh process per storage loads the model, fills its cache with `--positions` positions of
history (random keys and values: no prompt to run), decodes `--steps` tokens and reports the cache's
bytes, the process's peak resident memory (VmHWM) and the milliseconds per token (one thread).

    python benchmarks/kv_cache.py [--positions 4000] [--steps 5] [--storages f32 f16 q8_0]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np
from _common import console, table


def peak_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 2**10


def worker(storage: str, positions: int, steps: int) -> dict:
    import verigrad as vg
    from verigrad.io.quantizers import quantize
    from verigrad.models.catalog import load_language_model

    vg.set_threads(1)
    model, _ = load_language_model("smollm2")
    cache = model.new_cache(1, model.context_length, allocate=256, dtype=storage)
    rng = np.random.default_rng(0)
    with vg.no_grad():
        model(np.asarray([[1, 2, 3, 4]]), cache)
        cache.reserve(positions + steps)
        for a in cache.keys + cache.values:
            b, kv, _, row = a.shape
            history = rng.standard_normal((b * kv * positions, 64)).astype(np.float32)
            if storage == "q8_0":
                history = quantize(history, "q8_0")
            a[:, :, :positions] = history.reshape(b, kv, positions, row)
        cache.length = positions
        model(np.asarray([[5]]), cache)  # the first step at this width: its plan, if any
        t0 = time.perf_counter()
        for _ in range(steps):
            model(np.asarray([[5]]), cache)
        ms = (time.perf_counter() - t0) / steps * 1e3
    cache_mib = sum(a.nbytes for a in cache.keys + cache.values) / 2**20
    return {"cache_mib": cache_mib, "peak_mib": peak_mib(), "ms": ms}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", type=int, default=4000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--storages", nargs="+", default=["f32", "f16", "q8_0"])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.positions, args.steps)))
        return
    out = table(
        f"SmolLM2-135M decode after {args.positions} positions, one thread, {args.steps} steps",
        ["KV cache", "cache MiB", "peak RSS MiB", "ms per token"],
    )
    for storage in args.storages:
        command = [sys.executable, __file__, "--worker", storage, "--positions", str(args.positions)]
        done = subprocess.run([*command, "--steps", str(args.steps)], capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"{storage}: {(done.stderr.strip().splitlines() or ['no output'])[-1]}")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        out.add_row(storage, f"{r['cache_mib']:.0f}", f"{r['peak_mib']:.0f}", f"{r['ms']:.0f}")
    console(100).print(out)


if __name__ == "__main__":
    main()
