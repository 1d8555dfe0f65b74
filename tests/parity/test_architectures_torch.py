"""Llama, Mistral, Qwen2 and Qwen3 against transformers: a tiny random model of each (2 layers, width 64),
written by the test to a GGUF file (F32 tensors, llama.cpp's names and layouts, a byte-level BPE
tokenizer) that transformers and verigrad both load: the logits agree within 1e-4 and greedy decoding
on verigrad's KV cache picks the same 16 tokens. The same models saved by transformers as Hugging Face
folders (`save_pretrained`) load through the catalog with the same logits."""

from __future__ import annotations

import json

import gguf
import numpy as np
import pytest
import torch
import transformers
from tokenizers import Tokenizer as HFTokenizer
from tokenizers import decoders, models, pre_tokenizers

from verigrad.io.tokenizer import Tokenizer, byte_alphabet
from verigrad.models.catalog import load_gguf, load_language_model

SIZES = {"vocab_size": 300, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2}
SIZES |= {"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64}
SIZES |= {"rms_norm_eps": 1e-6, "rope_theta": 5000.0}
# (GGUF architecture, transformers config, extra config): transformers reads Mistral from a "llama" GGUF
# whose general.name says mistral (llama.cpp writes Mistral 7B so); it takes Qwen3's head size from its
# config's default (128), not from qwen3.attention.key_length, so the test's Qwen3 has heads of 128.
ARCHITECTURES = {
    "llama": ("llama", transformers.LlamaConfig, {}),
    "mistral": ("llama", transformers.MistralConfig, {"head_dim": 16, "sliding_window": None}),
    "qwen2": ("qwen2", transformers.Qwen2Config, {}),
    "qwen3": ("qwen3", transformers.Qwen3Config, {"num_attention_heads": 2, "num_key_value_heads": 1}),
    "phi3": ("phi3", transformers.Phi3Config, {"pad_token_id": 0}),
    # Gemma: transformers reads neither query_pre_attn_scalar nor the soft-caps from the file (it keeps its
    # defaults: 256, 50 and 30), so the test's heads are of 256 (llama.cpp scales queries by the head size)
    # and its caps the defaults; six Gemma 3 layers: five local (RoPE base 10000), one global
    "gemma2": ("gemma2", transformers.Gemma2Config, {"num_attention_heads": 2, "num_key_value_heads": 1}),
    "gemma3": ("gemma3", transformers.Gemma3TextConfig, {"num_attention_heads": 2, "num_key_value_heads": 1}),
}
GEMMA = {"head_dim": 256, "sliding_window": 64, "pad_token_id": 0, "rope_theta": 100000.0}
ARCHITECTURES["gemma2"][2].update(GEMMA)
ARCHITECTURES["gemma3"][2].update(GEMMA, num_hidden_layers=6)
SENTENCEPIECE = ("mistral", "phi3", "gemma2", "gemma3")  # the others' files get a byte-level BPE one
GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
BLOCK = {  # Hugging Face's names in a block -> llama.cpp's
    "input_layernorm.weight": "attn_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "self_attn.q_norm.weight": "attn_q_norm.weight",
    "self_attn.k_norm.weight": "attn_k_norm.weight",
}
BLOCK |= {f"self_attn.{x}_proj.{p}": f"attn_{x}.{p}" for x in "qkv" for p in ("weight", "bias")}
BLOCK |= {"self_attn.qkv_proj.weight": "attn_qkv.weight", "mlp.gate_up_proj.weight": "ffn_up.weight"}  # Phi-3
GEMMA_BLOCK = BLOCK | {
    "post_attention_layernorm.weight": "post_attention_norm.weight",
    "pre_feedforward_layernorm.weight": "ffn_norm.weight",
    "post_feedforward_layernorm.weight": "post_ffw_norm.weight",
}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ s", "r e", "1 2"]
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
TEXTS = ["The theory is here", "  spaced   out\n\nlines", "12 123 1234 digits", "café 日本 😀"]
TEXTS += ["x<|im_end|>y"]


def _random_model(name: str, tied: bool = True) -> transformers.PreTrainedModel:
    _, config_class, extra = ARCHITECTURES[name]
    ends = (1, 2) if name in SENTENCEPIECE else (297, 297)  # <s>, </s>; <|endoftext|>
    config = config_class(
        **(SIZES | extra), tie_word_embeddings=tied, bos_token_id=ends[0], eos_token_id=ends[1]
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config).eval()
    with torch.no_grad():  # weights large enough that the logits differ by more than rounding
        for key, p in model.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p) if "norm" in key else 0.15 * torch.randn_like(p))
    return model


