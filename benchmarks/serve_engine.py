"""serve.py's engine-alone measurements (`--engine`, `--stall`): the engine without HTTP under clients
that are threads of this process, in the engine thread's CPU time (see serve.py's docstring)."""

from __future__ import annotations

import itertools
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np


def engine_cpu(
    model_path: Path,
    threads: int,
    counts: list[int],
    requests: int,
    max_tokens: int,
    block: int,
    join: bool,
    prefill_tokens: int | None,
    engine_flags: dict | None = None,
    activations: str = "f32",
    seconds: float | None = None,
    questions: list[str] = (),
):
    """The engine alone (no HTTP), as the server's clients load it: the engine thread's CPU seconds in
    prefill (admitting prompts and running their chunks apart from the steps) and in decode steps (with
    the chunks joined to them, unless `join` is false), and its CPU ms per output token (time.thread_time:
    with --threads 1 the kernels run on that thread, and the machine's other work adds little); the plans
    the level built. `prefill_tokens`: the engine's (None: its default); `engine_flags`: more of the
    Engine's settings (join_last, ragged_pad); `seconds`: each client starts requests for that long
    instead of `requests` of them. (It times `_prefill_some` and `_step`, which older engines have too.)"""
    import threading

    from verigrad.backends import backend, set_threads
    from verigrad.models.catalog import load_language_model
    from verigrad.serve.engine import Engine, Request

    class Timed(Engine):
        cpu = {"prefill": 0.0, "decode": 0.0, "rows": 0}  # the steps' rows

        def _prefill_some(self) -> None:
            t0 = time.thread_time()
            super()._prefill_some()
            self.cpu["prefill"] += time.thread_time() - t0

        def _step(self) -> None:
            t0 = time.thread_time()
            self.cpu["rows"] += len(self._running)
            super()._step()
            self.cpu["decode"] += time.thread_time() - t0

    kinds = ("decode", "decode_rows", "chunks", "mixes", "raggeds")

    def plans_built(model: Any) -> dict[str, int]:
        """The plans the model's compiled steps built so far, by kind (rows: `forward_rows`'s)."""
        step = model.cached_step
        return {kind: sum(c.counts["plans"] for c in getattr(step, kind).values()) for kind in kinds}

    set_threads(threads)
    model, tokenizer = load_language_model(model_path, activations)
    chats = [[{"role": "user", "content": q}] for q in questions]
    prompts = [tokenizer.encode(tokenizer.apply_chat_template(c), add_special=False) for c in chats]
    with backend("cpu"):
        budget = {} if prefill_tokens is None else {"prefill_tokens": prefill_tokens}
        budget |= engine_flags or {}
        engine = Timed(
            model, tokenizer, max_batch=max(counts), capacity=1024, block=block, join_chunks=join, **budget
        )
        engine.start()

        def level(clients: int, requests: int, max_tokens: int, seconds: float | None = None):
            made, ttft = [], []
            t0 = time.perf_counter()

            def client(i: int) -> None:
                for j in itertools.count():
                    if (seconds is None and j == requests) or (
                        seconds and time.perf_counter() - t0 > seconds
                    ):
                        return
                    done, got, sent = threading.Event(), [], time.perf_counter()

                    def on_event(ev: Any) -> None:
                        if ev.tokens and not got:
                            ttft.append(time.perf_counter() - sent)
                        got.extend(ev.tokens)
                        if ev.finish_reason:
                            done.set()

                    engine.submit(Request(prompts[(i + j) % len(prompts)], max_tokens, 0.0), on_event)
                    done.wait()
                    made.append(len(got))

            workers = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            return sum(made), time.perf_counter() - t0, statistics.median(ttft)

        try:
            for clients in counts:
                level(clients, 1, max_tokens)  # warm-up: the plans built, the prefix cache filled
                engine.cpu.update(prefill=0.0, decode=0.0, rows=0)
                steps, joined = engine.steps_total, (engine.joined_chunks_total, engine.joined_tokens_total)
                plans = plans_built(model)
                tokens, wall, ttft = level(clients, requests, max_tokens, seconds)
                pre, dec = engine.cpu["prefill"], engine.cpu["decode"]
                steps, now = engine.steps_total - steps, plans_built(model)
                print(
                    f"{activations}, block {block}, {clients} client(s): {tokens} tokens, engine thread CPU "
                    f"{pre:.2f} s prefill + {dec:.2f} s decode = {1000 * (pre + dec) / tokens:.2f} ms per "
                    f"token ({tokens / wall:.1f} tokens/s wall, TTFT {1000 * ttft:.0f} ms); {steps} decode "
                    f"steps of {1000 * dec / max(steps, 1):.1f} ms, {engine.cpu['rows'] / max(steps, 1):.2f} "
                    f"rows each, {engine.joined_chunks_total - joined[0]} prompt chunks in them (of "
                    f"{engine.joined_tokens_total - joined[1]} tokens); plans built "
                    + (", ".join(f"{k} {now[k] - plans[k]}" for k in kinds if now[k] - plans[k]) or "none")
                    + f" ({sum(now.values()) - sum(plans.values())}; {sum(now.values())} in all)",
                    flush=True,
                )
        finally:
            engine.close()


