"""`verigrad serve`: an OpenAI-compatible HTTP server for a language model, with continuous batching
(verigrad/serve/). Needs the `serve` extra (Starlette and uvicorn)."""

from __future__ import annotations

import argparse
import gc
import sys
from pathlib import Path

from .arguments import non_negative_int, positive_int
from .lm_commands import add_model_options, on_backend, open_language_model


def add_commands(sub: argparse._SubParsersAction) -> None:
    """`serve`."""
    p = sub.add_parser("serve", help="serve a language model over OpenAI's HTTP API (continuous batching)")
    add_model_options(p)
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=positive_int, default=8000, help="default 8000")
    p.add_argument("--max-batch", type=positive_int, default=8, help="sequences decoded together (default 8)")
    p.add_argument(
        "--max-queue", type=positive_int, default=64, help="requests waiting, then 429 (default 64)"
    )
    p.add_argument(
        "--context",
        type=positive_int,
        default=None,
        help="tokens per sequence (default: the model's, at most 4096)",
    )
    p.add_argument(
        "--join-last",
        action="store_true",
        help="run prompts' last chunks within the decode steps, their first token from the step (models "
        "with ragged steps; off by default: measured no faster)",
    )
    p.add_argument(
        "--warm-positions",
        type=non_negative_int,
        default=128,
        help="build the batched steps' plans for windows of up to N positions at start-up, so that no "
        "request waits on one (default 128: short chats; 0: none)",
    )
    p.add_argument("--api-key", default=None, help="required as 'Authorization: Bearer KEY' when given")
    p.set_defaults(run=run_serve)


@on_backend
def run_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from ..serve.app import create_app
    except ImportError as e:
        print(f"verigrad serve: error: {e.name} is missing: pip install 'verigrad[serve]'", file=sys.stderr)
        return 1
    from ..serve.engine import Engine

    model, tokenizer = open_language_model(args)
    context = min(model.context_length, args.context or 4096)
    engine = Engine(
        model,
        tokenizer,
        max_batch=args.max_batch,
        max_queue=args.max_queue,
        capacity=context,
        join_last=args.join_last,
        warm_positions=args.warm_positions,
    )
    name = str(args.model)
    model_id = Path(name).stem if Path(name).suffix == ".gguf" else name
    app = create_app(engine, model_id, api_key=args.api_key, aliases=(name,))
    gc.freeze()  # the model's objects live as long as the server: a full collection need not scan them
    engine.start()
    print(
        f"serving {model_id!r} on http://{args.host}:{args.port}/v1 (batch {args.max_batch})", file=sys.stderr
    )
    try:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    finally:
        engine.close()
    return 0
