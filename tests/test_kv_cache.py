"""The key/value cache: allocated for a few positions and doubled as it fills (the same logits, bit for
bit, as a cache allocated for the whole context; O(log n) copies and plans)."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
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
        return model.cached_step.decode.stats()["plans"]

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
