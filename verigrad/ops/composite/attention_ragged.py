"""ragged_attention(q, k, v, past_kt, past_v, runs): cached attention of several sequences' tokens at once.

The N new tokens are runs of consecutive tokens, one run per sequence: q [1, H, N, D], k and v [1, KV, N, D]
and [1, KV, N, Dv] hold them all, in order. `runs` i64 [S, 4] gives each run (row, start, count, length):
its tokens start .. start + count - 1 are the next tokens of the sequence in row `row` of the windows
(past_kt [R, KV, D, W] keys transposed, past_v [R, KV, W, Dv]: every row of a cache), which holds `length`
positions. Token start + t attends the row's first `length` positions and its run's tokens start .. start +
t (cached_attention with the bias that hides the window past `length` and the run's future); a run of one
token is a decode row. The runs cover the tokens in order: starts 0, then each the previous start + count,
the last ending at N; counts >= 0 (an empty run is padding: a plan's runs are a fixed number), rows < R,
lengths <= W. The result [1, H, N, Dv].

So one call, and one compiled plan of a given N and W, serves any mix of decode rows and prompt chunks: the
runs are data, not shapes. Each run is cached_attention of its chunk over its row's first `length` positions
(the window's other positions are left out: cached_attention gives the same bits where their keys and values
are finite, as a cache's unused positions are), and the kernels give each token those bits.
ragged_attention_q8 is the same over a q8_0 cache's blocks (u8 [R, KV, W, D / 32 * 34], keys not
transposed), as cached_attention_q8. Inference only (no gradient).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dtypes import DType, u8
from ...errors import DTypeError, ShapeError
from ...shapes import exact_div, shape_text
from .._op import Op, Sample
from .._samples import uniform
from ..quant import FORMATS
from ._common import float_inputs
from .attention import _cached_reference, _heads, _torch_cached, cached_params
from .attention_q8 import dequantized, q8_blocks

Q8 = FORMATS["q8_0"]


def _new_tokens(q: tuple, k: tuple, v: tuple, runs: tuple) -> None:
    _heads(q, k, v)
    if q[0] != 1:
        raise ShapeError(
            f"ragged attention takes the new tokens as one batch: q [1, H, N, D], got {shape_text(q)}"
        )
    if k[2] != q[2]:
        raise ShapeError(f"q and k must hold the same {q[2]} new tokens, got {k[2]}")
    if len(runs) != 2 or runs[1] != 4:
        raise ShapeError(f"runs must be [S, 4] (row, start, count, length), got {shape_text(runs)}")


def _shape(q: tuple, k: tuple, v: tuple, past_kt: tuple, past_v: tuple, runs: tuple, scale: Any) -> tuple:
    _new_tokens(q, k, v, runs)
    kv, d, dv = k[1], k[3], v[3]
    if len(past_kt) != 4 or len(past_v) != 4 or past_kt[1:3] != (kv, d) or past_v[1] != kv:
        raise ShapeError(
            f"the windows must be past_kt [R, {kv}, {d}, W] and past_v [R, {kv}, W, {dv}], got "
            f"{shape_text(past_kt)} and {shape_text(past_v)}"
        )
    if past_v[0] != past_kt[0] or past_v[2:] != (past_kt[3], dv):
        raise ShapeError(
            f"past_v must be [{past_kt[0]}, {kv}, {past_kt[3]}, {dv}] as past_kt says, "
            f"got {shape_text(past_v)}"
        )
    return (*q[:3], dv)


def _shape_q8(q: tuple, k: tuple, v: tuple, past_k: tuple, past_v: tuple, runs: tuple, scale: Any) -> tuple:
    _new_tokens(q, k, v, runs)
    kv, d, dv = k[1], k[3], v[3]
    for name, size in (("k", d), ("v", dv)):
        if exact_div(size, Q8.block) is None:
            raise ShapeError(f"ragged_attention_q8: {name}'s head dim must be a multiple of 32, got {size}")
    if len(past_k) != 4 or len(past_v) != 4 or past_k[:3] != past_v[:3] or past_k[1] != kv:
        raise ShapeError(
            f"ragged_attention_q8: the windows must be past_k and past_v [R, {kv}, W, bytes], got "
            f"{shape_text(past_k)} and {shape_text(past_v)}"
        )
    if past_k[3] != Q8.row_bytes(d) or past_v[3] != Q8.row_bytes(dv):
        raise ShapeError(
            f"ragged_attention_q8: a q8_0 row of {d} and {dv} values takes {Q8.row_bytes(d)} and "
            f"{Q8.row_bytes(dv)} bytes, got past_k {shape_text(past_k)} and past_v {shape_text(past_v)}"
        )
    return (*q[:3], dv)


def _dtype(q: DType, k: DType, v: DType, past_k: DType, past_v: DType, runs: DType, scale: Any) -> DType:
    if runs.kind != "i":
        raise DTypeError(f"ragged attention: runs must be integers, got {runs.name}")
    return float_inputs(q, k, v, past_k, past_v)


def _dtype_q8(q: DType, k: DType, v: DType, past_k: DType, past_v: DType, runs: DType, scale: Any) -> DType:
    if past_k is not u8 or past_v is not u8:
        raise DTypeError(
            f"ragged_attention_q8: the windows must be u8 (q8_0 blocks), got {past_k.name} and {past_v.name}"
        )
    return _dtype(q, k, v, q, q, runs, scale)


def checked_runs(runs: np.ndarray, tokens: int, rows: int, width: int) -> list[tuple[int, int, int, int]]:
    """The runs as (row, start, count, length) tuples; ValueError where they do not cover the `tokens` in
    order or name a row or length the windows do not hold (the kernels refuse the same)."""
    out, at = [], 0
    for row, start, count, length in np.asarray(runs, np.int64).tolist():
        if start != at or count < 0 or not 0 <= row < rows or not 0 <= length <= width:
            raise ValueError(
                f"ragged attention: run (row {row}, start {start}, count {count}, length {length}) must "
                f"start at token {at} with count >= 0, row 0 ... {rows - 1} and length 0 ... {width}"
            )
        out.append((row, start, count, length))
        at += count
    if at != tokens:
        raise ValueError(f"ragged attention: the runs cover {at} tokens, not the {tokens} new ones")
    return out


def causal_bias(length: int, count: int) -> np.ndarray:
    """[count, length + count]: a run's tokens see the `length` positions and their run's past (0 or -inf)."""
    bias = np.zeros((count, length + count))
    bias[:, length:][np.triu_indices(count, 1)] = -np.inf
    return bias


def _reference(q, k, v, past_kt, past_v, runs, scale: float | None) -> np.ndarray:
    out = np.empty((*q.shape[:3], v.shape[3]), q.dtype)
    for row, start, count, length in checked_runs(runs, q.shape[2], past_kt.shape[0], past_kt.shape[3]):
        if not count:
            continue
        at = slice(start, start + count)
        window = (past_kt[row : row + 1, :, :, :length], past_v[row : row + 1, :, :length])
        bias = causal_bias(length, count).astype(q.dtype)
        out[:, :, at] = _cached_reference(q[:, :, at], k[:, :, at], v[:, :, at], *window, bias, scale)
    return out


def _reference_q8(q, k, v, past_k, past_v, runs, scale: float | None) -> np.ndarray:
    return _reference(q, k, v, np.swapaxes(dequantized(past_k), -1, -2), dequantized(past_v), runs, scale)


def _torch(t, q, k, v, past_kt, past_v, runs, scale):
    parts = []
    for row, start, count, length in runs.tolist():
        if not count:
            continue
        at = slice(start, start + count)
        window = (past_kt[row : row + 1, :, :, :length], past_v[row : row + 1, :, :length])
        bias = t.tensor(causal_bias(length, count), dtype=q.dtype)
        parts.append(_torch_cached(t, q[:, :, at], k[:, :, at], v[:, :, at], *window, bias, scale))
    return t.cat(parts, dim=2)


def _torch_q8(t, q, k, v, past_k, past_v, runs, scale):
    blocks = [p.reshape(*p.shape[:-1], -1, Q8.nbytes) for p in (past_k, past_v)]
    d = [b[..., :2].contiguous().view(t.float16).float() for b in blocks]  # the blocks' d q, exact in f32
    x = [
        (s * b[..., 2:].contiguous().view(t.int8).float()).flatten(-2).to(q.dtype) for s, b in zip(d, blocks)
    ]
    return _torch(t, q, k, v, x[0].transpose(-1, -2), x[1], runs, scale)


# (window rows, heads, kv heads, runs (row, count, length) in token order)
_CASES = [
    (4, 1, 1, [(0, 1, 3), (2, 3, 2), (1, 2, 0)]),  # a decode row, a chunk, a prompt's first chunk
    (3, 6, 2, [(1, 1, 4)]),  # one run: cached_attention's case
    (2, 4, 2, [(1, 4, 1), (0, 1, 2), (0, 0, 0)]),  # rows out of order, a full window, an empty run
]


def _samples(rng: np.random.Generator, dims: tuple[int, ...], window: Any) -> list[Sample]:
    """A mix of runs: decode rows, chunks, a first chunk (length 0), rows out of order; head dims `dims`."""
    out = []
    for (rows, h, kv, cases), d in zip(_CASES, dims):
        w, at, table = 4, 0, []
        for row, count, length in cases:
            table.append((row, at, count, length))
            at += count
        new = [uniform(rng, s) for s in [(1, h, at, d), (1, kv, at, d), (1, kv, at, d)]]
        out.append(Sample((*new, *window(rng, (rows, kv, w, d)), np.asarray(table, np.int64))))
    return out


def _float_window(rng: np.random.Generator, shape: tuple) -> tuple[np.ndarray, np.ndarray]:
    b, kv, w, d = shape
    return uniform(rng, (b, kv, d, w)), uniform(rng, shape)


ragged_attention = Op(
    "ragged_attention",
    shape=_shape,
    dtype=_dtype,
    params=cached_params,
    reference=_reference,
    samples=lambda rng: _samples(rng, (4, 3, 2), _float_window),
    torch=_torch,
    exact=False,
    differentiable=False,
    doc="Cached attention of several sequences' runs of new tokens in one call (see the module docstring).",
)

ragged_attention_q8 = Op(
    "ragged_attention_q8",
    shape=_shape_q8,
    dtype=_dtype_q8,
    params=cached_params,
    reference=_reference_q8,
    samples=lambda rng: _samples(rng, (32, 64, 32), lambda rng, s: (q8_blocks(rng, s), q8_blocks(rng, s))),
    torch=_torch_q8,
    exact=False,
    differentiable=False,
    doc="ragged_attention over a q8_0 cache's blocks (u8 [R, KV, W, D / 32 * 34] each, keys not transposed).",
)
