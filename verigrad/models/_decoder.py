"""What GPT-2 and Llama share: token ids, the KV cache, and the step that runs with it.

Without a cache a model runs eagerly, with the causal `attention` op. With one, a forward is one
`step(ids, positions, bias, *windows)`, compiled for the decode loop (`verigrad.compile`: the per-op
dispatch of ~25 ops a layer is paid once, when the plan is built). The step reads each layer's keys
and values through a window of W positions of the cache (views, no copy; the keys transposed) and
returns the logits and each layer's new keys and values, which `commit` then writes into the cache.
W is a power of two (at least the cache's length), so only a handful of plans are ever built, and the
plans of narrower windows are freed once a wider one runs (a conversation's window only widens); `bias`
[T, W+T] (0 or -inf) hides the window's unused slots and the new tokens' future, so the softmax
(`cached_attention`) covers exactly the valid prefix.

A q8_0 cache stores each key and value as q8_0 blocks along the head dimension (llama.cpp's blocks:
34 bytes per 32 values); the step then takes the windows as those bytes, and each layer's attention reads
them as they are (`window_attention`: the `cached_attention_q8` op, whose kernel de-quantizes in
registers), so the step is compiled as the f32 and f16 ones are.

A batch of sequences of different lengths (a server's continuous batching) runs one decode step with
per-row positions [B, 1] and bias [B, 1, W+1] (`row_inputs`): sequence i is row i of the cache, at its
own length, and `commit_rows` writes each row's new key and value at its own position. Where the model's
attention takes ragged steps, the bias is each row's run instead (`Rows`: one `ragged_attention` call that
reads no position past a row's length). A mixed step
(`CachedStep.mixed`, a server's prompt chunk joined to its decode step) runs those rows' tokens and a
chunk of the next row's prompt as one sequence of tokens [1, n + C] through the products; its attention
(`Mixed.split`) runs the rows' tokens over their rows' windows and the chunk over its row's, each on the
inputs the step alone gives it, so every row's logits, keys and values are the bits it gets alone.
A ragged step (`CachedStep.ragged`, `forward_ragged`) runs runs of tokens of any cache rows (decode rows,
prompt chunks) as one sequence [1, N] whose attention is one `ragged_attention` call over every row's
window: the runs are data, so one trace serves them all, a plan per (N, runs, window).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..autograd import no_grad
from ..backends import get_backend
from ..dtypes import u8
from ..io.quantizers import quantize
from ..ops import (
    cached_attention,
    cached_attention_q8,
    concat,
    dequantize_op,
    from_numpy,
    ragged_attention,
    ragged_attention_q8,
    take,
)
from ..ops.quant import FORMATS
from ..shapes import DimLike, Spec, dims, spec
from ..tensor import Tensor
from .lm import KVCache, LanguageModel, untouched_zeros

MIN_WINDOW = 64  # the smallest window; each doubling builds one more plan (~0.2 s for SmolLM2)
# a cache's storage: f32, f16 (half the memory; each key and value rounded to f16 once, when written,
# and widened exactly inside `cached_attention`), or q8_0 (34 bytes per 32 values, 0.27 of f32's: keys and
# values quantized to llama.cpp's q8_0 blocks along the head dimension when written, read as blocks)
KV_DTYPES = {"f32": np.float32, "f16": np.float16, "q8_0": np.uint8}
Q8 = FORMATS["q8_0"]


def cache_dtype(cache: KVCache) -> str:
    """The name (of KV_DTYPES) of the cache's storage."""
    dtype = np.dtype(cache.keys[0].dtype)
    return "q8_0" if dtype == np.uint8 else dtype.name.replace("float", "f")


def _stored(new: np.ndarray, cache: KVCache) -> np.ndarray:
    """New keys or values [..., head_dim] (f32) as the cache stores them (q8_0: the blocks' bytes)."""
    if cache.keys[0].dtype != np.uint8:
        return new
    return quantize(new.reshape(-1, new.shape[-1]), "q8_0").reshape(*new.shape[:-1], -1)


def new_cache(
    layers: int,
    batch: int,
    kv_heads: int,
    capacity: int,
    head_dim: int,
    allocate: int | None = None,
    dtype: str = "f32",
) -> KVCache:
    """Zeroed keys and values [batch, kv_heads, allocated, head_dim] (`dtype`: a name of KV_DTYPES; q8_0:
    [..., head_dim / 32 * 34] bytes) for each layer, allocated for `allocate` positions (all `capacity` by
    default; `KVCache.reserve` grows them)."""
    if not (isinstance(batch, int) and batch >= 1 and isinstance(capacity, int) and capacity >= 1):
        raise ValueError(f"a cache needs batch >= 1 and capacity >= 1, got {batch} and {capacity}")
    if allocate is not None and not (isinstance(allocate, int) and allocate >= 1):
        raise ValueError(f"a cache's allocate must be a positive integer (or None), got {allocate!r}")
    if dtype not in KV_DTYPES:
        raise ValueError(f"a cache's dtype must be one of {', '.join(KV_DTYPES)}, got {dtype!r}")
    if dtype == "q8_0" and head_dim % Q8.block:
        raise ValueError(f"a q8_0 cache needs a head size that is a multiple of 32, got {head_dim}")
    row = Q8.row_bytes(head_dim) if dtype == "q8_0" else head_dim
    shape = (batch, kv_heads, capacity if allocate is None else min(allocate, capacity), row)
    # an array of its own per layer: `reserve` frees each as it is copied
    return KVCache(
        keys=[untouched_zeros(shape, KV_DTYPES[dtype]) for _ in range(layers)],
        values=[untouched_zeros(shape, KV_DTYPES[dtype]) for _ in range(layers)],
        capacity=capacity,
    )


