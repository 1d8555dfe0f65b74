"""Qwen2 (q/k/v biases) and Qwen3 (q/k RMSNorm) as configurations of the Llama decoder: symbolic checks,
quantized GGUF files against the same weights in Hugging Face's layout, and the files refused with the
key or tensor at fault. (tests/parity/test_architectures_torch.py compares them with transformers.)"""

from __future__ import annotations

import dataclasses
import json

import gguf
import numpy as np
import pytest
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers, processors

import verigrad as vg
from verigrad.errors import ShapeError, WeightFileError
from verigrad.io.tokenizer import Tokenizer, _merges_by_score, byte_alphabet
from verigrad.models import _decoder, gemma
from verigrad.models._decoder import step_specs
from verigrad.models.catalog import load_gguf, load_language_model
from verigrad.models.gemma import Gemma, GemmaConfig
from verigrad.models.llama import GGUF_VARIANTS, Llama, LlamaConfig, rope_tables
from verigrad.models.llama_folder import FOLDER_VARIANTS
from verigrad.nn.quant import QLinear

SMALL = LlamaConfig(
    vocab_size=40, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, ffn_dim=96, context_length=32
)
FLAGS = {"qwen2": {"qkv_bias": True}, "qwen3": {"qk_norm": True}}
NAMES = {  # our names in a block -> llama.cpp's
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
}
NAMES |= {f"self_attn.{x}_proj.{p}": f"attn_{x}.{p}" for x in "qkv" for p in ("weight", "bias")}
GEMMA_NAMES = NAMES | {  # Gemma's post_attention_layernorm is after attention, not before the MLP
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}


