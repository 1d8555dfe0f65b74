"""Where the small GPT's compiled training step (benchmarks/lm_train.py) spends its time, call by call, one
thread, in thread CPU time (another process's load adds none): each plan call inside a run of the step
(its operands as the step leaves them, cold or hot), split into the pool's chunks and the rest (Python,
and C outside the chunks: allocation, NumPy copies, a product's packing), beside the same call repeated
alone on its operands (hot: what `lm_train.py --kernels` sums). Summed by op, medians of `--repeats` runs;
`--calls N` lists the N calls with the most time outside the chunks (serial on any thread count), with
their operands' shapes.

`--again` times, in other runs of the step, each call twice in a row: as the step makes it, then at once
again on the same operands (those it writes into copied first, untimed). The second call finds its
operands in the caches and its result's memory just freed: the difference is what the step's order and
allocation cost that call, measured in the same run, so that the machine's load moves both alike. It
also counts the minor page faults of each run, and sums each call's minimum over the runs beside its
median (`lm_train.py --kernels` sums minimums). `--decode B` makes that table for SmolLM2's decode step
(`forward_rows` of B rows, the Q4_1 GGUF of `verigrad.models.fetch.fetch("smollm2")`, f32 activations) in
place of the GPT's: its plan's loop, which it runs before it replays.

    python benchmarks/lm_step_outside.py --repeats 7
    python benchmarks/lm_step_outside.py --repeats 7 --again
    python benchmarks/lm_step_outside.py --repeats 7 --again --decode 1
    python benchmarks/lm_step_outside.py --repeats 7 --calls 12
    python benchmarks/lm_step_outside.py --repeats 3 --again --size base   # the 10.1M GPT's step

`--eager` gives the same GPT's eager step by op instead (each op call's thread CPU time less that of the
op calls inside it, summed by op, means over `--repeats` steps): beside the compiled table, call by call.
Its timer replaces `EagerMode.run`, which turns off vg_eager's calls in C and the loss step's kept gradient
(cross_entropy and cross_entropy_grad then run apart): the Python path's op calls, not the step's own.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time
from collections import defaultdict
from typing import Any

import numpy as np
from lm_train import small_steps


def in_step(plan: Any, arrays: list[np.ndarray], counted: Any) -> list[tuple[float, float]]:
    """(chunks, rest) thread CPU seconds of each call of one run of the plan's loop on `arrays`."""
    env = plan._template.copy()
    for slot, a in zip(plan.input_slots, arrays):
        env[slot] = a
    times = []
    for (kernel, ins, out), dead in zip(plan._loop, plan._dead):
        args = [env[i] for i in ins]
        counted()
        start = time.thread_time()
        result = kernel(*args)
        took, chunks = time.thread_time() - start, counted()
        inside = chunks.whole + chunks.total
        times.append((inside, took - inside))
        for slot, r in zip(out, result) if type(out) is tuple else ((out, result),):
            env[slot] = r
        for slot in dead:
            env[slot] = None
    return times


def hot(plan: Any, arrays: list[np.ndarray], repeats: int) -> list[float]:
    """Each call's thread CPU seconds repeated alone on its operands (those it writes into copied)."""
    env = plan._template.copy()
    for slot, a in zip(plan.input_slots, arrays):
        env[slot] = a
    times = []
    for step, (kernel, ins, out) in zip(plan.calls, plan._loop):
        written = set(ins[len(step.ins) :])
        args = [env[i].copy() if i in written else env[i] for i in ins]
        took = []
        for _ in range(repeats):
            start = time.thread_time()
            result = kernel(*args)
            took.append(time.thread_time() - start)
        times.append(statistics.median(took))
        for slot, r in zip(out, result) if type(out) is tuple else ((out, result),):
            env[slot] = r
    return times


