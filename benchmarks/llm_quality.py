"""How often greedy decoding agrees with transformers' f32 run on the same GGUF: over 50 prompts (25 chat
turns through the model's template, 25 raw texts), the share of the 32 greedy tokens that equal transformers'
before the first difference, for verigrad with f32 activations, verigrad with 8-bit activations
(llama.cpp's scheme) and llama.cpp (llama-cpp-python, when installed; skipped and said so otherwise).

    python benchmarks/llm_quality.py [--model smollm2|PATH.gguf] [--prompts 50] [--tokens 32] [--threads 2]
                                     [--llama-no-repack]

`--llama-no-repack` turns off llama.cpp's extra weight layouts (its `--no-repack`: the repacked and AMX
buffers), for a CPU that reports AMX to a build that then cannot use it (a virtual machine's: SIGILL).

Every runner gets the same token ids (verigrad's tokenizer, the chat template applied by verigrad); an end
token (any that ends a turn) ends a sequence and counts as a token, so stopping early or late is a
difference like any other.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _common import console, table

import verigrad

CHAT = [
    "What is the capital of France?",
    "Name three primary colors.",
    "How many legs does a spider have?",
    "Write a haiku about autumn.",
    "What is 12 times 12?",
    "Explain photosynthesis in one sentence.",
    "Who wrote Romeo and Juliet?",
    "Give me a synonym for happy.",
    "What is the boiling point of water in Celsius?",
    "Translate 'thank you' into Spanish.",
    "What does a CPU do?",
    "Suggest a name for a pet goldfish.",
    "Why is the sky blue?",
    "List the planets of the solar system.",
    "What is the largest ocean on Earth?",
    "How do I make a cup of tea?",
    "What is a prime number?",
    "Tell me a fun fact about octopuses.",
    "What language is spoken in Brazil?",
    "Summarize the plot of Cinderella in two sentences.",
    "What is the square root of 81?",
    "Who painted the Mona Lisa?",
    "What is gravity?",
    "Recommend a book for a long flight.",
    "How many days are in a leap year?",
]
RAW = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "The three laws of motion are",
    "Water boils at a temperature of",
    "In 1492, Christopher Columbus",
    "The quick brown fox",
    "import numpy as np\n",
    "The mitochondria is",
    "My favourite recipe for pancakes starts with",
    "The largest mammal on Earth is",
    "To be or not to be,",
    "A good night's sleep helps",
    "The first person to walk on the moon was",
    "Machine learning is a field of",
    "Dear Sir or Madam,\n",
    "The Pythagorean theorem states that",
    "Paris is known for",
    "The recipe calls for two cups of",
    "In the beginning,",
    "The stock market closed",
    "Photosynthesis converts",
    "Here is a list of fruits: apple,",
    "The weather today is",
    "Shakespeare was born in",
]
END = -1  # an end token, whatever its id


def _prompts(tokenizer, count: int) -> list[list[int]]:
    chats = [
        tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": c}]), add_special=False)
        for c in CHAT
    ]
    raws = [tokenizer.encode(r) for r in RAW]
    mixed = [p for pair in zip(chats, raws) for p in pair]
    return mixed[:count]


def _agreement(ours: list[int], theirs: list[int]) -> int:
    n = 0
    for a, b in zip(ours, theirs):
        if a != b:
            break
        n += 1
    return n


def _cut(ids: list[int], ends: set[int], tokens: int) -> list[int]:
    """ids up to the first end token, which becomes END (and counts), at most `tokens`."""
    out = []
    for i in ids[:tokens]:
        if i in ends:
            out.append(END)
            break
        out.append(int(i))
    return out


def _verigrad(path: str, activations: str, tokenizer, tokens: int) -> Callable[[list[int]], list[int]]:
    from verigrad.models.catalog import load_gguf

    model, _ = load_gguf(path, activations=activations)

    def run(ids: list[int]) -> list[int]:
        result = model.generate(tokenizer, ids, max_tokens=tokens, temperature=0)
        return result.ids + ([END] if result.finish_reason == "end" else [])

    return run


def _transformers(path: str, tokens: int, ends: set[int]) -> Callable[[list[int]], list[int]]:
    # this folder's kernels.py would hide the `kernels` package transformers imports
    here = Path(__file__).resolve().parent
    sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != here]
    import torch
    import transformers

    p = Path(path)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(p.parent), gguf_file=p.name, dtype=torch.float32
    )
    model.eval()

    def run(ids: list[int]) -> list[int]:
        with torch.no_grad():
            out = model.generate(
                torch.tensor([ids]), max_new_tokens=tokens, do_sample=False, eos_token_id=sorted(ends)
            )
        return _cut(out[0, len(ids) :].tolist(), ends, tokens)

    return run


def llama_cpp_model(path: str, threads: int, no_repack: bool, **kwargs) -> object | None:
    """llama-cpp-python's Llama on `path` (None where it is not installed); `no_repack`: its model
    parameter use_extra_bufts off (llama.cpp's --no-repack), which its constructor does not take."""
    try:
        import llama_cpp
        import llama_cpp.llama as llama_module
    except ImportError:
        return None
    defaults = llama_module.llama_cpp.llama_model_default_params

    def params() -> object:
        p = defaults()
        p.use_extra_bufts = not no_repack
        return p

    llama_module.llama_cpp.llama_model_default_params = params
    try:
        return llama_cpp.Llama(model_path=path, n_threads=threads, verbose=False, **kwargs)
    finally:
        llama_module.llama_cpp.llama_model_default_params = defaults


def _llama_cpp(
    path: str, tokens: int, ends: set[int], threads: int, no_repack: bool
) -> Callable[[list[int]], list[int]] | None:
    llm = llama_cpp_model(path, threads, no_repack, n_ctx=512)
    if llm is None:
        return None

    def run(ids: list[int]) -> list[int]:
        llm.reset()
        out = []
        for token in llm.generate(ids, temp=0.0, top_k=1):
            out.append(int(token))
            if token in ends or len(out) >= tokens:
                break
        return _cut(out, ends, tokens)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--prompts", type=int, default=50)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--llama-no-repack", action="store_true", help="llama.cpp's --no-repack")
    args = parser.parse_args()
    from verigrad.io.tokenizer import END_TOKENS
    from verigrad.models.catalog import load_gguf
    from verigrad.models.fetch import MODELS, fetch

    path = str(fetch(args.model) if args.model in MODELS else args.model)
    verigrad.set_threads(args.threads)
    _, tokenizer = load_gguf(path)
    vocab = tokenizer.backend.get_vocab(with_added_tokens=True)
    ends = {vocab[t] for t in END_TOKENS if t in vocab} | ({tokenizer.eos_id} - {None})
    prompts = _prompts(tokenizer, args.prompts)
    reference = _transformers(path, args.tokens, ends)
    runners = {
        "verigrad f32": _verigrad(path, "f32", tokenizer, args.tokens),
        "verigrad q8": _verigrad(path, "q8", tokenizer, args.tokens),
    }
    cpp = _llama_cpp(path, args.tokens, ends, args.threads, args.llama_no_repack)
    if cpp is None:
        print("llama.cpp: llama-cpp-python is not installed; its row is skipped")
    else:
        runners["llama.cpp"] = cpp
    agreed = {name: 0 for name in runners}
    whole = {name: 0 for name in runners}
    total, start = 0, time.perf_counter()
    for ids in prompts:
        theirs = reference(ids)
        total += len(theirs)
        for name, run in runners.items():
            ours = _cut(run(ids), ends | {END}, args.tokens)
            n = _agreement(ours, theirs)
            agreed[name] += n
            whole[name] += n == len(theirs) == len(ours)
    out = table(
        f"greedy tokens equal to transformers' (f32) before the first difference: {len(prompts)} prompts, "
        f"{args.tokens} tokens each, {total} reference tokens ({time.perf_counter() - start:.0f} s)",
        ["runner", "tokens agreeing", "prompts wholly equal"],
    )
    for name in runners:
        out.add_row(name, f"{agreed[name] / total:.1%}", f"{whole[name]}/{len(prompts)}")
    console(120).print(out)


if __name__ == "__main__":
    main()
