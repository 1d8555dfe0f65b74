"""Pooling kernels of the cpu backend against pooling.c's general ones and PyTorch, on the digits CNN's 2x2
max pools (f32, batch 64, NCHW and NHWC; 28x28 and 8x8 images).

For each layer: max_pool2d and max_pool2d_grad as the cpu backend's kernels (pooling_tiled.c's, for windows
that tile the image), as pooling.c's general kernels (the path before pooling_tiled.c; forced by declining the
fast path), and PyTorch's max_pool2d, and for the gradient max_pool2d with indices followed by its
backward (verigrad's gradient op finds the maxima again from the image). Every kernel is checked against
the op's reference first (the same bits). The table gives medians over `--repeats` timed runs of
`--calls` calls each; the three take turns within each repeat. On one thread the time is the calling
thread's CPU time (`time.thread_time`), which another process's load on the machine does not inflate;
on more, wall time.

PyTorch is only needed here: if it is missing, it is installed (torch==2.13.0).

    python benchmarks/pooling.py                 # 1 thread, 9 repeats
    python benchmarks/pooling.py --threads 1,2 --repeats 15
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import kernel_main, table, timing_rows, verigrad
from rich.table import Table

from verigrad.backends import cpu
from verigrad.backends.cpu import pooling
from verigrad.ops import REGISTRY

BATCH = 64
LAYERS = {
    "28x28 pool1": (16, 28, 28),
    "28x28 pool2": (32, 14, 14),
    "8x8 pool1": (16, 8, 8),
    "8x8 pool2": (32, 4, 4),
}
WINDOW = {"kernel": (2, 2), "stride": (2, 2), "padding": (0, 0), "dilation": (1, 1)}


def general_kernels() -> pooling._Pools:
    """pooling.c's f32 pooling kernels alone: pooling_tiled.c's gradient kernel declines every case."""
    k = pooling._Pools(cpu.cpu.library, "f32", np.dtype(np.float32), cpu.cpu)
    k.c_tile_max_grad = lambda *args: 0
    return k


def runners(torch: Any, c: int, h: int, w: int, layout: str) -> dict[str, dict[str, Callable[[], Any]]]:
    """Per op: the kernel (checked first), pooling.c's general kernel, PyTorch."""
    rng = np.random.default_rng(0)
    x = np.maximum(rng.standard_normal((BATCH, c, h, w)), 0).astype(np.float32)  # ReLU outputs: ties
    g = rng.standard_normal((BATCH, c, h // 2, w // 2)).astype(np.float32)
    tx, tg = torch.from_numpy(x), torch.from_numpy(g)
    if layout == "NHWC":
        x, g = (np.ascontiguousarray(a.transpose(0, 2, 3, 1)) for a in (x, g))
        tx = tx.contiguous(memory_format=torch.channels_last)
    params = {**WINDOW, "layout": layout}
    general = general_kernels()
    calls = {
        "max_pool2d": ((x,), lambda: general.pool((lambda *a: 0, general.c_max), x, **params)),
        "max_pool2d_grad": ((g, x), lambda: general.max_pool_grad(g, x, **params)),
    }
    txr = tx.clone().requires_grad_()

    def torch_grad() -> Any:
        _, at = torch.nn.functional.max_pool2d(txr, 2, return_indices=True)
        return torch.ops.aten.max_pool2d_with_indices_backward(
            tg, txr, [2, 2], [2, 2], [0, 0], [1, 1], False, at
        )

    theirs = {"max_pool2d": lambda: torch.nn.functional.max_pool2d(tx, 2), "max_pool2d_grad": torch_grad}
    out = {}
    for name, (arrays, before) in calls.items():
        kernel = cpu.cpu.native(REGISTRY[name], verigrad.f32)
        if kernel is None:
            raise SystemExit(f"the cpu backend has no f32 {name} kernel")
        with verigrad.backend("reference"), verigrad.no_grad():
            expected = REGISTRY[name](*(verigrad.from_numpy(a) for a in arrays), **params).numpy()
        for result in (kernel(*arrays, **params), before()):
            if result.tobytes() != expected.tobytes():
                raise SystemExit(f"the cpu backend's {name} does not give the reference's bits")
        out[name] = {
            "kernel": lambda k=kernel, a=arrays: k(*a, **params),
            "general": before,
            "torch": theirs[name],
        }
    return out


def run(args: argparse.Namespace, torch: Any) -> Table:
    title = (
        f"ms per call, f32, batch {BATCH}, 2x2 windows, median of {args.repeats} runs of {args.calls} calls"
    )
    columns = ["layer", "layout", "threads", "op", "kernel", "general", "torch", "kernel / general"]
    out = table(title, [*columns, "kernel / torch"], left=("layer", "layout", "op"), no_wrap=True)
    with verigrad.no_grad():
        for layer, dims in LAYERS.items():
            for layout in ("NCHW", "NHWC"):
                fns = runners(torch, *dims, layout)
                rows = timing_rows(torch, args, fns, "kernel", ("general", "torch"))
                for first, threads, name, cells in rows:
                    out.add_row(
                        layer if first and layout == "NCHW" else "",
                        layout if first else "",
                        threads,
                        name,
                        *cells,
                    )
            out.add_section()
    return out


def main(argv: list[str] | None = None) -> None:
    kernel_main(__doc__.split("\n\n")[0], run, argv)


if __name__ == "__main__":
    main()
