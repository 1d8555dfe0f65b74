"""Does llama.cpp load what `verigrad finetune --merge` writes, and compute the same model? A check run by
hand (it needs llama-cpp-python, which verigrad does not depend on), not in CI.

For a merged GGUF file: llama.cpp's logits of a chat prompt (every position) against verigrad's on the
same file (`activations="q8"`: llama.cpp's 8-bit activations), the largest difference relative to the
largest logit, and how many of the greedy next tokens agree.

    verigrad finetune --model smollm2 --data demo --steps 40 --merge q8_0 --out runs/finetune
    python benchmarks/finetune_llamacpp.py runs/finetune/model-q8_0.gguf
"""

from __future__ import annotations

import argparse

import numpy as np

PROMPT = [{"role": "user", "content": "What is verigrad?"}]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("gguf", help="a GGUF file written by `verigrad finetune --merge`")
    args = parser.parse_args()
    try:
        from llama_cpp import Llama as LlamaCpp
    except ImportError:
        raise SystemExit("this check needs llama-cpp-python: pip install llama-cpp-python") from None
    from verigrad.models.catalog import load_gguf

    model, tokenizer = load_gguf(args.gguf, activations="q8")
    ids = tokenizer.encode(tokenizer.apply_chat_template(PROMPT), add_special=False)
    ours = model(np.array([ids])).numpy()[0]
    theirs_model = LlamaCpp(model_path=args.gguf, logits_all=True, n_ctx=len(ids) + 8, verbose=False)
    theirs_model.eval(ids)
    theirs = np.array(theirs_model.scores[: len(ids)], dtype=np.float32)
    error = np.abs(ours - theirs).max() / np.abs(theirs).max()
    same = int((ours.argmax(-1) == theirs.argmax(-1)).sum())
    print(f"llama.cpp loaded {args.gguf}: {len(ids)} positions, largest logit difference {error:.2e} of the")
    print(f"largest logit; greedy next tokens agree at {same} of {len(ids)} positions")


if __name__ == "__main__":
    main()
