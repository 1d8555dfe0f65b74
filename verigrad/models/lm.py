"""What every causal language model in `verigrad.models` offers, so that generation, the CLI and the
benchmarks work with any of them (GPT-2, Llama-family), and text generation with it (`generate`): the
prompt in one forward pass, then one token per step on the key/value cache, chosen as `sampling` says.

A model keeps its own key/value cache (`KVCache`) of up to `context_length` positions (or fewer),
allocated for all of them or, with `allocate`, for fewer and doubled as it fills; `forward(ids, cache)`
runs the tokens `ids` [B, T] at positions `cache.length ... cache.length + T - 1`, appends
their keys and values, and returns the logits [B, T, vocab] as f32.
"""

from __future__ import annotations

import mmap
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..autograd import no_grad
from ..nn import Module
from .sampling import SamplingOptions, next_token

if TYPE_CHECKING:  # for the hints only: the tokenizers library is imported where a model is loaded
    from ..io.tokenizer import Tokenizer


UNTOUCHED_FROM = 1 << 16  # bytes from which a cache's arrays are memory maps (`untouched_zeros`)


def untouched_zeros(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Zeros that take no memory until written: a private anonymous memory map, whose pages the system
    gives, zeroed, as they are first written, so a cache's positions allocated but not yet used cost
    nothing (np.zeros of a layer's 98 KB comes from the heap, where calloc may clear, so touch, it all).
    Small arrays, and systems without such maps, get np.zeros."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    if nbytes < UNTOUCHED_FROM or not hasattr(mmap, "MAP_ANONYMOUS"):  # MAP_PRIVATE comes with it
        return np.zeros(shape, dtype)
    memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(memory, dtype).reshape(shape)


@dataclass
class KVCache:
    """Keys and values of every layer for positions [0, length), up to `capacity` positions:
    `keys[layer]` and `values[layer]` are arrays [B, kv_heads, allocated, head_dim], `allocated` <=
    `capacity` growing as `reserve` asks. `views` holds what is derived from the arrays (windows over
    them), dropped when they grow; `extra` what is not (the tokens held)."""

    keys: list[np.ndarray]
    values: list[np.ndarray]
    capacity: int
    length: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    views: dict[Any, Any] = field(default_factory=dict)

    def reset(self) -> None:
        self.length = 0

    @property
    def allocated(self) -> int:
        """The positions the arrays hold now (the capacity for a cache with no arrays)."""
        return self.keys[0].shape[2] if self.keys else self.capacity

    def reserve(self, positions: int) -> None:
        """Make room for `positions` positions (at most the capacity): the arrays are doubled until they
        hold them, the old ones copied whole (a batch's rows keep lengths of their own, not `length`),
        so a cache that grows to n positions is copied O(log n) times; the old arrays' views are dropped.
        The new arrays take memory for the positions copied and then written (`untouched_zeros`; np.zeros
        cleared, so touched, all of them: SmolLM2's f32 chat cache of 534 positions took 47 MiB, not 25),
        and each old array is freed as soon as it is copied (the views first: they would keep every old
        array alive to the end, twice the cache at its peak)."""
        if positions <= self.allocated:
            return
        if positions > self.capacity:
            raise ValueError(
                f"KVCache.reserve: {positions} positions do not fit in the capacity ({self.capacity})"
            )
        size = self.allocated
        while size < positions:
            size *= 2
        size = min(size, self.capacity)
        self.views.clear()
        for arrays in (self.keys, self.values):
            for i in range(len(arrays)):
                old = arrays[i]
                arrays[i] = untouched_zeros((*old.shape[:2], size, *old.shape[3:]), old.dtype)
                arrays[i][:, :, : old.shape[2]] = old
                del old


class LanguageModel(Module):
    """A causal language model. Subclasses set `context_length`, `vocab_size`, and implement
    `new_cache` and `forward`; `generate` works on top of those."""

    context_length: int
    vocab_size: int

    def new_cache(
        self, batch: int = 1, capacity: int | None = None, allocate: int | None = None, dtype: str = "f32"
    ) -> KVCache:
        """An empty cache for `batch` sequences of up to `capacity` positions (default: the context),
        allocated for `allocate` of them (default: all) and grown as the model's forward fills it, storing
        keys and values in `dtype` ("f32"; "f16": half the memory; "q8_0": llama.cpp's 8-bit blocks along the
        head dimension, 0.27 of f32's memory)."""
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
        """Continue `prompt` (text or token ids): `generate(self, tokenizer, prompt, **options)`, which
        lists the options and returns a `GenerationResult`."""
        return generate(self, tokenizer, prompt, **options)


@dataclass
class GenerationResult:
    """What `generate` produced and how fast. `ids` and `text` exclude the prompt and the end token;
    `finish_reason` is "end" (an end token), "length" (max_tokens), "context" (the cache is full) or
    "interrupted" (Ctrl-C)."""

    text: str
    ids: list[int]
    finish_reason: str
    prompt_tokens: int  # tokens run through the model for the prompt (fewer when a cache held a prefix)
    prompt_seconds: float
    generated_seconds: float  # from the end of the prompt's forward pass to the last token
    peak_memory: int | None = None  # bytes: the process's peak resident set size
    prompt_ids: list[int] = field(default_factory=list)

    @property
    def prompt_tokens_per_s(self) -> float:
        return self.prompt_tokens / self.prompt_seconds if self.prompt_seconds > 0 else 0.0

    @property
    def generated_tokens_per_s(self) -> float:
        return len(self.ids) / self.generated_seconds if self.generated_seconds > 0 else 0.0

    def summary(self) -> str:
        """One line: prompt tokens/s, generated tokens/s, peak memory."""
        memory = f"{self.peak_memory / 2**20:.0f} MiB" if self.peak_memory else "unknown"
        return (
            f"prompt: {self.prompt_tokens} tokens, {self.prompt_tokens_per_s:.1f} tokens/s; "
            f"generated: {len(self.ids)} tokens, {self.generated_tokens_per_s:.1f} tokens/s "
            f"({self.finish_reason}); "
            f"peak memory {memory}"
        )


def peak_memory() -> int | None:
    """The process's peak resident memory in bytes (None where the platform does not say)."""
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024  # macOS: bytes; Linux: KiB


def generate(
    model: LanguageModel,
    tokenizer: Tokenizer,
    prompt: str | Sequence[int],
    *,
    max_tokens: int = 128,
    temperature: float = SamplingOptions.temperature,
    top_k: int = SamplingOptions.top_k,
    top_p: float = SamplingOptions.top_p,
    repeat_penalty: float = SamplingOptions.repeat_penalty,
    seed: int = SamplingOptions.seed,
    stream: Callable[[str], Any] | None = None,
    cache: KVCache | None = None,
    kv_cache: str = "f32",
) -> GenerationResult:
    """Continue `prompt` (text, encoded with the model's special tokens, or token ids) by up to
    `max_tokens` tokens, stopping at an end token; `stream(text)` receives the text as it completes.

    `cache` (from `model.new_cache()`) may be passed again with a longer prompt, as a chat does: the
    tokens it already holds that start the new prompt are not run again; without one, a cache is made
    storing keys and values in `kv_cache` ("f32", "f16" or "q8_0", see `LanguageModel.new_cache`). Ctrl-C
    stops the generation and returns what was generated."""
    options = SamplingOptions(temperature, top_k, top_p, repeat_penalty, seed)
    if not (isinstance(max_tokens, int) and max_tokens >= 1):
        raise ValueError(f"max_tokens must be a positive integer, got {max_tokens!r}")
    ids = tokenizer.encode(prompt) if isinstance(prompt, str) else [int(i) for i in prompt]
    if not ids:
        raise ValueError("the prompt is empty: give at least one token")
    if max(ids) >= model.vocab_size or min(ids) < 0:
        raise ValueError(
            f"the prompt has token ids outside the model's vocabulary (0 ... {model.vocab_size - 1})"
        )
    if cache is None:
        cache = model.new_cache(1, min(model.context_length, len(ids) + max_tokens), dtype=kv_cache)
    if len(ids) > cache.capacity:
        raise ValueError(
            f"the prompt has {len(ids)} tokens, more than the model's context holds ({cache.capacity}); "
            "shorten it"
        )
    held = cache.extra.get("tokens", []) if cache.length == len(cache.extra.get("tokens", ())) else []
    start = _common_prefix(held, ids)
    start = min(start, len(ids) - 1)  # at least one token runs, for the logits of the next one
    fed = list(ids[:start])
    cache.length = start

    rng = np.random.default_rng(options.seed) if options.temperature else None  # greedy draws nothing
    decoder = tokenizer.stream()
    out: list[int] = []
    pieces: list[str] = []
    reason = "interrupted"
    t0 = time.perf_counter()
    t1 = None
    try:
        with no_grad():
            logits = _last_logits(model, ids[start:], cache)
            fed.extend(ids[start:])
            t1 = time.perf_counter()
            while True:
                token = next_token(logits, [*ids, *out], options, rng)
                if token in tokenizer.end_ids:
                    reason = "end"
                    break
                out.append(token)
                piece = decoder.push(token)
                if piece:
                    pieces.append(piece)
                    if stream is not None:
                        stream(piece)
                if len(out) >= max_tokens:
                    reason = "length"
                    break
                if len(fed) >= cache.capacity:
                    reason = "context"
                    break
                logits = _last_logits(model, [token], cache)
                fed.append(token)
    except KeyboardInterrupt:
        reason = "interrupted"
    finally:
        cache.length = len(fed)  # what the cache holds for sure, whatever stopped the loop
        cache.extra["tokens"] = fed
    t2 = time.perf_counter()
    tail = decoder.flush()
    if tail:
        pieces.append(tail)
        if stream is not None:
            stream(tail)
    return GenerationResult(
        text="".join(pieces),
        ids=out,
        finish_reason=reason,
        prompt_tokens=len(ids) - start if t1 is not None else 0,
        prompt_seconds=(t1 if t1 is not None else t2) - t0,
        generated_seconds=t2 - t1 if t1 is not None else 0.0,
        peak_memory=peak_memory(),
        prompt_ids=ids,
    )


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _last_logits(model: LanguageModel, ids: Sequence[int], cache: KVCache) -> np.ndarray:
    """The logits [vocab] after the last of `ids`, run at the cache's next positions."""
    return model.last_logits(np.asarray([ids], dtype=np.int64), cache)[0]
