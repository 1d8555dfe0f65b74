"""GPT-2 against Hugging Face transformers: a small random model saved as safetensors, loaded by both."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers

from verigrad.models.gpt2 import GPT2


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=101, n_positions=24, n_embd=48, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0
    )
    theirs = transformers.GPT2LMHeadModel(config).eval()
    folder = tmp_path_factory.mktemp("gpt2")
    theirs.save_pretrained(folder, safe_serialization=True)
    return theirs, GPT2.from_safetensors(folder)


def _logits(model, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


def test_logits_match_for_a_batch(models):
    theirs, ours = models
    ids = np.random.default_rng(0).integers(0, 101, (3, 11))
    np.testing.assert_allclose(ours(ids).numpy(), _logits(theirs, ids), rtol=0, atol=1e-4)


def test_cached_decoding_matches(models):
    theirs, ours = models
    ids = np.random.default_rng(1).integers(0, 101, (2, 9))
    expected = _logits(theirs, ids)
    cache = ours.new_cache(batch=2)
    steps = [ours(ids[:, :4], cache).numpy()] + [ours(ids[:, i : i + 1], cache).numpy() for i in range(4, 9)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), expected, rtol=0, atol=1e-4)
