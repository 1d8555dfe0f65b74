"""A Llama of random f32 weights for the tests: every tensor of its state dict (the rotary tables aside)
drawn from N(0, spread) by the generator given."""

from __future__ import annotations

import numpy as np

import verigrad as vg
from verigrad.models.llama import Llama, LlamaConfig


def random_state(config: LlamaConfig, rng: np.random.Generator, spread: float = 0.3) -> dict[str, np.ndarray]:
    """The model's state dict of f32 draws from N(0, spread), in the state dict's order."""
    with vg.abstract():
        shapes = {k: t.shape for k, t in Llama(config).state_dict().items() if not k.startswith("rope_")}
    return {k: rng.normal(0, spread, s).astype(np.float32) for k, s in shapes.items()}


def random_llama(config: LlamaConfig, rng: np.random.Generator) -> Llama:
    """A Llama of `random_state`'s weights."""
    return Llama.from_state(config, random_state(config, rng))


def wide_heads_llama() -> Llama:
    """A small Llama of random f32 weights whose heads (32 values) a q8_0 cache takes."""
    sizes = {"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 32, "ffn_dim": 40}
    config = LlamaConfig(vocab_size=41, context_length=512, **sizes)
    return random_llama(config, np.random.default_rng(0))
