"""GPT-2 and Llama: symbolic shape checks, the KV cache, loading (safetensors, GGUF) and its errors."""

from __future__ import annotations

import dataclasses
import json
import time

import gguf
import numpy as np
import pytest
from llama_random import random_state

import verigrad as vg
from verigrad.errors import ShapeError, WeightFileError
from verigrad.io.gguf import read_gguf
from verigrad.models import _decoder
from verigrad.models._decoder import step_specs
from verigrad.models.gpt2 import GPT2, GPT2Config
from verigrad.models.llama import Llama, LlamaConfig
from verigrad.nn.quant import QLinear

GPT2_SMALL = GPT2Config(vocab_size=37, n_positions=16, n_embd=24, n_layer=2, n_head=3)
LLAMA_SMALL = LlamaConfig(
    vocab_size=41, dim=24, n_layers=2, n_heads=6, n_kv_heads=2, head_dim=4, ffn_dim=40, context_length=32
)


def _random_gpt2(seed: int = 0) -> GPT2:
    vg.manual_seed(seed)
    return GPT2(GPT2_SMALL)


def _random_llama(config: LlamaConfig = LLAMA_SMALL, seed: int = 0) -> tuple[Llama, dict[str, np.ndarray]]:
    state = random_state(config, np.random.default_rng(seed))
    return Llama.from_state(config, state), state


# symbolic checks ------------------------------------------------------------------------------------
def test_gpt2_checks_for_every_size():
    B, T, V, P, H, hd = vg.dims("B T V P H hd")
    with vg.abstract():
        model = GPT2(GPT2Config(vocab_size=V, n_positions=P, n_embd=H * hd, n_layer=2, n_head=H))
    assert vg.check(model, vg.spec([B, T], "i64")).shape == (B, T, V)
    with vg.abstract():  # a projection stored the other way round is caught for every size
        model.h[1].mlp.c_fc.weight = vg.zeros(H * hd * 4, H * hd, requires_grad=True)
    with pytest.raises(ShapeError, match="matmul"):
        vg.check(model, vg.spec([B, T], "i64"))


def _symbolic_llama(fused: bool = False):
    V, D, KV, G, F = vg.dims("V D KV G F")
    hd = vg.dims("pairs") * 2  # RoPE rotates pairs of features
    config = LlamaConfig(V, D, 2, KV * G, KV, hd, F, context_length=vg.dims("C"), rope_interleaved=True)
    config = dataclasses.replace(config, fused=fused)
    with vg.abstract():
        return Llama(config), config


@pytest.mark.parametrize("fused", [False, True])
def test_llama_checks_for_every_size_with_and_without_cache(fused):
    model, c = _symbolic_llama(fused)
    B, T = vg.dims("B T")
    assert vg.check(model, vg.spec([B, T], "i64")).shape == (B, T, c.vocab_size)
    batch = vg.dims("batch")  # the step's own symbol for the batch (see step_specs)
    for tokens in (T, 1):  # the step for any number of new tokens, and the decode step's
        logits, *new = vg.check(model.step, *step_specs(c.n_layers, c.n_kv_heads, c.head_dim, tokens))
        assert logits.shape == (batch, tokens, c.vocab_size)
        assert [s.shape for s in new] == [(batch, c.n_kv_heads, tokens, c.head_dim)] * (2 * c.n_layers)


def test_gpt2_cached_step_checks_for_every_size():
    V, P, H, hd = vg.dims("V P H hd")
    with vg.abstract():
        model = GPT2(GPT2Config(vocab_size=V, n_positions=P, n_embd=H * hd, n_layer=2, n_head=H))
    logits, *new = vg.check(model.step, *step_specs(2, H, hd))
    batch, tokens = vg.dims("batch tokens")  # the step's own symbols (see step_specs)
    assert logits.shape == (batch, tokens, V) and [s.shape for s in new] == [(batch, H, tokens, hd)] * 4


@pytest.mark.parametrize("name", ["q_proj", "k_proj", "o_proj"])
def test_llama_refuses_a_transposed_projection(name):
    model, _ = _symbolic_llama()
    attn = model.layers[0].self_attn
    with vg.abstract():
        w = getattr(attn, name).weight
        getattr(attn, name).weight = vg.zeros(w.shape[1], w.shape[0], requires_grad=True)
    with pytest.raises(ShapeError):
        vg.check(model, vg.spec(vg.dims("B T"), "i64"))


