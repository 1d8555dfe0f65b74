"""The `verigrad` command: `train` (and `train lm`), `finetune`, `eval`, `demo`, `ir`, `ops`, `verify`,
`fetch`, `generate`, `chat`, `serve`, `quantize`, `version`. `main` is the entry point; each command's options
and work live in the module named for it."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import (
    backend_commands,
    demo,
    finetune,
    ir_command,
    lm_commands,
    lm_train,
    quantize,
    serve,
    train_commands,
)
from .arguments import OneLineParser


def _version(args: argparse.Namespace) -> int:
    import verigrad

    print(f"verigrad {verigrad.__version__}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="verigrad",
        description="verigrad: every op has one NumPy definition; shapes are checked for every size.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for commands in (
        train_commands,
        lm_train,
        finetune,
        demo,
        ir_command,
        backend_commands,
        lm_commands,
        serve,
        quantize,
    ):
        commands.add_commands(sub)
    sub.add_parser("version", help="print the version").set_defaults(run=_version)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from ..errors import VerigradError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "run"):
        parser.print_help()
        return 0
    try:
        return args.run(args)
    except (VerigradError, ValueError, OSError) as e:  # a one-line error, never a traceback
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        if getattr(e, "where", None) is not None:
            message += f" (at {e.where})"  # the user's line of a shape or dtype error
        print(f"verigrad {args.command}: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"verigrad {args.command}: interrupted", file=sys.stderr)
        return 130
