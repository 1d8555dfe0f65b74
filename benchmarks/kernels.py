"""Element-wise kernels of the cpu backend against PyTorch: sigmoid, tanh and relu on f32 vectors.

For each size (400K and 4M elements by default) and thread count (1 and 2), each kernel is called
`--calls` times in a row and timed, `--repeats` times; verigrad's kernel (`cpu` backend, output
allocated by the call, as `torch.sigmoid(x)` does) and PyTorch's take turns within each repeat, after a
short pause (so that the other runtime's spinning worker threads have gone to sleep). The table gives
the median ms per call, and the median over the repeats of the ratio verigrad / torch and of the ratio
to a memory copy of the same vector (`np.copyto` into a preallocated array: the memory bandwidth one
core gets), which bounds relu: ratios of runs next to each other, so that a change in the machine's
load between repeats cancels out.

Before timing, every verigrad result is checked against the op's reference at the kernel's stated
exactness: bit for bit in the default build; with VERIGRAD_NATIVE=1 (a native build, which computes f32
sigmoid in f32 arithmetic) within its tolerance. The title says which build ran. `--path` holds both
sides to one instruction set: verigrad's vector path and PyTorch's kernels (`ATEN_CPU_CAPABILITY`,
set before PyTorch is imported), so that an AVX-512 machine also measures the comparison a machine
with AVX2 only would make. PyTorch is only needed here: if it is missing, it is installed
(torch==2.13.0).

    python benchmarks/kernels.py                     # 400K and 4M elements, 1 and 2 threads
    python benchmarks/kernels.py --quick             # 5 repeats
    python benchmarks/kernels.py --sizes 1000000 --threads 2 --repeats 21
    python benchmarks/kernels.py --path avx2         # both on AVX2: as on a machine without AVX-512
    VERIGRAD_NATIVE=1 python benchmarks/kernels.py   # the native build
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import console as make_console
from _common import describe_machine, ensure_torch, ms_in_turns, positive_ints, set_threads, table, verigrad
from rich.console import Console
from rich.table import Table

from verigrad.backends import cpu
from verigrad.backends.verification import compare
from verigrad.ops import REGISTRY

OPS_TIMED = ("sigmoid", "tanh", "relu")
# verigrad's vector paths (--path), each with PyTorch's instruction set of the same width
TORCH_CAPABILITY = {"avx512": "avx512", "avx2": "avx2", "scalar": "default"}


def median_ratio(ours: list[float], theirs: list[float]) -> float:
    """The median of the ratios of the runs of the same repeat."""
    return statistics.median(a / b for a, b in zip(ours, theirs))


def runners(torch: Any, x: np.ndarray) -> dict[str, Callable[[], Any]]:
    """For each op, verigrad's kernel and PyTorch's, checked first; and the memory copy."""
    t = torch.from_numpy(x)
    out: dict[str, Callable[[], Any]] = {}
    for name in OPS_TIMED:
        kernel = cpu.cpu.native(REGISTRY[name], verigrad.f32)
        if kernel is None:
            raise SystemExit(f"the cpu backend has no f32 {name} kernel")
        stated = cpu.cpu.exactness(name, "f32")
        verdict = compare(kernel(x), REGISTRY[name].reference(x), stated)
        if verdict.message:
            raise SystemExit(f"the cpu backend's {name} is outside its claim ({stated}): {verdict.message}")
        out[f"verigrad {name}"] = lambda k=kernel: k(x)
        theirs = getattr(torch, name)
        out[f"torch {name}"] = lambda f=theirs: f(t)
    dst = np.empty_like(x)
    out["copy"] = lambda: np.copyto(dst, x)
    return out


def build_kind() -> str:
    """Which build of the kernels runs: the default one gives the reference's bits."""
    if cpu.build_info().get("native"):
        return "native build: f32 arithmetic for sigmoid, within its stated tolerance"
    return "default build: the reference's bits"


def run(args: argparse.Namespace, torch: Any, console: Console) -> Table:
    out = table(
        f"ms per call, f32, median of {args.repeats} runs (ratios: median of the runs' ratios); "
        f"cpu backend ({cpu.vector_path()} path for sigmoid and tanh; {build_kind()}); "
        f"PyTorch's kernels: {torch.backends.cpu.get_cpu_capability()}",
        ["elements", "threads", "op", "verigrad ms", "torch ms", "verigrad / torch", "verigrad / copy"],
        left=("op",),
        no_wrap=True,
    )
    rng = np.random.default_rng(0)
    for size in args.sizes:
        x = rng.standard_normal(size).astype(np.float32)
        fns = runners(torch, x)
        calls = args.calls or max(1, 4_000_000 // size)
        for n in args.threads:
            set_threads(torch, n)
            times = ms_in_turns(fns, args.repeats, calls, args.pause)
            med = {name: statistics.median(ms) for name, ms in times.items()}
            for i, name in enumerate(OPS_TIMED):
                ours, theirs = times[f"verigrad {name}"], times[f"torch {name}"]
                out.add_row(
                    f"{size:,}" if i == 0 and n == args.threads[0] else "",
                    str(n) if i == 0 else "",
                    name,
                    f"{med[f'verigrad {name}']:.3f}",
                    f"{med[f'torch {name}']:.3f}",
                    f"{median_ratio(ours, theirs):.2f}x",
                    f"{median_ratio(ours, times['copy']):.2f}x",
                )
            out.add_row("", "", "memory copy", f"{med['copy']:.3f}", "", "", "1.00x")
            console.print(f"  {size:,} elements, {n} thread(s): done", style="dim")
        out.add_section()
    verigrad.set_threads(1)
    return out


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="400000,4000000", help="vector lengths (default 400000,4000000)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    parser.add_argument("--repeats", type=int, default=15, help="timed runs per measurement (default 15)")
    parser.add_argument("--calls", type=int, default=0, help="calls per timed run (default 4M / size)")
    parser.add_argument("--pause", type=float, default=0.02, help="seconds idle before each run (0.02)")
    parser.add_argument("--quick", action="store_true", help="5 repeats")
    parser.add_argument(
        "--path",
        choices=tuple(TORCH_CAPABILITY),
        help="the instruction set of verigrad's vector path and PyTorch's kernels (default: the fastest)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats = 5
    args.sizes = positive_ints(parser, args.sizes, "--sizes")
    args.threads = positive_ints(parser, args.threads, "--threads")
    if args.repeats < 1 or args.calls < 0 or args.pause < 0:
        parser.error("--repeats must be at least 1, --calls and --pause at least 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.path is not None:
        os.environ["ATEN_CPU_CAPABILITY"] = TORCH_CAPABILITY[args.path]
    torch = ensure_torch()
    if not cpu.available():
        raise SystemExit("the cpu backend is not available here (no C compiler?)")
    if args.path is not None and cpu.vector_path(args.path) != args.path:
        raise SystemExit(f"this machine has no {args.path} path (it has {', '.join(cpu.vector_paths())})")
    console = make_console(120)
    console.print(describe_machine(torch))
    console.print(run(args, torch, console))
    console.print("verigrad / torch above 1: verigrad is slower; verigrad / copy: time over a memory copy's")


if __name__ == "__main__":
    main()
