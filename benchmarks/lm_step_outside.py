"""Where the small GPT's compiled training step (benchmarks/lm_train.py) spends its time, call by call, one
thread, in thread CPU time (another process's load adds none): each plan call inside a run of the step
(its operands as the step leaves them, cold or hot), split into the pool's chunks and the rest (Python,
and C outside the chunks: allocation, NumPy copies, a product's packing), beside the same call repeated
alone on its operands (hot: what `lm_train.py --kernels` sums). Summed by op, medians of `--repeats` runs;
`--calls N` lists the N calls with the most time outside the chunks (serial on any thread count), with
their operands' shapes.

    python benchmarks/lm_step_outside.py --repeats 7 --calls 12
"""

from __future__ import annotations

import argparse
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs, and calls alone (default 7)")
    parser.add_argument(
        "--calls", type=int, default=0, help="list the N calls with the most time outside chunks"
    )
    args = parser.parse_args()
    from verigrad.backends import cpu

    steps, x, y = small_steps(1)
    compiled = steps["compiled"]
    for _ in range(12):  # past the checked run and the replay decision
        compiled(x, y)
    (plan,) = compiled._plans.values()
    # the captured arrays copied: the runs below update the copies, not the model
    arrays = [x.payload, y.payload] + [t.payload.copy() for t in plan.program.captured]
    with np.errstate(all="ignore"), cpu.static_schedule(), cpu.timed_chunks() as counted:
        runs = [in_step(plan, arrays, counted) for _ in range(args.repeats)]
        alone = hot(plan, arrays, args.repeats)
    whole = []
    for _ in range(args.repeats):
        start = time.thread_time()
        compiled(x, y)
        whole.append(time.thread_time() - start)
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
    print(f"whole compiled step: {statistics.median(whole) * 1e3:.1f} ms (the calls, and the plan's loop)")
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
