"""Peak memory of SmolLM2-135M-Instruct decoding at a long context, for each KV cache storage (f32, f16,
q8_0): a fresh process per storage loads the model, fills its cache with `--positions` positions of
history (random keys and values: no prompt to run), decodes `--steps` tokens and reports the cache's
bytes, the process's peak resident memory (VmHWM) and the milliseconds per token (one thread).

    python benchmarks/kv_cache.py [--positions 4000] [--steps 5] [--storages f32 f16 q8_0]
    python benchmarks/kv_cache.py --interleaved [--steps 20]

`--interleaved` measures the time per token alone, in one process: a cache of each storage is filled with
the same history, then the storages take turns, one decode step each, `--steps` rounds, and the table gives
each storage's median milliseconds per token and its ratio to the f16 cache's (a busy machine slows all of
them alike, where separate processes each meet its own load).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import numpy as np
from _common import console, table


def peak_mib() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) / 2**10


def filled(model: Any, storage: str, positions: int, steps: int) -> Any:
    """A cache of `storage` holding `positions` positions of random history (the same for every storage:
    one generator seed), room for `steps` more, after its first step at this width (its plan made)."""
    import verigrad as vg
    from verigrad.io.quantizers import quantize

    cache = model.new_cache(1, model.context_length, allocate=256, dtype=storage)
    rng = np.random.default_rng(0)
    with vg.no_grad():
        model(np.asarray([[1, 2, 3, 4]]), cache)
        cache.reserve(positions + steps + 1)
        for a in cache.keys + cache.values:
            b, kv, _, row = a.shape
            history = rng.standard_normal((b * kv * positions, 64)).astype(np.float32)
            if storage == "q8_0":
                history = quantize(history, "q8_0")
            a[:, :, :positions] = history.reshape(b, kv, positions, row).astype(a.dtype)
        cache.length = positions
        model(np.asarray([[5]]), cache)  # the first step at this width: its plan, if any
    return cache


def interleaved(storages: list[str], positions: int, steps: int) -> dict[str, float]:
    """Median ms per token of each storage, the storages taking turns step by step in this process."""
    import verigrad as vg
    from verigrad.models.catalog import load_language_model

    vg.set_threads(1)
    model, _ = load_language_model("smollm2")
    caches = {s: filled(model, s, positions, steps) for s in storages}
    times: dict[str, list[float]] = {s: [] for s in storages}
    with vg.no_grad():
        for _ in range(steps):
            for storage, cache in caches.items():
                t0 = time.perf_counter()
                model(np.asarray([[5]]), cache)
                times[storage].append((time.perf_counter() - t0) * 1e3)
    return {s: statistics.median(t) for s, t in times.items()}


def worker(storage: str, positions: int, steps: int) -> dict:
    import verigrad as vg
    from verigrad.models.catalog import load_language_model

    vg.set_threads(1)
    model, _ = load_language_model("smollm2")
    cache = filled(model, storage, positions, steps)
    with vg.no_grad():
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
    parser.add_argument("--interleaved", action="store_true", help="time per token alone, storages in turn")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.interleaved:
        ms = interleaved(args.storages, args.positions, args.steps)
        out = table(
            f"SmolLM2-135M decode after {args.positions} positions, one thread, {args.steps} rounds in turn",
            ["KV cache", "ms per token (median)", "/ f16's"],
        )
        for storage, value in ms.items():
            out.add_row(storage, f"{value:.0f}", f"{value / ms['f16']:.2f}x" if "f16" in ms else "")
        console(100).print(out)
        return
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
