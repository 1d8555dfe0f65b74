"""LoRA on a Llama decoder, and the fine-tuned model's weights out again.

`add_lora(model, targets, r, alpha)` freezes the model and puts an adapter (nn/lora.py) on each targeted
projection, named as Hugging Face and PEFT name them (`q_proj`, ..., `down_proj`); in a GGUF model's fused
q/k/v and gate/up matrices the adapter covers its projection's rows. `to_f32(model)` makes every quantized
matrix (a fused one of mixed formats too) a trainable f32 one (`--full`). `gguf_weights` gives the weights
under llama.cpp's tensor names with the adapters merged (for a GGUF export), `peft_adapters` the adapters
under PEFT's names, rows in Hugging Face's half-split RoPE order.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..modes import abstract
from ..nn import Embedding, Linear, Module, RMSNorm
from ..nn.lora import LoRALinear, TrainingQLinear, check_rank
from ..nn.quant import QEmbedding, QLinear, QLinearGroup
from ..ops import from_numpy
from ..ops.quant import dequantize
from .llama import _BLOCK, _FUSED, _GLOBAL, Llama

TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
DEFAULT_TARGETS = ("q_proj", "v_proj")  # PEFT's default for Llama models
PEFT_PREFIX = "base_model.model.model."


def check_targets(targets: Iterable[str]) -> tuple[str, ...]:
    """The target projections, each one of TARGETS, at least one, no repeats."""
    targets = tuple(targets)
    unknown = [t for t in targets if t not in TARGETS]
    if unknown or not targets or len(set(targets)) != len(targets):
        raise ValueError(
            f"LoRA targets must be distinct names among {', '.join(TARGETS)}, "
            f"got {', '.join(targets) or '(none)'}"
        )
    return targets


def _projections(model: Llama) -> list[tuple[str, list[tuple[str, int]]]]:
    """(path of a linear layer inside a block, its parts (projection name, rows) in order)."""
    c = model.config
    q, kv = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    if c.fused:
        return [
            ("self_attn.qkv_proj", [("q_proj", q), ("k_proj", kv), ("v_proj", kv)]),
            ("self_attn.o_proj", [("o_proj", c.dim)]),
            ("mlp.gate_up_proj", [("gate_proj", c.ffn_dim), ("up_proj", c.ffn_dim)]),
            ("mlp.down_proj", [("down_proj", c.dim)]),
        ]
    rows = {"q_proj": q, "k_proj": kv, "v_proj": kv, "o_proj": c.dim}
    rows |= {"gate_proj": c.ffn_dim, "up_proj": c.ffn_dim, "down_proj": c.dim}
    return [(f"{'self_attn' if n in TARGETS[:4] else 'mlp'}.{n}", [(n, r)]) for n, r in rows.items()]


def _set(root: Module, path: str, module: Module) -> None:
    *owner, attr = path.split(".")
    setattr(functools.reduce(getattr, owner, root), attr, module)


def add_lora(model: Llama, targets: Iterable[str], r: int, alpha: float) -> Llama:
    """Freeze `model` and adapt its `targets` projections in every block (A drawn from the default
    generator, block by block, in TARGETS' order); its quantized layers with f32 activations become
    TrainingQLinear (faster on a step's many rows). Returns the model."""
    targets = check_targets(targets)
    check_rank(r, alpha)
    model.requires_grad_(False)
    for name, module in list(model.named_modules()):
        if type(module) is QLinear and module.activations == "f32":
            _set(model, name, TrainingQLinear.of(module))
    for block in model.layers:
        for path, parts in _projections(model):
            if any(name in targets for name, _ in parts):
                base = functools.reduce(getattr, path.split("."), block)
                _set(block, path, LoRALinear(base, parts, targets, r, alpha))
    return model


def to_f32(model: Llama) -> Llama:
    """Every quantized matrix of `model` made an f32 parameter (dequantized), every parameter trainable;
    a tied output matrix stays tied (the embedding's)."""
    if model.config.tie_embeddings:
        model.lm_head = None  # the logits are then norm(x) @ embed_tokens.weight.T
    replaced: list[str] = []
    for name, module in list(model.named_modules()):
        if any(name.startswith(f"{r}.") for r in replaced):  # a part of a group already made one Linear
            continue
        if isinstance(module, QLinear | QLinearGroup | QEmbedding):
            values = dense(module)
            rows, cols = values.shape
            with abstract():
                embedding = isinstance(module, QEmbedding)
                new = Embedding(rows, cols) if embedding else Linear(cols, rows, bias=False)
            new.weight = from_numpy(values).requires_grad_(True)
            _set(model, name, new)
            replaced.append(name)
    return model.requires_grad_(True)


# the weights out ------------------------------------------------------------------------------------
def interleaved_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """q/k rows from Hugging Face's half-split RoPE order to llama.cpp's interleaved one."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def half_split_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """The inverse of `interleaved_rows`."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def dense(module: Module) -> np.ndarray:
    """The f32 weight a layer applies: a quantized one dequantized, a LoRA layer's base plus its adapters
    (added in f64, rounded once)."""
    if isinstance(module, LoRALinear):
        return (dense(module.base).astype(np.float64) + module.delta()).astype(np.float32)
    if isinstance(module, QLinearGroup):
        return np.concatenate([dense(part) for part in module.parts])
    if isinstance(module, QLinear):
        return dequantize(module.weight.numpy(), module.qtype, (module.out_features, module.in_features))
    if isinstance(module, QEmbedding):
        return dequantize(module.weight.numpy(), module.qtype, (module.num_embeddings, module.embedding_dim))
    if isinstance(module, Linear | Embedding | RMSNorm):
        return np.array(module.weight.detach().numpy(), dtype=np.float32)
    raise TypeError(f"dense: no weight to read from a {type(module).__name__}")


def _projection_rows(model: Llama, block: Module, path: str) -> np.ndarray:
    """The rows of projection `path` ("self_attn.q_proj", ...) of a block, fused or not, in the model's
    row order."""
    owner, attr = path.split(".")
    module = getattr(getattr(block, owner), attr, None)
    if module is not None:
        return dense(module)
    fused = next(f for f, members in _FUSED.items() if path in members)
    start = 0
    for name, rows in dict(_projections(model))[fused]:
        if f"{owner}.{name}" == path:
            return dense(functools.reduce(getattr, fused.split("."), block))[start : start + rows]
        start += rows
    raise KeyError(path)


def gguf_weights(model: Llama, names: Iterable[str]) -> dict[str, np.ndarray]:
    """The model's f32 weights (adapters merged) under llama.cpp's tensor `names` (a GGUF file's, in its
    order): q/k rows in the interleaved RoPE order."""
    c = model.config
    out = {}
    for name in names:
        stem, *_ = name.rsplit(".", 1)
        if stem in _GLOBAL:
            ours = _GLOBAL[stem]
            module = model.lm_head if ours == "lm_head" else getattr(model, ours)
            out[name] = dense(module if module is not None else model.embed_tokens)
            continue
        _, i, part = stem.split(".")
        block = model.layers[int(i)]
        path = _BLOCK[part]
        w = dense(functools.reduce(getattr, path.split("."), block)) if "norm" in part else None
        if w is None:
            w = _projection_rows(model, block, path)
            if not c.rope_interleaved and path in ("self_attn.q_proj", "self_attn.k_proj"):
                w = interleaved_rows(w, c.n_heads if path.endswith("q_proj") else c.n_kv_heads)
        out[name] = w
    return out


def lora_layers(model: Module) -> list[tuple[str, LoRALinear]]:
    return [(n, m) for n, m in model.named_modules() if isinstance(m, LoRALinear)]


def peft_adapters(model: Llama) -> dict[str, np.ndarray]:
    """The adapters under PEFT's names (`base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`),
    q/k rows of B in Hugging Face's half-split RoPE order, f32."""
    c = model.config
    out = {}
    for path, layer in lora_layers(model):
        owner = path.rsplit(".", 1)[0]  # layers.N.self_attn
        for name, adapter in layer.adapters.items():
            b = adapter.lora_B.detach().numpy()
            if c.rope_interleaved and name in ("q_proj", "k_proj"):
                b = half_split_rows(b, c.n_heads if name == "q_proj" else c.n_kv_heads)
            key = f"{PEFT_PREFIX}{owner}.{name}"
            out[f"{key}.lora_A.weight"] = np.array(adapter.lora_A.detach().numpy())
            out[f"{key}.lora_B.weight"] = np.ascontiguousarray(b)
    return out


def adapter_config(model: Llama, base: str) -> dict[str, Any]:
    """PEFT's adapter_config.json for the model's adapters."""
    layers = lora_layers(model)
    first = next(iter(layers[0][1].adapters.values()))
    targets = sorted({name for _, layer in layers for name in layer.adapters}, key=TARGETS.index)
    return {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": base,
        "r": first.r,
        "lora_alpha": first.alpha,
        "lora_dropout": 0.0,
        "target_modules": targets,
        "bias": "none",
        "fan_in_fan_out": False,
        "use_rslora": False,
        "init_lora_weights": True,
        "inference_mode": True,
    }