def stall(model_path: Path, threads: int, running: int, prompt: int, join: bool, repeats: int = 3) -> None:
    """A long prompt arriving while `running` sequences decode (the engine alone, no HTTP): the longest
    wait between two tokens of a running sequence while it is prefilled, and its time to first token,
    with the prompt prefilled one chunk (16 tokens) or 64 tokens (the default) between two steps, and all
    at once, beside the time of a step without it (medians)."""
    import threading

    from verigrad.backends import backend, set_threads
    from verigrad.models.catalog import load_language_model
    from verigrad.serve.engine import BLOCK, PREFILL_TOKENS, Engine, Request

    set_threads(threads)
    model, tokenizer = load_language_model(model_path)
    rng = np.random.default_rng(0)
    budgets = dict.fromkeys((BLOCK, PREFILL_TOKENS))  # one chunk, the default (the same where they are)
    modes = {f"{n} tokens between steps": n for n in budgets} | {"all at once": 1 << 30}
    found: dict[str, list[tuple[float, float, float]]] = {mode: [] for mode in modes}
    with backend("cpu"):
        for r in range(repeats + 1):  # the first round builds the plans
            for mode, budget in modes.items():
                engine = Engine(
                    model,
                    tokenizer,
                    max_batch=running + 1,
                    capacity=2048,
                    prefill_tokens=budget,
                    join_chunks=join,
                )
                times: list[float] = []
                started, first = threading.Semaphore(0), threading.Event()

                def receiver() -> Any:
                    seen: list[int] = []

                    def on_event(ev: Any) -> None:
                        times.append(time.perf_counter())
                        if not seen:
                            seen.append(1)
                            started.release()

                    return on_event

                engine.start()
                try:
                    for i in range(running):
                        engine.submit(Request([1 + i, 2, 3], 10_000, temperature=0.0), receiver())
                    for _ in range(running):
                        started.acquire()
                    clock = time.pthread_getcpuclockid(engine._thread.ident)  # the engine thread's CPU
                    ta, sa, ca = time.perf_counter(), engine.steps_total, time.clock_gettime(clock)
                    time.sleep(0.5)  # the steps' own pace, for comparison
                    t0, s0, c0 = time.perf_counter(), engine.steps_total, time.clock_gettime(clock)
                    ids = list(map(int, rng.integers(100, 20_000, prompt)))
                    engine.submit(Request(ids, 1, temperature=0.0), lambda ev: first.set())
                    first.wait()
                    t1, s1, c1 = time.perf_counter(), engine.steps_total, time.clock_gettime(clock)
                finally:
                    engine.close()
                during = [t for t in times if t0 <= t <= t1]
                gaps = np.diff([t0, *during, t1])
                if r:
                    step_cpu = (c0 - ca) / max(s0 - sa, 1)
                    prefill_cpu = c1 - c0 - (s1 - s0) * step_cpu  # the window's CPU less its steps' own
                    found[mode].append((float(gaps.max()), t1 - t0, (t0 - ta) / max(s0 - sa, 1), prefill_cpu))
    for mode, rows in found.items():
        gap, ttft, step, cpu = (statistics.median(row[i] for row in rows) for i in range(4))
        say = f"{prompt}-token prompt, {running} running, {mode}: longest wait {1000 * gap:.0f} ms"
        print(
            f"{say} (a step without it: {1000 * step:.0f} ms), TTFT {1000 * ttft:.0f} ms, the prompt's CPU "
            f"{1000 * cpu:.0f} ms"
        )
