"""The cpu backend's cached_attention kernel (attention.c) on the decode step's operands: windows that
are views of a KV cache (keys transposed), hidden slots, grouped heads; held to its stated bound against
the reference, the same bits for every thread count, NaN where the reference has NaN."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu.attention import ATTENTION_EXACTNESS

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
OP = vg.REGISTRY["cached_attention"]


def decode_case(rng, b=1, kv=3, group=3, t=1, d=64, width=128, length=70):
    """q, k, v, the window views of a cache of twice the width, and the bias hiding slots length..width."""
    keys, values = (rng.uniform(-2, 2, (b, kv, 2 * width, d)).astype(np.float32) for _ in range(2))
    q = rng.uniform(-2, 2, (b, kv * group, t, d)).astype(np.float32)
    k, v = (rng.uniform(-2, 2, (b, kv, t, d)).astype(np.float32) for _ in range(2))
    bias = np.zeros((t, width + t), np.float32)
    bias[:, length:width] = -np.inf
    bias[:, width:][np.triu_indices(t, 1)] = -np.inf
    return q, k, v, keys[:, :, :width].swapaxes(2, 3), values[:, :, :width], bias


def run(kernel, args, threads):
    vg.set_threads(threads)
    try:
        return kernel(*args, scale=0.125)
    finally:
        vg.set_threads(1)


@needs_cc
@pytest.mark.parametrize(
    "sizes",
    [
        {},
        {"t": 3, "length": 0},
        {"width": 64},
        {"b": 2, "kv": 2, "group": 1, "d": 6, "width": 5, "length": 3},
    ],
)
def test_cached_attention_kernel_meets_its_bound_for_every_thread_count(sizes):
    kernel = cpu.cpu.native(OP, vg.f32)
    assert kernel is not None and not cpu.cpu.exactness("cached_attention", "f32").is_exact
    args = decode_case(np.random.default_rng(0), **sizes)
    want = OP.reference(*args, scale=0.125)
    got = run(kernel, args, 1)
    assert got.dtype == np.float32 and got.shape == want.shape
    bound = ATTENTION_EXACTNESS.rtol * np.abs(want) + ATTENTION_EXACTNESS.atol
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)
    for threads in (2, 3):
        np.testing.assert_array_equal(run(kernel, args, threads).view(np.uint32), got.view(np.uint32))


@needs_cc
def test_cached_attention_kernel_gives_nan_where_the_reference_does():
    kernel = cpu.cpu.native(OP, vg.f32)
    q, k, v, kt, pv, bias = decode_case(np.random.default_rng(1), kv=2, group=2)
    pv.base[0, 1, 100, 5] = np.nan  # a hidden slot of head 1's values: 0 * NaN is NaN
    q[0, 0, 0, 3] = np.inf  # head 0's scores: inf and NaN
    args = (q, k, v, kt, pv, bias)
    with np.errstate(all="ignore"):
        want = OP.reference(*args, scale=0.125)
    got = run(kernel, args, 1)
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@needs_cc
def test_hidden_slots_are_skipped_only_where_their_keys_and_values_are_finite():
    """The window's hidden tail (a cache's unused slots) adds nothing when finite, however large; an
    infinite key there makes NaN scores, as in the reference, so it is not skipped."""
    kernel = cpu.cpu.native(OP, vg.f32)
    q, k, v, kt, pv, bias = decode_case(np.random.default_rng(2), kv=2, group=3, length=40)
    args = (q, k, v, kt, pv, bias)
    got = run(kernel, args, 1)
    kt.base[0, 0, 100, :] = 1e30  # hidden slots (40..127 of the window)
    pv.base[0, 0, 90, :] = -1e30
    np.testing.assert_array_equal(run(kernel, args, 1).view(np.uint32), got.view(np.uint32))
    kt.base[0, 1, 120, 7] = np.inf  # key/value head 1: its query heads 3..5 get inf - inf = NaN scores
    with np.errstate(all="ignore"):
        want = OP.reference(*args, scale=0.125)
    got = run(kernel, args, 1)
    assert np.isnan(want[0, 3:]).any() and not np.isnan(want[0, :3]).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


@needs_cc
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_prompts_rows_read_their_hidden_tail_once_and_get_its_nan(threads):
    """A prompt's T rows of one (batch, key/value head) hide the same tail, which is read once for them:
    the keys shared by the batch (stride 0) but not the values, a NaN in one sequence's hidden values makes
    that sequence's rows NaN, as in the reference, and the other's finite, with the bits of its rows alone."""
    kernel = cpu.cpu.native(OP, vg.f32)
    q, k, v, kt, pv, bias = decode_case(np.random.default_rng(5), b=2, kv=1, group=2, t=5, length=40)
    kt = np.broadcast_to(kt[:1], kt.shape)  # one window of keys for both sequences
    pv.base[1, 0, 100, 3] = np.nan  # sequence 1's values: hidden position 100
    with np.errstate(all="ignore"):
        want = OP.reference(q, k, v, kt, pv, bias, scale=0.125)
    got = run(kernel, (q, k, v, kt, pv, bias), threads)
    assert np.isnan(want[1, :, :, 3]).all() and np.isnan(want).sum() == want[1, :, :, 3].size
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    alone = run(kernel, (q[:1], k[:1], v[:1], kt[:1], pv[:1], bias), 1)
    np.testing.assert_array_equal(got[:1].view(np.uint32), alone.view(np.uint32))


@needs_cc
def test_a_bias_per_sequence_gives_each_row_the_bits_it_gets_alone():
    """A batch of sequences of different lengths (bias [B, 1, W+1]): row i is computed as sequence i
    alone with its own [1, W'+1] mask over a narrower window, bit for bit, for every thread count."""
    kernel = cpu.cpu.native(OP, vg.f32)
    rng = np.random.default_rng(3)
    lengths, width = [70, 3, 128, 1], 128
    b = len(lengths)
    q, k, v, kt, pv, _ = decode_case(rng, b=b, width=width)
    bias = np.zeros((b, 1, width + 1), np.float32)
    for i, n in enumerate(lengths):
        bias[i, 0, n:width] = -np.inf
    batched = run(kernel, (q, k, v, kt, pv, bias), 1)
    want = OP.reference(q, k, v, kt, pv, bias, scale=0.125)
    bound = ATTENTION_EXACTNESS.rtol * np.abs(want) + ATTENTION_EXACTNESS.atol
    assert np.all(np.abs(batched.astype(np.float64) - want) <= bound)
    for i, n in enumerate(lengths):
        w = 64 if n <= 64 else 128
        alone = np.zeros((1, w + 1), np.float32)
        alone[0, n:w] = -np.inf
        row = slice(i, i + 1)
        args = (q[row], k[row], v[row], kt[row, :, :, :w], pv[row, :, :w], alone)
        np.testing.assert_array_equal(run(kernel, args, 1).view(np.uint32), batched[row].view(np.uint32))
    for threads in (2, 3):
        got = run(kernel, (q, k, v, kt, pv, bias), threads)
        np.testing.assert_array_equal(got.view(np.uint32), batched.view(np.uint32))


@needs_cc
@pytest.mark.parametrize("threads", [2, 3])
def test_threads_take_bands_of_equal_work_not_of_equal_rows(threads):
    """A batch of short and long sequences: the rows are split where their work (visible positions) is
    shared evenly, not into equal counts of rows, which left a thread idle; the bits stay each row's alone."""
    kernel = cpu.cpu.native(OP, vg.f32)  # loads the library
    args = [ctypes.c_void_p] * 3 + [ctypes.c_int, ctypes.c_void_p]
    bands = cpu.cpu.library.fn("vg_cached_attention_bands", args, restype=ctypes.c_int64)
    width, kv = 128, 3

    def bounds(lengths):
        bias = np.zeros((len(lengths), 1, width + 1), np.float32)
        for i, n in enumerate(lengths):
            bias[i, 0, n:width] = -np.inf
        sizes = np.array([len(lengths), 9, kv, 1, 64, 64, width], np.int64)
        strides = np.array([s // 4 for s in bias.strides], np.int64)
        out = np.zeros(65, np.int64)
        parts = bands(sizes, bias, strides, threads, out)
        assert parts == threads
        return list(out[: parts + 1])

    rows = 8 * kv
    even = bounds([70] * 8)
    assert even == [rows * i // threads for i in range(threads + 1)]
    short_first, long_first = bounds([10] * 4 + [120] * 4), bounds([120] * 4 + [10] * 4)
    assert short_first[1] > even[1] and long_first[1] < even[1]
    assert short_first[-1] == long_first[-1] == rows

    q, k, v, kt, pv, _ = decode_case(np.random.default_rng(4), b=8, width=width)
    lengths = [1, 7, 100, 1, 7, 100, 128, 2]
    bias = np.zeros((8, 1, width + 1), np.float32)
    for i, n in enumerate(lengths):
        bias[i, 0, n:width] = -np.inf
    batched = run(kernel, (q, k, v, kt, pv, bias), threads)
    for i in range(len(lengths)):
        row = slice(i, i + 1)
        got = run(kernel, (q[row], k[row], v[row], kt[row], pv[row], bias[row]), 1)
        np.testing.assert_array_equal(got.view(np.uint32), batched[row].view(np.uint32))


@needs_cc
@pytest.mark.parametrize("which", ["keys", "values"])
@pytest.mark.parametrize("position", [3, 20, 34, 39])
def test_a_nonfinite_hidden_slot_is_found_wherever_it_lies(which, position):
    """The hidden tail's check for an infinity or a NaN reads 64 floats a step and the rest one at a time:
    head size 6 and a tail of 37 slots (222 floats: 3 steps and 30 more), a NaN in a key or a value at
    the first hidden slot, within the steps, in the rest, and at the last slot: that head's rows are NaN
    as the reference's, the other head's keep the bits of a clean tail."""
    kernel = cpu.cpu.native(OP, vg.f32)
    q, k, v, kt, pv, bias = decode_case(np.random.default_rng(7), kv=2, group=2, d=6, width=40, length=3)
    args = (q, k, v, kt, pv, bias)
    clean = run(kernel, args, 1)
    if which == "keys":
        kt.base[0, 1, position, 5] = np.nan
    else:
        pv.base[0, 1, position, 5] = np.nan
    with np.errstate(all="ignore"):
        want = OP.reference(*args, scale=0.125)
    got = run(kernel, args, 1)
    assert np.isnan(want[0, 2:]).any() and not np.isnan(want[0, :2]).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[0, :2].view(np.uint32), clean[0, :2].view(np.uint32))
