"""The command `verigrad verify --backend NAME [--op NAME]`: what is native (with each kernel's stated
exactness) and what falls back, then the suite's table."""

from __future__ import annotations

from typing import Any

from ...ops import REGISTRY
from ..active import lookup
from ..kernel_table import Exactness
from .suite import SMALL_CHUNK, THREADS, claims, known_ops, verify


def run_command(backend_name: str, op: str | None = None, console: Any = None) -> int:
    """Print what is native (with each kernel's stated exactness) and what falls back, run the suite,
    print its table; 0 when every kernel passed, 1 otherwise."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    backend = lookup(backend_name)
    ops = None if op is None else [op]
    known_ops(ops or ())
    stated = claims(backend)
    console.print(f"[bold]verigrad verify[/]: backend {backend.name} ({escape(backend.description)})")
    native = {name: kernels for name, kernels in stated.items() if op is None or name == op}
    lines = [
        f"  {name}: " + ", ".join(f"{dtype} {_claim(claim)}{_in(mode)}" for dtype, claim, mode in kernels)
        for name, kernels in native.items()
    ]
    console.print(f"native ({len(native)} ops):", markup=False)
    console.print("\n".join(lines) or "  none", markup=False)
    fallback = [n for n in backend.report()["fallback"] if n in REGISTRY and (op is None or n == op)]
    console.print(f"on the reference ({len(fallback)} ops): {', '.join(fallback) or 'none'}", markup=False)
    report = verify(backend, ops)
    if not report.results:
        console.print("no native kernel to verify")
        return 0
    table = Table("op", "dtype", "claimed", "cases", "worst", "result", title=f"kernels of {backend.name}")
    for r in report.results:
        style = {"pass": "green", "fail": "bold red"}.get(r.status, "yellow")
        claim = _claim(r.exactness)
        table.add_row(r.name, r.dtype, claim, str(r.cases), r.worst(), f"[{style}]{r.status}[/]")
    console.print(table)
    for r in report.results:
        if not r.passed:
            console.print(f"{r.status.upper()} {r.name} {r.dtype}: {r.message}", markup=False, soft_wrap=True)
    failed = [r for r in report.results if not r.passed]
    console.print(
        f"{len(report.results)} kernels, {sum(r.cases for r in report.results)} cases, threads "
        f"{', '.join(map(str, THREADS))} (min chunk {SMALL_CHUNK}): "
        + (f"{len(failed)} not verified" if failed else "all verified")
        + f" in {report.seconds:.1f} s",
        markup=False,
    )
    return 1 if failed else 0


def _in(mode: str) -> str:
    return f" ({mode})" if mode else ""


def _claim(exactness: Exactness) -> str:
    if exactness.is_exact or exactness.ulps:
        return str(exactness)
    return f"rtol {exactness.rtol:.2g} atol {exactness.atol:.2g}"
