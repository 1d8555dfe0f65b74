"""How the next token is chosen from a language model's logits, as transformers samples.

`next_token` follows transformers' order and definitions: the repetition penalty on every token already
in the context (a positive logit divided by the penalty, a negative one multiplied, as in llama.cpp and
CTRL), then temperature, top-k (ties with the k-th logit kept), top-p (the smallest set of most likely
tokens whose probability reaches p), then a draw from a seeded `numpy.random.Generator`. Temperature 0
is greedy (the first maximum). The same seed gives the same tokens.

A server's requests add OpenAI's presence and frequency penalties (`penalized`, before the rest) and ask
for log-probabilities (`log_probabilities`: of the model's own distribution, the raw logits, before any
penalty, temperature or top-p, as vLLM's default reports them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


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
    logits: np.ndarray, previous: Sequence[int], options: SamplingOptions, rng: np.random.Generator | None
) -> int:
    """The next token after `previous` given the model's `logits` [vocab] (`rng`: unused, and may be None,
    at temperature 0)."""
    scores = filtered_logits(logits, previous, options)
    if options.temperature == 0:
        return int(np.argmax(scores))
    if rng is None:
        raise ValueError("next_token: sampling at a temperature above 0 needs rng, a numpy Generator")
    cumulative = np.cumsum(_softmax(scores))
    i = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    return min(i, scores.size - 1)


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x))
    return e / e.sum()


def penalized(logits: np.ndarray, counts: dict[int, int], presence: float, frequency: float) -> np.ndarray:
    """OpenAI's penalties (f64): logit[j] - counts[j] * frequency - (counts[j] > 0) * presence, counts[j]
    being how many times token j was generated so far (the prompt's tokens do not count)."""
    scores = np.array(logits, dtype=np.float64).reshape(-1)
    if counts and (presence or frequency):
        ids = np.fromiter(counts.keys(), np.int64, len(counts))
        scores[ids] -= np.fromiter(counts.values(), np.float64, len(counts)) * frequency + presence
    return scores


def log_probabilities(logits: np.ndarray) -> np.ndarray:
    """log softmax of the logits [vocab], in f64."""
    x = np.asarray(logits, dtype=np.float64).reshape(-1)
    shifted = x - np.max(x)
    return shifted - np.log(np.sum(np.exp(shifted)))
