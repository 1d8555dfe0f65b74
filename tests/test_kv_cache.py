"""The key/value cache: allocated for a few positions and doubled as it fills (the same logits, bit for
bit, as a cache allocated for the whole context; O(log n) copies and plans); stored in f16, widened
exactly in cached_attention's kernel, within a stated bound of the f32 cache's attention."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu.attention import ATTENTION_EXACTNESS
from verigrad.models import _decoder
from verigrad.models.llama import Llama, LlamaConfig

CONFIG = LlamaConfig(
    vocab_size=41, dim=24, n_layers=2, n_heads=6, n_kv_heads=2, head_dim=4, ffn_dim=40, context_length=512
)


def _llama(seed: int = 0) -> Llama:
    rng = np.random.default_rng(seed)
    with vg.abstract():
        shapes = {k: t.shape for k, t in Llama(CONFIG).state_dict().items() if not k.startswith("rope_")}
    return Llama.from_state(CONFIG, {k: rng.normal(0, 0.3, s).astype(np.float32) for k, s in shapes.items()})


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
    with pytest.raises(ValueError, match="dtype must be one of f32, f16, got 'q4'"):
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
