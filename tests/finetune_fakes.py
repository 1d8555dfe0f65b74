"""A small Llama GGUF file for the fine-tuning tests: random weights (Q8_0 matrices, f32 norms), the
byte-level tokenizer and ChatML template of lm_fakes, and a few chat examples as JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
from lm_fakes import CHATML, MERGES, vocabulary

DIM, LAYERS, HEADS, KV_HEADS, FFN, CONTEXT = 64, 2, 4, 2, 96, 128
HEAD_DIM = DIM // HEADS


def write_llama_gguf(path: Path, seed: int = 0, tied: bool = True, qtype: str = "Q8_0") -> Path:
    """A Llama GGUF of the sizes above, its vocabulary lm_fakes' (270 tokens), weights N(0, 0.2)."""
    tokens, types = vocabulary()
    vocab = len(tokens)
    rng = np.random.default_rng(seed)
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    shapes = {"token_embd.weight": (vocab, DIM)}
    for i in range(LAYERS):
        b = f"blk.{i}."
        shapes |= {
            b + "attn_norm.weight": (DIM,),
            b + "attn_q.weight": (q, DIM),
            b + "attn_k.weight": (kv, DIM),
        }
        shapes |= {b + "attn_v.weight": (kv, DIM), b + "attn_output.weight": (DIM, q)}
        shapes |= {b + "ffn_norm.weight": (DIM,), b + "ffn_gate.weight": (FFN, DIM)}
        shapes |= {b + "ffn_up.weight": (FFN, DIM), b + "ffn_down.weight": (DIM, FFN)}
    shapes["output_norm.weight"] = (DIM,)
    if not tied:
        shapes["output.weight"] = (vocab, DIM)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny-llama")
    for key, value in {
        "llama.context_length": CONTEXT,
        "llama.embedding_length": DIM,
        "llama.block_count": LAYERS,
        "llama.feed_forward_length": FFN,
        "llama.attention.head_count": HEADS,
        "llama.attention.head_count_kv": KV_HEADS,
        "llama.rope.dimension_count": HEAD_DIM,
    }.items():
        w.add_uint32(key, value)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float32("llama.rope.freq_base", 10000.0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(MERGES)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template(CHATML)
    quant = gguf.GGMLQuantizationType[qtype]
    for name, shape in shapes.items():
        if len(shape) == 1:
            w.add_tensor(name, (1 + rng.normal(0, 0.1, shape)).astype(np.float32))
        else:
            values = rng.normal(0, 0.2, shape).astype(np.float32)
            w.add_tensor(name, gguf.quants.quantize(values, quant), raw_dtype=quant)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


QUESTIONS = ["hello", "world", "hello world", "hell", "low", "old", "word", "lord"]


def write_chats(path: Path, count: int = 12, seed: int = 0) -> Path:
    """`count` JSONL lines, chat messages and prompt/completion pairs alternating."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(count):
        question = QUESTIONS[int(rng.integers(len(QUESTIONS)))]
        answer = " ".join([question] * int(rng.integers(1, 4)))
        if i % 2:
            lines.append({"prompt": question, "completion": answer})
        else:
            lines.append(
                {
                    "messages": [
                        {"role": "user", "content": question},
                        {"role": "assistant", "content": answer},
                    ]
                }
            )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path
