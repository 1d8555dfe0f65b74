"""A user kernel against built-in activations: `quick_gelu(x) = x * sigmoid(1.702 * x)` written as an
`elementwise_kernel` (compiled to C by the fused kernels' generator, verified at registration) against
verigrad's own `F.silu` and `F.gelu` (built-in kernels) and PyTorch's `F.silu`, `F.gelu` and quick_gelu
written in torch ops, eagerly on `--size` f32 elements (normal, standard deviation 3).

Each way runs in turns within each repeat; medians of `--repeats` runs of `--calls` calls (on one thread
the calling thread's CPU time). The user kernel is first held to its reference's bits on the same
vector. PyTorch is only needed here: if it is missing, it is installed.

    python benchmarks/user_kernel.py                    # 1 thread, 1M elements
    python benchmarks/user_kernel.py --threads 1,2

The module also defines the kernel for `verigrad verify --import benchmarks/user_kernel.py --op
quick_gelu --every-f32` (all 2^32 f32 inputs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

try:
    import verigrad
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import verigrad

from verigrad import f32
from verigrad.library import elementwise_kernel


@elementwise_kernel
def quick_gelu(x: f32) -> f32:
    """GELU's sigmoid approximation (CLIP's QuickGELU)."""
    return x * sigmoid(1.702 * x)  # noqa: F821 (the kernel's own function, never run as Python)


COLUMNS = ("threads", "user quick_gelu", "F.silu", "F.gelu", "torch silu", "torch gelu", "torch quick_gelu")


def run(args: argparse.Namespace, torch: Any) -> Any:
    from _common import median_ms, set_threads, table, timing_cells

    F, TF = verigrad.nn.functional, torch.nn.functional
    a = np.random.default_rng(0).normal(0, 3, args.size).astype(np.float32)
    reference = quick_gelu.op.reference(a)
    x, tx = verigrad.from_numpy(a), torch.from_numpy(a)
    with verigrad.backend("cpu"):
        got = quick_gelu(x).numpy()
    if got.tobytes() != reference.tobytes():
        sys.exit("quick_gelu: the kernel's bits differ from its reference's")
    out = table(
        f"ms per call, {args.size:,} f32 elements; median of {args.repeats} runs of {args.calls}",
        [*COLUMNS, "/ F.silu", "/ F.gelu", "/ torch silu"],
    )
    with verigrad.backend("cpu"):
        for n in args.threads:
            set_threads(torch, n)
            ways = {
                "user": lambda: quick_gelu(x),
                "silu": lambda: F.silu(x),
                "gelu": lambda: F.gelu(x),
                "torch silu": lambda: TF.silu(tx),
                "torch gelu": lambda: TF.gelu(tx),
                "torch quick": lambda: tx * torch.sigmoid(1.702 * tx),
            }
            med = median_ms(ways, args.repeats, args.calls, n)
            cells = timing_cells(med, "user", ("silu", "gelu", "torch silu"))
            torch_only = [f"{med[w]:.3f}" for w in ("torch gelu", "torch quick")]
            out.add_row(str(n), *cells[:4], *torch_only, *cells[4:])
    return out


def sizes(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size", type=int, default=1_000_000, help="elements (default 1,000,000)")


def main(argv: list[str] | None = None) -> None:
    from _common import kernel_main

    kernel_main(__doc__.splitlines()[0], run, argv, sizes)


if __name__ == "__main__":
    main()
