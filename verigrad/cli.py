"""The `verigrad` command: `verigrad demo`, `verigrad ops`, `verigrad version`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence


def _demo(args: argparse.Namespace) -> int:
    from .demos import run_demo

    return run_demo(steps=args.steps)


def _ops(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from .backends import get_backend
    from .registry import OPS

    table = Table("op", "kind", "grad", "exact", "torch", "doc", title="verigrad ops")
    for name, op in sorted(OPS.items()):
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
        f"{len(OPS)} ops; backend {get_backend().name}: {len(report['native'])} native, "
        f"{len(report['fallback'])} on the reference"
    )
    return 0


def _version(args: argparse.Namespace) -> int:
    import verigrad

    print(f"verigrad {verigrad.__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="verigrad",
        description="verigrad: every op has one NumPy definition; shapes are checked for every size.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="train a small MLP eagerly and print the loss falling")
    demo.add_argument("--steps", type=_positive_int, default=300, help="SGD steps (default 300)")
    demo.set_defaults(run=_demo)
    sub.add_parser("ops", help="list every op in the registry").set_defaults(run=_ops)
    sub.add_parser("version", help="print the version").set_defaults(run=_version)
    return parser


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 0
    return args.run(args)