def _state(config: LlamaConfig, seed: int = 0, spread: float = 0.3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    with vg.abstract():
        shapes = {k: t.shape for k, t in Llama(config).state_dict().items() if not k.startswith("rope_")}
    return {
        k: (1 + rng.normal(0, 0.1, s) if "norm" in k else rng.normal(0, spread, s)).astype(np.float32)
        for k, s in shapes.items()
    }


def _gguf_name(key: str, names: dict[str, str] = NAMES) -> str:
    """llama.cpp's name of one of our parameters."""
    if key.startswith("layers."):
        _, i, stem = key.split(".", 2)
        return f"blk.{i}.{names[stem]}"
    return {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight"}[key]


def _write(path, arch: str, config: LlamaConfig, state: dict, drop: str = "", extra: dict | None = None):
    """`state` (Hugging Face's names, half-split RoPE, as Qwen's GGUF files keep it) as a GGUF file with
    Q8_0 matrices and F32 vectors."""
    names = GEMMA_NAMES if arch.startswith("gemma") else NAMES
    w = gguf.GGUFWriter(str(path), arch)
    keys = {"context_length": config.context_length, "embedding_length": config.dim}
    keys |= {"block_count": config.n_layers, "feed_forward_length": config.ffn_dim}
    keys |= {"attention.head_count": config.n_heads, "attention.head_count_kv": config.n_kv_heads}
    keys |= {"attention.key_length": config.head_dim}
    for key, value in (keys | (extra or {})).items():
        add = (
            w.add_string
            if isinstance(value, str)
            else w.add_float32
            if isinstance(value, float)
            else w.add_uint32
        )
        add(f"{arch}.{key}", value)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", config.norm_eps)
    for key, array in state.items():
        name = _gguf_name(key, names)
        if name == drop:
            continue
        if array.ndim == 1:
            w.add_tensor(name, array)
        else:
            q8 = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(name, gguf.quants.quantize(array, q8), raw_dtype=q8)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("arch", list(FLAGS))
def test_qwen_checks_for_every_size_with_and_without_cache(arch, fused):
    V, D, KV, G, F = vg.dims("V D KV G F")
    hd = vg.dims("pairs") * 2
    config = LlamaConfig(V, D, 2, KV * G, KV, hd, F, context_length=vg.dims("C"), fused=fused, **FLAGS[arch])
    with vg.abstract():
        model = Llama(config)
    B, T = vg.dims("B T")
    assert vg.check(model, vg.spec([B, T], "i64")).shape == (B, T, V)
    logits, *new = vg.check(model.step, *step_specs(2, KV, hd, 1))
    assert logits.shape == (vg.dims("batch"), 1, V)
    assert [s.shape for s in new] == [(vg.dims("batch"), KV, 1, hd)] * 4
    with vg.abstract():  # a q/k norm or bias of the wrong size is caught for every size
        attn = model.layers[1].self_attn
        if arch == "qwen3":
            attn.k_norm.weight = vg.zeros(hd + 2, requires_grad=True)
        elif fused:
            attn.qkv_bias = vg.zeros(KV * G * hd, requires_grad=True)
        else:
            attn.v_proj.bias = vg.zeros(D, requires_grad=True)
    with pytest.raises(ShapeError):
        vg.check(model, vg.spec([B, T], "i64"))


@pytest.mark.parametrize("arch", list(FLAGS))
def test_quantized_qwen_gguf_equals_the_unfused_model(tmp_path, arch):
    config = dataclasses.replace(SMALL, **FLAGS[arch])
    state = _state(config)
    _write(tmp_path / "m.gguf", arch, config, state)
    model = Llama.from_gguf(tmp_path / "m.gguf")
    attn = model.layers[0].self_attn
    assert isinstance(attn.qkv_proj, QLinear) and (attn.q_norm is not None) == (arch == "qwen3")
    assert not model.config.rope_interleaved  # llama.cpp keeps Qwen's q/k rows in half-split order
    # the same Q8_0-rounded matrices, unfused, in Hugging Face's names
    reader = {t.name: t for t in gguf.GGUFReader(str(tmp_path / "m.gguf")).tensors}
    rounded = {
        k: gguf.quants.dequantize(reader[_gguf_name(k)].data, reader[_gguf_name(k)].tensor_type).reshape(
            v.shape
        )
        for k, v in state.items()
    }
    reference = Llama.from_state(config, rounded)
    ids = np.array([[1, 5, 9, 2, 33, 7, 0, 39]])
    expected = reference(ids).numpy()
    np.testing.assert_allclose(model(ids).numpy(), expected, rtol=1e-5, atol=1e-5)
    cache = model.new_cache()  # the prompt's step, then the compiled one-token steps
    steps = [model(ids[:, :3], cache).numpy()] + [
        model(ids[:, i : i + 1], cache).numpy() for i in range(3, 8)
    ]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("arch", list(FLAGS))
def test_quantized_qwen_gguf_on_8_bit_activations(tmp_path, arch):
    """The norm fused into the product, then the bias: close to f32 activations. (The error grows with the
    weights' spread, as the random model amplifies it: 2% of the largest logit at 0.1, 11% at 0.3.)"""
    config = dataclasses.replace(SMALL, **FLAGS[arch])
    _write(tmp_path / "m.gguf", arch, config, _state(config, spread=0.1))
    ids = np.array([[1, 5, 9, 2, 33, 7, 0, 39]])
    expected = Llama.from_gguf(tmp_path / "m.gguf")(ids).numpy()
    q8 = Llama.from_gguf(tmp_path / "m.gguf", activations="q8")
    cache = q8.new_cache()
    got = [q8(ids[:, :3], cache).numpy()] + [q8(ids[:, i : i + 1], cache).numpy() for i in range(3, 8)]
    assert 0 < np.abs(np.concatenate(got, 1) - expected).max() < 0.03 * np.abs(expected).max()


def test_unknown_architecture_names_the_supported_ones(tmp_path):
    _write(tmp_path / "g.gguf", "falcon", SMALL, _state(SMALL))
    with pytest.raises(
        WeightFileError,
        match=r"falcon is not supported \(verigrad runs llama, qwen2, qwen3, phi3, gemma2, gemma3\)",
    ):
        load_gguf(tmp_path / "g.gguf")
    assert list(GGUF_VARIANTS) == ["llama", "qwen2", "qwen3", "phi3"]


def test_gguf_sliding_window_limits_the_context(tmp_path):
    config = dataclasses.replace(SMALL, qkv_bias=True)
    _write(tmp_path / "m.gguf", "qwen2", config, _state(config), extra={"attention.sliding_window": 8})
    assert Llama.from_gguf(tmp_path / "m.gguf").context_length == 8  # full attention over 8 is the window's


@pytest.mark.parametrize(
    ("arch", "drop", "extra", "message"),
    [
        ("qwen2", "blk.1.attn_k.bias", {}, r"missing tensor blk\.1\.attn_k\.bias"),
        ("qwen3", "blk.0.attn_q_norm.weight", {}, r"missing tensor blk\.0\.attn_q_norm\.weight"),
        (
            "qwen3",
            "",
            {"rope.dimension_count": 16},
            r"qwen3\.rope\.dimension_count is 16 but .*key_length is 32",
        ),
        (
            "qwen2",
            "",
            {"rope.scaling.type": "yarn"},
            r"qwen2\.rope\.scaling\.type is yarn: only linear scaling",
        ),
        ("qwen2", "", {"attention.key_length": 7}, r"attention\.key_length is 7; RoPE needs it even"),
    ],
)
def test_bad_qwen_files_are_refused_naming_the_fault(tmp_path, arch, drop, extra, message):
    config = dataclasses.replace(SMALL, **FLAGS[arch])
    _write(tmp_path / "m.gguf", arch, config, _state(config), drop=drop, extra=extra)
    with pytest.raises(WeightFileError, match=message):
        Llama.from_gguf(tmp_path / "m.gguf")


# Hugging Face folders ----------------------------------------------------------------------------------
def _hf_config(kind: str, c: LlamaConfig) -> dict:
    return {
        "model_type": kind,
        "vocab_size": c.vocab_size,
        "hidden_size": c.dim,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads,
        "num_key_value_heads": c.n_kv_heads,
        "head_dim": c.head_dim,
        "intermediate_size": c.ffn_dim,
        "max_position_embeddings": c.context_length,
        "rms_norm_eps": c.norm_eps,
        "rope_theta": c.rope_base,
        "tie_word_embeddings": c.tie_embeddings,
        "bos_token_id": 0,
        "eos_token_id": [1, 2],
    }


def _save_folder(folder, kind: str, config: LlamaConfig, state: dict, change: dict | None = None, shards=1):
    """A Hugging Face folder as transformers saves one: config.json, the weights (`model.` names) in one
    file or `shards` files with their index, and a byte-level tokenizer.json."""
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_hf_config(kind, config) | (change or {})))
    named = {f"model.{k}": v for k, v in state.items()}
    if shards == 1:
        vg.io.save(named, folder / "model.safetensors")
    else:
        files = {k: f"model-{i % shards + 1:05d}-of-{shards:05d}.safetensors" for i, k in enumerate(named)}
        for file in set(files.values()):
            vg.io.save({k: v for k, v in named.items() if files[k] == file}, folder / file)
        (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": files}))
    alphabet = list(byte_alphabet().values())
    backend = HFTokenizer(models.BPE(vocab={t: i for i, t in enumerate(alphabet)}, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.save(str(folder / "tokenizer.json"))


@pytest.mark.parametrize("shards", [1, 3])
@pytest.mark.parametrize("kind", ["llama", "qwen2", "qwen3"])
def test_folder_loads_the_same_model(tmp_path, kind, shards):
    config = dataclasses.replace(SMALL, vocab_size=256, **FOLDER_VARIANTS[kind])
    state = _state(config)
    _save_folder(tmp_path / "m", kind, config, state, shards=shards)
    model, tokenizer = load_language_model(tmp_path / "m")
    assert model.config == config
    ids = np.array([[1, 5, 9, 2, 33, 7]])
    np.testing.assert_array_equal(model(ids).numpy(), Llama.from_state(config, state)(ids).numpy())
    assert tokenizer.eos_id == 1 and tokenizer.end_ids == {1, 2}


def test_mistral_sliding_window_limits_the_context(tmp_path):
    config = dataclasses.replace(SMALL, vocab_size=256)
    _save_folder(tmp_path / "m", "mistral", config, _state(config), change={"sliding_window": 8})
    model, _ = load_language_model(tmp_path / "m")
    assert model.context_length == 8  # attention over at most 8 positions is a sliding window's
    with pytest.raises(ValueError, match=r"positions 0\.\.8 do not fit in the context length \(8\)"):
        model(np.zeros((1, 9), np.int64))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"model_type": "gemma2"},
            r"model_type gemma2 is not supported \(verigrad reads llama, mistral",
        ),
        ({"rope_scaling": {"type": "dynamic", "factor": 2.0}}, r"RoPE scaling .*dynamic.* is not supported"),
        (
            {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}},
            r"RoPE scaling .*llama3.* is not",
        ),
        ({"hidden_act": "gelu"}, r"hidden_act is gelu"),
        ({"attention_bias": True}, r"attention_bias is True: biases there are not supported"),
        ({"num_key_value_heads": 3}, r"num_key_value_heads 3 does not divide num_attention_heads 4"),
        ({"num_hidden_layers": 10**6}, r"num_hidden_layers is 1000000; it must be in 1\.\.1024"),
        ({"head_dim": 16}, r"self_attn\.q_proj\.weight.*shape \[128, 64\], expected \[64, 64\]"),
        ({"eos_token_id": [1, 999]}, r"end token id 999 is outside the vocabulary"),
    ],
)
def test_bad_folders_are_refused_naming_the_fault(tmp_path, change, message):
    _save_folder(tmp_path / "m", "llama", SMALL, _state(SMALL), change=change)
    with pytest.raises(WeightFileError, match=message):
        load_language_model(tmp_path / "m")