def cold_and_again(plan: Any, arrays: list[np.ndarray]) -> list[tuple[float, float]]:
    """(in the step, at once again) thread CPU seconds of each call of one run of the plan's loop on
    `arrays`."""
    env = plan._template.copy()
    for slot, a in zip(plan.input_slots, arrays):
        env[slot] = a
    times = []
    for step, (kernel, ins, out), dead in zip(plan.calls, plan._loop, plan._dead):
        args = [env[i] for i in ins]
        start = time.thread_time()
        result = kernel(*args)
        cold = time.thread_time() - start
        written = set(ins[len(step.ins) :])
        again = [env[i].copy() if i in written else env[i] for i in ins]
        start = time.thread_time()
        kernel(*again)
        times.append((cold, time.thread_time() - start))
        del again
        for slot, r in zip(out, result) if type(out) is tuple else ((out, result),):
            env[slot] = r
        for slot in dead:
            env[slot] = None
    return times


def again_table(plan: Any, arrays: list[np.ndarray], repeats: int) -> None:
    """`--again`'s table: by op, the calls in the step against the same calls at once again."""
    runs = [cold_and_again(plan, arrays) for _ in range(repeats)]
    by_op: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])  # calls, in step, again
    minimums = [0.0, 0.0]
    for k, step in enumerate(plan.calls):
        row = by_op[step.op.name + (" (merged)" if hasattr(step, "outs") else "")]
        row[0] += 1
        for j in (0, 1):
            row[j + 1] += statistics.median(run[k][j] for run in runs) * 1e3
            minimums[j] += min(run[k][j] for run in runs) * 1e3
    header = ("calls", "in step ms", "again", "in step - again")
    print(f"{'op':26s} " + " ".join(f"{h:>{max(7, len(h))}s}" for h in header))
    rows = sorted(by_op.items(), key=lambda kv: -(kv[1][1] - kv[1][2]))
    rows.append(("all", [sum(row[j] for row in by_op.values()) for j in range(3)]))
    for name, (calls, cold, again) in rows:
        print(f"{name:26s} {calls:7d} {cold:10.2f} {again:7.2f} {cold - again:15.2f}")
    print(f"each call's minimum over the runs, summed: in step {minimums[0]:.2f} ms, again {minimums[1]:.2f}")


