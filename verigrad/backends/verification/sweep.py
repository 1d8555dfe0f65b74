"""Every f32 input: a backend's f32 kernel of a one-operand element-wise op (sigmoid, tanh, exp, ...) run
on all 2^32 bit patterns, NaNs, infinities and subnormals included, and held to its op's reference at
the kernel's stated exactness, as the verification suite holds it on samples (`compare.compare`).

The patterns go in chunks of `CHUNK` consecutive ones; the reference of the next chunks is computed on
other threads while the kernel runs on this one (on the backend's threads). A full sweep of one op takes
half a minute to three minutes on two cores (longer where the reference calls Python per element, as
gelu's erf does); `start` and `stop` sweep a range of patterns instead. A kernel with several code paths
(`Backend.paths`: the cpu backend's AVX-512, AVX2 and scalar paths) is swept on each, against one
computation of the reference.

    verigrad verify --backend cpu --op sigmoid --every-f32
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ...dtypes import f32
from ...ops import REGISTRY
from ...shapes import Spec
from ..active import lookup
from ..kernel_table import Backend, Exactness
from ..threads import count
from .cases import result_spec
from .compare import compare, one_line
from .suite import reference_kernel

PATTERNS = 1 << 32  # every f32 bit pattern
CHUNK = 1 << 22  # patterns per call of the kernel


@dataclass
class Sweep:
    """How a kernel did on a range of f32 inputs: the worst difference (ulps, or error over the claimed
    tolerance), and the first input whose result is outside the claim with what each side gave."""

    op: str
    exactness: Exactness
    inputs: int = 0
    worst: float = 0.0
    failures: int = 0  # chunks with a result outside the claim
    first: str = ""
    seconds: float = 0.0
    path: str = ""  # the kernel's code path ("": its only one)

    @property
    def passed(self) -> bool:
        return self.failures == 0 and self.inputs > 0


def one_operand_ops(backend: Backend) -> list[str]:
    """The ops with an f32 kernel of `backend` that take one f32 array and give one of its shape."""
    vector = Spec([7], f32)
    names = []
    for name, dtype in backend.registered():
        op = REGISTRY.get(name)
        if dtype == "f32" and op is not None and not op.variadic:
            found = result_spec(op, [vector], {})
            if found is not None and found == (vector, {}):
                names.append(name)
    return sorted(names)


def _sweepable(backend: Backend, op: str) -> None:
    if op not in one_operand_ops(backend):
        raise ValueError(
            f"{backend.name} has no f32 kernel of a one-operand element-wise op named {op!r}; "
            f"it has: {', '.join(one_operand_ops(backend)) or 'none'}"
        )


def sweep(
    backend: Backend | str,
    op: str,
    start: int = 0,
    stop: int = PATTERNS,
    chunk: int = CHUNK,
    progress: Callable[[int], None] | None = None,
) -> Sweep:
    """Hold `backend`'s f32 kernel of `op` (on its default path) to the reference on the bit patterns
    [start, stop). `progress(n)` is called after each chunk with the patterns it held."""
    backend = lookup(backend) if isinstance(backend, str) else backend
    return sweep_paths(backend, op, backend.paths(op, "f32")[:1], start, stop, chunk, progress)[0]


def sweep_paths(
    backend: Backend | str,
    op: str,
    paths: Sequence[str] | None = None,
    start: int = 0,
    stop: int = PATTERNS,
    chunk: int = CHUNK,
    progress: Callable[[int], None] | None = None,
) -> list[Sweep]:
    """`sweep` on each of the kernel's `paths` (None: every one the machine has, `Backend.paths`), the
    reference computed once for all: a Sweep each, in the order of `paths`."""
    backend = lookup(backend) if isinstance(backend, str) else backend
    _sweepable(backend, op)
    known = backend.paths(op, "f32")
    paths = known if paths is None else tuple(paths)
    if not paths or any(p not in known for p in paths):
        raise ValueError(f"{op}'s f32 kernel takes the paths {list(known)} here, not {list(paths)}")
    if not 0 <= start < stop <= PATTERNS:
        raise ValueError(f"the patterns must satisfy 0 <= start < stop <= 2^32, got [{start}, {stop})")
    chunk = count(chunk, "chunk")
    kernel, reference = backend.native(REGISTRY[op], f32), reference_kernel(REGISTRY[op])
    results = [Sweep(op, backend.exactness(op, "f32"), path=p) for p in paths]
    began = time.perf_counter()
    bounds = [(lo, min(lo + chunk, stop)) for lo in range(start, stop, chunk)]

    def expected(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        x = np.arange(lo, hi, dtype=np.uint32).view(np.float32)
        with np.errstate(all="ignore"):
            return x, reference(x)

    workers = max(1, backend.threads)
    with ThreadPoolExecutor(workers) as pool:
        ahead: deque[Future] = deque(pool.submit(expected, *b) for b in bounds[: workers + 1])
        for k in range(len(bounds)):
            x, want = ahead.popleft().result()
            if k + workers + 1 < len(bounds):
                ahead.append(pool.submit(expected, *bounds[k + workers + 1]))
            for result in results:
                try:
                    with backend.on_path(result.path), np.errstate(all="ignore"):
                        got = np.asarray(kernel(x))
                except Exception as e:  # a kernel that fails on some inputs fails the sweep, and says where
                    _raised(result, *bounds[k], e)
                else:
                    _hold(result, x, got, want)
            if progress is not None:
                progress(len(x))
    seconds = time.perf_counter() - began
    for result in results:
        result.seconds = seconds
    return results


def _raised(result: Sweep, lo: int, hi: int, e: Exception) -> None:
    result.inputs += hi - lo
    result.failures += 1
    result.first = result.first or f"inputs 0x{lo:08x}-0x{hi - 1:08x}: the kernel raised {one_line(e)}"


def _hold(result: Sweep, x: np.ndarray, got: np.ndarray, want: np.ndarray) -> None:
    """Compare one chunk's results and add the verdict to `result`."""
    verdict = compare(got, want, result.exactness)
    result.inputs += len(x)
    worst = verdict.ulps if verdict.ulps is not None else verdict.error
    if worst is not None:
        result.worst = max(result.worst, worst)
    if verdict.message:
        result.failures += 1
        if not result.first:
            i = verdict.index[0] if verdict.index else 0
            bits = int(x[i : i + 1].view(np.uint32)[0])
            result.first = f"input {x[i]!s} (0x{bits:08x}): {verdict.message}"


