"""Llama against Hugging Face transformers: a small random model (half-split RoPE, grouped-query heads),
and SmolLM2-135M from its GGUF file (interleaved RoPE on llama.cpp's permuted weights), which
transformers dequantizes and loads itself."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from verigrad.models.llama import Llama, LlamaConfig


def _logits(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


def test_small_random_llama_matches():
    torch.manual_seed(0)
    sizes = {"vocab_size": 101, "hidden_size": 48, "intermediate_size": 80, "num_hidden_layers": 2}
    config = transformers.LlamaConfig(
        **sizes,
        num_attention_heads=6,
        num_key_value_heads=2,
        max_position_embeddings=32,
        rope_theta=500.0,
        tie_word_embeddings=True,
    )
    theirs = transformers.LlamaForCausalLM(config).eval()
    state = {k: v.numpy() for k, v in theirs.state_dict().items() if k != "lm_head.weight"}
    ours = Llama.from_state(
        LlamaConfig(
            101, 48, 2, 6, 2, 8, 80, norm_eps=config.rms_norm_eps, rope_base=500.0, context_length=32
        ),
        state,
    )
    ids = np.random.default_rng(0).integers(0, 101, (2, 10))
    expected = _logits(theirs, ids)
    np.testing.assert_allclose(ours(ids).numpy(), expected, rtol=0, atol=1e-4)
    cache = ours.new_cache(batch=2)
    steps = [ours(ids[:, :6], cache).numpy()] + [ours(ids[:, i : i + 1], cache).numpy() for i in range(6, 10)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), expected, rtol=0, atol=1e-4)


@pytest.fixture(scope="module")
def smollm2_gguf():
    """The real SmolLM2-135M-Instruct GGUF, downloaded once into verigrad's cache."""
    from verigrad.models.fetch import fetch

    return fetch("smollm2")


def test_smollm2_greedy_steps_match(smollm2_gguf):
    folder, name = str(smollm2_gguf.parent), smollm2_gguf.name
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    theirs.eval()
    ours = Llama.from_gguf(smollm2_gguf, activations="f32")
    sequence = tokenizer("The capital of France is")["input_ids"]
    cache = ours.new_cache(capacity=32)
    step_ids = list(sequence)
    for step in range(5):
        expected = _logits(theirs, [sequence])[0, -1]
        got = ours([step_ids], cache).numpy()[0, -1]
        if step == 0:
            top5 = [tokenizer.decode([int(i)]) for i in np.argsort(-expected)[:5]]
            assert top5 == [" Paris", " the", " London", " Le", " New"]
        assert got.argmax() == expected.argmax(), f"step {step}"
        assert np.abs(got - expected).max() < 1e-3, f"step {step}"
        step_ids = [int(got.argmax())]
        sequence.append(step_ids[0])