def _permuted(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert script for llama: q/k rows reordered from half-split to interleaved pairs."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _tokens() -> list[str]:
    tokens = list(byte_alphabet().values())
    tokens += ["".join(m.split(" ")) for m in MERGES]
    tokens += [f"<unused{i}>" for i in range(SIZES["vocab_size"] - len(tokens) - len(SPECIALS))]
    return tokens + SPECIALS


def _sentencepiece(gemma: bool = False) -> tuple[list[str], list[float], list[int]]:
    """A SentencePiece vocabulary as Llama 2 and Mistral files hold it: <unk>, <s>, </s>, 256 byte tokens,
    then pieces with "▁" for spaces and scores (no merges). Gemma's writes a token of spaces with
    spaces."""
    pieces = ["▁", "▁t", "he", "▁the", "▁a", "in", "er", "on", "▁th", "▁is", "is", "▁h", "re", "12"]
    pieces += ["ca", "fé", "▁ca", "▁café", "▁▁", "▁▁▁▁", "e", "t", "h", "a", "i", "n", "r", "o", "s", "1"]
    pieces += ["2", "c", "f", "é", "T", "x", "y", "日", "本", "▁T", "▁The"]
    tokens = ["<unk>", "<s>", "</s>", *(f"<0x{b:02X}>" for b in range(256)), *pieces]
    assert len(tokens) == SIZES["vocab_size"]
    if gemma:
        tokens = [" " * len(t) if set(t) == {"▁"} and len(t) > 1 else t for t in tokens]
    return (
        tokens,
        [0.0] * 259 + [-float(i) for i in range(len(pieces))],
        [2, 3, 3] + [6] * 256 + [1] * len(pieces),
    )


def write_gguf(model: transformers.PreTrainedModel, name: str, path) -> None:
    """The model as llama.cpp's convert script writes it, in F32, with a byte-level BPE tokenizer."""
    arch, _, _ = ARCHITECTURES[name]
    c = model.config
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(name)
    for key, value in {
        "context_length": c.max_position_embeddings,
        "embedding_length": c.hidden_size,
        "block_count": c.num_hidden_layers,
        "feed_forward_length": c.intermediate_size,
        "attention.head_count": c.num_attention_heads,
        "attention.head_count_kv": c.num_key_value_heads,
        "attention.key_length": head_dim,
        "attention.value_length": head_dim,
    }.items():
        w.add_uint32(f"{arch}.{key}", value)
    w.add_float32(f"{arch}.attention.layer_norm_rms_epsilon", c.rms_norm_eps)
    rope = c.rope_parameters.get("full_attention", c.rope_parameters)  # Gemma 3's: per kind of layer
    w.add_float32(f"{arch}.rope.freq_base", rope["rope_theta"])
    gemma = arch.startswith("gemma")
    if gemma:
        w.add_uint32(f"{arch}.attention.sliding_window", c.sliding_window)
    if arch == "gemma2":
        w.add_float32("gemma2.attn_logit_softcapping", c.attn_logit_softcapping)
        w.add_float32("gemma2.final_logit_softcapping", c.final_logit_softcapping)
    if name in SENTENCEPIECE:  # as in Mistral's, Llama 2's and Phi-3's files
        tokens, scores, types = _sentencepiece(gemma)
        w.add_string("tokenizer.ggml.model", "llama")
        w.add_array("tokenizer.ggml.tokens", tokens)
        w.add_array("tokenizer.ggml.scores", scores)
        w.add_array("tokenizer.ggml.token_type", types)
        w.add_uint32("tokenizer.ggml.bos_token_id", tokens.index("<s>"))
        w.add_uint32("tokenizer.ggml.eos_token_id", tokens.index("</s>"))
        w.add_uint32("tokenizer.ggml.padding_token_id", 0)
    else:
        tokens = _tokens()
        w.add_string("tokenizer.ggml.model", "gpt2")
        w.add_string("tokenizer.ggml.pre", "qwen2" if arch.startswith("qwen") else "llama-bpe")
        w.add_array("tokenizer.ggml.tokens", tokens)
        w.add_array("tokenizer.ggml.token_type", [3 if t in SPECIALS else 1 for t in tokens])
        w.add_array("tokenizer.ggml.merges", MERGES)
        w.add_uint32("tokenizer.ggml.bos_token_id", tokens.index("<|endoftext|>"))
        w.add_uint32("tokenizer.ggml.eos_token_id", tokens.index("<|im_end|>"))
    w.add_string("tokenizer.chat_template", TEMPLATE)
    for key, value in model.state_dict().items():
        array = value.numpy().astype(np.float32)
        if key == "lm_head.weight":
            if not c.tie_word_embeddings:
                w.add_tensor("output.weight", array)
            continue
        if gemma and "norm" in key:  # llama.cpp stores Gemma's norms as 1 + w
            array = array + 1
        if key in GLOBAL:
            w.add_tensor(GLOBAL[key], array)
            continue
        _, _, i, *rest = key.split(".")
        stem = ".".join(rest)
        if arch == "llama" and stem in ("self_attn.q_proj.weight", "self_attn.k_proj.weight"):
            heads = c.num_attention_heads if "q_proj" in stem else c.num_key_value_heads
            array = _permuted(array, heads)
        w.add_tensor(f"blk.{i}.{(GEMMA_BLOCK if gemma else BLOCK)[stem]}", array)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _theirs_logits(model, ids) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


def _greedy(model, prompt: list[int], steps: int) -> list[int]:
    """verigrad's greedy tokens: the prompt in one step on the cache, then a token a step."""
    cache = model.new_cache(capacity=len(prompt) + steps)
    out, ids = [], [prompt]
    for _ in range(steps):
        out.append(int(model.last_logits(np.array(ids), cache)[0].argmax()))
        ids = [[out[-1]]]
    return out


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_gguf_model_matches_transformers(tmp_path, name, tied):
    original = _random_model(name, tied)
    write_gguf(original, name, tmp_path / "tiny.gguf")
    # transformers maps the "mistral" file to a model gguf-py has no tensor names for, and leaves an untied
    # Gemma's output.weight unread (Gemma files tie it): there the test compares with the model written
    if name == "mistral" or (name.startswith("gemma") and not tied):
        theirs = original
    else:
        theirs = transformers.AutoModelForCausalLM.from_pretrained(
            tmp_path, gguf_file="tiny.gguf", dtype=torch.float32
        ).eval()
        assert type(theirs) is type(original)
    ours, tokenizer = load_gguf(tmp_path / "tiny.gguf", activations="f32")
    ids = np.random.default_rng(1).integers(0, SIZES["vocab_size"], (2, 12))
    expected = _theirs_logits(theirs, ids)
    np.testing.assert_allclose(_theirs_logits(original, ids), expected, rtol=0, atol=1e-5)  # read right
    np.testing.assert_allclose(ours(ids).numpy(), expected, rtol=0, atol=1e-4)
    prompt = tokenizer.encode("The theory is here")
    with torch.no_grad():
        generated = theirs.generate(
            torch.tensor([prompt]), max_new_tokens=16, min_new_tokens=16, do_sample=False
        )
    assert _greedy(ours, prompt, 16) == generated[0, len(prompt) :].tolist()


@pytest.mark.parametrize("name", ["llama", "qwen2", "mistral", "phi3", "gemma3"])
def test_gguf_tokenizer_matches_transformers(tmp_path, name):
    write_gguf(_random_model(name), name, tmp_path / "tiny.gguf")
    theirs = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file="tiny.gguf")
    ours = Tokenizer.from_gguf(tmp_path / "tiny.gguf")
    for text in [*TEXTS, " hi", "", "Tx  y</s>z", "<s>The"]:
        ids = ours.encode(text)
        assert ids == theirs(text)["input_ids"], text
        assert ours.decode(ids) == theirs.decode(ids), text
        assert ours.decode(ids, skip_special=True) == theirs.decode(ids, skip_special_tokens=True), text
        ids = ours.encode(text, add_special=False)
        assert ids == theirs(text, add_special_tokens=False)["input_ids"], text
        assert ours.decode(ids) == theirs.decode(ids), text
    chat = [{"role": "user", "content": "hi"}]
    assert ours.apply_chat_template(chat) == theirs.apply_chat_template(
        chat, tokenize=False, add_generation_prompt=True
    )