def check_room(cache: KVCache | None, ids: Tensor, context_length: int) -> None:
    """Refuses ids that are not [B, T], or that do not fit in the context or the cache, before any work."""
    if ids.ndim != 2:
        raise ValueError(f"token ids must be [B, T], got shape {list(ids.shape)}")
    if cache is None:
        start, limit, what = 0, context_length, "the context length"
    else:
        start, limit, what = cache.length, cache.capacity, "the cache's capacity"
        batch = cache.keys[0].shape[0] if cache.keys else ids.shape[0]
        if batch != ids.shape[0]:
            raise ValueError(f"the cache holds {batch} sequence(s), the ids {ids.shape[0]}")
    end = start + ids.shape[1]
    if isinstance(end, int) and isinstance(limit, int) and end > limit:
        raise ValueError(f"positions {start}..{end - 1} do not fit in {what} ({limit})")


def token_ids(ids: Any) -> Tensor:
    """Token ids as an integer tensor [B, T]."""
    if isinstance(ids, Tensor):
        if ids.dtype.kind != "i":
            raise TypeError(f"token ids must be integers, got {ids.dtype.name}")
        return ids
    array = np.asarray(ids)
    if array.dtype.kind not in "iu":
        raise TypeError(f"token ids must be integers, got {array.dtype}")
    return from_numpy(array.astype(np.int64))


# the cached step ------------------------------------------------------------------------------------
def step_specs(
    layers: int,
    kv_heads: DimLike,
    head_dim: DimLike,
    tokens: int | None = None,
    rows: bool = False,
    cache_dtype: str = "f32",
    runs: bool = False,
) -> tuple:
    """The step's argument specs: ids [B, T], positions [T], bias [T, W+T] (with `rows`, each row's own:
    positions [B, T], bias [B, T, W+T]), then per layer the windows of the keys, transposed
    [B, KV, D, W], and of the values [B, KV, W, D], in `cache_dtype`; T is `tokens` if given. The
    symbols have names of their own (batch, tokens, window), so a user's B, T or W declared a multiple of
    something does not constrain them. A q8_0 cache's windows are its bytes, keys not transposed: u8
    [B, KV, W, head_dim / 32 * 34] each. With `rows` and `runs`, the bias is the rows' runs i64 [B, 4]
    (`Rows`)."""
    b, t, w = dims("batch tokens window")
    t = t if tokens is None else tokens
    lead = [b] if rows else []
    positions = spec([*lead, t], "i64")
    bias = spec([b, 4], "i64") if rows and runs else spec([*lead, t, w + t])
    return (
        spec([b, t], "i64"),
        positions,
        bias,
        *window_specs(layers, kv_heads, head_dim, b, w, cache_dtype),
    )


def window_specs(
    layers: int, kv_heads: DimLike, head_dim: DimLike, batch: DimLike, width: DimLike, dtype: str
) -> list[Spec]:
    """Every layer's window specs (keys transposed, values) over `batch` rows of `width` positions."""
    if dtype == "q8_0":
        keys = values = spec([batch, kv_heads, width, Q8.row_bytes(head_dim)], "u8")
    else:
        keys, values = (
            spec([batch, kv_heads, head_dim, width], dtype),
            spec([batch, kv_heads, width, head_dim], dtype),
        )
    return [keys, values] * layers


def window_width(length: int, capacity: int) -> int:
    """The window for a cache holding `length` positions: a power of two, at least MIN_WINDOW (at most
    the capacity: the cache is allocated for the window before it is made, `reserve`)."""
    width = MIN_WINDOW
    while width < length:
        width *= 2
    return min(width, capacity)


def windows_of(cache: KVCache, width: int, batch: int | None = None) -> list[Tensor]:
    """Every layer's window of `width` positions (keys transposed, values) over the cache's first `batch`
    rows (all by default): views made once per (width, batch) and kept in `cache.views` (dropped when the
    cache grows)."""
    batch = cache.keys[0].shape[0] if batch is None else batch
    key = ("windows", width) if batch == cache.keys[0].shape[0] else ("windows", width, batch)
    windows = cache.views.get(key)
    if windows is None:
        windows = []
        for k, v in zip(cache.keys, cache.values):
            k = k[:batch, :, :width]
            windows += [
                from_numpy(k if k.dtype == np.uint8 else k.swapaxes(2, 3)),
                from_numpy(v[:batch, :, :width]),
            ]
        cache.views[key] = windows
    return windows


