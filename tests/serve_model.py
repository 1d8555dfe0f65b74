"""A tiny random Llama GGUF file that also holds the byte-level tokenizer and ChatML template of
`lm_fakes`, for the server's tests: `load_language_model(path)` opens it as `verigrad serve` does."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from lm_fakes import CHATML, MERGES, vocabulary

DIM, LAYERS, HEADS, KV_HEADS, FFN = 64, 2, 4, 2, 96  # Q8_0 rows are blocks of 32


def write_model(path: Path, context: int = 256, seed: int = 0) -> Path:
    """Q8_0 weights drawn from N(0, 0.5) (so that greedy answers vary with the prompt), f32 norms."""
    tokens, types = vocabulary()
    vocab, head_dim = len(tokens), DIM // HEADS
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), "llama")
    for key, value in {
        "llama.context_length": context,
        "llama.embedding_length": DIM,
        "llama.block_count": LAYERS,
        "llama.feed_forward_length": FFN,
        "llama.attention.head_count": HEADS,
        "llama.attention.head_count_kv": KV_HEADS,
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
    shapes = {"token_embd.weight": (vocab, DIM)}
    for i in range(LAYERS):
        shapes |= {
            f"blk.{i}.attn_q.weight": (HEADS * head_dim, DIM),
            f"blk.{i}.attn_k.weight": (KV_HEADS * head_dim, DIM),
            f"blk.{i}.attn_v.weight": (KV_HEADS * head_dim, DIM),
            f"blk.{i}.attn_output.weight": (DIM, HEADS * head_dim),
            f"blk.{i}.ffn_gate.weight": (FFN, DIM),
            f"blk.{i}.ffn_up.weight": (FFN, DIM),
            f"blk.{i}.ffn_down.weight": (DIM, FFN),
        }
    qtype = gguf.GGMLQuantizationType.Q8_0
    for name, shape in shapes.items():
        array = rng.normal(0, 0.5, shape).astype(np.float32)
        w.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    for name in [f"blk.{i}.{n}.weight" for i in range(LAYERS) for n in ("attn_norm", "ffn_norm")]:
        w.add_tensor(name, np.ones(DIM, np.float32))
    w.add_tensor("output_norm.weight", np.ones(DIM, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
