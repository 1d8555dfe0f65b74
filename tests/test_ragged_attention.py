"""ragged_attention's kernels (f32 and f16 windows, q8_0 blocks) against cached_attention's on each sequence
alone: the bits it gives each token with its whole chunk, over the row's window of a cache that is zero past
the row's length (a hidden tail the per-sequence kernel skips), for 1-3 threads; runs the C refuses."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu.attention import ATTENTION_EXACTNESS
from verigrad.io.quantizers import quantize
from verigrad.models._decoder import chunk_bias

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
RAGGED, CACHED = vg.REGISTRY["ragged_attention"], vg.REGISTRY["cached_attention"]
RAGGED_Q8, CACHED_Q8 = vg.REGISTRY["ragged_attention_q8"], vg.REGISTRY["cached_attention_q8"]
# (row, count, length) in token order: decode rows, chunks, a first chunk, rows out of order
RUNS = [(3, 1, 40), (0, 16, 16), (1, 1, 0), (4, 5, 0), (2, 7, 63), (5, 1, 64)]


def _case(rng, dtype: str, kv: int = 2, group: int = 3, d: int = 64, rows: int = 6, width: int = 64):
    """The new tokens (q [1, H, N, D] viewing [1, N, H, D], as the model's), a cache of `rows` rows zero past
    each run's length, its windows as the step takes them, and the runs [S, 4]."""
    n = sum(c for _, c, _ in RUNS)
    q = rng.uniform(-1, 1, (1, n, kv * group, d)).astype(np.float32).transpose(0, 2, 1, 3)
    k, v = (rng.uniform(-1, 1, (1, kv, n, d)).astype(np.float32) for _ in range(2))
    keys, values = (np.zeros((rows, kv, 2 * width, d), np.float32) for _ in range(2))
    for row, _, length in RUNS:
        keys[row, :, :length], values[row, :, :length] = rng.uniform(-1, 1, (2, kv, length, d))
    if dtype == "q8_0":
        keys, values = (
            quantize(a.reshape(-1, d), "q8_0").reshape(rows, kv, 2 * width, -1) for a in (keys, values)
        )
        windows = (keys[:, :, :width], values[:, :, :width])
    else:
        keys, values = keys.astype(dtype), values.astype(dtype)
        windows = (keys[:, :, :width].swapaxes(2, 3), values[:, :, :width])
    starts = np.cumsum([0] + [c for _, c, _ in RUNS[:-1]])
    runs = np.asarray([(r, s, c, n) for (r, c, n), s in zip(RUNS, starts)], np.int64)
    return (q, k, v, *windows, runs)


def _alone(cached, args) -> np.ndarray:
    """Each run through cached_attention's kernel on its own row (its whole chunk, bias hiding the window
    past its length and the chunk's future), concatenated in token order."""
    q, k, v, past_k, past_v, runs = args
    width = past_v.shape[2]
    parts = []
    for row, start, count, length in runs.tolist():
        at = slice(start, start + count)
        bias = chunk_bias(length, width, count)
        parts.append(
            cached(
                q[:, :, at],
                k[:, :, at],
                v[:, :, at],
                past_k[row : row + 1],
                past_v[row : row + 1],
                bias,
                scale=0.125,
            )
        )
    return np.concatenate(parts, axis=2)


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float16", "q8_0"])
def test_each_token_gets_the_bits_cached_attention_gives_it_alone_on_every_thread_count(dtype):
    ragged_op, cached_op = (RAGGED_Q8, CACHED_Q8) if dtype == "q8_0" else (RAGGED, CACHED)
    ragged, cached = cpu.cpu.native(ragged_op, vg.f32), cpu.cpu.native(cached_op, vg.f32)
    args = _case(np.random.default_rng(3), dtype)
    want = _alone(cached, args)
    for threads in (1, 2, 3):
        vg.set_threads(threads)
        try:
            got = ragged(*args, scale=0.125)
        finally:
            vg.set_threads(1)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    reference = ragged_op.reference(*args, scale=0.125)  # within the stated bound of the reference
    bound = ATTENTION_EXACTNESS.rtol * np.abs(reference) + ATTENTION_EXACTNESS.atol
    assert np.all(np.abs(got.astype(np.float64) - reference) <= bound)


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "q8_0"])
@pytest.mark.parametrize(
    "change",
    [(0, 1, 1), (1, 2, -1), (-1, 0, 6), (2, 3, 65), (-1, 2, 0)],
    ids=["start", "count", "row", "length", "short"],
)
def test_runs_that_do_not_cover_the_tokens_in_order_are_refused(dtype, change):
    """The C refuses them (the kernel then runs the reference, which says what is wrong), as the reference."""
    ragged_op = RAGGED_Q8 if dtype == "q8_0" else RAGGED
    args = _case(np.random.default_rng(3), dtype)
    runs = args[5].copy()
    run, column, value = change
    runs[run, column] = value if column != 1 else runs[run, column] + value
    ragged = cpu.cpu.native(ragged_op, vg.f32)
    with pytest.raises(ValueError, match="ragged attention"):
        ragged(*args[:5], runs, scale=0.125)
    with pytest.raises(ValueError, match="ragged attention"):
        ragged_op.reference(*args[:5], runs, scale=0.125)


def _swapped(a: np.ndarray) -> np.ndarray:
    """`a`'s values in the other byte order, of its shape and strides (a view of its base's copy)."""
    base = a
    while isinstance(base.base, np.ndarray):
        base = base.base
    assert base.flags.c_contiguous
    data = base.byteswap()
    offset = a.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return np.ndarray(a.shape, a.dtype.newbyteorder("S"), data, offset, a.strides)


@needs_cc
@pytest.mark.parametrize("dtype", ["float32", "float16", "q8_0"])
@pytest.mark.parametrize("ragged", [True, False], ids=["ragged", "cached"])
def test_an_array_in_the_other_byte_order_is_not_taken_for_a_layout_seen_in_the_native_one(dtype, ragged):
    """The kernels remember each layout's checks (shapes, strides, dtypes): a byte-swapped operand has its
    dtype's number but not its dtype, and the C reads native numbers (the reference's result instead)."""
    args = _case(np.random.default_rng(5), dtype)
    if not ragged:  # the first run's token over its row alone
        args = (*(a[:, :, :1] for a in args[:3]), args[3][3:4], args[4][3:4], chunk_bias(40, 64, 1))
    ops = (RAGGED_Q8, CACHED_Q8) if dtype == "q8_0" else (RAGGED, CACHED)
    op = ops[0] if ragged else ops[1]
    kernel = cpu.cpu.native(op, vg.f32)
    kernel(*args, scale=0.125)  # the native layout, remembered
    at = [0] if dtype == "q8_0" else [0, 3]  # q, and an f32 or f16 window's keys
    for i in at:
        swapped = list(args)
        swapped[i] = _swapped(args[i])
        assert swapped[i].strides == args[i].strides and swapped[i].dtype.num == args[i].dtype.num
        want = op.reference(*swapped, scale=0.125)
        np.testing.assert_array_equal(kernel(*swapped, scale=0.125), want)