def chunk_bias(length: int, width: int, count: int) -> np.ndarray:
    """Bias [count, width + count] of `count` new tokens of a sequence holding `length` positions of a
    window `width` wide: the window past `length` hidden, and each new token's future."""
    bias = np.zeros((count, width + count), np.float32)
    bias[:, length:width] = -np.inf
    if count > 1:
        bias[:, width:][np.triu_indices(count, 1)] = -np.inf
    return bias


def rows_bias(ends: np.ndarray, width: int) -> np.ndarray:
    """Bias [B, 1, width + 1] of one new token per row, row i holding ends[i] positions of the window."""
    bias = np.zeros((len(ends), 1, width + 1), np.float32)
    bias[:, 0, :width][np.arange(width) >= ends.reshape(-1, 1)] = -np.inf
    return bias


def step_inputs(cache: KVCache, count: int) -> tuple[np.ndarray, np.ndarray, list[Tensor]]:
    """Positions, bias and the windows of every layer's keys and values for `count` new tokens (tensors
    viewing the cache, made once per window width and kept in `cache.views`: the views see what
    `commit` writes). The cache grows first if the window or the new tokens need it."""
    length = cache.length
    width = window_width(length, cache.capacity)
    cache.reserve(max(width, length + count))
    positions = np.arange(length, length + count, dtype=np.int64)
    return positions, chunk_bias(length, width, count), windows_of(cache, width)


def row_inputs(
    cache: KVCache, lengths: list[int], runs: bool = False
) -> tuple[np.ndarray, np.ndarray, list[Tensor]]:
    """Positions [B, 1], bias [B, 1, W+1] (with `runs`, the runs [B, 4] of `Rows`) and the windows of the
    cache's first B = len(lengths) rows for one new token per row, row i holding `lengths[i]` positions
    (the window covers the longest)."""
    width = window_width(max(lengths), cache.capacity)
    cache.reserve(max(width, max(lengths) + 1))
    positions = np.asarray(lengths, dtype=np.int64).reshape(-1, 1)
    bias = row_runs(positions[:, 0]) if runs else rows_bias(positions, width)
    return positions, bias, windows_of(cache, width, len(lengths))


def row_runs(ends: np.ndarray) -> np.ndarray:
    """The runs [B, 4] of one new token per row (`Rows`): row i's (i, i, 1, ends[i])."""
    rows = np.arange(len(ends), dtype=np.int64)
    return np.stack([rows, rows, np.ones_like(rows), ends.astype(np.int64)], axis=1)


def commit(cache: KVCache, new: list[Tensor]) -> None:
    """Write the step's new keys and values (alternating per layer) into the cache; advance it."""
    count = new[0].shape[2]
    at = slice(cache.length, cache.length + count)
    for i, (k, v) in enumerate(zip(new[0::2], new[1::2])):
        cache.keys[i][:, :, at] = _stored(k.numpy(), cache)
        cache.values[i][:, :, at] = _stored(v.numpy(), cache)
    cache.length += count


def commit_rows(cache: KVCache, new: list[Tensor], lengths: list[int]) -> None:
    """Write row i's new key and value (one token) at position lengths[i] of the cache's row i, every
    layer's in one call of the active backend (`Backend.write_rows`)."""
    news = [_stored(a.numpy()[:, :, 0], cache) for a in new]  # keys and values alternate per layer
    stores = [store for pair in zip(cache.keys, cache.values) for store in pair]
    get_backend().write_rows(stores, news, np.asarray(lengths, np.int64))


@dataclass(frozen=True)
class Mixed:
    """A mixed step's bias (what the model's step passes on as `bias`): its first `rows` tokens are one
    new token of each of the cache's first `rows` sequences (`rows_bias` [rows, 1, W+1], as `row_inputs`
    makes it), the other C a chunk of sequence `rows`'s prompt (`chunk_bias` [C, W+C], as `step_inputs`)."""

    rows: int
    rows_bias: Tensor
    chunk_bias: Tensor

    def split(self, attend: Any, q: Tensor, k: Tensor, v: Tensor, past_k: Tensor, past_v: Tensor) -> Tensor:
        """attend(q, k, v, past_k, past_v, bias) of the step's tokens (q [1, H, N, hd], k and v
        [1, KV, N, hd]) by sequence: the rows' tokens over their rows' windows, as `CachedStep.rows` runs
        them, then the chunk over its own row's, as `CachedStep.chunk` does; [1, H, N, hd]."""
        n = self.rows
        one = [a[:, :, :n].permute(2, 1, 0, 3) for a in (q, k, v)]  # token i as sequence i's one token
        rows = attend(*one, past_k[:n], past_v[:n], self.rows_bias).permute(2, 1, 0, 3)
        chunk = attend(*[a[:, :, n:] for a in (q, k, v)], past_k[n:], past_v[n:], self.chunk_bias)
        return concat(rows, chunk, axis=2)


