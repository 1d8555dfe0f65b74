"""`verigrad quantize IN.gguf OUT.gguf --type TYPE`: a GGUF model's weights rewritten in another type
(llama.cpp's types and mixtures, by its rules; io/gguf_quantize.py)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path


def add_commands(sub: argparse._SubParsersAction) -> None:
    """`quantize`."""
    from ..io.gguf_quantize import TYPES

    quantize = sub.add_parser(
        "quantize",
        help="rewrite a GGUF model's weights in another type (q4_k_m, q6_k, q8_0, ...), as llama-quantize",
        description="Quantize a GGUF model's matrices to TYPE with llama.cpp's reference quantizers and its "
        "rules of which tensor gets which type (the mixtures q2_k, q3_k_m, q4_k_s, q4_k_m, q5_k_s, q5_k_m, "
        "q6_k; q3_k, q4_k and q5_k put every matrix in that type). Metadata and tokenizer are copied; "
        "vectors stay f32; a quantized input is decoded first (a warning: quality is lost twice).",
    )
    quantize.add_argument("input", help="the GGUF file to read (f32, f16, bf16 or any type verigrad reads)")
    quantize.add_argument("output", help="the GGUF file to write (replaced whole, or left as it was)")
    quantize.add_argument("--type", required=True, choices=list(TYPES), metavar="TYPE", help=", ".join(TYPES))
    quantize.add_argument(
        "--pure", action="store_true", help="every matrix in TYPE, no mixture rules (llama-quantize --pure)"
    )
    quantize.set_defaults(run=run_quantize)


def run_quantize(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..io.gguf import read_gguf
    from ..io.gguf_quantize import plan, quantize_gguf
    from ..models.catalog import check_gguf_model

    source, target = Path(args.input), Path(args.output)
    if target.is_dir():
        raise ValueError(f"{target}: is a folder; name the GGUF file to write")
    if target.exists() and source.exists() and os.path.samefile(source, target):
        raise ValueError(f"{target}: is the input file; name another output")
    gguf = read_gguf(source)
    check_gguf_model(gguf, tokenizer=False)  # a file verigrad could not load is refused before any work
    steps = plan(gguf, args.type, args.pure)
    console = Console(stderr=True)
    requantized = sorted({s.tensor.qtype for s in steps if s.requantized})
    if requantized:
        console.print(
            f"[yellow]warning[/]: the input holds {', '.join(requantized)} tensors: they are decoded and "
            "quantized again, which loses more than quantizing the f32/f16 model would "
            "(llama-quantize --allow-requantize)"
        )
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(f"quantize to {args.type}", total=len(steps))
        done = quantize_gguf(source, target, args.type, args.pure, on_tensor=lambda _: progress.advance(task))
    counts: dict[str, int] = {}
    for step in done:
        counts[step.qtype] = counts.get(step.qtype, 0) + 1
    summary = ", ".join(f"{n} {q}" for q, n in sorted(counts.items(), key=lambda item: -item[1]))
    size = target.stat().st_size / 2**20
    console.print(f"wrote {escape(str(target))} ({size:.1f} MiB): {summary}")
    return 0
