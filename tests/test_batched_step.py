"""The batched decode step (`forward_rows`) on the cpu backend at 2 to 5 sequences of a tiny Q4_1 Llama
GGUF with f32 activations: 2 to 4 rows take the products that de-quantize each block once for all rows
(quant_f32_tiles.c's FEW_ROWS), 5 the row buffer and tiles; each row's logits are, bit for bit, those of
its sequence decoded alone, and its key and value go to its own position."""

from __future__ import annotations

import numpy as np
import pytest
from llama_gguf import SERVED, write_llama_gguf

import verigrad as vg
from verigrad.backends import cpu
from verigrad.models.catalog import load_language_model

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = write_llama_gguf(tmp_path_factory.mktemp("batched") / "tiny.gguf", qtype="Q4_1", **SERVED)
    return load_language_model(path)[0]


@pytest.mark.parametrize("count", [2, 3, 4, 5])
def test_each_row_of_a_batch_gets_its_sequences_bits_alone(model, count):
    with vg.backend("cpu"):
        rng = np.random.default_rng(count)
        prompts = [list(map(int, rng.integers(3, 260, n))) for n in rng.integers(1, 60, count)]
        alone, nexts = [], []
        big = model.new_cache(count, 256)
        for i, p in enumerate(prompts):
            cache = model.new_cache(1, 256)
            token = int(np.argmax(model.last_logits(np.asarray([p]), cache)[0]))
            for layer, (k, v) in enumerate(zip(big.keys, big.values)):
                k[i], v[i] = cache.keys[layer][0], cache.values[layer][0]
            alone.append(model.last_logits(np.asarray([[token]]), cache)[0])
            nexts.append(token)
        rows = model.forward_rows(np.asarray([[t] for t in nexts]), big, [len(p) for p in prompts]).numpy()
        for i, want in enumerate(alone):
            np.testing.assert_array_equal(rows[i, 0].view(np.uint32), want.view(np.uint32), f"row {i}")
            assert np.any(big.keys[0][i, :, len(prompts[i])] != 0)  # the new key at the row's own position


def test_a_model_of_more_layers_than_a_replay_once_held_decodes_rows(tmp_path, monkeypatch):
    """A 33-layer model's rows step takes 3 + 2 x 33 arrays: its replay (after `Plan.replay_after` runs)
    rebinds them all, where it once refused more than 64; 12 steps give the bits they give unreplayed."""
    from verigrad.ir.plan import Plan

    path = write_llama_gguf(tmp_path / "deep.gguf", qtype="Q4_1", layers=33, **SERVED)

    def decode(replay: bool) -> list[np.ndarray]:
        monkeypatch.setattr(Plan, "replay", replay)
        deep = load_language_model(path)[0]
        cache, lengths, out = deep.new_cache(2, 64), [0, 0], []
        for step in range(12):
            rows = deep.forward_rows(np.asarray([[11 + step], [40 + step]]), cache, lengths)
            out.append(rows.numpy().copy())
            lengths = [n + 1 for n in lengths]
        return out

    with vg.backend("cpu"):
        plain, replayed = decode(False), decode(True)
    for step, (want, got) in enumerate(zip(plain, replayed)):
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), f"step {step}")


@pytest.mark.parametrize("kv", ["f32", "f16"])
def test_a_rows_step_reads_no_position_past_a_rows_length(model, kv):
    """The rows' attention runs by runs (`Rows`): a NaN left past a row's length (where a shorter row's
    window ends inside a longer row's) changes no bit of any row. (The tiny model's heads of 16 take no
    q8_0 cache; ragged_attention_q8's kernel is held to the same rule by its own tests.)"""
    with vg.backend("cpu"):
        lengths, ids = [3, 40], np.asarray([[17], [29]])
        clean, dirty = model.new_cache(2, 128, dtype=kv), model.new_cache(2, 128, dtype=kv)
        for cache in (clean, dirty):
            for a in (*cache.keys, *cache.values):
                a[:, :, :40] = 0.25
        for a in (*dirty.keys, *dirty.values):
            a[0, :, 5:60] = np.nan
        want = model.forward_rows(ids, clean, lengths).numpy()
        got = model.forward_rows(ids, dirty, lengths).numpy()
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