@dataclass(frozen=True)
class Ragged:
    """A ragged step's bias (what the model's step passes on as `bias`): its N tokens are runs, run
    (row, start, count, length) of `runs` being the next `count` tokens of the sequence in cache row `row`,
    which holds `length` positions (`ragged_attention`: the runs are data, so one plan serves any mix of
    decode rows and prompt chunks of N tokens; empty runs pad them); `last` [S] the tokens whose logits
    the step returns (each run's last)."""

    runs: Tensor
    last: Tensor


@dataclass(frozen=True)
class Rows:
    """A batched decode step's bias (what the model's step passes on as `bias`) where the model's attention
    takes ragged steps: one new token per row of the windows, row i's run (i, i, 1, length) of `runs`
    [B, 4]. Its attention is one `ragged_attention` call, which reads no window position past a row's
    length; `cached_attention`'s kernel read that hidden tail for a NaN (an 8-row step at 100-149 positions
    in a window of 256 read as much memory there as in the positions it attends). The same bits where the
    tail is finite, as the engine keeps a cache's unused positions (zeros)."""

    runs: Tensor

    def attend(
        self, op: Any, q: Tensor, k: Tensor, v: Tensor, past_k: Tensor, past_v: Tensor, scale: Any
    ) -> Tensor:
        """op(q, k, v, past_k, past_v, runs) (a ragged attention op) of the rows' tokens (q [B, H, 1, hd],
        k and v [B, KV, 1, hd]) taken as one sequence of B tokens (permuted views); [B, H, 1, hd]."""
        one = [a.permute(2, 1, 0, 3) for a in (q, k, v)]
        return op(*one, past_k, past_v, self.runs, scale=scale).permute(2, 1, 0, 3)


def logit_rows(x: Tensor, bias: Any, last_only: bool) -> Tensor:
    """The rows of a step's last hidden states x [B, T, d] whose logits it returns: all, the last (with
    `last_only`), a mixed step's rows' and its chunk's last ([rows + 1, 1, d]), or a ragged step's `last`
    tokens' ([S, 1, d])."""
    if isinstance(bias, Ragged):
        return take(x[0], bias.last.reshape(bias.last.shape[0], 1), axis=0)
    if isinstance(bias, Mixed):
        return concat(x[:, : bias.rows], x[:, -1:], axis=1).reshape(bias.rows + 1, 1, x.shape[2])
    return x[:, -1:] if last_only else x


def mixed_inputs(
    cache: KVCache, lengths: list[int], at: int, count: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[Tensor]]:
    """Positions [n + count], the rows' bias, the chunk's bias (`Mixed`) and the windows of the cache's
    first n + 1 rows (n = len(lengths)) for a mixed step: one token per row i at position lengths[i], then
    `count` tokens of row n at positions at, at + 1, ... (the window covers the longest row)."""
    n = len(lengths)
    width = window_width(max(*lengths, at), cache.capacity)
    cache.reserve(max(width, max(lengths) + 1, at + count))
    ends = np.asarray(lengths, dtype=np.int64)
    positions = np.concatenate([ends, np.arange(at, at + count)]).astype(np.int64)
    return positions, rows_bias(ends, width), chunk_bias(at, width, count), windows_of(cache, width, n + 1)


def commit_mixed(cache: KVCache, new: list[Tensor], lengths: list[int], at: int) -> None:
    """Write a mixed step's new keys and values: token i (< n) at position lengths[i] of row i, the
    chunk's at positions at ... of row n."""
    n = len(lengths)
    rows, ends = np.arange(n), np.asarray(lengths)
    for i, (k, v) in enumerate(zip(new[0::2], new[1::2])):
        for store, a in ((cache.keys[i], k.numpy()[0]), (cache.values[i], v.numpy()[0])):
            store[rows, :, ends] = _stored(a[:, :n].swapaxes(0, 1), cache)
            store[n, :, at : at + a.shape[1] - n] = _stored(a[:, n:], cache)


def ragged_inputs(
    cache: KVCache, runs: np.ndarray, tokens: int
) -> tuple[np.ndarray, np.ndarray, list[Tensor]]:
    """Positions [tokens], each run's last token (whose logits a ragged step returns) and the windows of
    every row of the cache for `runs` (row, start, count, length) [S, 4]; tokens past the runs' (padding)
    at position 0. The window covers the longest row."""
    lengths, ends = runs[:, 3], runs[:, 3] + runs[:, 2]
    width = window_width(int(lengths.max()), cache.capacity)
    cache.reserve(max(width, int(ends.max())))
    positions = np.zeros(tokens, np.int64)
    for _, start, count, length in runs.tolist():
        positions[start : start + count] = np.arange(length, length + count)
    return positions, runs[:, 1] + runs[:, 2] - 1, windows_of(cache, width)


