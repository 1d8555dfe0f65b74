"""The key/value cache: allocated for a few positions and doubled as it fills (the same logits, bit for
bit, as a cache allocated for the whole context; O(log n) copies and plans); stored in f16, widened
exactly in cached_attention's kernel, or as q8_0 blocks, read as blocks by cached_attention_q8's kernel:
each within a stated bound of the f32 cache's attention."""

from __future__ import annotations

import gc
import os
import tracemalloc
import weakref

import numpy as np
import pytest
from llama_random import random_llama

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu.attention import ATTENTION_EXACTNESS
from verigrad.backends.cpu.attention_q8 import plain_only
from verigrad.io.quantizers import quantize
from verigrad.models import _decoder
from verigrad.models.llama import Llama, LlamaConfig
from verigrad.ops.composite.attention_q8 import q8_blocks
from verigrad.ops.quant import dequantize, random_blocks

CONFIG = LlamaConfig(
    vocab_size=41, dim=24, n_layers=2, n_heads=6, n_kv_heads=2, head_dim=4, ffn_dim=40, context_length=512
)


def _llama(seed: int = 0) -> Llama:
    return random_llama(CONFIG, np.random.default_rng(seed))


def _decode(model: Llama, cache, prompt: list[int], steps: int) -> tuple[list[np.ndarray], list[int]]:
    """A prompt, then `steps` greedy tokens one at a time; every logits row and the allocation after it."""
    logits, allocated = [], []
    with vg.no_grad():
        out = model(np.asarray([prompt]), cache).numpy()[0, -1]
        for _ in range(steps):
            logits.append(out)
            allocated.append(cache.allocated)
            out = model(np.asarray([[int(np.argmax(out))]]), cache).numpy()[0, -1]
    return logits, allocated


def test_a_growing_cache_gives_the_full_caches_logits_bit_for_bit():
    model = _llama()
    prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
    full = model.new_cache(1, 300)
    assert full.allocated == 300
    expected, _ = _decode(model, full, prompt, 280)
    grown = model.new_cache(1, 300, allocate=16)
    assert grown.allocated == 16 and grown.capacity == 300
    got, allocated = _decode(model, grown, prompt, 280)
    for i, (a, b) in enumerate(zip(got, expected)):
        np.testing.assert_array_equal(a, b, err_msg=f"step {i}")
    # doubled from 16 as the windows (64, 128, 256, then the capacity) need, never shrunk
    assert sorted(set(allocated)) == [64, 128, 256, 300] and allocated == sorted(allocated)
    assert grown.keys[0].shape == (1, CONFIG.n_kv_heads, 300, CONFIG.head_dim)


def test_growing_builds_at_most_one_plan_more_per_doubling():
    def plans(allocate: int | None) -> int:
        model = _llama()
        _decode(model, model.new_cache(1, 512, allocate=allocate), [1, 2, 3], 400)
        return model.cached_step.decode["f32"].stats()["plans"]

    full, grown = plans(None), plans(8)
    assert full <= 4  # windows of 64, 128, 256, 512
    assert grown <= full + 4  # a window as wide as the arrays is contiguous: one more layout per doubling


def test_batched_rows_grow_the_cache_and_keep_each_rows_logits():
    model = _llama()
    full, grown = model.new_cache(2, 256), model.new_cache(2, 256, allocate=4)
    lengths = [70, 128]
    for cache in (full, grown):
        for layer in range(CONFIG.n_layers):  # the same (random) history in both caches
            history = np.random.default_rng(layer).normal(size=(2, 2, 128, 4)).astype(np.float32)
            cache.reserve(128)
            cache.keys[layer][:, :, :128] = history
            cache.values[layer][:, :, :128] = -history
    assert grown.allocated == 128
    with vg.no_grad():
        a = model.forward_rows(np.asarray([[5], [7]]), full, lengths).numpy()
        b = model.forward_rows(np.asarray([[5], [7]]), grown, lengths).numpy()
    assert grown.allocated == 256  # the second row's token went to position 128
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(grown.keys[0][:, :, :129], full.keys[0][:, :, :129])


