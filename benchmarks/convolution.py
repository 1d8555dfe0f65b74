"""Convolution kernels of the cpu backend against their decompositions and PyTorch, on the digits CNN's
layers (f32, batch 64, 3x3 kernels, padding 1; 28x28 and 8x8 images).

For each layer: conv2d, conv2d_input_grad and conv2d_weight_grad as the cpu backend's kernels, as their
decompositions run op by op on the cpu backend (im2col, the copies that transpose the columns, one
matmul, col2im: the path before these kernels), and PyTorch's conv2d, nn.grad.conv2d_input and
nn.grad.conv2d_weight. Every verigrad kernel is checked against the op's reference first (within its
`error_bound`). The table gives medians over `--repeats` timed runs of `--calls` calls each; the three
take turns within each repeat. On one thread the time is the calling thread's CPU time
(`time.thread_time`), which another process's load on the machine does not inflate; on more, wall time.

PyTorch is only needed here: if it is missing, it is installed (torch==2.13.0).

    python benchmarks/convolution.py                 # 1 thread, 9 repeats
    python benchmarks/convolution.py --threads 1,2 --repeats 15
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import kernel_main, table, timing_rows, verigrad
from rich.table import Table

from verigrad.backends import cpu
from verigrad.backends.cpu.convolution import CONVOLUTION, error_bound
from verigrad.backends.reference import composite_reference
from verigrad.ops import REGISTRY

BATCH = 64
LAYERS = {  # (C, H, W, O)
    "28x28 conv1": (1, 28, 28, 16),
    "28x28 conv2": (16, 14, 14, 32),
    "8x8 conv1": (1, 8, 8, 16),
    "8x8 conv2": (16, 4, 4, 32),
}
PARAMS = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1), "layout": "NCHW"}


def runners(torch: Any, c: int, h: int, w: int, o: int) -> dict[str, dict[str, Callable[[], Any]]]:
    """Per op: the kernel (checked first), the decomposition on the cpu backend, PyTorch."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, c, h, w)).astype(np.float32)
    weight = (rng.standard_normal((o, c, 3, 3)) / 3).astype(np.float32)
    g = rng.standard_normal((BATCH, o, h, w)).astype(np.float32)
    calls = {
        "conv2d": ((x, weight), PARAMS),
        "conv2d_input_grad": ((g, weight), {**PARAMS, "size": (h, w)}),
        "conv2d_weight_grad": ((g, x), {**PARAMS, "kernel": (3, 3)}),
    }
    tx, tw, tg = torch.from_numpy(x), torch.from_numpy(weight), torch.from_numpy(g)
    theirs = {
        "conv2d": lambda: torch.nn.functional.conv2d(tx, tw, padding=1),
        "conv2d_input_grad": lambda: torch.nn.grad.conv2d_input(tx.shape, tw, tg, padding=1),
        "conv2d_weight_grad": lambda: torch.nn.grad.conv2d_weight(tx, tw.shape, tg, padding=1),
    }
    out = {}
    for name in CONVOLUTION:
        arrays, params = calls[name]
        kernel = cpu.cpu.native(REGISTRY[name], verigrad.f32)
        if kernel is None:
            raise SystemExit(f"the cpu backend has no f32 {name} kernel")
        err = np.abs(kernel(*arrays, **params) - composite_reference(REGISTRY[name])(*arrays, **params))
        if not (err <= error_bound(name, *arrays, **params)).all():
            raise SystemExit(f"the cpu backend's {name} is outside its error bound")

        def decomposition(op=REGISTRY[name], arrays=arrays, params=params) -> Any:
            with verigrad.backend("cpu"), verigrad.no_grad():
                return op.decompose(*(verigrad.from_numpy(a) for a in arrays), **params).payload

        out[name] = {
            "kernel": lambda k=kernel, a=arrays, p=params: k(*a, **p),
            "decomposition": decomposition,
            "torch": theirs[name],
        }
    return out


def run(args: argparse.Namespace, torch: Any) -> Table:
    title = f"ms per call, f32, batch {BATCH}, median of {args.repeats} runs of {args.calls} calls"
    columns = ["layer", "threads", "op", "kernel", "decomposition", "torch", "kernel / decomposition"]
    out = table(title, [*columns, "kernel / torch"], left=("layer", "op"), no_wrap=True)
    for layer, dims in LAYERS.items():
        fns = runners(torch, *dims)
        rows = timing_rows(torch, args, fns, "kernel", ("decomposition", "torch"))
        for first, threads, name, cells in rows:
            out.add_row(layer if first else "", threads, name, *cells)
        out.add_section()
    return out


def main(argv: list[str] | None = None) -> None:
    kernel_main(__doc__.split("\n\n")[0], run, argv)


if __name__ == "__main__":
    main()
