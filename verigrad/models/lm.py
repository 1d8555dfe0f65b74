"""What every causal language model in `verigrad.models` offers, so that generation, the CLI and the
benchmarks work with any of them (GPT-2, Llama-family).

A model keeps its own key/value cache (`KVCache`), preallocated for `context_length` positions (or
fewer); `forward(ids, cache)` runs the tokens `ids` [B, T] at positions `cache.length ...
cache.length + T - 1`, appends their keys and values, and returns the logits [B, T, vocab] as f32.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..nn import Module


@dataclass
class KVCache:
    """Keys and values of every layer for positions [0, length), preallocated for `capacity` positions:
    `keys[layer]` and `values[layer]` are arrays [B, kv_heads, capacity, head_dim]."""

    keys: list[np.ndarray]
    values: list[np.ndarray]
    capacity: int
    length: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def reset(self) -> None:
        self.length = 0


class LanguageModel(Module):
    """A causal language model. Subclasses set `context_length`, `vocab_size`, and implement
    `new_cache` and `forward`; `generate` (models/generate.py) works on top of those."""

    context_length: int
    vocab_size: int

    def new_cache(self, batch: int = 1, capacity: int | None = None) -> KVCache:
        """An empty cache for `batch` sequences of up to `capacity` positions (default: the context)."""
        raise NotImplementedError

    def forward(self, ids: Any, cache: KVCache | None = None) -> Any:
        """Logits [B, T, vocab] (f32 Tensor) for token ids [B, T] following the cache's positions; with no
        cache, the ids start at position 0 and nothing is kept."""
        raise NotImplementedError

    # whether `forward` takes `last_only=True` (the last position's logits alone, the others never made)
    computes_last_only = False

    def last_logits(self, ids: Any, cache: KVCache) -> np.ndarray:
        """The logits [B, vocab] after the last of token ids [B, T], run on `cache` (as `forward`)."""
        logits = self(ids, cache, last_only=True) if self.computes_last_only else self(ids, cache)
        return (logits.numpy() if hasattr(logits, "numpy") else np.asarray(logits))[:, -1]

    def generate(self, tokenizer: Any, prompt: Any, **options: Any) -> Any:
        """Continue `prompt` (text or token ids): `verigrad.models.generate.generate(self, tokenizer,
        prompt, **options)`, which lists the options and returns a `GenerationResult`."""
        from .generate import generate

        return generate(self, tokenizer, prompt, **options)
