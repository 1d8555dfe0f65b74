"""Llama, Mistral, Qwen2, Qwen3 and Phi-3 from Hugging Face folders: `config.json`, `model.safetensors`
(or its shards and `model.safetensors.index.json`), every hyperparameter and tensor checked before the
model is built (`models/llama.py`'s decoder, Hugging Face's half-split RoPE; Phi-3's projections fused).

What the decoder does not implement is refused by name: RoPE scaling other than linear, RoPE on part of
a head, biases on the output or MLP projections, another activation than SiLU, Qwen's sliding-window
layers. Mistral's and
Phi-3's sliding window of W positions gives the same attention as full attention over at most W
positions, so the context is limited to W (a longer prompt or cache is refused, never silently computed
differently).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import WeightFileError
from ..io.gguf import shown
from ..io.hf import read_config, read_folder_tensors
from ..modes import abstract
from ._weights import MAX_CONTEXT, checked_integer, checked_real
from .gpt2 import MAX_LAYERS, MAX_WIDTH
from .llama import Llama, LlamaConfig

# model_type -> how it differs from Llama's decoder
FOLDER_VARIANTS: dict[str, dict[str, bool]] = {
    "llama": {},
    "mistral": {},
    "qwen2": {"qkv_bias": True},
    "qwen3": {"qk_norm": True},
    "phi3": {"fused": True},  # its qkv_proj and gate_up_proj are our fused matrices
}
_REQUIRED = ("model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
_REQUIRED += ("intermediate_size", "max_position_embeddings", "rms_norm_eps")


def folder_config(raw: dict[str, Any], path: Path) -> LlamaConfig:
    """The decoder's configuration from config.json's keys (`path` names the file in errors), each of the
    right type, in range and supported, before anything is allocated."""
    kind = raw["model_type"]
    if not isinstance(kind, str) or kind not in FOLDER_VARIANTS:
        raise WeightFileError(
            f"{path}: model_type {shown(kind)} is not supported (verigrad reads {', '.join(FOLDER_VARIANTS)}"
            " and gpt2 folders)"
        )
    width = checked_integer(path, "hidden_size", raw["hidden_size"], 1, MAX_WIDTH)
    heads = checked_integer(path, "num_attention_heads", raw["num_attention_heads"], 1, MAX_WIDTH)
    kv_heads = raw.get("num_key_value_heads")
    kv_heads = heads if kv_heads is None else checked_integer(path, "num_key_value_heads", kv_heads, 1, heads)
    if heads % kv_heads:
        raise WeightFileError(
            f"{path}: num_key_value_heads {kv_heads} does not divide num_attention_heads {heads}"
        )
    head_dim = raw.get("head_dim")
    if head_dim is None:
        if width % heads:
            raise WeightFileError(
                f"{path}: hidden_size {width} is not a multiple of num_attention_heads {heads}"
            )
        head_dim = width // heads
    head_dim = checked_integer(path, "head_dim", head_dim, 2, MAX_WIDTH)
    if head_dim % 2:
        raise WeightFileError(f"{path}: head_dim is {head_dim}; RoPE needs it even")
    context = checked_integer(path, "max_position_embeddings", raw["max_position_embeddings"], 1, MAX_CONTEXT)
    _refuse_unsupported(raw, path, kind)
    theta, factor = _rope(raw, path)
    window = raw.get("sliding_window") if kind in ("mistral", "phi3") else None
    if window is not None:  # full attention is the same as a window's over at most `window` positions
        context = min(context, checked_integer(path, "sliding_window", window, 1))
    return LlamaConfig(
        vocab_size=checked_integer(path, "vocab_size", raw["vocab_size"], 1, (1 << 31) - 1),
        dim=width,
        n_layers=checked_integer(path, "num_hidden_layers", raw["num_hidden_layers"], 1, MAX_LAYERS),
        n_heads=heads,
        n_kv_heads=kv_heads,
        head_dim=head_dim,
        ffn_dim=checked_integer(path, "intermediate_size", raw["intermediate_size"], 1, MAX_WIDTH),
        norm_eps=checked_real(path, "rms_norm_eps", raw["rms_norm_eps"], 1.0),
        rope_base=checked_real(path, "rope_theta", theta),
        rope_factor=checked_real(path, "rope_scaling factor", factor),
        context_length=context,
        tie_embeddings=raw.get("tie_word_embeddings", False) is True,
        **FOLDER_VARIANTS[kind],
    )


def _rope(raw: dict[str, Any], path: Path) -> tuple[Any, Any]:
    """RoPE's base and linear scaling factor, from `rope_parameters` (transformers 5) or `rope_theta` and
    `rope_scaling` (4.x), refusing any other scaling."""
    params = raw.get("rope_parameters")
    scaling = raw.get("rope_scaling")
    if isinstance(params, dict):
        scaling = params if params.get("rope_type", "default") != "default" else scaling
        theta = params.get("rope_theta", raw.get("rope_theta", 10000.0))
    else:
        theta = raw.get("rope_theta", 10000.0)
    rotated = params.get("partial_rotary_factor", 1.0) if isinstance(params, dict) else 1.0
    if raw.get("partial_rotary_factor", rotated) != 1.0:
        raise WeightFileError(
            f"{path}: partial_rotary_factor {shown(rotated)}: RoPE on part of a head is not supported"
        )
    kind = scaling.get("rope_type", scaling.get("type", "default")) if isinstance(scaling, dict) else None
    if scaling is not None and kind not in ("default", "linear"):
        raise WeightFileError(f"{path}: RoPE scaling {shown(scaling)} is not supported (only linear)")
    return theta, scaling.get("factor") if kind == "linear" else 1.0


def _refuse_unsupported(raw: dict[str, Any], path: Path, kind: str) -> None:
    if raw.get("hidden_act", "silu") != "silu":
        raise WeightFileError(
            f"{path}: hidden_act is {shown(raw['hidden_act'])}; verigrad's decoder uses silu"
        )
    for key in ("mlp_bias", "attention_bias") if kind != "qwen2" else ("mlp_bias",):
        if raw.get(key, False) is not False:
            raise WeightFileError(f"{path}: {key} is {shown(raw[key])}: biases there are not supported")
    if raw.get("use_sliding_window", False) is not False:
        raise WeightFileError(
            f"{path}: use_sliding_window is {shown(raw['use_sliding_window'])}: not supported"
        )


def load_llama_folder(folder: str | os.PathLike) -> Llama:
    """The model of a Hugging Face Llama, Mistral, Qwen2 or Qwen3 folder, every tensor checked (f32, f16 or
    bf16 in the file; f32 in memory). An `lm_head.weight` equal to the embedding is shared with it."""
    folder = Path(folder)
    raw = read_config(folder, required=_REQUIRED)
    config = folder_config(raw, folder / "config.json")
    with abstract():
        expected = {k: tuple(t.shape) for k, t in Llama(config).state_dict().items()}
    expected["lm_head.weight"] = (config.vocab_size, config.dim)
    arrays = read_folder_tensors(
        folder,
        expected,
        optional={"lm_head.weight"} if config.tie_embeddings else (),
        ignore=lambda name: name.endswith(".rotary_emb.inv_freq"),
        rename=lambda name: name.removeprefix("model."),
    )
    if config.tie_embeddings:  # transformers ties them whatever the file holds
        arrays.pop("lm_head.weight", None)
    return Llama.from_state(config, arrays, str(folder))