def commit_ragged(cache: KVCache, new: list[Tensor], runs: np.ndarray) -> None:
    """Write a ragged step's new keys and values: run (row, start, count, length)'s at positions length ...
    of its row (tokens past the runs, padding, are not written)."""
    rows = np.concatenate([np.full(c, r) for r, _, c, _ in runs.tolist()])
    at = np.concatenate([np.arange(n, n + c) for _, _, c, n in runs.tolist()])
    count = len(rows)
    for i, (k, v) in enumerate(zip(new[0::2], new[1::2])):
        for store, a in ((cache.keys[i], k.numpy()[0]), (cache.values[i], v.numpy()[0])):
            store[rows, :, at] = _stored(a[:, :count].swapaxes(0, 1), cache)


def layer_window(windows: tuple, layer: int) -> tuple[Tensor, Tensor]:
    """Layer `layer`'s window from a step's windows: (keys transposed, values) of an f32 or f16 cache; a
    q8_0 cache's blocks as the cache holds them (u8 [B, KV, W, bytes] each), which `window_attention` reads
    directly (no f32 window is made)."""
    return windows[2 * layer], windows[2 * layer + 1]


def window_attention(
    q: Tensor, k: Tensor, v: Tensor, past_k: Tensor, past_v: Tensor, bias: Any, scale: float | None = None
) -> Tensor:
    """The attention of new tokens over a layer's window (`layer_window`) and themselves:
    `cached_attention`, or `cached_attention_q8` on a q8_0 cache's blocks; a mixed step's tokens by
    their sequences (`Mixed.split`); a ragged step's runs in one call (`ragged_attention`)."""
    if isinstance(bias, Ragged | Rows):
        op = ragged_attention_q8 if past_k.dtype is u8 else ragged_attention
        if isinstance(bias, Rows):
            return bias.attend(op, q, k, v, past_k, past_v, scale)
        return op(q, k, v, past_k, past_v, bias.runs, scale=scale)
    if isinstance(bias, Mixed):
        return bias.split(functools.partial(window_attention, scale=scale), q, k, v, past_k, past_v)
    if past_k.dtype is u8:
        return cached_attention_q8(q, k, v, past_k, past_v, bias, scale=scale)
    return cached_attention(q, k, v, past_k, past_v, bias, scale=scale)


def float_window(past_k: Tensor, past_v: Tensor) -> tuple[Tensor, Tensor]:
    """A layer's window as (keys transposed, values) of floats, for attention written in ops: a q8_0
    cache's blocks de-quantized (f32), a float window as it is."""
    if past_k.dtype is u8:
        return dequantize_op(past_k, qtype="q8_0").mT, dequantize_op(past_v, qtype="q8_0")
    return past_k, past_v