def run_command(backend_name: str, op: str | None = None, console: Any = None) -> int:
    """Sweep every f32 input of `op`'s kernel (or of each one-operand kernel) with a progress bar, print a
    table; 0 when every kernel met its claim, 1 otherwise."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    console = console or Console()
    backend = lookup(backend_name)
    if op is not None:
        _sweepable(backend, op)
    names = [op] if op is not None else one_operand_ops(backend)
    if not names:
        console.print(f"{backend.name} has no f32 kernel of a one-operand element-wise op to sweep")
        return 0
    console.print(f"[bold]verigrad verify --every-f32[/]: backend {backend.name}, {len(names)} kernel(s)")
    results = []
    columns = (TextColumn("{task.description:16}"), BarColumn(), TextColumn("{task.percentage:5.1f}%"))
    with Progress(*columns, TimeRemainingColumn(), console=console) as progress:
        for name in names:
            task = progress.add_task(name, total=PATTERNS)
            advance = partial(progress.advance, task)
            results += sweep_paths(backend, name, None, 0, PATTERNS, CHUNK, advance)
    columns = ("op", "path", "claimed", "inputs", "worst", "result", "seconds")
    table = Table(*columns, title=f"every f32 input, {backend.name}")
    for r in results:
        worst = f"{r.worst:.0f} ulps" if r.exactness.is_exact or r.exactness.ulps else f"{r.worst:.3g}"
        verdict = "[green]pass[/]" if r.passed else "[bold red]fail[/]"
        row = (r.op, r.path or "-", str(r.exactness), f"{r.inputs:,}", worst, verdict, f"{r.seconds:.0f}")
        table.add_row(*row)
    console.print(table)
    for r in results:
        if not r.passed:
            on = f" ({r.path} path)" if r.path else ""
            what = f"FAIL {r.op}{on}: {r.failures} chunk(s) outside the claim; first: {r.first}"
            console.print(what, markup=False, soft_wrap=True)
    return 0 if all(r.passed for r in results) else 1
