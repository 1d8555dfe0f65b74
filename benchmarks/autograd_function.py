"""Microseconds per eager forward+backward through a custom autograd Function: verigrad against PyTorch
(the same class body subclassed from each library's Function), and verigrad's Function against the
same computation written with plain ops (what the Function's node and the user's Python cost). On one
thread, 64-element f32 tensors (`--size`), median of `--repeats` runs taking turns.

    python benchmarks/autograd_function.py
    python benchmarks/autograd_function.py --size 4096 --repeats 15
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from _common import console, describe_machine, ensure_torch, median_ms, set_threads, table, verigrad


def _square(lib: Any) -> type:
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    return Square


def _step(x: Any, fn: Any) -> Any:
    def run() -> None:
        x.grad = None
        fn(x).sum().backward()

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    torch = ensure_torch()
    set_threads(torch, 1)
    a = np.random.default_rng(0).standard_normal(args.size).astype(np.float32)
    xv = verigrad.tensor(a, requires_grad=True)
    xt = torch.tensor(a, requires_grad=True)
    vg_fn, torch_fn = _square(verigrad), _square(torch)
    ways = {
        "verigrad Function": _step(xv, vg_fn.apply),
        "torch Function": _step(xt, torch_fn.apply),
        "verigrad ops": _step(xv, lambda x: x * x),
        "torch ops": _step(xt, lambda x: x * x),
    }
    med = median_ms(ways, args.repeats, args.calls, threads=1)
    out = console(110)
    out.print(describe_machine(torch))
    rows = table(f"forward+backward of x*x (f32[{args.size}]), us per step", ["way", "us", "vs torch"])
    for way, ms in med.items():
        peer = med["torch Function" if "Function" in way else "torch ops"]
        rows.add_row(way, f"{ms * 1000:.1f}", f"{ms / peer:.2f}x")
    out.print(rows)
    ratio = med["verigrad Function"] / med["verigrad ops"]
    out.print(f"verigrad Function / verigrad ops: {ratio:.2f}x")


if __name__ == "__main__":
    main()
