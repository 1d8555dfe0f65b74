"""The loss_step pass: a compiled GPT step's cross_entropy and its gradient as one kernel against the two,
in one process, alternating (CPU time on one thread: `time.process_time`; the median of `--repeats`
rounds).

  kernels  cross_entropy + cross_entropy_grad against cross_entropy_step + cross_entropy_total on
           `--rows` x `--classes` f32 logits (the small GPT's: 1024 x 4096), mean, ignore_index -100
  eager    the eager loss and its backward on those logits: F.cross_entropy, which keeps the gradient
           from the step kernel for loss.backward() (nn/functional/loss_step.py), against the
           cross_entropy op, whose backward runs cross_entropy_grad
  steps    the small GPT's compiled training step (benchmarks/lm_train.py's) with the pass and without

    python benchmarks/loss_step.py
    python benchmarks/loss_step.py --repeats 21 --steps 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
from lm_train import small_steps


def _cpu_ms(call: Any, calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        call()
    return (time.process_time() - start) / calls * 1e3


def _alternate(ways: dict[str, Any], repeats: int, calls: int) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in ways}
    for round_ in range(repeats):
        for name in list(ways)[:: 1 if round_ % 2 else -1]:  # each first in turn
            times[name].append(_cpu_ms(ways[name], calls))
    return {name: statistics.median(t) for name, t in times.items()}


def kernels(args: argparse.Namespace) -> None:
    import verigrad
    from verigrad.backends import cpu
    from verigrad.ops import REGISTRY

    verigrad.set_threads(1)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((args.rows, args.classes)) * 0.5).astype(np.float32)
    t, g = rng.integers(0, args.classes, args.rows), np.ones((), np.float32)
    k = {name: cpu.cpu.native(REGISTRY[name], verigrad.f32) for name in REGISTRY if name.startswith("cross_")}
    params = {"reduction": "mean", "ignore_index": -100}
    n = args.rows * args.classes

    def two() -> None:
        k["cross_entropy"](x, t, **params)
        k["cross_entropy_grad"](x, t, g, **params)

    def one() -> None:
        k["cross_entropy_total"](k["cross_entropy_step"](x, t, g, **params)[n:], t, **params)

    ms = _alternate({"two kernels": two, "one step": one}, args.repeats, 10)
    print(f"kernels {args.rows}x{args.classes}: " + ", ".join(f"{w} {v:.2f} ms" for w, v in ms.items()))
    print(f"  one step / two kernels: {ms['one step'] / ms['two kernels']:.3f}")


def eager(args: argparse.Namespace) -> None:
    import verigrad
    import verigrad.nn.functional as F

    verigrad.set_threads(1)
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((args.rows, args.classes)) * 0.5).astype(np.float32)
    logits = verigrad.tensor(x, requires_grad=True)
    target = verigrad.tensor(rng.integers(0, args.classes, args.rows))

    def backward(loss_of: Any) -> None:
        logits.grad = None
        loss_of().backward()

    ways = {
        "the op": lambda: backward(lambda: verigrad.ops.cross_entropy(logits, target, ignore_index=-100)),
        "F.cross_entropy": lambda: backward(lambda: F.cross_entropy(logits, target)),
    }
    ms = _alternate(ways, args.repeats, 10)
    print("eager loss + backward: " + ", ".join(f"{w} {v:.2f} ms" for w, v in ms.items()))
    print(f"  F.cross_entropy / the op: {ms['F.cross_entropy'] / ms['the op']:.3f}")


def steps(args: argparse.Namespace) -> None:
    from verigrad.ir import passes
    from verigrad.ir.passes import loss_step

    made: dict[str, Any] = {}
    full = list(passes.PIPELINE)
    for way, pipeline in (("with the pass", full), ("without", [p for p in full if p is not loss_step.run])):
        passes.PIPELINE[:] = pipeline  # read when the step is traced, on its first call
        compiled, x, y = small_steps(1)
        compiled = compiled["compiled"]
        losses = [compiled(x, y).numpy().tobytes() for _ in range(12)]  # past the checked run and replay
        made[way] = (compiled, x, y, losses)
    passes.PIPELINE[:] = full
    same = made["with the pass"][3] == made["without"][3]
    ways = {way: (lambda c=c, x=x, y=y: c(x, y)) for way, (c, x, y, _) in made.items()}
    ms = _alternate(ways, args.repeats, args.steps)
    print("small GPT compiled step, 1 thread: " + ", ".join(f"{w} {v:.1f} ms" for w, v in ms.items()))
    print(
        f"  speed with / without: {ms['without'] / ms['with the pass']:.3f}x; 12 losses the same bits: {same}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=1024)
    parser.add_argument("--classes", type=int, default=4096)
    args = parser.parse_args()
    kernels(args)
    eager(args)
    steps(args)


if __name__ == "__main__":
    main()