# Hugging Face folders ----------------------------------------------------------------------------------
def _save_tokenizer_json(folder) -> None:
    tokens = _tokens()
    vocab = {t: i for i, t in enumerate(tokens)}
    backend = HFTokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) for m in MERGES]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(SPECIALS)
    backend.save(str(folder / "tokenizer.json"))


@pytest.mark.parametrize("shards", ["one file", "sharded"])
@pytest.mark.parametrize("name", [name for name in ARCHITECTURES if not name.startswith("gemma")])
def test_hugging_face_folder_matches_transformers(tmp_path, name, shards):
    theirs = _random_model(name, tied=shards == "one file")
    theirs.save_pretrained(tmp_path, max_shard_size="100KB" if shards == "sharded" else "1GB")
    assert (tmp_path / "model.safetensors.index.json").is_file() == (shards == "sharded")
    if name in SENTENCEPIECE:  # the tokenizer files transformers saves for its SentencePiece tokenizer
        (tmp_path / "gguf").mkdir()
        write_gguf(theirs, name, tmp_path / "gguf" / "t.gguf")
        transformers.AutoTokenizer.from_pretrained(tmp_path / "gguf", gguf_file="t.gguf").save_pretrained(
            tmp_path
        )
        reference = transformers.AutoTokenizer.from_pretrained(tmp_path)
    else:
        _save_tokenizer_json(tmp_path)
        reference = transformers.PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"))
    ours, tokenizer = load_language_model(tmp_path)
    ids = np.random.default_rng(2).integers(0, SIZES["vocab_size"], (2, 12))
    np.testing.assert_allclose(ours(ids).numpy(), _theirs_logits(theirs, ids), rtol=0, atol=1e-4)
    for text in [*TEXTS, " hi", ""]:
        expected = reference(text)["input_ids"]
        assert tokenizer.encode(text) == expected, text
        assert tokenizer.decode(expected) == reference.decode(expected), text
    config = json.loads((tmp_path / "config.json").read_text())
    assert tokenizer.eos_id == config["eos_token_id"]


def test_linear_rope_scaling_matches_transformers(tmp_path):
    """A Llama folder whose RoPE is linearly scaled (positions / 4), as transformers computes it."""
    parameters = {"rope_type": "linear", "factor": 4.0, "rope_theta": 5000.0}
    config = transformers.LlamaConfig(
        **(SIZES | {"rope_parameters": parameters}), bos_token_id=297, eos_token_id=297
    )
    torch.manual_seed(0)
    theirs = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for key, p in theirs.named_parameters():
            p.copy_(1 + 0.1 * torch.randn_like(p) if "norm" in key else 0.15 * torch.randn_like(p))
    theirs.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["rope_parameters"]["rope_type"] == "linear"
    _save_tokenizer_json(tmp_path)
    ours, _ = load_language_model(tmp_path)
    assert ours.config.rope_factor == 4.0
    ids = np.random.default_rng(3).integers(0, SIZES["vocab_size"], (1, 40))
    np.testing.assert_allclose(ours(ids).numpy(), _theirs_logits(theirs, ids), rtol=0, atol=1e-4)