class CachedStep:
    """A model's `step` run on a cache (inputs made, outputs committed): compiled for one new token
    (the decode loop: T = 1, so its products have no position axis), eager for several (a prompt:
    compiling per prompt length would build a plan for each, and run it once), on every cache storage (a
    q8_0 cache's windows are read as blocks: no de-quantized f32 window for a plan to keep)."""

    def __init__(self, step: Any, layers: int, kv_heads: DimLike, head_dim: DimLike, runs: bool = False):
        self.step, self.sizes = step, (layers, kv_heads, head_dim)
        self.runs = runs  # the batched decode step's attention by runs (`Rows`)
        self.decode: dict[str, Any] = {}  # compiled per cache dtype
        self.widest: dict[str, int] = {}  # the widest window `decode` has run, per cache dtype
        self.decode_rows: dict[str, Any] = {}
        self.chunks: dict[str, Any] = {}  # a prompt's chunks: any T, the last token's logits
        self.mixes: dict[tuple[str, int], Any] = {}  # mixed steps per (cache dtype, rows): any chunk
        self.raggeds: dict[tuple[str, int], Any] = {}  # ragged steps per (cache dtype, rows): any runs

    def _compiled(self, plans: dict[str, Any], cache: KVCache, rows: bool, tokens: int | None = 1) -> Any:
        dtype = cache_dtype(cache)
        if dtype not in plans:
            from ..compile import compile  # the decode loop's, not the load's (the IR is 20 modules)

            step = self.step if tokens == 1 else functools.partial(self.step, last_only=True)
            runs = rows and self.runs
            step = self._rows if runs else step
            plans[dtype] = compile(step, specs=step_specs(*self.sizes, tokens, rows, dtype, runs))
        return plans[dtype]

    def chunk(self, ids: Tensor, cache: KVCache) -> Tensor:
        """The logits [B, 1, vocab] of the last of T new tokens (ids [B, T]), the same bits as
        `self(ids, cache, last_only=True)`, compiled for any T: a server's prompt chunks (T <= its block,
        so at most block x windows plans, ~0.8 MiB each for SmolLM2) run without the eager dispatch of
        every op."""
        if ids.shape[1] == 1:
            return self(ids, cache)
        plan = self._compiled(self.chunks, cache, rows=False, tokens=None)
        positions, bias, windows = step_inputs(cache, ids.shape[1])
        with no_grad():
            logits, *new = plan(ids, from_numpy(positions), from_numpy(bias), *windows)
        commit(cache, new)
        return logits

    def mixed(self, ids: Tensor, cache: KVCache, lengths: list[int], at: int) -> Tensor:
        """The logits [n + 1, 1, vocab] of one step of n = len(lengths) sequences' next tokens and a
        chunk of sequence n's prompt: ids [1, n + C] are row i's token (at position lengths[i]), then the
        chunk's C tokens (at positions at, at + 1, ...); row n's logits are the chunk's last token's. Each
        row's logits, keys and values are the bits `rows` and `chunk` give (the products take the n + C
        rows as one operand; the attention runs by sequence, on the inputs those give it)."""
        n, count = len(lengths), ids.shape[1] - len(lengths)
        key = (cache_dtype(cache), n)
        step = self.mixes.get(key)
        if step is None:
            from ..compile import compile

            t, w = dims("tokens window")
            specs = (
                spec([1, n + t], "i64"),
                spec([n + t], "i64"),
                spec([n, 1, w + 1]),
                spec([t, w + t]),
                *window_specs(*self.sizes, n + 1, w, key[0]),
            )
            step = self.mixes[key] = compile(functools.partial(self._mixed, rows=n), specs=specs)
        positions, row_bias, prompt_bias, windows = mixed_inputs(cache, lengths, at, count)
        with no_grad():
            args = [from_numpy(a) for a in (positions, row_bias, prompt_bias)]
            logits, *new = step(ids, *args, *windows)
        commit_mixed(cache, new, lengths, at)
        return logits

    def _mixed(
        self, ids: Tensor, positions: Tensor, rows_bias: Tensor, chunk_bias: Tensor, *windows, rows: int
    ) -> tuple[Tensor, ...]:
        """The model's step with a mixed step's bias (`Mixed`): what `mixed` compiles."""
        return self.step(ids, positions, Mixed(rows, rows_bias, chunk_bias), *windows)

    def ragged(self, ids: np.ndarray, cache: KVCache, runs: np.ndarray, pad: int = 1) -> Tensor:
        """The logits [S, 1, vocab] of the last token of each of S runs (row, start, count, length) [S, 4] of
        the N tokens `ids` [N] (see `Ragged`), their keys and values written into their rows. One compiled
        step for any runs: its plans are per (N, S, window), N rounded up to a multiple of `pad` (the
        padding tokens form a run of their own whose keys are not kept); the runs are padded with empty
        ones to one more than the cache's rows. (The logits of S rows, not of the cache's rows: a plan
        for each S costs less than the head's product on rows that no run asked for.)"""
        dtype, slots = cache_dtype(cache), cache.keys[0].shape[0]
        step = self.raggeds.get((dtype, slots))
        if step is None:
            from ..compile import compile

            n, s, w = dims("tokens sequences window")
            specs = (
                spec([1, n], "i64"),
                spec([n], "i64"),
                spec([slots + 1, 4], "i64"),
                spec([s], "i64"),
                *window_specs(*self.sizes, slots, w, dtype),
            )
            step = self.raggeds[dtype, slots] = compile(self._ragged, specs=specs)
        count = len(ids)
        tokens = -(-count // pad) * pad
        table = np.zeros((slots + 1, 4), np.int64)
        table[: len(runs)] = runs
        table[len(runs) :, 1] = tokens
        if tokens > count:  # the padding: a run of its own over no positions
            table[len(runs)] = (0, count, tokens - count, 0)
        positions, last, windows = ragged_inputs(cache, runs, tokens)
        padded = np.zeros((1, tokens), np.int64)
        padded[0, :count] = ids
        with no_grad():
            args = [from_numpy(a) for a in (padded, positions, table, last)]
            logits, *new = step(*args, *windows)
        commit_ragged(cache, new, runs)
        return logits

    def _ragged(
        self, ids: Tensor, positions: Tensor, runs: Tensor, last: Tensor, *windows
    ) -> tuple[Tensor, ...]:
        """The model's step with a ragged step's bias (`Ragged`): what `ragged` compiles."""
        return self.step(ids, positions, Ragged(runs, last), *windows)

    def _rows(self, ids: Tensor, positions: Tensor, runs: Tensor, *windows) -> tuple[Tensor, ...]:
        """The model's step with a batched decode step's runs (`Rows`): what `rows` compiles."""
        return self.step(ids, positions, Rows(runs), *windows)

    def drop_plans(self) -> None:
        """Free the compiled steps' plans (`Compiled.drop_plans`)."""
        every = (self.decode, self.decode_rows, self.chunks, self.mixes, self.raggeds)
        for compiled in [c for plans in every for c in plans.values()]:
            compiled.drop_plans()

    def _widen(self, decode: Any, dtype: str, width: int) -> None:
        """Drop the one-token step's plans when a wider window than any it ran comes: a chat's window only
        widens (64, 128, 256, ...) and each plan holds its buffers (SmolLM2's chat at 243 positions kept
        three, 4 MiB); a cache of a narrower window used again (another conversation) builds its plan
        again, once per widening."""
        widest = self.widest.get(dtype)
        if widest is None or width > widest:
            self.widest[dtype] = width
            if widest is not None:
                decode.drop_plans()

    def rows(self, ids: Tensor, cache: KVCache, lengths: list[int]) -> Tensor:
        """The logits [B, 1, vocab] of one new token per row (ids [B, 1]), row i of the cache holding
        lengths[i] positions; each row's key and value are written at its own position (the caller
        keeps the lengths: `cache.length` is not used)."""
        decode = self._compiled(self.decode_rows, cache, rows=True)
        positions, bias, windows = row_inputs(cache, lengths, self.runs)
        with no_grad():
            logits, *new = decode(ids, from_numpy(positions), from_numpy(bias), *windows)
        commit_rows(cache, new, lengths)
        return logits

    def __call__(self, ids: Tensor, cache: KVCache, last_only: bool = False) -> Tensor:
        """The logits [B, T, vocab] (or [B, 1, vocab] of the last token, with `last_only`)."""
        count = ids.shape[1]
        decode = self._compiled(self.decode, cache, rows=False) if count == 1 else None
        positions, bias, windows = step_inputs(cache, count)
        if decode is not None:
            self._widen(decode, cache_dtype(cache), bias.shape[1] - count)
        with no_grad():
            args = [from_numpy(positions), from_numpy(bias), *windows]
            if count == 1:  # one token: its logits are the last
                logits, *new = decode(ids, *args)
            else:
                logits, *new = self.step(ids, *args, last_only=last_only)
        commit(cache, new)
        return logits


class CachedDecoder(LanguageModel):
    """A decoder-only model (GPT-2, Llama) on this module's cache: a subclass calls `cached(layers,
    kv_heads, head_dim)` in `__init__` and gives `hidden(ids)` (the uncached trunk: the last layer's
    output [B, T, d]), `_logits(x)` and `step`; `forward` and `new_cache` are these."""

    computes_last_only = True
    ragged_steps = True  # `forward_ragged` runs (not where the attention is written in ops by sequence)

    def cached(self, layers: int, kv_heads: DimLike, head_dim: DimLike) -> None:
        old = getattr(self, "cached_step", None)
        self.cache_sizes = (layers, kv_heads, head_dim)
        self.cached_step = CachedStep(self.step, layers, kv_heads, head_dim, runs=self.ragged_steps)
        if old is not None:  # made anew (Llama's RoPE tables grew): the old plans' memory freed now
            old.drop_plans()

    def new_cache(
        self, batch: int = 1, capacity: int | None = None, allocate: int | None = None, dtype: str = "f32"
    ) -> KVCache:
        layers, kv_heads, head_dim = self.cache_sizes
        capacity = self.context_length if capacity is None else capacity
        return new_cache(layers, batch, kv_heads, capacity, head_dim, allocate, dtype)

    def forward(self, ids: Any, cache: KVCache | None = None, last_only: bool = False) -> Tensor:
        """Logits [B, T, vocab] of token ids [B, T] ([B, 1, vocab] of the last token alone with `last_only`:
        a prompt's other rows are never made); with a cache, one compiled step without gradients."""
        ids = token_ids(ids)
        check_room(cache, ids, self.context_length)
        if cache is None:
            x = self.hidden(ids)
            return self._logits(x[:, -1:] if last_only else x)
        return self.cached_step(ids, cache, last_only)

    def forward_rows(self, ids: Any, cache: KVCache, lengths: list[int]) -> Tensor:
        """Logits [B, 1, vocab] of one new token per sequence (ids [B, 1]), sequence i being row i of the
        cache and holding lengths[i] positions (a server's batch; see `CachedStep.rows`)."""
        ids = token_ids(ids)
        rows = cache.keys[0].shape[0] if cache.keys else 0
        b = ids.shape[0]
        if ids.ndim != 2 or ids.shape[1] != 1 or not 1 <= b <= rows or b != len(lengths):
            raise ValueError(
                f"forward_rows: ids must be [B, 1] with B = len(lengths) <= the cache's {rows} rows, "
                f"got ids {list(ids.shape)} and {len(lengths)} lengths"
            )
        if not all(isinstance(n, int) and 0 <= n < cache.capacity for n in lengths):
            raise ValueError(f"forward_rows: each length must be 0 ... {cache.capacity - 1}, got {lengths}")
        self.prepare(cache.capacity)
        return self.cached_step.rows(ids, cache, lengths)

    def forward_mixed(self, ids: Any, chunk: Any, cache: KVCache, lengths: list[int], at: int) -> Tensor:
        """Logits [B + 1, 1, vocab]: rows 0 .. B-1 those `forward_rows(ids, cache, lengths)` gives, row B
        those `forward_chunk(chunk)` gives on row B of the cache holding `at` positions (chunk [1, T]): one
        step whose products read each weight once for both (`CachedStep.mixed`)."""
        ids, chunk = token_ids(ids), token_ids(chunk)
        rows = cache.keys[0].shape[0] if cache.keys else 0
        b = ids.shape[0]
        if ids.ndim != 2 or ids.shape[1] != 1 or not 1 <= b < rows or b != len(lengths):
            raise ValueError(
                f"forward_mixed: ids must be [B, 1] with B = len(lengths) < the cache's {rows} rows, "
                f"got ids {list(ids.shape)} and {len(lengths)} lengths"
            )
        if chunk.ndim != 2 or chunk.shape[0] != 1:
            raise ValueError(f"forward_mixed: the chunk must be [1, T], got {list(chunk.shape)}")
        end = at + chunk.shape[1]
        if (
            not all(isinstance(n, int) and 0 <= n < cache.capacity for n in [*lengths, at])
            or end > cache.capacity
        ):
            raise ValueError(
                f"forward_mixed: the lengths {lengths} and the chunk's positions {at} ... {end - 1} must be "
                f"0 ... {cache.capacity - 1}"
            )
        self.prepare(cache.capacity)
        joined = np.concatenate([ids.numpy()[:, 0], chunk.numpy()[0]]).reshape(1, -1)
        return self.cached_step.mixed(from_numpy(joined), cache, lengths, at)

    def forward_ragged(
        self,
        tokens: Sequence[Sequence[int]],
        cache: KVCache,
        rows: Sequence[int],
        lengths: Sequence[int],
        pad: int = 1,
    ) -> Tensor:
        """Logits [S, 1, vocab] of one step of S sequences: sequence s, in cache row rows[s] (distinct) and
        holding lengths[s] positions, runs its next tokens[s] (one token: a decode row, as `forward_rows`;
        several: a prompt's chunk, as `forward_chunk`), and row s of the result is the logits of its last;
        each run's logits, keys and values are the bits those give it. One compiled step serves any runs
        (`CachedStep.ragged`: a plan per token count rounded up to a multiple of `pad`, run count and
        window)."""
        rows_held = cache.keys[0].shape[0] if cache.keys else 0
        counts = [len(t) for t in tokens]
        if not (len(tokens) == len(rows) == len(lengths) >= 1 and min(counts) >= 1):
            raise ValueError(
                f"forward_ragged: give one or more runs of at least one token, each with its row and length, "
                f"got {len(tokens)} runs, {len(rows)} rows and {len(lengths)} lengths"
            )
        if len(set(rows)) != len(rows) or not all(isinstance(r, int) and 0 <= r < rows_held for r in rows):
            raise ValueError(
                f"forward_ragged: the rows must be distinct, 0 ... {rows_held - 1}, got {list(rows)}"
            )
        if not all(
            isinstance(n, int) and n >= 0 and n + c <= cache.capacity for n, c in zip(lengths, counts)
        ):
            raise ValueError(
                f"forward_ragged: each run's positions (lengths {list(lengths)}, counts {counts}) must be "
                f"0 ... "
                f"{cache.capacity - 1}"
            )
        if not (isinstance(pad, int) and pad >= 1):
            raise ValueError(f"forward_ragged: pad must be a positive integer, got {pad!r}")
        ids = np.concatenate([np.asarray(t, np.int64).reshape(-1) for t in tokens])
        if ids.min() < 0 or ids.max() >= self.vocab_size:
            raise ValueError(f"forward_ragged: token ids must be 0 ... {self.vocab_size - 1}")
        starts = np.cumsum([0, *counts[:-1]])
        runs = np.asarray([rows, starts, counts, lengths], np.int64).T.copy()
        self.prepare(cache.capacity)
        return self.cached_step.ragged(ids, cache, runs, pad)

    def forward_chunk(self, ids: Any, cache: KVCache) -> Tensor:
        """Logits [B, 1, vocab] of the last of token ids [B, T] run on the cache, as `forward(ids, cache,
        last_only=True)` gives them, from a plan compiled for any T (`CachedStep.chunk`)."""
        ids = token_ids(ids)
        check_room(cache, ids, self.context_length)
        self.prepare(cache.capacity)
        return self.cached_step.chunk(ids, cache)

    def prepare(self, positions: int) -> None:
        """Make what a step over `positions` positions needs (before the step is called)."""
