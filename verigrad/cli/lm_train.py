"""`verigrad train lm`: a GPT trained from scratch on the standard library's sources (or `--data`), with
a progress bar (loss, tokens/s, time left), validation loss, bits per byte and a sample at each
evaluation, checkpoints, `--resume`, and a loss picture."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import data_parallel, lm_trainer, plot
from .arguments import (
    non_negative_float,
    positive_int,
    writable_folder,
)
from .lm_trainer import LMTrainConfig
from .loop_options import add_loop_options, add_shards_option, loop_config
from .loop_progress import loop_progress

DEFAULTS = LMTrainConfig.__dataclass_fields__


def _default(name: str):
    return DEFAULTS[name].default


def add_commands(sub: argparse._SubParsersAction) -> None:
    """`train lm`, under the `train` command (whose own options train the digits CNN)."""
    from ..models.gpt import MLPS, NORMS, POSITIONS

    train = sub.choices["train"]
    lm = train.add_subparsers(dest="what", metavar="lm").add_parser(
        "lm", help="train a GPT language model from scratch (default data: the Python standard library)"
    )
    sizes = lm.add_argument_group("model")
    for name, help_text in (
        ("layers", "transformer blocks"),
        ("heads", "attention heads (must divide --width)"),
        ("width", "embedding width"),
        ("context", "tokens per sequence"),
        ("vocab-size", "BPE vocabulary, trained on the training split"),
    ):
        key = name.replace("-", "_")
        sizes.add_argument(
            f"--{name}",
            type=positive_int,
            default=_default(key),
            help=f"{help_text} (default {_default(key)})",
        )
    sizes.add_argument("--norm", choices=NORMS, default=_default("norm"))
    sizes.add_argument("--positions", choices=POSITIONS, default=_default("positions"))
    sizes.add_argument("--mlp", choices=MLPS, default=_default("mlp"))
    sizes.add_argument("--dropout", type=non_negative_float, default=0.0, help="default 0")
    loop = lm.add_argument_group("training")
    add_loop_options(loop, LMTrainConfig, "sequences")
    loop.add_argument(
        "--data", default=None, help="a text file or a folder of them (default: the stdlib's .py)"
    )
    loop.add_argument(
        "--out",
        type=writable_folder,
        default=_default("out"),
        help="folder for the checkpoint, tokenizer and picture (default runs/lm)",
    )
    add_shards_option(loop)
    lm.set_defaults(run=run_train_lm)


def config_from(args: argparse.Namespace) -> LMTrainConfig:
    return LMTrainConfig(
        layers=args.layers,
        heads=args.heads,
        width=args.width,
        context=args.context,
        vocab_size=args.vocab_size,
        norm=args.norm,
        positions=args.positions,
        mlp=args.mlp,
        dropout=args.dropout,
        data=args.data,
        out=args.out,
        shards=data_parallel.setup(getattr(args, "shards", None)).shards,
        **loop_config(args),
    )


def run_train_lm(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    config = config_from(args)  # refuses bad options before any work
    ranks = data_parallel.current(config.shards)
    console = Console(quiet=not ranks.leader)  # rank 0 alone prints
    with console.status("preparing the data and tokenizer (cached after the first run)"):
        run = data_parallel.leader_first(lambda: lm_trainer.prepare(config, resume=args.resume), ranks)
    data = config.data or "the Python standard library's sources"
    console.print(
        f"[bold]verigrad train lm[/]: GPT of {run.model.num_parameters():,} parameters ({config.layers} "
        f"layers, width {config.width}, {config.heads} heads, context {config.context}) on {escape(data)}: "
        f"{len(run.corpus.train):,} training tokens ({run.corpus.train_files} files), vocabulary "
        f"{run.corpus.vocab_size}; {config.threads} thread(s), {'compiled' if config.compiled else 'eager'}"
        + (f"; resuming at step {run.start}" if run.start else "")
    )
    with loop_progress(console, "train", config.steps, run.start, "tokens") as (progress, on_step):

        def on_eval(e: dict) -> None:
            progress.console.print(
                f"step {e['step']}: validation loss [bold]{e['val_loss']:.3f}[/], "
                f"[bold]{e['val_bpb']:.3f}[/] bits per byte; sample:"
            )
            progress.console.print(e["sample"], markup=False, highlight=False, style="dim")

        lm_trainer.train(run, on_step=on_step, on_eval=on_eval)
    if not ranks.leader:
        return 0
    out = Path(config.out)
    console.print(
        f"checkpoint {escape(str(out / lm_trainer.CHECKPOINT))}; sample with "
        f'`verigrad generate --model {escape(str(out))} "def "`'
    )
    if plot.have_matplotlib():
        console.print(f"picture {escape(str(plot.lm_picture(run.history, out / lm_trainer.PICTURE)))}")
    else:
        console.print('no picture: matplotlib is missing (pip install "verigrad[plot]")', markup=False)
    return 0
