"""The small GPT's compiled training step (benchmarks/lm_train.py) in its plan's order against an order that
puts consumers next to their producers: each call that writes into no operand moved to right after the
last call making one of its operands (`--ops`: only the calls of those ops). One thread, one process, the
two orders alternating (each first in turn) on copies of the same arrays: thread CPU time, the median of
the paired ratios over `--repeats` pairs; the bytes each order's run holds at its peak (ir/memory_plan.py);
and whether the outputs and updates have the same bits.

    python benchmarks/lm_step_order.py --repeats 11
    python benchmarks/lm_step_order.py --repeats 11 --ops sum,layer_norm_grad,layer_norm_weight_grad
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from lm_train import small_steps


def producers_first(calls: list[Any], ops: set[str] | None) -> list[int]:
    """The calls' indices in the new order: each call that writes into no operand (of `ops`, if given)
    right after the last call before it that makes one of its operands; the others in turn at the end.
    Moving a call earlier keeps it before any call writing into its operands (the memory plan lets a call
    write into an array only where no later call reads it)."""
    from verigrad.ir.steps import Merged, call_args, call_outs

    order: list[int] = []
    where: dict[int, int] = {}  # slot -> position of the call making it
    for k, call in enumerate(calls):
        free = not isinstance(call, Merged) and call.into is None and (ops is None or call.op.name in ops)
        at = max([where[i] + 1 for i in call_args(call) if i in where], default=0) if free else len(order)
        order.insert(at, k)
        for p in range(at, len(order)):
            outs = call_outs(calls[order[p]])
            for slot in outs if isinstance(outs, tuple) else (outs,):
                where[slot] = p
    return order


def run(plan: Any, loop: list, dead: list, arrays: list[np.ndarray]) -> list[Any]:
    """Every slot's array after the calls of `loop` on `arrays`, each dropped after its `dead` call."""
    env = plan._template.copy()
    for slot, a in zip(plan.input_slots, arrays):
        env[slot] = a
    for k, (kernel, ins, out) in enumerate(loop):
        result = kernel(*[env[i] for i in ins])
        for slot, r in zip(out, result) if type(out) is tuple else ((out, result),):
            env[slot] = r
        for slot in dead[k]:
            env[slot] = None
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=11, help="pairs of runs (default 11)")
    parser.add_argument("--ops", help="comma-separated: move only these ops' calls (default all)")
    args = parser.parse_args()
    from verigrad.ir.memory_plan import held_bytes
    from verigrad.ir.plan import _dead_after

    steps, x, y = small_steps(1)
    compiled = steps["compiled"]
    for _ in range(12):  # past the checked run and the replay decision
        compiled(x, y)
    (plan,) = compiled._plans.values()
    arrays = [x.payload, y.payload] + [t.payload.copy() for t in plan.program.captured]
    order = producers_first(plan.calls, set(args.ops.split(",")) if args.ops else None)
    calls = [plan.calls[k] for k in order]
    loop = [plan._loop[k] for k in order]
    ways = {
        "plan": (plan.calls, plan._loop, plan._dead),
        "producers first": (calls, loop, _dead_after(calls, [ins for _, ins, _ in loop], plan._kept())),
    }
    kept = [*plan.output_slots, *plan.update_slots.values()]
    times: dict[str, list[float]] = {way: [] for way in ways}
    with np.errstate(all="ignore"):
        ends = [run(plan, loop_, dead, [a.copy() for a in arrays]) for _, loop_, dead in ways.values()]
        same = all(np.array_equal(ends[0][s], ends[1][s]) for s in kept)
        for r in range(args.repeats):
            for way in list(ways)[:: 1 if r % 2 else -1]:
                _, loop_, dead = ways[way]
                copies = [a.copy() for a in arrays]
                start = time.thread_time()
                run(plan, loop_, dead, copies)
                times[way].append(time.thread_time() - start)
    moved = sum(p != k for p, k in enumerate(order))
    for way, (calls_, _, dead) in ways.items():
        peak = held_bytes(calls_, dead, plan.specs)[0]
        print(f"{way:16s} {statistics.median(times[way]) * 1e3:7.1f} ms, peak {peak / 2**20:5.1f} MiB")
    ratio = statistics.median(b / a for a, b in zip(*times.values()))
    print(f"{moved} of {len(order)} calls moved; paired ratio {ratio:.3f}; the same bits: {same}")


if __name__ == "__main__":
    main()