def test_sharded_folder_errors(tmp_path):
    _save_folder(tmp_path / "m", "qwen2", dataclasses.replace(SMALL, qkv_bias=True), _state(SMALL), shards=2)
    with pytest.raises(WeightFileError, match=r"missing tensor layers\.0\.self_attn\.q_proj\.bias"):
        load_language_model(tmp_path / "m")  # the state lacks Qwen2's biases
    config = dataclasses.replace(SMALL, qkv_bias=True)
    _save_folder(tmp_path / "n", "qwen2", config, _state(config), shards=2)
    (tmp_path / "n" / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(WeightFileError, match=r"lists shard model-00002-of-00002\.safetensors, which"):
        load_language_model(tmp_path / "n")


def test_a_tokenizer_larger_than_the_embedding_is_refused(tmp_path):
    _save_folder(tmp_path / "m", "llama", SMALL, _state(SMALL))  # 256 byte tokens, 40 embeddings
    with pytest.raises(WeightFileError, match=r"the tokenizer has 256 tokens but the model embeds 40"):
        load_language_model(tmp_path / "m")


# SentencePiece tokenizers from GGUF ------------------------------------------------------------------
SP_PIECES = ["▁", "▁t", "he", "▁the", "▁th", "h", "e", "t", "T", "▁T", "▁The", "é"]


def _sp_gguf(path, arch: str = "llama", scores: bool = True, extra_tokens: dict | None = None) -> str:
    extra_tokens = extra_tokens or {}
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *SP_PIECES, *extra_tokens]
    w = gguf.GGUFWriter(str(path), arch)
    w.add_string("tokenizer.ggml.model", "llama")
    w.add_array("tokenizer.ggml.tokens", tokens)
    if scores:
        w.add_array("tokenizer.ggml.scores", [0.0] * 259 + [-float(i) for i in range(len(tokens) - 259)])
    w.add_array(
        "tokenizer.ggml.token_type", [2, 3, 3] + [6] * 256 + [1] * len(SP_PIECES) + [*extra_tokens.values()]
    )
    w.add_uint32("tokenizer.ggml.bos_token_id", 1)
    w.add_uint32("tokenizer.ggml.eos_token_id", 2)
    w.add_tensor("token_embd.weight", np.zeros((len(tokens), 4), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return str(path)


def test_sentencepiece_merges_follow_the_scores():
    tokens = ["a", "b", "c", "ab", "bc", "abc"]
    # by the merged token's score; the two ways to make "abc" tie, the longer left part first (as in
    # transformers' derivation)
    merges = _merges_by_score(tokens, [0, 0, 0, -2.0, -1.0, -3.0])
    assert merges == [("b", "c"), ("a", "b"), ("ab", "c"), ("a", "bc")]


def test_sentencepiece_tokenizer_from_gguf(tmp_path):
    tok = Tokenizer.from_gguf(_sp_gguf(tmp_path / "sp.gguf"))
    assert tok.sentencepiece and tok.add_bos and tok.end_ids == {2}
    ids = tok.encode("The the\U0001f600")  # the emoji has no piece: four <0xNN> byte tokens
    pieces = [tok.backend.id_to_token(i) for i in ids]
    assert pieces == ["<s>", "▁The", "▁the", "<0xF0>", "<0x9F>", "<0x98>", "<0x80>"]
    assert tok.decode(ids) == "<s> The the\U0001f600"  # "▁" is a space; the text's first one is dropped
    assert tok.decode(ids, skip_special=True) == "The the\U0001f600"
    stream = tok.stream(skip_special=True)  # a stream continues a text: its first space stays
    assert "".join(stream.push(i) for i in ids) + stream.flush() == " The the\U0001f600"
    assert tok.encode("é</s>", add_special=False) == [tok.backend.token_to_id(t) for t in ("▁", "é", "</s>")]


@pytest.mark.parametrize(
    ("arch", "scores", "message"),
    [
        ("gemma4", True, r"gemma4's SentencePiece tokenizer .* is not supported"),
        ("llama", False, r"no key 'tokenizer\.ggml\.scores'"),
    ],
)
def test_sentencepiece_files_refused(tmp_path, arch, scores, message):
    with pytest.raises(WeightFileError, match=message):
        Tokenizer.from_gguf(_sp_gguf(tmp_path / "sp.gguf", arch, scores))


# Gemma -----------------------------------------------------------------------------------------------
GEMMA2 = GemmaConfig(**dataclasses.asdict(SMALL), attn_softcap=5.0, final_softcap=3.0)
GEMMA3 = GemmaConfig(**dataclasses.asdict(SMALL) | {"n_layers": 6, "qk_norm": True}, local_rope_base=100.0)


def _random_gemma(config: GemmaConfig) -> Gemma:
    rng = np.random.default_rng(0)
    with vg.abstract():
        shapes = {k: t.shape for k, t in Gemma(config).state_dict().items()}
    state = {
        k: (1 + rng.normal(0, 0.1, s) if "norm" in k else rng.normal(0, 0.3, s)) for k, s in shapes.items()
    }
    return Gemma.from_state(config, {k: v.astype(np.float32) for k, v in state.items()})


def test_gemma2_checks_for_every_size_with_and_without_cache():
    V, D, KV, G, F = vg.dims("V D KV G F")
    hd = vg.dims("pairs") * 2
    config = GemmaConfig(V, D, 2, KV * G, KV, hd, F, context_length=vg.dims("C"), attn_softcap=50.0)
    with vg.abstract():
        model = Gemma(config)
    B, T = vg.dims("B T")
    assert vg.check(model, vg.spec([B, T], "i64")).shape == (B, T, V)
    logits, *new = vg.check(model.step, *step_specs(2, KV, hd, T))
    assert logits.shape == (vg.dims("batch"), T, V) and len(new) == 4
    with vg.abstract():  # a post-MLP norm of the wrong size is caught for every size
        model.layers[1].post_feedforward_layernorm.weight = vg.zeros(F, requires_grad=True)
    with pytest.raises(ShapeError):
        vg.check(model, vg.spec([B, T], "i64"))


@pytest.mark.parametrize("config", [GEMMA2, GEMMA3], ids=["gemma2", "gemma3"])
def test_gemma_decoding_with_the_cache_equals_the_full_forward(config, monkeypatch):
    """The soft-capped attention written in ops (Gemma 2) and the local/global RoPE tables (Gemma 3) on
    the cache's windows give the full forward's logits."""
    monkeypatch.setattr(_decoder, "MIN_WINDOW", 2)  # windows 2, 4, 8, then the capacity
    model = _random_gemma(config)
    ids = np.random.default_rng(1).integers(0, 40, (2, 9))
    full = model(ids).numpy()
    cache = model.new_cache(batch=2, capacity=12)
    steps = [model(ids[:, :3], cache).numpy()] + [
        model(ids[:, i : i + 1], cache).numpy() for i in range(3, 9)
    ]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, rtol=1e-5, atol=1e-5)
    assert np.abs(full).max() <= (config.final_softcap or np.inf)


def test_gemma_features_change_the_logits():
    """Each of Gemma's additions is in the computation (a flag that did nothing would pass the cache test)."""
    ids = np.array([[1, 5, 9, 2, 33, 7]])
    base = _random_gemma(GEMMA2)(ids).numpy()
    for change in (
        {"attn_softcap": None},
        {"final_softcap": None},
        {"local_rope_base": 100.0, "n_layers": 2},
    ):
        other = _random_gemma(dataclasses.replace(GEMMA2, **change))(ids).numpy()
        assert np.abs(other - base).max() > 1e-3, change
    gemma3 = _random_gemma(GEMMA3)
    ids = np.arange(12)[None] % 40
    same_base = _random_gemma(dataclasses.replace(GEMMA3, local_rope_base=GEMMA3.rope_base))(ids).numpy()
    assert np.abs(gemma3(ids).numpy() - same_base).max() > 1e-3


def test_gemma_27b_scales_queries_by_width_over_heads(tmp_path, monkeypatch):
    config = GemmaConfig(**dataclasses.asdict(SMALL) | {"n_layers": 2, "head_dim": 8})
    with vg.abstract():
        state = {k: np.zeros(t.shape, np.float32) for k, t in Gemma(config).state_dict().items()}
    _write(tmp_path / "m.gguf", "gemma2", config, state, extra={"attention.sliding_window": 16})
    assert Gemma.from_gguf(tmp_path / "m.gguf").layers[0].self_attn.scale == 8**-0.5  # the head size
    monkeypatch.setitem(gemma._LARGE, "gemma2", 2)  # as if it had the 27B model's 46 layers
    model = Gemma.from_gguf(tmp_path / "m.gguf")
    assert model.layers[0].self_attn.scale == (64 / 4) ** -0.5 and model.context_length == 16


def test_folder_tokenizer_adds_bos_as_its_post_processor_does(tmp_path):
    """A Llama 3 folder's tokenizer.json adds BOS in its post-processor (transformers adds it; verigrad
    skipped it): without tokenizer_config.json's flag, the post-processor decides."""
    config = dataclasses.replace(SMALL, vocab_size=256)
    _save_folder(tmp_path / "m", "llama", config, _state(config))
    backend = HFTokenizer.from_file(str(tmp_path / "m" / "tokenizer.json"))
    backend.post_processor = processors.TemplateProcessing(single="Ā $A", special_tokens=[("Ā", 0)])
    backend.save(str(tmp_path / "m" / "tokenizer.json"))
    _, tokenizer = load_language_model(tmp_path / "m")
    hi = [backend.token_to_id(c) for c in "hi"]
    assert tokenizer.add_bos and tokenizer.encode("hi") == [0, *hi]
    (tmp_path / "m" / "tokenizer_config.json").write_text(json.dumps({"add_bos_token": False}))
    assert load_language_model(tmp_path / "m")[1].encode("hi") == hi


def test_linear_rope_scaling_divides_the_positions(tmp_path):
    """`{arch}.rope.scaling.type` linear (Gemma 3 4B and larger, some Llamas): the angle of position p is
    the unscaled one of p / factor."""
    config = dataclasses.replace(SMALL, qk_norm=True)
    _write(tmp_path / "m.gguf", "qwen3", config, _state(config), extra={"rope.scaling.type": "linear"})
    assert Llama.from_gguf(tmp_path / "m.gguf").config.rope_factor == 1.0  # no factor: 1, as in llama.cpp
    extra = {"rope.scaling.type": "linear", "rope.scaling.factor": 4.0}
    _write(tmp_path / "f.gguf", "qwen3", config, _state(config), extra=extra)
    model = Llama.from_gguf(tmp_path / "f.gguf")
    assert model.config.rope_factor == 4.0
    cos, sin = model.rope_rows(8)
    plain = rope_tables(8, config.head_dim, config.rope_base)
    np.testing.assert_allclose(cos.numpy()[4], plain[0][1], atol=1e-7)  # position 4 turns as 1 did
    np.testing.assert_allclose(sin.numpy()[4], plain[1][1], atol=1e-7)


@pytest.mark.parametrize(
    "config", [GEMMA2, dataclasses.replace(GEMMA3, n_layers=2)], ids=["gemma2", "gemma3"]
)
def test_quantized_gemma_gguf_on_8_bit_activations(tmp_path, config):
    """A Q8_0 Gemma file: the model from the file equals the same rounded weights given by name, and runs
    on 8-bit activations close to f32 ones. (Two layers: the error grows with depth, faster than Llama's
    as the norms after attention and MLP scale their outputs up: 1.6% of the largest logit with two Gemma
    3 layers, 3.3% with six, against 2.1% and 1.3% for Qwen3.)"""
    rng = np.random.default_rng(0)
    with vg.abstract():
        shapes = {k: t.shape for k, t in Gemma(config).state_dict().items()}
    state = {k: rng.normal(1 if "norm" in k else 0, 0.1, s).astype(np.float32) for k, s in shapes.items()}
    arch = "gemma2" if config.attn_softcap else "gemma3"
    extra = {"attention.sliding_window": 32}
    if arch == "gemma2":
        extra |= {
            "attn_logit_softcapping": config.attn_softcap,
            "final_logit_softcapping": config.final_softcap,
        }
    _write(tmp_path / "m.gguf", arch, config, state, extra=extra)
    model = Gemma.from_gguf(tmp_path / "m.gguf")
    assert model.config.attn_softcap == config.attn_softcap and model.config.local_rope_base == (
        config.local_rope_base and 10000.0
    )
    reader = {t.name: t for t in gguf.GGUFReader(str(tmp_path / "m.gguf")).tensors}
    rounded = {
        k: gguf.quants.dequantize(
            reader[_gguf_name(k, GEMMA_NAMES)].data, reader[_gguf_name(k, GEMMA_NAMES)].tensor_type
        )
        for k in state
    }
    unfused = dataclasses.replace(model.config, fused=False)
    reference = Gemma.from_state(unfused, {k: v.reshape(state[k].shape) for k, v in rounded.items()})
    ids = np.array([[1, 5, 9, 2, 33, 7, 0, 39]])
    expected = reference(ids).numpy()
    np.testing.assert_allclose(model(ids).numpy(), expected, rtol=1e-5, atol=1e-5)
    q8 = Gemma.from_gguf(tmp_path / "m.gguf", activations="q8")
    cache = q8.new_cache()
    got = [q8(ids[:, :3], cache).numpy()] + [q8(ids[:, i : i + 1], cache).numpy() for i in range(3, 8)]
    assert 0 < np.abs(np.concatenate(got, 1) - expected).max() < 0.03 * np.abs(expected).max()


def test_a_user_defined_end_of_turn_ends_a_text(tmp_path):
    """Gemma's files mark <end_of_turn> user-defined (type 4), not control: it still ends a reply."""
    path = _sp_gguf(tmp_path / "sp.gguf", "gemma3", extra_tokens={"<end_of_turn>": 4})
    tok = Tokenizer.from_gguf(path)
    end = tok.backend.token_to_id("<end_of_turn>")
    assert end in tok.end_ids and end not in tok.special_ids and tok.encode("a<end_of_turn>")[-1] == end
