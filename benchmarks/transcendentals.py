"""The cpu backend's transcendental kernels against their NumPy references and PyTorch, in f32 and f64.

For exp, expm1, log, log1p, sin, cos, tanh, sigmoid, silu, gelu_tanh, gelu and gelu_deriv (PyTorch's
aten.gelu_backward with a gradient of ones, which multiplies by it too) on a vector of `--size` elements
(normal values of standard deviation 3; log and log1p take their absolute values), and pow (those
absolute values to the power of normal values of standard deviation 1): verigrad's cpu
kernel, the op's NumPy reference (which defines its bits) and PyTorch's function. Each kernel is first
held to its stated exactness against the reference on the same vector (bit for bit where it states
exact: where NumPy's f64 routines are its own, the kernels run them, see verigrad/backends/cpu/
numpy_loops.py). The table gives medians over `--repeats` timed runs of `--calls` calls each, the three
taking turns within each repeat; on one thread the calling thread's CPU time.

PyTorch is only needed here: if it is missing, it is installed (torch==2.13.0).

    python benchmarks/transcendentals.py                  # 1 thread, 400K elements
    python benchmarks/transcendentals.py --threads 1,2 --size 4000000
    VERIGRAD_NATIVE=1 python benchmarks/transcendentals.py --ops gelu,gelu_deriv --size 524288 --dtypes f32
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np
from _common import kernel_main, median_ms, set_threads, table, timing_cells, verigrad
from rich.table import Table

from verigrad.backends import cpu
from verigrad.backends.verification import compare
from verigrad.ops import REGISTRY

OPS_TIMED = ("exp", "expm1", "log", "log1p", "sin", "cos", "tanh", "sigmoid", "silu", "gelu_tanh", "pow")
OPS_TIMED += ("gelu", "gelu_deriv")  # their NumPy references call Python's erf an element at a time
POSITIVE = ("log", "log1p")


def operands(op: str, rng: np.random.Generator, size: int, dtype: np.dtype) -> tuple[np.ndarray, ...]:
    """The vectors `op` is timed on."""
    x = rng.normal(0, 3, size)
    if op == "pow":
        return np.abs(x).astype(dtype), rng.normal(0, 1, size).astype(dtype)
    return ((np.abs(x) if op in POSITIVE else x).astype(dtype),)


def torch_function(torch: Any, op: str) -> Any:
    if op == "gelu_tanh":
        return lambda t: torch.nn.functional.gelu(t, approximate="tanh")
    if op == "gelu":
        return torch.nn.functional.gelu
    if op == "gelu_deriv":
        ones: dict[tuple, Any] = {}  # made once per shape, outside the timed calls' work

        def gelu_backward(t: Any) -> Any:
            g = ones.setdefault(tuple(t.shape), torch.ones_like(t))
            return torch.ops.aten.gelu_backward(g, t)

        return gelu_backward
    if op == "silu":
        return torch.nn.functional.silu
    return getattr(torch, op)


def run(args: argparse.Namespace, torch: Any) -> Table:
    out = table(
        f"ms per call, {args.size:,} elements; median of {args.repeats} runs of {args.calls}",
        ["op", "dtype", "threads", "stated", "verigrad", "NumPy", "torch", "/ NumPy", "/ torch"],
        left=("op", "dtype", "stated"),
    )
    for op in args.ops.split(","):
        for dtype in args.dtypes.split(","):
            xs = operands(op, np.random.default_rng(0), args.size, cpu.DTYPES[dtype])
            kernel = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype))
            stated = cpu.cpu.exactness(op, dtype)
            with np.errstate(all="ignore"):
                verdict = compare(kernel(*xs), REGISTRY[op].reference(*xs), stated)
            if verdict.message:
                sys.exit(f"{op} {dtype}: {verdict.message}")
            tx, fn = [torch.from_numpy(a) for a in xs], torch_function(torch, op)
            for n in args.threads:
                set_threads(torch, n)
                ref = REGISTRY[op].reference
                ways = {"verigrad": lambda: kernel(*xs), "NumPy": lambda: ref(*xs), "torch": lambda: fn(*tx)}
                with np.errstate(all="ignore"):
                    med = median_ms(ways, args.repeats, args.calls, n)
                cells = timing_cells(med, "verigrad", ("NumPy", "torch"))
                out.add_row(op, dtype, str(n), str(stated), *cells)
        out.add_section()
    return out


def sizes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", type=int, default=400_000, help="elements (default 400,000)")
    parser.add_argument("--ops", default=",".join(OPS_TIMED), help="comma-separated ops (default: all)")
    parser.add_argument("--dtypes", default="f32,f64", help="comma-separated: f32, f64 (default both)")


def main(argv: list[str] | None = None) -> None:
    kernel_main(__doc__.splitlines()[0], run, argv, sizes)


if __name__ == "__main__":
    main()