# the KV cache -------------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [_random_gpt2, lambda: _random_llama()[0]], ids=["gpt2", "llama"])
def test_decoding_with_the_cache_equals_the_full_forward(make, monkeypatch):
    monkeypatch.setattr(_decoder, "MIN_WINDOW", 2)  # the window grows (2, 4, 8, then the capacity 10)
    model = make()
    ids = np.random.default_rng(1).integers(0, 37, (2, 7))
    full = model(ids).numpy()
    cache = model.new_cache(batch=2, capacity=10)
    steps = [model(ids[:, :3], cache).numpy()] + [
        model(ids[:, i : i + 1], cache).numpy() for i in range(3, 7)
    ]
    assert cache.length == 7
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="capacity"):
        model(ids[:, :4], cache)  # positions 7..10 do not fit in 10
    assert cache.length == 7
    cache.length = 3  # rewound (as a chat that keeps a common prefix does): later slots are rewritten
    np.testing.assert_allclose(model(ids[:, 3:], cache).numpy(), full[:, 3:], rtol=1e-5, atol=1e-5)
    cache.reset()
    np.testing.assert_allclose(model(ids, cache).numpy(), full, rtol=1e-5, atol=1e-5)


def test_attention_sees_only_the_past():
    model, _ = _random_llama()
    ids = np.array([[3, 1, 4, 1, 5, 9]])
    changed = ids.copy()
    changed[0, 4] = 2
    a, b = model(ids).numpy(), model(changed).numpy()
    np.testing.assert_array_equal(a[:, :4], b[:, :4])
    assert not np.allclose(a[:, 4:], b[:, 4:])


