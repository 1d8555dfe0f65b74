"""The `verigrad` command: `train` (and `train lm`), `finetune`, `eval`, `demo`, `ir`, `ops`, `verify`,
`fetch`, `generate`, `chat`, `serve`, `quantize`, `version`. `main` is the entry point; each command's options
and work live in the module named for it."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from .arguments import OneLineParser

# The modules that add each command (the one that makes it, then those that add to it, as lm_train adds `train
# lm`), in the order of `verigrad --help`: `verigrad chat` imports lm_commands alone, not the trainers, the
# GGUF writer and the data loaders the other commands need (their memory and start-up).
MODULES = (
    "train_commands",
    "lm_train",
    "finetune",
    "demo",
    "ir_command",
    "backend_commands",
    "lm_commands",
    "serve",
    "quantize",
)
COMMANDS: dict[str, tuple[str, ...]] = {
    "train": ("train_commands", "lm_train"),
    "eval": ("train_commands",),
    "finetune": ("finetune",),
    "demo": ("demo",),
    "ir": ("ir_command",),
    "ops": ("backend_commands",),
    "verify": ("backend_commands",),
    "fetch": ("lm_commands",),
    "generate": ("lm_commands",),
    "chat": ("lm_commands",),
    "serve": ("serve",),
    "quantize": ("quantize",),
    "version": (),
}


def _version(args: argparse.Namespace) -> int:
    import verigrad

    print(f"verigrad {verigrad.__version__}")
    return 0


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of `command` alone where it names one (`main` parses its command
    line with that: the other commands' modules stay unread)."""
    wanted = COMMANDS.get(command, MODULES) if command is not None else MODULES
    parser = OneLineParser(
        prog="verigrad",
        description="verigrad: every op has one NumPy definition; shapes are checked for every size.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in MODULES:
        if name in wanted:
            importlib.import_module(f"{__name__}.{name}").add_commands(sub)
    sub.add_parser("version", help="print the version").set_defaults(run=_version)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from ..errors import VerigradError

    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(argv[0] if argv else None)
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
