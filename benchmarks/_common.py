"""What the benchmark scripts share: verigrad from the checkout when it is not installed, PyTorch
installed on demand (never a dependency of verigrad), a line describing the machine, and a console."""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console

try:
    import verigrad
except ImportError:  # run from a checkout that is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import verigrad

TORCH_VERSION = "2.13.0"


def ensure_torch() -> Any:
    """PyTorch, installed first with this interpreter's pip if it is missing."""
    try:
        return importlib.import_module("torch")
    except ImportError:
        print(f"PyTorch is not installed; installing torch=={TORCH_VERSION} for the comparison", flush=True)
        subprocess.check_call([sys.executable, "-m", "pip", "install", f"torch=={TORCH_VERSION}"])
        importlib.invalidate_caches()
        return importlib.import_module("torch")


def describe_machine(torch: Any) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), cpu)
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{cpu}, {cores} usable cores, load average {load:.2f}; Python {platform.python_version()}, "
        f"NumPy {np.__version__}, verigrad {verigrad.__version__}, torch {torch.__version__}"
    )


def console(width: int) -> Console:
    """A console; piped to a file, wide enough (`width`) that no table cell wraps."""
    out = Console()
    return out if out.is_terminal else Console(width=width)


def positive_ints(parser: argparse.ArgumentParser, text: str, what: str) -> list[int]:
    """Comma-separated integers, each at least 1 (a parser error otherwise)."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        parser.error(f"{what} takes comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        parser.error(f"{what} needs at least one value, each at least 1")
    return values


def median_ms(ways: dict[str, Callable[[], Any]], repeats: int, calls: int, threads: int) -> dict[str, float]:
    """Median milliseconds per call of each of `ways`, over `repeats` timed runs of `calls` calls; the
    ways take turns within each repeat, and each run starts after one untimed call. On one thread the
    time is the calling thread's CPU time (`time.thread_time`), which the load of other processes does
    not inflate; on more, wall time."""
    clock = time.thread_time if threads == 1 else time.perf_counter
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(repeats):
        for way, fn in ways.items():
            fn()
            start = clock()
            for _ in range(calls):
                fn()
            times[way].append((clock() - start) * 1e3 / calls)
    return {way: statistics.median(ms) for way, ms in times.items()}


def timing_cells(med: dict[str, float], ours: str, others: tuple[str, ...]) -> list[str]:
    """A table row's timing cells: the median ms of `ours` and of each other way, then `ours` / each."""
    cells = [f"{med[way]:.3f}" for way in (ours, *others)]
    return cells + [f"{med[ours] / med[way]:.2f}x" for way in others]


def kernel_args(
    description: str,
    argv: list[str] | None = None,
    extra: Callable[[argparse.ArgumentParser], Any] | None = None,
) -> argparse.Namespace:
    """`--threads`, `--repeats` and `--calls` of the per-kernel benchmarks (and what `extra` adds)."""
    parser = argparse.ArgumentParser(description=description)
    if extra is not None:
        extra(parser)
    parser.add_argument("--threads", default="1", help="comma-separated thread counts (default 1)")
    parser.add_argument("--repeats", type=int, default=9, help="timed runs per measurement (default 9)")
    parser.add_argument("--calls", type=int, default=5, help="calls per timed run (default 5)")
    args = parser.parse_args(argv)
    args.threads = positive_ints(parser, args.threads, "--threads")
    if args.repeats < 1 or args.calls < 1:
        parser.error("--repeats and --calls must be at least 1")
    return args


def kernel_main(
    description: str,
    run: Callable[[argparse.Namespace, Any], Any],
    argv: list[str] | None,
    extra: Callable[[argparse.ArgumentParser], Any] | None = None,
) -> None:
    """A per-kernel benchmark's main: parse the arguments (`extra` may add some), get PyTorch, print the
    machine and the table that `run(args, torch)` makes on the cpu backend."""
    args = kernel_args(description, argv, extra)
    torch = ensure_torch()
    out = console(130)
    out.print(describe_machine(torch))
    from verigrad.backends import cpu

    if not cpu.available():
        raise SystemExit("the cpu backend could not be built here")
    try:
        out.print(run(args, torch))
    finally:
        verigrad.set_threads(1)
