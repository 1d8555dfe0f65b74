"""`verigrad ops` and `verigrad verify`: the table of every op, and a backend's kernels held to the ops'
references."""

from __future__ import annotations

import argparse


def add_commands(sub: argparse._SubParsersAction) -> None:
    """`ops` and `verify`."""
    from ..backends import available

    sub.add_parser("ops", help="list every op in the registry").set_defaults(run=run_ops)
    verify = sub.add_parser(
        "verify",
        help="verify a backend's kernels against the op references (exit 1 on any failure)",
        description="List a backend's native kernels (with their stated exactness) and the ops that fall "
        "back to the reference, then hold every native kernel to its op's reference on the op's samples, "
        "special values, empty, size-1 and grown sizes and non-contiguous views, with 1, 2 and 3 threads.",
    )
    verify.add_argument("--backend", choices=available(), default="cpu", help="default: cpu")
    verify.add_argument("--op", default=None, help="verify only this op's kernels")
    verify.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import this module (a name, or a .py file) first: the ops and kernels a user's code registers "
        "(custom_op, elementwise_kernel, register_kernel) are then verified as the built-ins",
    )
    verify.add_argument(
        "--every-f32",
        action="store_true",
        help="instead, run the f32 kernel of --op (default: of every one-operand element-wise op) on all "
        "2^32 f32 inputs against the reference (0.5-3 minutes per op on two cores)",
    )
    verify.set_defaults(run=run_verify)


def run_ops(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from ..backends import get_backend
    from ..ops import REGISTRY

    table = Table("op", "kind", "grad", "exact", "torch", "doc", title="verigrad ops")
    for name, op in sorted(REGISTRY.items()):
        doc = (op.__doc__ or "").split("\n")[0]
        table.add_row(
            name,
            "composite" if op.is_composite else "primitive",
            "yes" if op.differentiable else "",
            "yes" if op.exact else "",
            "yes" if op.torch else "",
            doc,
        )
    console = Console()
    console.print(table)
    report = get_backend().report()
    console.print(
        f"{len(REGISTRY)} ops; backend {get_backend().name}: {len(report['native'])} native, "
        f"{len(report['fallback'])} on the reference"
    )
    return 0


def run_verify(args: argparse.Namespace) -> int:
    for module in args.imports:
        _import(module)
    if args.every_f32:
        from ..backends.verification.sweep import run_command as sweep_command

        return sweep_command(args.backend, args.op)
    from ..backends.verification.command import run_command

    return run_command(args.backend, args.op)


def _import(module: str) -> None:
    """Import a module by name, or run a .py file as a module (the user's ops register themselves)."""
    import importlib
    import importlib.util
    import sys
    from pathlib import Path

    if not module.endswith(".py"):
        importlib.import_module(module)
        return
    path = Path(module)
    if not path.is_file():
        raise SystemExit(f"verigrad verify: --import {module}: no such file")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    loaded = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[path.stem] = loaded
    spec.loader.exec_module(loaded)  # type: ignore[union-attr]