def _llama_cpp_permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert script: q/k rows reordered from half-split to interleaved RoPE pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _gguf_state(state: dict[str, np.ndarray], c: LlamaConfig) -> dict[str, np.ndarray]:
    names = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight"}
    names["lm_head.weight"] = "output.weight"
    block = {
        "input_layernorm": "attn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    out = {}
    for k, v in state.items():
        if k in names:
            out[names[k]] = v
            continue
        _, i, *rest = k.split(".")
        stem = ".".join(rest[:-1])
        if stem == "self_attn.q_proj":
            v = _llama_cpp_permute(v, c.n_heads)
        elif stem == "self_attn.k_proj":
            v = _llama_cpp_permute(v, c.n_kv_heads)
        out[f"blk.{i}.{block[stem]}.weight"] = v
    return out


def _write_gguf(path, c: LlamaConfig, tensors: dict[str, np.ndarray], skip_key: str | None = None) -> None:
    w = gguf.GGUFWriter(str(path), "llama")
    keys = {
        "llama.context_length": c.context_length,
        "llama.embedding_length": c.dim,
        "llama.block_count": c.n_layers,
        "llama.feed_forward_length": c.ffn_dim,
        "llama.attention.head_count": c.n_heads,
        "llama.attention.head_count_kv": c.n_kv_heads,
    }
    for k, v in keys.items():
        if k != skip_key:
            w.add_uint32(k, v)
    w.add_float32("llama.attention.layer_norm_rms_epsilon", c.norm_eps)
    w.add_float32("llama.rope.freq_base", c.rope_base)
    for name, array in tensors.items():
        if name.endswith("norm.weight"):
            w.add_tensor(name, array)
        else:
            qtype = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(name, gguf.quants.quantize(array, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


CONFIG_32 = LlamaConfig(  # Q8_0 rows are blocks of 32
    vocab_size=40, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, ffn_dim=96, context_length=32
)


@pytest.mark.parametrize("tied", [True, False])
def test_gguf_llama_equals_the_half_split_model(tmp_path, tied):
    config = dataclasses.replace(CONFIG_32, tie_embeddings=tied)
    _, state = _random_llama(config)
    path = tmp_path / "tiny.gguf"
    _write_gguf(path, config, _gguf_state(state, config))
    model = Llama.from_gguf(path)
    assert model.config.rope_interleaved and model.config.tie_embeddings == tied
    assert model.config.n_kv_heads == 2 and model.config.ffn_dim == 96
    assert isinstance(model.layers[1].self_attn.qkv_proj, QLinear)  # quantized, q/k/v rows fused
    # the same Q8_0-rounded weights, rows put back in Hugging Face's half-split order
    reader = read_gguf(path)
    rounded = {k: reader.tensors[g].dequantize() for k, g in zip(state, _gguf_state(state, config))}
    for k in rounded:
        if k.endswith(("q_proj.weight", "k_proj.weight")):
            heads = config.n_heads if "q_proj" in k else config.n_kv_heads
            w = rounded[k]
            rounded[k] = w.reshape(heads, w.shape[0] // heads // 2, 2, -1).swapaxes(1, 2).reshape(w.shape)
    reference = Llama.from_state(config, rounded)
    ids = np.array([[1, 5, 9, 2, 33, 7]])
    expected = reference(ids).numpy()
    np.testing.assert_allclose(model(ids).numpy(), expected, rtol=1e-5, atol=1e-5)
    cache = model.new_cache()
    cached = np.concatenate([model(ids[:, :2], cache).numpy(), model(ids[:, 2:], cache).numpy()], axis=1)
    np.testing.assert_allclose(cached, expected, rtol=1e-5, atol=1e-5)
    # a prompt's last row alone (what generation asks for): no logits made for the other positions
    cache = model.new_cache()
    last = model.last_logits(ids, cache)
    assert last.shape == (1, config.vocab_size) and cache.length == ids.shape[1]
    np.testing.assert_allclose(last, expected[:, -1], rtol=1e-5, atol=1e-5)
    assert model(ids, last_only=True).shape == (1, 1, config.vocab_size)
    # activations quantized to 8 bits per block of 32: close, not equal
    q8 = Llama.from_gguf(path, activations="q8")(ids).numpy()
    assert 0 < np.abs(q8 - expected).max() < 0.02 * np.abs(expected).max()


def test_gguf_missing_key_is_named(tmp_path):
    _, state = _random_llama(CONFIG_32)
    path = tmp_path / "tiny.gguf"
    _write_gguf(path, CONFIG_32, _gguf_state(state, CONFIG_32), skip_key="llama.block_count")
    with pytest.raises(WeightFileError, match=r"llama\.block_count"):
        Llama.from_gguf(path)


# GPT-2 from a Hugging Face folder ---------------------------------------------------------------------
def _save_gpt2(model: GPT2, folder, drop: str | None = None, change: dict | None = None) -> None:
    folder.mkdir(exist_ok=True)
    c = model.config
    config = {"vocab_size": c.vocab_size, "n_positions": c.n_positions, "n_embd": c.n_embd}
    config |= {"n_layer": c.n_layer, "n_head": c.n_head, "layer_norm_epsilon": c.layer_norm_epsilon}
    (folder / "config.json").write_text(json.dumps(config))
    state = {f"transformer.{k}": v.numpy() for k, v in model.state_dict().items() if k != drop}
    state |= change or {}
    vg.io.save(state, folder / "model.safetensors")


def test_gpt2_from_safetensors_round_trip(tmp_path):
    model = _random_gpt2()
    _save_gpt2(model, tmp_path / "m")
    loaded = GPT2.from_safetensors(tmp_path / "m")
    ids = np.array([[1, 2, 3, 30], [4, 5, 6, 36]])
    np.testing.assert_array_equal(loaded(ids).numpy(), model(ids).numpy())


def test_gpt2_weight_file_errors(tmp_path):
    model = _random_gpt2()
    _save_gpt2(model, tmp_path / "missing", drop="h.1.mlp.c_fc.bias")
    with pytest.raises(WeightFileError, match=r"missing tensor h\.1\.mlp\.c_fc\.bias \(expected \[96\]\)"):
        GPT2.from_safetensors(tmp_path / "missing")

    wrong = {"transformer.h.0.attn.c_attn.weight": np.zeros((72, 24), np.float32)}
    _save_gpt2(model, tmp_path / "wrong", change=wrong)
    with pytest.raises(
        WeightFileError, match=r"h\.0\.attn\.c_attn\.weight: shape \[72, 24\], expected \[24, 72\]"
    ):
        GPT2.from_safetensors(tmp_path / "wrong")

    _save_gpt2(model, tmp_path / "cut")
    blob = (tmp_path / "cut" / "model.safetensors").read_bytes()
    (tmp_path / "cut" / "model.safetensors").write_bytes(blob[:-100])
    with pytest.raises(WeightFileError, match="truncated file: needs bytes up to"):
        GPT2.from_safetensors(tmp_path / "cut")

    (tmp_path / "cut" / "config.json").write_text(json.dumps({"vocab_size": 37}))
    with pytest.raises(WeightFileError, match=r"missing key.*n_positions"):
        GPT2.from_safetensors(tmp_path / "cut")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("n_layer", 100000, r"n_layer is 100000; it must be in 1\.\.1024"),
        ("n_layer", 0, r"n_layer is 0"),
        ("n_head", 5, r"n_embd 24 is not a multiple of n_head 5"),
        ("n_embd", "24", r"n_embd must be an integer, found 24"),
        ("n_positions", 2**40, r"n_positions is 1099511627776"),
        ("vocab_size", True, r"vocab_size must be an integer"),
        ("layer_norm_epsilon", float("nan"), r"layer_norm_epsilon is nan; it must be above 0"),
    ],
)
def test_gpt2_hostile_config_refused_before_building(tmp_path, key, value, message):
    """config.json's sizes are checked before a model of that size is built (n_layer=100000 built 100000
    abstract blocks before the tensor check)."""
    _save_gpt2(_random_gpt2(), tmp_path / "m")
    path = tmp_path / "m" / "config.json"
    path.write_text(json.dumps(json.loads(path.read_text()) | {key: value}))
    start = time.perf_counter()
    with pytest.raises(WeightFileError, match=message):
        GPT2.from_safetensors(tmp_path / "m")
    assert time.perf_counter() - start < 1.0
