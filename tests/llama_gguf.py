"""A tiny random Llama GGUF file holding `lm_fakes`' byte-level tokenizer and ChatML template, for the
fine-tuning and the server's tests: Q8_0 (or `qtype`) matrices, f32 norms; `load_language_model(path)`
opens it as `verigrad serve` and `verigrad finetune` do."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
from lm_fakes import add_tokenizer, vocabulary

DIM, LAYERS, HEADS, KV_HEADS, FFN, CONTEXT = 64, 2, 4, 2, 96, 128  # Q8_0 rows are blocks of 32
HEAD_DIM = DIM // HEADS
SERVED = {"context": 256, "std": 0.5, "norm_std": 0.0}  # the server's: greedy answers vary with the prompt


def write_llama_gguf(
    path: Path,
    seed: int = 0,
    tied: bool = True,
    qtype: str = "Q8_0",
    context: int = CONTEXT,
    std: float = 0.2,
    norm_std: float = 0.1,
    qtypes: dict[str, str] | None = None,
    layers: int = LAYERS,
) -> Path:
    """A Llama GGUF of the sizes above, its vocabulary lm_fakes' (270 tokens): matrices drawn from
    N(0, std), norms from 1 + N(0, norm_std) (ones, drawing nothing, when `norm_std` is 0), in the
    order of the file's tensors. `qtypes` stores some block tensors in other formats, by name
    ({"attn_v": "Q5_0"}: every block's attn_v.weight)."""
    tokens, _ = vocabulary()
    vocab = len(tokens)
    rng = np.random.default_rng(seed)
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    shapes = {"token_embd.weight": (vocab, DIM)}
    for i in range(layers):
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
        "llama.context_length": context,
        "llama.embedding_length": DIM,
        "llama.block_count": layers,
        "llama.feed_forward_length": FFN,
        "llama.attention.head_count": HEADS,
        "llama.attention.head_count_kv": KV_HEADS,
        "llama.rope.dimension_count": HEAD_DIM,
    }.items():
        w.add_uint32(key, value)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
    w.add_float32("llama.rope.freq_base", 10000.0)
    add_tokenizer(w)
    for name, shape in shapes.items():
        stem = name.split(".")[-2]
        quant = gguf.GGMLQuantizationType[(qtypes or {}).get(stem, qtype)]
        if len(shape) == 1:
            norm = 1 + rng.normal(0, norm_std, shape) if norm_std else np.ones(shape)
            w.add_tensor(name, norm.astype(np.float32))
        else:
            values = rng.normal(0, std, shape).astype(np.float32)
            w.add_tensor(name, gguf.quants.quantize(values, quant), raw_dtype=quant)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