def test_reserve_copies_what_the_cache_holds_and_drops_its_views():
    cache = _decoder.new_cache(1, 1, 1, 100, 2, allocate=3)
    cache.keys[0][:] = 1.0
    cache.views["windows", 3] = "stale"
    cache.reserve(4)
    assert cache.allocated == 6 and cache.views == {}
    np.testing.assert_array_equal(cache.keys[0][0, 0, :, 0], [1, 1, 1, 0, 0, 0])
    cache.reserve(5)
    assert cache.allocated == 6  # room already
    cache.reserve(90)
    assert cache.allocated == 96
    cache.reserve(97)
    assert cache.allocated == 100  # never past the capacity
    with pytest.raises(ValueError, match=r"KVCache.reserve: 101 positions do not fit in the capacity"):
        cache.reserve(101)


@pytest.mark.parametrize("allocate", [0, -1, 2.5, "8"])
def test_new_cache_refuses_a_bad_allocation(allocate):
    with pytest.raises(ValueError, match="allocate must be a positive integer"):
        _llama().new_cache(1, 64, allocate=allocate)


# the f16 cache ---------------------------------------------------------------------------------------
needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
OP = vg.REGISTRY["cached_attention"]


def _window_case(rng, b=1, kv=3, group=3, t=1, d=64, width=128, length=70, spread=2.0):
    """q, k, v, an f32 cache window (views of a cache of twice the width, keys transposed), its f16 copy,
    and the bias hiding slots length..width."""
    keys, values = (rng.uniform(-spread, spread, (b, kv, 2 * width, d)).astype(np.float32) for _ in range(2))
    q = rng.uniform(-2, 2, (b, kv * group, t, d)).astype(np.float32)
    k, v = (rng.uniform(-2, 2, (b, kv, t, d)).astype(np.float32) for _ in range(2))
    bias = np.zeros((t, width + t), np.float32)
    bias[:, length:width] = -np.inf
    bias[:, width:][np.triu_indices(t, 1)] = -np.inf
    window = (keys[:, :, :width].swapaxes(2, 3), values[:, :, :width])
    half = tuple(a.astype(np.float16) for a in (keys, values))
    return (q, k, v, *window, bias), (
        q,
        k,
        v,
        half[0][:, :, :width].swapaxes(2, 3),
        half[1][:, :, :width],
        bias,
    )


