"""What the benchmark scripts share: verigrad from the checkout when it is not installed, PyTorch
installed on demand (never a dependency of verigrad), a line describing the machine, a console, the
timing of ways taking turns, the tables, and PyTorch's training step."""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

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


def describe_machine(torch: Any = None) -> str:
    """The CPU model, usable cores, load average and versions (PyTorch's where `torch` is given)."""
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
        f"NumPy {np.__version__}, verigrad {verigrad.__version__}"
        + (f", torch {torch.__version__}" if torch is not None else "")
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


def set_threads(torch: Any, n: int) -> None:
    """`n` threads for verigrad and for PyTorch."""
    verigrad.set_threads(n)
    torch.set_num_threads(n)


def ms_per_call(
    fn: Callable[[], Any], calls: int, pause: float = 0.0, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Milliseconds per call over `calls` consecutive calls of `fn`, measured by `clock`.

    First a pause (when given), so that the worker threads the other framework's runtime left spinning
    (OpenMP's and OpenBLAS's wait by busy-looping for a while) have gone to sleep and do not compete for
    the cores; then one untimed call to wake this framework's own threads.
    """
    if pause:
        time.sleep(pause)
    fn()
    start = clock()
    for _ in range(calls):
        fn()
    return (clock() - start) * 1e3 / calls


def ms_in_turns(
    ways: dict[str, Callable[[], Any]],
    repeats: int,
    calls: int,
    pause: float = 0.0,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Each way's milliseconds per call (`ms_per_call`) in each of `repeats` runs; the ways take turns
    within each repeat, so that a change in the machine's load falls on all of them."""
    times: dict[str, list[float]] = {way: [] for way in ways}
    for _ in range(repeats):
        for way, fn in ways.items():
            times[way].append(ms_per_call(fn, calls, pause, clock))
    return times


def median_ms(ways: dict[str, Callable[[], Any]], repeats: int, calls: int, threads: int) -> dict[str, float]:
    """Median milliseconds per call of each of `ways`, over `repeats` timed runs of `calls` calls (see
    `ms_in_turns`). On one thread the time is the calling thread's CPU time (`time.thread_time`), which
    the load of other processes does not inflate; on more, wall time."""
    clock = time.thread_time if threads == 1 else time.perf_counter
    return {way: statistics.median(ms) for way, ms in ms_in_turns(ways, repeats, calls, clock=clock).items()}


def table(
    title: str,
    columns: Sequence[str],
    left: Collection[str] = (),
    center: Collection[str] = (),
    no_wrap: bool = False,
) -> Table:
    """A table of `columns`, right-justified but for those in `left` and `center`."""
    out = Table(title=title)
    for column in columns:
        justify = "left" if column in left else "center" if column in center else "right"
        out.add_column(column, justify=justify, no_wrap=no_wrap)
    return out


def torch_training_step(torch: Any, model: Any, optimizer: Any, x: Any, y: Any) -> Callable[[], None]:
    """One PyTorch eager training step of `model` on (x, y): cross-entropy, backward, `optimizer`."""

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def timing_cells(med: dict[str, float], ours: str, others: tuple[str, ...]) -> list[str]:
    """A table row's timing cells: the median ms of `ours` and of each other way, then `ours` / each."""
    cells = [f"{med[way]:.3f}" for way in (ours, *others)]
    return cells + [f"{med[ours] / med[way]:.2f}x" for way in others]


def timing_rows(
    torch: Any,
    args: argparse.Namespace,
    ops: dict[str, dict[str, Callable[[], Any]]],
    ours: str,
    others: tuple[str, ...],
) -> Iterator[tuple[bool, str, str, list[str]]]:
    """A per-kernel table's rows: at each thread count of `args.threads`, each op of `ops` (its ways)
    timed by `median_ms`; per row, whether it is the first, the threads cell (on an op's first row),
    the op and the `timing_cells`."""
    for n in args.threads:
        set_threads(torch, n)
        for i, (name, ways) in enumerate(ops.items()):
            med = median_ms(ways, args.repeats, args.calls, n)
            yield (
                i == 0 and n == args.threads[0],
                str(n) if i == 0 else "",
                name,
                timing_cells(med, ours, others),
            )


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