def eager_table(step: Any, x: Any, y: Any, repeats: int) -> None:
    """`--eager`'s table: the eager step's op calls by op, in thread CPU time less the op calls inside."""
    from verigrad.eager import EagerMode

    run = EagerMode.run
    took: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # calls, seconds
    inner = [0.0]  # the time of the op calls made inside the current one

    def timed(self: Any, op: Any, args: Any, params: Any, plan: Any) -> Any:
        outer, inner[0] = inner[0], 0.0
        start = time.thread_time()
        try:
            return run(self, op, args, params, plan)
        finally:
            spent = time.thread_time() - start
            took[op.name][0] += 1
            took[op.name][1] += spent - inner[0]
            inner[0] = outer + spent

    for _ in range(3):
        step(x, y)
    whole = []
    EagerMode.run = timed
    try:
        for _ in range(repeats):
            start = time.thread_time()
            step(x, y)
            whole.append(time.thread_time() - start)
    finally:
        EagerMode.run = run
    print(f"{'op':26s} {'calls':>7s} {'ms':>10s}")
    for name, (calls, seconds) in sorted(took.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:26s} {calls // repeats:7d} {seconds / repeats * 1e3:10.2f}")
    total = sum(seconds for _, seconds in took.values()) / repeats * 1e3
    print(f"ops {total:.1f} ms; whole eager step (timed ops): {statistics.median(whole) * 1e3:.1f} ms")


def decode_plan(rows: int) -> tuple[Any, list[np.ndarray]]:
    """SmolLM2's decode step of `rows` rows (one thread, cpu backend): its plan, after 12 steps, and the
    arrays a step gives it."""
    from verigrad.backends import backend, set_threads
    from verigrad.models.catalog import load_language_model
    from verigrad.models.fetch import fetch

    set_threads(1)
    model, _ = load_language_model(fetch("smollm2"), "f32")
    with backend("cpu"):
        cache, ids, lengths = (
            model.new_cache(rows, 512),
            np.full((rows, 1), 42),
            [100 + 7 * i for i in range(rows)],
        )
        for _ in range(12):  # the plan built, then its calls recorded and replayed
            model.forward_rows(ids, cache, lengths)
        (plan,) = model.cached_step.decode_rows["f32"]._plans.values()
        given: list[list[np.ndarray]] = []
        run = plan.run_locked
        plan.run_locked = lambda arrays: given.append(list(arrays)) or run(arrays)
        model.forward_rows(ids, cache, lengths)
        del plan.run_locked
    return plan, given[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs, and calls alone (default 7)")
    parser.add_argument("--again", action="store_true", help="each call in the step against it at once again")
    parser.add_argument(
        "--decode", type=int, metavar="B", help="with --again: SmolLM2's decode step of B rows"
    )
    parser.add_argument(
        "--calls", type=int, default=0, help="list the N calls with the most time outside chunks"
    )
    parser.add_argument("--size", default="small", help="the GPT of lm_train.py's --sizes (default small)")
    parser.add_argument("--eager", action="store_true", help="the eager step's time by op instead")
    args = parser.parse_args()
    from verigrad.backends import cpu

    if args.decode:
        plan, arrays = decode_plan(args.decode)
        with np.errstate(all="ignore"):
            again_table(plan, arrays, args.repeats)
        return

    steps, x, y = small_steps(1, args.size)
    if args.eager:
        eager_table(steps["eager"], x, y, args.repeats)
        return
    compiled = steps["compiled"]
    for _ in range(12):  # past the checked run and the replay decision
        compiled(x, y)
    (plan,) = compiled._plans.values()
    whole, faults = [], []  # the steps' minor page faults: before the copies below move the heap's top
    for _ in range(args.repeats):
        before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
        start = time.thread_time()
        compiled(x, y)
        whole.append(time.thread_time() - start)
        faults.append(resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before)
    # the captured arrays copied: the runs below update the copies, not the model
    arrays = [x.payload, y.payload] + [t.payload.copy() for t in plan.program.captured]
    if args.again:
        with np.errstate(all="ignore"):
            again_table(plan, arrays, args.repeats)
        print(f"whole compiled step: {statistics.median(whole) * 1e3:.1f} ms, minor page faults {faults}")
        return
    with np.errstate(all="ignore"), cpu.static_schedule(), cpu.timed_chunks() as counted:
        runs = [in_step(plan, arrays, counted) for _ in range(args.repeats)]
        alone = hot(plan, arrays, args.repeats)
    by_op: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # calls, chunks, rest, hot
    for k, step in enumerate(plan.calls):
        row = by_op[step.op.name + (" (merged)" if hasattr(step, "outs") else "")]
        row[0] += 1
        for j in (1, 2):
            row[j] += statistics.median(run[k][j - 1] for run in runs) * 1e3
        row[3] += alone[k] * 1e3
    header = ("calls", "in step ms", "chunks", "rest", "alone", "in step - alone")
    print(f"{'op':26s} " + " ".join(f"{h:>{max(7, len(h))}s}" for h in header))
    rows = sorted(by_op.items(), key=lambda kv: -kv[1][1] - kv[1][2])
    rows.append(("all", [sum(row[j] for row in by_op.values()) for j in range(4)]))
    for name, (calls, chunks, rest, alone_ms) in rows:
        total = chunks + rest
        print(
            f"{name:26s} {calls:7d} {total:10.2f} {chunks:7.2f} {rest:7.2f} {alone_ms:7.2f} "
            f"{total - alone_ms:15.2f}"
        )
    print(
        f"whole compiled step: {statistics.median(whole) * 1e3:.1f} ms (the calls, and the plan's loop), "
        f"minor page faults {faults}"
    )
    if args.calls:
        serial_calls(plan, runs, args.calls)


def serial_calls(plan: Any, runs: list[list[tuple[float, float]]], count: int) -> None:
    """The `count` calls of the plan with the most median time outside the pool's chunks."""
    rest = [(statistics.median(run[k][1] for run in runs), k) for k in range(len(plan.calls))]
    print(f"\n{'call':>5s} {'op':26s} {'rest ms':>8s} {'chunks':>7s}  operands")
    for took, k in sorted(rest, reverse=True)[:count]:
        _, ins, _ = plan._loop[k]
        shapes = " ".join(str(plan.specs[i].shape) for i in ins if i < len(plan.specs))
        chunks = statistics.median(run[k][0] for run in runs)
        print(f"{k:5d} {plan.calls[k].op.name:26s} {took * 1e3:8.3f} {chunks * 1e3:7.3f}  {shapes}")


if __name__ == "__main__":
    main()