def f16_cache_bound(q, past_kt, past_v, scale: float) -> np.ndarray:
    """What storing the window's keys and values in f16 may move each attention output [B, H, T, 1] by.

    Each stored number moves by <= 2^-11 |x| + 2^-25 (f16's rounding, normal or subnormal), so a window
    score q.k scale by <= e = scale (2^-11 max_j sum_i |q_i k_ji| + 2^-25 sum_i |q_i|); the softmax weights
    then move by a factor within exp(+-2e), the weighted sum of values by <= (exp(2e) - 1) max |v|, and the
    values' own rounding adds <= 2^-11 max |v| + 2^-25; 2^-20 max |v| covers the f32 results' roundings."""
    b, h, t, d = q.shape
    kv = past_kt.shape[1]
    qa = np.abs(q.astype(np.float64)).reshape(b, kv, h // kv * t, d)
    dots = (qa @ np.abs(past_kt.astype(np.float64))).max(axis=-1, initial=0.0)
    e = scale * (2.0**-11 * dots + 2.0**-25 * qa.sum(axis=-1))
    vmax = np.abs(past_v.astype(np.float64)).max(axis=(2, 3))[:, :, None]
    bound = (np.expm1(2 * e) + 2.0**-11 + 2.0**-20) * vmax + 2.0**-25
    return bound.reshape(b, h, t, 1)


@needs_cc
@pytest.mark.parametrize(
    "sizes",
    [
        {},
        {"t": 3, "length": 0},
        {"width": 64, "spread": 8.0},
        {"b": 2, "kv": 2, "group": 1, "d": 6, "width": 5},
    ],
)
def test_the_f16_window_kernel_widens_exactly_and_gives_the_same_bits_for_every_thread_count(sizes):
    kernel = cpu.cpu.native(OP, vg.f32)
    f32, f16 = _window_case(np.random.default_rng(0), **sizes)
    widened = (*f16[:3], f16[3].astype(np.float32), f16[4].astype(np.float32), f16[5])
    outs = []
    for threads in (1, 2, 3):
        vg.set_threads(threads)
        try:
            outs.append(kernel(*f16, scale=0.125))
        finally:
            vg.set_threads(1)
    got = outs[0]
    assert got.dtype == np.float32
    for other in outs[1:]:
        np.testing.assert_array_equal(other.view(np.uint32), got.view(np.uint32))
    # the f32 kernel on the widened window, bit for bit; the reference on the f16 window within its bound
    np.testing.assert_array_equal(got.view(np.uint32), kernel(*widened, scale=0.125).view(np.uint32))
    want = OP.reference(*f16, scale=0.125)
    assert np.all(
        np.abs(got.astype(np.float64) - want)
        <= ATTENTION_EXACTNESS.rtol * np.abs(want) + ATTENTION_EXACTNESS.atol
    )
    # against the f32 cache's attention: within the stated bound
    exact = OP.reference(*f32, scale=0.125).astype(np.float64)
    moved = np.abs(got - exact)
    assert np.all(moved <= f16_cache_bound(f32[0], f32[3], f32[4], 0.125))
    if sizes.get("length", 70):  # a window with visible slots: f16 does move the results
        assert moved.max() > 0


def test_an_f16_cache_halves_the_memory_and_stays_f16_as_it_grows():
    model = _llama()
    f32, f16 = model.new_cache(1, 256), model.new_cache(1, 256, allocate=8, dtype="f16")
    assert f16.keys[0].dtype == np.float16 and f16.values[0].dtype == np.float16
    f16.reserve(256)
    assert f16.keys[0].nbytes * 2 == f32.keys[0].nbytes and f16.keys[0].dtype == np.float16
    with pytest.raises(ValueError, match="dtype must be one of f32, f16, q8_0, got 'q4'"):
        model.new_cache(1, 64, dtype="q4")


def test_an_f16_cache_decodes_as_the_f32_cache_within_f16s_rounding():
    """The same tokens through both caches: the logits move by f16's rounding of the keys and values
    (2^-11 relative) carried through two layers: < 2e-3 of their scale on this model."""
    model = _llama()
    tokens = np.random.default_rng(2).integers(0, CONFIG.vocab_size, 150)
    caches = model.new_cache(1, 256), model.new_cache(1, 256, allocate=16, dtype="f16")
    with vg.no_grad():
        outs = [[model(np.asarray([tokens[:10]]), c).numpy()[0, -1]] for c in caches]
        for token in tokens[10:]:
            for out, cache in zip(outs, caches):
                out.append(model(np.asarray([[token]]), cache).numpy()[0, -1])
    a, b = np.asarray(outs[0]), np.asarray(outs[1])
    assert 0 < np.abs(a - b).max() <= 2e-3 * np.abs(a).max()
    assert (a.argmax(-1) == b.argmax(-1)).mean() >= 0.95
    assert model.cached_step.decode["f16"].stats()["traces"] == 1


# the q8_0 cache ---------------------------------------------------------------------------------------
Q8_CONFIG = LlamaConfig(
    vocab_size=41, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, ffn_dim=40, context_length=512
)


def _q8_llama(seed: int = 0) -> Llama:
    return random_llama(Q8_CONFIG, np.random.default_rng(seed))


def _q8_window(a: np.ndarray) -> np.ndarray:
    """f32 [..., D] as a q8_0 cache stores it and the step reads it back: quantized, then de-quantized."""
    stored = quantize(a.reshape(-1, a.shape[-1]), "q8_0")
    return dequantize(stored, "q8_0", (stored.shape[0], a.shape[-1])).reshape(a.shape)


def q8_cache_bound(q, past_kt, past_v, scale: float) -> np.ndarray:
    """What storing the window's keys and values as q8_0 blocks may move each attention output [B, H, T, 1]
    by.

    A block of 32 numbers with largest magnitude A is stored as d16 * q, d16 = A / 127 rounded to f16 and q =
    round(x / d): each number moves by <= d / 2 (1 + 2^-16) + 127 |d16 - d| <= A (1/254 + 2^-10) + 2^-18 =
    delta(A). A window score q.k scale moves by <= e = scale max_j sum_blocks delta(A_jb) sum_{i in b} |q_i|;
    then, as for f16 (`f16_cache_bound`), the softmax weights by a factor within exp(+-2e), the output by
    <= (exp(2e) - 1) max |v| + max_j delta(A of v_j's blocks) + 2^-20 max |v| (the f32 roundings)."""
    b, h, t, d = q.shape
    kv = past_kt.shape[1]

    def delta(a: np.ndarray) -> np.ndarray:  # [..., d] -> per block [..., d / 32]
        amax = np.abs(a.astype(np.float64)).reshape(*a.shape[:-1], d // 32, 32).max(axis=-1)
        return amax * (1 / 254 + 2.0**-10) + 2.0**-18

    qa = np.abs(q.astype(np.float64)).reshape(b, kv, h // kv * t, d // 32, 32).sum(axis=-1)
    key_delta = delta(past_kt.swapaxes(2, 3))  # [B, KV, W, d / 32]
    e = scale * (qa @ key_delta.swapaxes(2, 3)).max(axis=-1, initial=0.0)  # [B, KV, H/KV T]
    vmax = np.abs(past_v.astype(np.float64)).max(axis=(2, 3))[:, :, None]
    value_delta = delta(past_v).max(axis=(2, 3))[:, :, None]
    bound = (np.expm1(2 * e) + 2.0**-20) * vmax + value_delta
    return bound.reshape(b, h, t, 1)


@needs_cc
@pytest.mark.parametrize(
    "sizes", [{}, {"t": 3, "length": 0}, {"width": 64, "spread": 8.0}, {"b": 2, "d": 96}]
)
def test_the_q8_0_windows_attention_is_within_the_stated_bound_of_the_f32_caches(sizes):
    kernel = cpu.cpu.native(OP, vg.f32)
    f32, _ = _window_case(np.random.default_rng(1), **sizes)
    q, k, v, past_kt, past_v, bias = f32
    stored_kt, stored_v = _q8_window(past_kt.swapaxes(2, 3)).swapaxes(2, 3), _q8_window(past_v)
    got = kernel(q, k, v, stored_kt, stored_v, bias, scale=0.125)
    exact = OP.reference(*f32, scale=0.125).astype(np.float64)
    moved = np.abs(got - exact)
    assert np.all(moved <= q8_cache_bound(q, past_kt, past_v, 0.125))
    if sizes.get("length", 70):
        assert moved.max() > 0


Q8_OP = vg.REGISTRY["cached_attention_q8"]


def _q8_case(rng, b=1, kv=3, group=3, t=1, d=64, width=128, length=70, spread=2.0):
    """The f32 window case of `_window_case` and the same case on a q8_0 cache of twice the width: the
    window's keys and values stored as blocks (views of the cache's first `width` positions)."""
    f32, _ = _window_case(rng, b, kv, group, t, d, width, length, spread)
    q, k, v, past_kt, past_v, bias = f32
    stored = [
        quantize(np.ascontiguousarray(a).reshape(-1, d), "q8_0") for a in (past_kt.swapaxes(2, 3), past_v)
    ]
    caches = [np.zeros((b, kv, 2 * width, d // 32 * 34), np.uint8) for _ in range(2)]
    for cache, blocks in zip(caches, stored):
        cache[:, :, :width] = blocks.reshape(b, kv, width, -1)
    return f32, (q, k, v, caches[0][:, :, :width], caches[1][:, :, :width], bias)


def _threads(kernel, args, threads: int) -> np.ndarray:
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
        {"width": 64, "spread": 8.0},
        {"b": 2, "d": 96},
        {"kv": 2, "group": 1, "d": 32},
    ],
)
def test_the_q8_0_kernel_reads_the_blocks_within_cached_attentions_bound_on_every_thread_count(sizes):
    """cached_attention_q8's kernel on a q8_0 cache's window: within the f32 kernel's bound of the reference
    (the window de-quantized), the same bits for 1-3 threads and on the plain loops as the vector ones, and
    within the stated bound (`q8_cache_bound`) of the f32 cache's attention."""
    kernel = cpu.cpu.native(Q8_OP, vg.f32)
    assert kernel is not None and cpu.cpu.exactness("cached_attention_q8", "f32") == ATTENTION_EXACTNESS
    f32, q8 = _q8_case(np.random.default_rng(4), **sizes)
    got = _threads(kernel, q8, 1)
    assert got.dtype == np.float32 and got.shape == f32[0].shape
    for threads in (2, 3):
        np.testing.assert_array_equal(_threads(kernel, q8, threads).view(np.uint32), got.view(np.uint32))
    was = plain_only(cpu.cpu.library, 1)
    try:
        plain = kernel(*q8, scale=0.125)
    finally:
        plain_only(cpu.cpu.library, was)
    np.testing.assert_array_equal(plain.view(np.uint32), got.view(np.uint32))
    want = Q8_OP.reference(*q8, scale=0.125)
    bound = ATTENTION_EXACTNESS.rtol * np.abs(want) + ATTENTION_EXACTNESS.atol
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)
    exact = OP.reference(*f32, scale=0.125).astype(np.float64)
    moved = np.abs(got - exact)
    assert np.all(moved <= q8_cache_bound(f32[0], f32[3], f32[4], 0.125))
    if sizes.get("length", 70):
        assert moved.max() > 0


@needs_cc
def test_the_q8_0_kernel_gives_nan_where_the_reference_does():
    """A block with an infinite or NaN scale in the window (its values inf or NaN, or NaN where 0 times
    inf): NaNs and infinities where the reference has them, hidden slot or not; a finite hidden slot adds
    nothing."""
    kernel = cpu.cpu.native(Q8_OP, vg.f32)
    _, (q, k, v, past_k, past_v, bias) = _q8_case(np.random.default_rng(5), width=64, length=40)
    for at, value in [(10, np.inf), (50, np.nan), (63, np.inf)]:  # visible, hidden, the last slot
        for which in (0, 1):
            windows = [past_k.copy(), past_v.copy()]
            windows[which][0, 1, at, 34:36] = np.array([value], "<f2").view(np.uint8)
            args = (q, k, v, *windows, bias)
            got, want = kernel(*args, scale=0.125), Q8_OP.reference(*args, scale=0.125)
            np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
            np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
            assert not np.isfinite(want).all()
    hidden = past_k.copy()
    hidden[:, :, 40:] = q8_blocks(np.random.default_rng(6), (1, 3, 24, 64))  # finite values in hidden slots
    np.testing.assert_array_equal(
        kernel(q, k, v, hidden, past_v, bias, scale=0.125), kernel(q, k, v, past_k, past_v, bias, scale=0.125)
    )


def test_cached_attention_q8_refuses_windows_that_are_not_q8_0_blocks():
    rng = np.random.default_rng(0)
    q, k, v = (vg.from_numpy(rng.standard_normal((1, 2, 1, 32)).astype(np.float32)) for _ in range(3))
    blocks, bias = vg.from_numpy(q8_blocks(rng, (1, 2, 4, 32))), vg.from_numpy(np.zeros((1, 5), np.float32))
    with pytest.raises(vg.ShapeError, match="a q8_0 row of 32 and 32 values takes 34 and 34 bytes"):
        Q8_OP(q, k, v, blocks[..., :33], blocks[..., :33], bias)
    with pytest.raises(vg.DTypeError, match="window's keys and values must be u8"):
        Q8_OP(q, k, v, blocks.float(), blocks.float(), bias)


@needs_cc
def test_dequantize_kernel_reads_a_strided_window_in_place_with_the_references_bits():
    """The q8_0 cache's windows (every position up to W of a longer allocation) go to the C dequantize
    without a copy: the reference's bits on every thread count, for other formats and layouts too."""
    kernel = cpu.cpu.native(vg.REGISTRY["dequantize"], vg.f32)
    rng = np.random.default_rng(3)
    cache = quantize(rng.standard_normal((2 * 3 * 40, 64)).astype(np.float32), "q8_0").reshape(2, 3, 40, 68)
    cases = [(cache[:, :, :17], "q8_0"), (cache[1:, ::2, 5:9], "q8_0"), (cache[:, :, ::-1], "q8_0")]
    cases += [
        (random_blocks(rng, "q4_k", 6, 512), "q4_k"),
        (random_blocks(rng, "iq4_nl", 6, 64)[::2], "iq4_nl"),
    ]
    for w, qtype in cases:
        want = vg.REGISTRY["dequantize"].reference(w, qtype=qtype)
        for threads in (1, 2, 3):
            vg.set_threads(threads)
            try:
                got = kernel(w, qtype=qtype)
            finally:
                vg.set_threads(1)
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_a_q8_0_cache_decodes_as_the_f32_cache_within_its_rounding():
    """The same tokens through an f32 and a q8_0 cache (grown from 16 positions): the logits move by 8-bit
    keys and values (about 1/254 of each block's largest) carried through two layers: < 2e-2 of their scale
    on this model, the same greedy token at nearly every step; one trace of the q8_0 step."""
    model = _q8_llama()
    tokens = np.random.default_rng(2).integers(0, Q8_CONFIG.vocab_size, 150)
    caches = model.new_cache(1, 256), model.new_cache(1, 256, allocate=16, dtype="q8_0")
    with vg.no_grad():
        outs = [[model(np.asarray([tokens[:10]]), c).numpy()[0, -1]] for c in caches]
        for token in tokens[10:]:
            for out, cache in zip(outs, caches):
                out.append(model(np.asarray([[token]]), cache).numpy()[0, -1])
    a, b = np.asarray(outs[0]), np.asarray(outs[1])
    assert 0 < np.abs(a - b).max() <= 2e-2 * np.abs(a).max()
    assert (a.argmax(-1) == b.argmax(-1)).mean() >= 0.95
    assert model.cached_step.decode["q8_0"].stats()["traces"] == 1  # compiled, as the f32 step
    # what it stores is the f32 cache's keys as q8_0 blocks (the first layer's: the same inputs in both)
    stored = caches[1].keys[0][:, :, :150]
    want = quantize(caches[0].keys[0][:, :, :150].reshape(-1, 32), "q8_0").reshape(stored.shape)
    np.testing.assert_array_equal(stored, want)


def test_a_q8_0_cache_takes_a_quarter_of_the_memory_and_batched_rows():
    model = _q8_llama()
    f32, q8 = model.new_cache(2, 256), model.new_cache(2, 256, allocate=8, dtype="q8_0")
    assert q8.keys[0].dtype == np.uint8 and q8.keys[0].shape == (2, 2, 8, 34)
    q8.reserve(256)
    assert q8.keys[0].nbytes * 128 == f32.keys[0].nbytes * 34
    with vg.no_grad():  # two rows at their own lengths: each row's logits as that sequence alone
        model(np.asarray([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]]), q8)
        rows = model.forward_rows(np.asarray([[5], [7]]), q8, [5, 3]).numpy()
        alone = model.new_cache(1, 256, dtype="q8_0")
        model(np.asarray([[6, 7, 8]]), alone)
        one = model(np.asarray([[7]]), alone).numpy()
    np.testing.assert_allclose(rows[1], one[0], rtol=0, atol=1e-5)
    with pytest.raises(ValueError, match="q8_0 cache needs a head size that is a multiple of 32, got 4"):
        _llama().new_cache(1, 64, dtype="q8_0")


@needs_cc
def test_a_q8_0_decode_step_makes_no_f32_window():
    """The compiled step reads each layer's window as blocks: no de-quantized f32 window is made, so a
    step's peak stays below a quarter of one layer's f32 window (1 MiB here; the step when it de-quantized
    each layer's window held about one, and a plan keeping them all six)."""
    config = LlamaConfig(
        vocab_size=41,
        dim=64,
        n_layers=6,
        n_heads=4,
        n_kv_heads=2,
        head_dim=32,
        ffn_dim=40,
        context_length=2048,
    )
    rng = np.random.default_rng(0)
    model = random_llama(config, rng)
    cache = model.new_cache(1, 2048, dtype="q8_0")
    history = rng.standard_normal((2 * 2000, 32)).astype(np.float32)
    for a in cache.keys + cache.values:
        a[:, :, :2000] = quantize(history, "q8_0").reshape(1, 2, 2000, 34)
    cache.length = 2000
    with vg.no_grad(), vg.backend("cpu"):
        model(np.asarray([[3]]), cache)  # the first step: what is made once
        tracemalloc.start()
        try:
            for token in (4, 5):
                model(np.asarray([[token]]), cache)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    one_layer = 2 * 2 * 2048 * 32 * 4  # keys and values, f32
    assert model.cached_step.decode["q8_0"].stats()["traces"] == 1
    assert peak < 0.25 * one_layer


def test_the_rope_tables_cover_the_allocated_positions_not_the_capacity():
    """A chat's cache of the model's context (8192 positions for SmolLM2) allocated for 256 made tables
    of 8192 rows; they are made for what the cache holds, and grow with it."""
    model = _llama()
    cache = model.new_cache(1, 512, allocate=16)
    _decode(model, cache, [1, 2, 3], 3)
    assert model.rope[0].shape[0] == 64  # MIN_ROPE_ROWS: the cache was allocated for 64 by its window
    _decode(model, cache, [4], 100)
    assert model.rope[0].shape[0] == cache.allocated == 128


def test_a_prompts_new_keys_and_values_own_their_memory(monkeypatch):
    """Each layer's new keys were a view of its rotated queries and keys, so every layer's projections
    lived until the cache was written (T x 207 KB for SmolLM2: 17 MiB at a prompt of 85 tokens)."""
    written = []
    commit = _decoder.commit
    monkeypatch.setattr(_decoder, "commit", lambda cache, new: (written.extend(new), commit(cache, new)))
    model = _llama()
    with vg.no_grad():
        model(np.asarray([[3, 1, 4, 1, 5, 9]]), model.new_cache(1, 64))
    assert len(written) == 2 * CONFIG.n_layers
    for t in written:
        array = t.numpy()
        while isinstance(array.base, np.ndarray):
            array = array.base
        assert array.nbytes == t.numpy().nbytes


def _resident_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads Linux's /proc")
def test_a_caches_positions_take_memory_when_written():
    """SmolLM2's chat cache (30 layers, 256 positions of 3 heads of 64) took memory for every position
    allocated once a few were written (np.zeros, from the heap); now only for the pages written."""
    before = _resident_kib()
    cache = _decoder.new_cache(30, 1, 3, 8192, 64, allocate=256, dtype="f32")  # 2 x 5.6 MiB
    assert all(not a.any() for a in cache.keys + cache.values)  # zeros
    for layer in range(30):
        cache.keys[layer][:, :, :4] = 1.0
        cache.values[layer][:, :, :4] = 2.0
    assert _resident_kib() - before < 2048
    assert not cache.keys[0][:, :, 4:].any() and cache.values[29][0, 2, 3, 63] == 2.0


def _reset_peak() -> bool:
    """Reset this process's VmHWM to its resident memory now (Linux 4.0+), False where it cannot."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads Linux's /proc")
def test_a_growing_cache_takes_memory_for_its_positions_and_frees_each_old_array_as_it_is_copied():
    """SmolLM2's chat cache growing from 256 to 512 positions: the old arrays lived until all were copied
    (the cache twice at the peak), and np.zeros, served from a heap where calloc clears (so touches) the
    memory, could take memory for every new position (47 MiB at 534 positions in a chat, not 25)."""
    cache = _decoder.new_cache(30, 1, 3, 8192, 64, allocate=256, dtype="f32")  # 2 x 5.6 MiB
    for layer in range(30):
        cache.keys[layer][:, :, :250] = 1.0
        cache.values[layer][:, :, :250] = 2.0
    cache.views["windows", 256] = [cache.keys[0][:, :, :256]]  # a view, as a step's windows
    before = _resident_kib()
    peak = _reset_peak()
    cache.reserve(257)
    assert cache.allocated == 512 and cache.views == {}
    assert _resident_kib() - before < 1024  # the positions copied, where the old ones were
    if peak:
        assert _peak_kib() - before < 2048  # an array or two of 384 KiB at a time, not the 11 MiB cache
    assert cache.keys[29][0, 2, 249, 63] == 1.0 and cache.values[0][0, 0, 249, 0] == 2.0
    assert not cache.keys[0][:, :, 250:].any() and not cache.values[29][:, :, 250:].any()


def test_a_wider_window_frees_the_narrower_windows_plans_and_a_narrower_one_builds_its_plan_again(
    no_automatic_collection,
):
    """A chat's window only widens (64, 128, 256): each plan kept held its buffers (SmolLM2's chat at 243
    positions kept three: 4 MiB). Once a wider window runs, the narrower plans are freed (a plan that
    replays refers to itself: not without a collection); a cache that needs one again gets the same bits."""
    model = _llama()
    prompt = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
    with vg.backend("cpu"):
        first, _ = _decode(model, model.new_cache(1, 300), prompt, 50)  # windows of 64
        decode = model.cached_step.decode["f32"]
        (narrow,) = decode._plans.values()
        narrow = weakref.ref(narrow)
        wider, _ = _decode(model, model.new_cache(1, 300), prompt, 100)  # then of 128
        assert narrow() is None and len(decode._plans) == 1
        again, _ = _decode(model, model.new_cache(1, 300), prompt, 50)  # 64 again
    assert model.cached_step.decode["f32"] is decode  # the RoPE tables did not grow: the same step
    assert decode.stats()["traces"] == 1 and decode.stats()["plans"] == 3
    for i, (a, b, c) in enumerate(zip(first, wider, again)):
        np.testing.assert_array_equal(a, b, err_msg=f"step {i}")
        np.testing.assert_array_equal(a, c, err_msg=f"step {i}")


@pytest.fixture
def no_automatic_collection():
    """What is freed is freed by the code under test, not by a collection that happened to run."""
    gc.disable()
    yield
    gc.enable()


def test_the_plans_of_a_step_made_anew_as_the_rope_tables_grow_are_freed(monkeypatch):
    """Llama's step is made anew when its RoPE tables grow: the old step's plans are freed then (with a
    collection: SmolLM2's chat at 559 positions peaked 4.5 MiB higher where they waited for one)."""
    dropped = []
    monkeypatch.setattr(_decoder.CachedStep, "drop_plans", lambda step: dropped.append(step))
    model = _llama()
    cache = model.new_cache(1, 300, allocate=16)
    _decode(model, cache, [1, 2, 3], 20)
    old = model.cached_step
    _decode(model, cache, [4], 60)  # past 64 positions: the tables grow, the step is made anew
    assert model.rope[0].shape[0] == 128 and dropped[-1] is old and model.cached_step is not old


# a greedy chat on the tiny GGUF of tests/llama_gguf.py, as the commit before this memory work made it
CHAT_BEFORE = [  # each reply's first 20 tokens
    [178, 93, 20, 132, 111, 79, 129, 207, 195, 135, 9, 89, 16, 85, 17, 54, 264, 130, 226, 25],
    [25, 49, 229, 258, 35, 175, 101, 130, 102, 242, 185, 78, 5, 158, 264, 114, 117, 91, 20, 101],
    [116, 42, 185, 152, 103, 114, 117, 35, 96, 57, 124, 232, 172, 237, 178, 145, 178, 121, 140, 141],
]


@needs_cc
def test_a_greedy_chat_on_a_growing_cache_gives_the_tokens_it_gave_before_and_a_full_caches(tmp_path):
    """Three turns on a cache allocated for 16 positions (grown to 256: its arrays copied, its windows
    widened 64, 128, 256 with the narrower plans freed, the RoPE tables and the step made anew) and on one
    allocated for the whole context: the same replies, and the same as before these changed."""
    from llama_gguf import write_llama_gguf

    from verigrad.models.catalog import load_language_model
    from verigrad.models.lm import generate

    path = write_llama_gguf(tmp_path / "chat.gguf", context=512, std=0.5, norm_std=0.0)
    replies = []
    for allocate in (16, None):
        model, tok = load_language_model(path)
        cache, messages, ids = model.new_cache(1, 512, allocate=allocate), [], []
        with vg.backend("cpu"):
            for turn in ("hi", "and then", "more"):
                messages.append({"role": "user", "content": turn})
                prompt = tok.encode(tok.apply_chat_template(messages), add_special=False)
                result = generate(model, tok, prompt, cache=cache, max_tokens=30, temperature=0.0)
                ids.append(result.ids)
                messages.append({"role": "assistant", "content": result.text})
        replies.append(ids)
        assert cache.length == 234 and cache.allocated == (256 if allocate else 512)
    assert replies[0] == replies[1]
    assert [r[: len(b)] for r, b in zip(replies[0], CHAT_BEFORE)] == CHAT_BEFORE
