"""`verigrad quantize` on the real SmolLM2-135M-Instruct (Q4_1: decoded, then quantized again) to Q4_K_M and
Q6_K, as llama-quantize would make them; each file loaded and run against the Q4_1 model's exact values
(f32 activations: x @ dequantize(w).T)."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad.io.gguf import read_gguf
from verigrad.io.gguf_quantize import quantize_gguf
from verigrad.models.catalog import load_gguf

PROMPT = "The capital of France is Paris. The capital of Germany is Berlin. The capital of Italy is"
# max |logit - the Q4_1 model's| / max |logit| over the prompt's positions, and the share of positions
# whose top token agrees (measured 0.18 / 0.89 and 0.073 / 1.0)
BOUNDS = {"q4_k_m": (0.25, 0.85), "q6_k": (0.1, 1.0)}


@pytest.fixture(autouse=True)
def _cpu():
    """The cpu backend's kernels (the suite's default is the reference: minutes for these models)."""
    with vg.backend("cpu" if vg.backends.cpu.available() else "reference"):
        yield


@pytest.fixture(scope="module")
def reference(smollm2_gguf):
    model, tokenizer = load_gguf(smollm2_gguf, activations="f32")
    with vg.backend("cpu" if vg.backends.cpu.available() else "reference"):
        return model, tokenizer, model([tokenizer.encode(PROMPT)]).numpy()[0]


@pytest.mark.parametrize("type_name", list(BOUNDS))
def test_smollm2_quantized(smollm2_gguf, reference, tmp_path, type_name):
    out = tmp_path / f"smollm2-{type_name}.gguf"
    steps = quantize_gguf(smollm2_gguf, out, type_name)
    types = {s.tensor.name: s.qtype for s in steps}
    # SmolLM2's rows of 576 are not whole blocks of 256: only ffn_down (rows of 1536) takes K-quants; the
    # others fall back as llama.cpp's do (q4_k -> q5_0, q6_k -> q8_0); the tied embedding gets q8_0
    assert types["token_embd.weight"] == "q8_0" and types["blk.0.attn_norm.weight"] == "f32"
    if type_name == "q4_k_m":
        assert types["blk.0.attn_q.weight"] == "q5_0" and types["blk.0.attn_v.weight"] == "q8_0"
        assert [types[f"blk.{i}.ffn_down.weight"] for i in (0, 3, 4, 5)] == ["q6_k", "q4_k", "q4_k", "q6_k"]
    else:
        assert types["blk.0.attn_q.weight"] == "q8_0" and types["blk.7.ffn_down.weight"] == "q6_k"
    source, written = read_gguf(smollm2_gguf), read_gguf(out)
    assert written.get("tokenizer.ggml.tokens") == source.get("tokenizer.ggml.tokens")
    assert written.get("tokenizer.chat_template") == source.get("tokenizer.chat_template")

    ref_model, tokenizer, expected = reference
    model, _ = load_gguf(out, activations="f32")
    got = model([tokenizer.encode(PROMPT)]).numpy()[0]
    error, agree = BOUNDS[type_name]
    assert np.abs(got - expected).max() <= error * np.abs(expected).max()
    assert (got.argmax(-1) == expected.argmax(-1)).mean() >= agree
    # greedy text: the Q4_1 model's continuation (Q4_K_M writes 1000 where it writes 1,000 after)
    for prompt, tokens in (("The capital of France is", 6), ("Water boils at a temperature of", 2)):
        ids = tokenizer.encode(prompt)
        text = model.generate(tokenizer, ids, max_tokens=tokens, temperature=0).text
        assert text == ref_model.generate(tokenizer, ids, max_tokens=tokens, temperature=0).text, prompt
    assert (
        text.startswith(" around")
        and "Paris" in model.generate(tokenizer, "The capital of France is", max_tokens=2, temperature=0).text
    )
