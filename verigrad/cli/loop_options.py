"""The trainers' shared options on the command line: the loop's of `verigrad train lm` and `verigrad
finetune`, declared once, with each command's defaults, and read back as its config's keyword arguments;
`--threads`, `--eager`, `--backend` and `--shards` of `verigrad train` too."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from typing import Any

from .arguments import (
    THREADS_HELP,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    step_count,
    thread_count,
)

# (option, type, help): each one a config field of the same name (`min_lr` for `--min-lr`)
NUMBERS = (
    ("batch", positive_int, "{batch} per micro-batch"),
    ("accumulate", positive_int, "micro-batches per step"),
    ("steps", step_count, "optimizer steps"),
    ("lr", positive_float, "peak learning rate"),
    ("min-lr", non_negative_float, "the cosine's end"),
    ("warmup", non_negative_int, "linear warmup steps"),
    ("weight-decay", non_negative_float, "AdamW's, on matrices only"),
    ("clip", non_negative_float, "gradient norm clip, 0: off"),
    ("eval-every", positive_int, "steps between validations and samples"),
    ("save-every", positive_int, "steps between checkpoints"),
    ("seed", non_negative_int, "the run's random seed"),
)


def add_loop_options(group: Any, config: type, batch: str) -> None:
    """The loop's options in the parser or argument group `group`: its numbers (their defaults the
    dataclass `config`'s; `batch`: what a micro-batch holds), `--resume`, `--threads`, `--eager` and
    `--backend`."""
    defaults = {f.name: f.default for f in fields(config) if f.default is not MISSING}
    for name, kind, text in NUMBERS:
        default = defaults[name.replace("-", "_")]
        help_text = f"{text.format(batch=batch)} (default {default})"
        group.add_argument(f"--{name}", type=kind, default=default, help=help_text)
    group.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    add_run_options(group)


def add_run_options(group: Any) -> None:
    """`--threads`, `--eager` and `--backend`: every trainer's."""
    from ..backends import available

    group.add_argument("--threads", type=thread_count, default=None, help=THREADS_HELP)
    group.add_argument("--eager", action="store_true", help="run each step eagerly instead of compiled")
    group.add_argument(
        "--backend", choices=available(), default="cpu" if "cpu" in available() else "reference"
    )


def add_shards_option(group: Any) -> None:
    """`--shards` (train and train lm: cli/data_parallel.py), default None: the ranks'."""
    group.add_argument(
        "--shards",
        type=positive_int,
        default=None,
        help="shards of each batch whose gradients are averaged in shard order, computed by mpiexec's "
        "ranks (which must divide them) or this process: the same bits; default the ranks",
    )


def loop_config(args: argparse.Namespace) -> dict[str, Any]:
    """The options `add_loop_options` declared, parsed into `args`, as a config's keyword arguments (but
    `--resume`, which is `prepare`'s)."""
    numbers = {name.replace("-", "_"): getattr(args, name.replace("-", "_")) for name, _, _ in NUMBERS}
    return numbers | run_config(args)


def run_config(args: argparse.Namespace) -> dict[str, Any]:
    """The options `add_run_options` declared, parsed into `args`, as a config's keyword arguments: the
    threads default `default_threads()`, `compiled` `--eager`'s opposite."""
    from ..backends import default_threads

    return {"threads": args.threads or default_threads(), "compiled": not args.eager, "backend": args.backend}
