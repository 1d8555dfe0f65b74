"""Text generation with any `LanguageModel`: the prompt in one forward pass, then one token per step
on the key/value cache, sampled as transformers samples.

Sampling (`next_token`) follows transformers' order and definitions: the repetition penalty on every
token already in the context (a positive logit divided by the penalty, a negative one multiplied, as
in llama.cpp and CTRL), then temperature, top-k (ties with the k-th logit kept), top-p (the smallest
set of most likely tokens whose probability reaches p), then a draw from a seeded
`numpy.random.Generator`. Temperature 0 is greedy (the first maximum). The same seed gives the same
tokens.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..autograd import no_grad

if TYPE_CHECKING:
    from ..io.tokenizer import Tokenizer
    from .lm import KVCache, LanguageModel


@dataclass(frozen=True)
class SamplingOptions:
    """How the next token is chosen; 0 turns top-k off, 1 turns top-p and the repeat penalty off."""

    temperature: float = 0.8
    top_k: int = 40
    top_p: float = 0.95
    repeat_penalty: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be 0 (greedy) or more, got {self.temperature}")
        if not (isinstance(self.top_k, int | np.integer) and self.top_k >= 0):
            raise ValueError(f"top_k must be an integer >= 0 (0: off), got {self.top_k!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1] (1: off), got {self.top_p}")
        if not self.repeat_penalty > 0:
            raise ValueError(f"repeat_penalty must be positive (1: off), got {self.repeat_penalty}")


def filtered_logits(logits: np.ndarray, previous: Sequence[int], options: SamplingOptions) -> np.ndarray:
    """The scores sampling draws from (f64): penalized, divided by the temperature, and -inf for every
    token top-k or top-p removes. With temperature 0, the penalized logits."""
    scores = np.array(logits, dtype=np.float64).reshape(-1)
    if options.repeat_penalty != 1.0 and len(previous):
        seen = np.unique(np.asarray(previous, dtype=np.int64))
        s = scores[seen]
        scores[seen] = np.where(s < 0, s * options.repeat_penalty, s / options.repeat_penalty)
    if options.temperature == 0:
        return scores
    scores /= options.temperature
    if 0 < options.top_k < scores.size:
        kth = np.partition(scores, scores.size - options.top_k)[scores.size - options.top_k]
        scores[scores < kth] = -np.inf
    if options.top_p < 1.0:
        finite = np.flatnonzero(scores > -np.inf)  # after top-k, only k tokens are left to sort
        order = finite[np.argsort(scores[finite], kind="stable")]  # ascending, as transformers sorts
        cumulative = np.cumsum(_softmax(scores[order]))
        remove = cumulative <= 1.0 - options.top_p
        remove[-1] = False  # the most likely token always stays
        scores[order[remove]] = -np.inf
    return scores


def next_token(
    logits: np.ndarray, previous: Sequence[int], options: SamplingOptions, rng: np.random.Generator
) -> int:
    """The next token after `previous` given the model's `logits` [vocab]."""
    scores = filtered_logits(logits, previous, options)
    if options.temperature == 0:
        return int(np.argmax(scores))
    cumulative = np.cumsum(_softmax(scores))
    i = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    return min(i, scores.size - 1)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x))
    return e / e.sum()


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
) -> GenerationResult:
    """Continue `prompt` (text, encoded with the model's special tokens, or token ids) by up to
    `max_tokens` tokens, stopping at an end token; `stream(text)` receives the text as it completes.

    `cache` (from `model.new_cache()`) may be passed again with a longer prompt, as a chat does: the
    tokens it already holds that start the new prompt are not run again. Ctrl-C stops the generation
    and returns what was generated."""
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
        cache = model.new_cache(1, min(model.context_length, len(ids) + max_tokens))
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

    rng = np.random.default_rng(options.seed)
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
