"""`verigrad finetune --model smollm2 --data FILE.jsonl`: LoRA adapters (or `--full`: every weight) trained
on chat examples with a progress bar, validation loss and a sample answer at each evaluation,
checkpoints and `--resume`; then the adapters as PEFT's files and, with `--merge f16|q8_0`, a GGUF."""

from __future__ import annotations

import argparse
from pathlib import Path

from . import finetune_trainer
from .arguments import (
    positive_float,
    positive_int,
    writable_folder,
)
from .finetune_trainer import MERGES, FinetuneConfig
from .loop_options import add_loop_options, loop_config
from .loop_progress import loop_progress

DEFAULTS = FinetuneConfig.__dataclass_fields__


def _default(name: str):
    return DEFAULTS[name].default


def add_commands(sub: argparse._SubParsersAction) -> None:
    from ..models.lora import TARGETS

    p = sub.add_parser("finetune", help="fine-tune a GGUF language model on chat examples (LoRA or --full)")
    p.add_argument("--model", default="smollm2", help="a model name or a Llama .gguf file (default smollm2)")
    p.add_argument(
        "--data",
        required=True,
        help='JSONL lines: {"messages": [{"role": ..., "content": ...}, ...]} or '
        '{"prompt": ..., "completion": ...}; "demo": 30 examples about verigrad shipped with it',
    )
    p.add_argument("--out", type=writable_folder, default=_default("out"), help="default runs/finetune")
    lora = p.add_argument_group("adapters")
    lora.add_argument(
        "--full", action="store_true", help="train every weight in f32 instead of LoRA adapters"
    )
    lora.add_argument("--rank", type=positive_int, default=_default("rank"), help="LoRA's r (default 8)")
    lora.add_argument(
        "--alpha", type=positive_float, default=_default("alpha"), help="LoRA's alpha (default 16)"
    )
    lora.add_argument(
        "--targets",
        default=",".join(_default("targets")),
        help=f"comma-separated projections among {','.join(TARGETS)} (default q_proj,v_proj)",
    )
    loop = p.add_argument_group("training")
    loop.add_argument(
        "--context",
        type=positive_int,
        default=_default("context"),
        help=f"longest example in tokens (longer ones are cut) (default {_default('context')})",
    )
    add_loop_options(loop, FinetuneConfig, "examples")
    loop.add_argument("--merge", choices=MERGES, default=None, help="also write the merged model as a GGUF")
    p.set_defaults(run=run_finetune)


def config_from(args: argparse.Namespace) -> FinetuneConfig:
    return FinetuneConfig(
        model=args.model,
        data=args.data,
        out=args.out,
        full=args.full,
        rank=args.rank,
        alpha=args.alpha,
        targets=tuple(t.strip() for t in args.targets.split(",") if t.strip()),
        context=args.context,
        merge=args.merge,
        **loop_config(args),
    )


def run_finetune(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    config = config_from(args)  # refuses bad options before any work
    console = Console()
    with console.status("loading the model and the examples"):
        run = finetune_trainer.prepare(config, resume=args.resume)
    trained = sum(p.numel() for p in run.model.parameters() if p.requires_grad)
    what = "every weight in f32" if config.full else f"LoRA r={config.rank} alpha={config.alpha:g} on "
    what += "" if config.full else ",".join(config.targets)
    console.print(
        f"[bold]verigrad finetune[/]: {escape(run.source.name)}, {what} ({trained:,} trained parameters); "
        f"{len(run.train)} training and {len(run.validation)} validation examples"
        + (f" ({run.cut} cut to {config.context} tokens)" if run.cut else "")
        + f"; {config.threads} thread(s)"
        + (f"; resuming at step {run.start}" if run.start else "")
    )
    with loop_progress(console, "finetune", config.steps, run.start, "answer tokens") as (progress, on_step):

        def on_eval(e: dict) -> None:
            if "val_loss" in e:
                loss = finetune_trainer.nats_to_text(e["val_loss"])
                progress.console.print(f"step {e['step']}: validation loss [bold]{loss}[/]; a sample answer:")
            else:
                progress.console.print(f"step {e['step']}: a sample answer:")
            progress.console.print(e["sample"], markup=False, highlight=False, style="dim")

        finetune_trainer.train(run, on_step=on_step, on_eval=on_eval)
    out = Path(config.out)
    written = [
        p for p in (out / finetune_trainer.ADAPTERS, out / f"model-{config.merge}.gguf") if p.is_file()
    ]
    for path in written:
        console.print(f"wrote {escape(str(path))}")
    if config.merge:
        console.print(
            f"chat with it: `verigrad chat --model {escape(str(out / f'model-{config.merge}.gguf'))}`"
        )
    return 0
