"""serve.py's `--attention`: the batched step's cached attention alone, 8 rows of different lengths, as
cached_attention over a common window (the bias hiding each row's tail) and as the step runs it now
(`ragged_attention`: row i's token is run (i, i, 1, length_i), `Rows` in models/_decoder.py), and a prompt
chunk's."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

ATTENTION_BATCHES = {  # (lengths of the 8 rows, window): SmolLM2's 9 query and 3 key/value heads of 64
    "8 x 100..149, W 256": ([100 + 7 * i for i in range(8)], 256),
    "8 x 100..149, W 149": ([100 + 7 * i for i in range(8)], 149),  # the hidden tails' reading, for scale
    "4 x 10 then 4 x 120, W 128": ([10] * 4 + [120] * 4, 128),
    "1, 7, 3, 20, 50, 90, 128, 100, W 128": ([1, 7, 3, 20, 50, 90, 128, 100], 128),
}


PROMPT_CHUNKS = {  # a prompt's chunk of 16 tokens at `length` cached positions, window W: (length, W)
    "a 16-token chunk at 16, W 64": (16, 64),
    "a 16-token chunk at 130, W 256": (130, 256),
    "a 16-token chunk at 300, W 512": (300, 512),
}


def attention(repeats: int = 9, layers: int = 30) -> None:
    """The batched step's cached attention alone (`ATTENTION_BATCHES`, each row's window a view of its own
    cache row, the rest hidden), and a prompt chunk's (`PROMPT_CHUNKS`, one sequence): ms per `layers`
    layers' calls, 1 thread in CPU time and 2 in wall time, medians of alternated repetitions."""
    import verigrad as vg
    from verigrad.backends import cpu

    kernel = cpu.cpu.native(vg.REGISTRY["cached_attention"], vg.f32)
    ragged = cpu.cpu.native(vg.REGISTRY["ragged_attention"], vg.f32)
    rng = np.random.default_rng(0)
    cases = {}
    for name, (lengths, width) in ATTENTION_BATCHES.items():
        calls = []
        for _ in range(layers):
            keys, values = (rng.uniform(-2, 2, (8, 3, 512, 64)).astype(np.float32) for _ in range(2))
            q = rng.uniform(-2, 2, (8, 9, 1, 64)).astype(np.float32)
            k, v = (rng.uniform(-2, 2, (8, 3, 1, 64)).astype(np.float32) for _ in range(2))
            bias = np.zeros((8, 1, width + 1), np.float32)
            for i, n in enumerate(lengths):
                bias[i, 0, n:width] = -np.inf
            calls.append((q, k, v, keys[:, :, :width].swapaxes(2, 3), values[:, :, :width], bias))
        cases[name] = calls
        cases[f"{name}, ragged"] = [ragged_call(*call, lengths) for call in calls]
    for name, (length, width) in PROMPT_CHUNKS.items():
        calls = []
        for _ in range(layers):
            keys, values = (rng.uniform(-2, 2, (1, 3, 1024, 64)).astype(np.float32) for _ in range(2))
            q = rng.uniform(-2, 2, (1, 9, 16, 64)).astype(np.float32)
            k, v = (rng.uniform(-2, 2, (1, 3, 16, 64)).astype(np.float32) for _ in range(2))
            bias = np.zeros((16, width + 16), np.float32)
            bias[:, length:width] = -np.inf
            bias[:, width:][np.triu_indices(16, 1)] = -np.inf
            calls.append((q, k, v, keys[:, :, :width].swapaxes(2, 3), values[:, :, :width], bias))
        cases[name] = calls
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(repeats):
        for name, calls in cases.items():
            for threads in (1, 2):
                vg.set_threads(threads)
                clock = time.process_time if threads == 1 else time.perf_counter
                t0 = clock()
                for args in calls:
                    (ragged if name.endswith("ragged") else kernel)(*args, scale=0.125)
                times.setdefault((name, threads), []).append(clock() - t0)
    vg.set_threads(1)
    for (name, threads), ts in times.items():
        how = "1 thread, CPU" if threads == 1 else "2 threads, wall"
        what = name if name in PROMPT_CHUNKS else f"rows {name}"
        print(f"attention, {what}: {1000 * statistics.median(ts):.2f} ms per {layers} layers ({how})")


def ragged_call(q: Any, k: Any, v: Any, past_kt: Any, past_v: Any, bias: Any, lengths: list[int]) -> tuple:
    """cached_attention's arguments for B rows of one token as the batched step's ragged_attention takes
    them: the B tokens as one sequence (q [1, H, B, D] viewing [1, B, H, D]), run i (i, i, 1, length_i)."""
    del bias
    tokens = [a.transpose(2, 1, 0, 3) for a in (q, k, v)]
    runs = np.asarray([(i, i, 1, n) for i, n in enumerate(lengths)], np.int64)
    return (*tokens, past_kt, past_v, runs)
