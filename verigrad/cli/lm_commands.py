"""`verigrad fetch`, `verigrad generate` and `verigrad chat`: a language model downloaded, continuing a
prompt, and in a conversation."""

from __future__ import annotations

import argparse
import sys

from .arguments import (
    THREADS_HELP,
    fraction,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    thread_count,
)

CHAT_ALLOCATE = 256  # positions a chat's cache is allocated for at first; doubled as the conversation grows


def add_commands(sub: argparse._SubParsersAction) -> None:
    """`fetch`, `generate` and `chat`."""
    from ..models.fetch import MODELS

    fetch = sub.add_parser("fetch", help="download a model into the cache (once) and print its path")
    fetch.add_argument("name", nargs="?", default="smollm2", choices=sorted(MODELS), help="default smollm2")
    fetch.set_defaults(run=run_fetch)
    generate = sub.add_parser("generate", help="continue a prompt with a language model, streaming the text")
    generate.add_argument("prompt", help="the text to continue (by default, as the user's chat turn)")
    generate.add_argument(
        "--raw", action="store_true", help="give the prompt to the model as it is, not as a chat turn"
    )
    generate.set_defaults(run=run_generate)
    chat = sub.add_parser("chat", help="talk with a language model (multi-turn, with its chat template)")
    chat.add_argument("--system", default=None, help="a system message starting the conversation")
    chat.add_argument("--context", type=positive_int, default=None, help="tokens kept (default: the model's)")
    chat.set_defaults(run=run_chat)
    for p in (generate, chat):
        add_model_options(p)
        p.add_argument("--max-tokens", type=positive_int, default=256, help="per reply (default 256)")
        p.add_argument("--temperature", type=non_negative_float, default=0.8, help="0: greedy (default 0.8)")
        p.add_argument("--top-k", type=non_negative_int, default=40, help="0: off (default 40)")
        p.add_argument("--top-p", type=fraction, default=0.95, help="1: off (default 0.95)")
        p.add_argument("--repeat-penalty", type=positive_float, default=1.0, help="1: off (default 1.0)")
        p.add_argument(
            "--seed", type=non_negative_int, default=0, help="the same seed gives the same text (default 0)"
        )
        p.add_argument(
            "--kv-cache",
            choices=("f32", "f16", "q8_0"),
            default="f32",
            help="the key/value cache's storage: f32 (default), f16 (half the memory; each key and value "
            "rounded to f16) or q8_0 (0.27 of f32's memory; keys and values quantized to 8 bits per 32 "
            "values along the head, as llama.cpp's q8_0: heads of a multiple of 32)",
        )


def add_model_options(p: argparse.ArgumentParser) -> None:
    """--model, --threads, --activations and --backend (generate, chat, serve)."""
    from ..backends import available

    p.add_argument(
        "--model",
        default="smollm2",
        help="a name (smollm2), a .gguf file, a GPT-2 folder, or a `train lm` folder (default smollm2)",
    )
    p.add_argument("--threads", type=thread_count, default=None, help=THREADS_HELP)
    p.add_argument(
        "--activations",
        choices=("f32", "q8"),
        default="f32",
        help="quantized matmul: f32 activations (default), or to 8 bits per block of 32 (256 for k-quants) "
        "as llama.cpp (q8: its numbers, faster on some formats, less accurate)",
    )
    p.add_argument("--backend", choices=available(), default="cpu" if "cpu" in available() else "reference")


def run_fetch(args: argparse.Namespace) -> int:
    from ..models.fetch import fetch

    print(fetch(args.name))
    return 0


def open_language_model(args: argparse.Namespace):
    """The model and tokenizer of --model, and one line on stderr saying what runs."""
    from ..backends import get_backend
    from ..models.catalog import load_language_model, matmul_description

    model, tokenizer = load_language_model(args.model, args.activations)
    print(
        f"{args.model}: {type(model).__name__}, context {model.context_length}, vocab {model.vocab_size}; "
        f"{matmul_description(model)}; backend {get_backend().name}, {args.threads} thread(s)",
        file=sys.stderr,
    )
    return model, tokenizer


def _sampling(args: argparse.Namespace) -> dict:
    return {
        "max_tokens": args.max_tokens,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "repeat_penalty": args.repeat_penalty,
        "seed": args.seed,
    }


def on_backend(run):
    """Run an LM command on --backend with --threads, restoring both afterwards."""

    def wrapped(args: argparse.Namespace) -> int:
        from ..backends import backend, default_threads, get_backend, set_threads

        if args.threads is None:
            args.threads = default_threads()
        with backend(args.backend):
            before = get_backend().threads
            set_threads(args.threads)
            try:
                return run(args)
            finally:
                set_threads(before)

    return wrapped


def _print_piece(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


@on_backend
def run_generate(args: argparse.Namespace) -> int:
    from ..models.lm import generate

    model, tokenizer = open_language_model(args)
    if args.raw or not tokenizer.chat_template:
        prompt = tokenizer.encode(args.prompt)
    else:  # an instruction-tuned model reads the prompt as the user's turn of a chat
        text = tokenizer.apply_chat_template([{"role": "user", "content": args.prompt}])
        prompt = tokenizer.encode(text, add_special=False)  # the template writes the special tokens
    result = generate(
        model, tokenizer, prompt, stream=_print_piece, kv_cache=args.kv_cache, **_sampling(args)
    )
    print()
    print(result.summary(), file=sys.stderr)
    return 130 if result.finish_reason == "interrupted" else 0


@on_backend
def run_chat(args: argparse.Namespace) -> int:
    from ..models.lm import generate

    model, tokenizer = open_language_model(args)
    if not tokenizer.chat_template:
        raise ValueError(f"{args.model} has no chat template: use `verigrad generate` for plain text")
    start = [{"role": "system", "content": args.system}] if args.system else []
    messages = list(start)
    capacity = min(args.context or model.context_length, model.context_length)
    cache = model.new_cache(1, capacity, allocate=CHAT_ALLOCATE, dtype=args.kv_cache)  # grown as it fills
    print("type a message; /reset starts over, /exit (or Ctrl-D) quits", file=sys.stderr)
    turn = 0
    while True:
        try:
            line = input("> ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if line in ("/exit", "/quit"):
            return 0
        if line == "/reset":
            messages = list(start)
            continue
        if not line:
            continue
        messages.append({"role": "user", "content": line})
        text = tokenizer.apply_chat_template(messages)
        try:
            result = generate(
                model,
                tokenizer,
                tokenizer.encode(text, add_special=False),
                stream=_print_piece,
                cache=cache,
                **{**_sampling(args), "seed": args.seed + turn},
            )
        except ValueError as e:  # the conversation outgrew the context
            messages.pop()
            print(f"verigrad chat: error: {e}; /reset starts a new conversation", file=sys.stderr)
            continue
        print()
        print(result.summary(), file=sys.stderr)
        messages.append({"role": "assistant", "content": result.text})
        turn += 1
