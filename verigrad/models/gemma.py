"""Gemma 2 and Gemma 3 decoders from GGUF files: Llama's decoder (models/llama.py) with Gemma's changes.

- the token embedding scaled by sqrt(d);
- RMSNorm multiplying by (1 + w): llama.cpp stores 1 + w in the file, so the norms are Llama's;
- a norm after attention and one after the MLP besides the ones before (`post_attention_layernorm`,
  `pre_feedforward_layernorm`, `post_feedforward_layernorm`: Hugging Face's names);
- GeGLU: down(gelu_tanh(gate(x)) * up(x));
- queries scaled by 1/sqrt(head size) (llama.cpp's rule; 1/sqrt(d / heads) for the 27B models);
- Gemma 2: attention scores and the final logits soft-capped, cap * tanh(x / cap);
- Gemma 3: Q/K RMSNorm per head, and RoPE base 10000 on the sliding-window layers (all but every
  sixth), the file's base and linear scaling (4B and larger) on the others, as llama.cpp does.

Sliding-window layers: the context is limited to the window (`llama.gguf_config`), where full
attention is the same.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtypes import f64
from ..errors import WeightFileError
from ..io.gguf import GGUFFile
from ..nn import Module, RMSNorm
from ..nn import functional as F
from ..ops import arange, attention, concat, full, softmax, where
from ..ops.composite.attention import scale_tensor
from ..tensor import Tensor
from ._decoder import Mixed, Ragged, float_window, window_attention
from .llama import _BLOCK, Llama, LlamaAttention, LlamaConfig, LlamaMLP, gguf_config, rope_tables

GEMMA_VARIANTS: dict[str, dict[str, bool]] = {"gemma2": {}, "gemma3": {"qk_norm": True}}
LOCAL_ROPE_BASE = 10000.0  # Gemma 3's sliding-window layers (not in the file; llama.cpp's value)
GLOBAL_EVERY = 6  # Gemma 3: every sixth layer attends globally
_LARGE = {"gemma2": 46, "gemma3": 62}  # the 27B models' layer counts (their queries scale by d / heads)


@dataclass(frozen=True)
class GemmaConfig(LlamaConfig):
    """Llama's sizes and Gemma's additions."""

    query_scale: float | None = None  # None: 1/sqrt(head_dim)
    attn_softcap: float | None = None  # Gemma 2
    final_softcap: float | None = None  # Gemma 2
    local_rope_base: float | None = None  # Gemma 3: the sliding-window layers' RoPE base


def _softcapped(x: Tensor, cap: float | None) -> Tensor:
    return x if cap is None else (x / cap).tanh() * cap


class GemmaMLP(LlamaMLP):
    act = staticmethod(lambda x: F.gelu(x, approximate="tanh"))


class GemmaAttention(LlamaAttention):
    def __init__(self, config: GemmaConfig):
        super().__init__(config)
        d = config.head_dim
        self.scale = config.query_scale or (d**-0.5 if isinstance(d, int) else None)  # None: 1/sqrt(d)
        self.softcap = config.attn_softcap

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, past: tuple | None) -> Tensor:
        if self.softcap is None:
            s = self.scale
            return attention(q, k, v, scale=s) if past is None else window_attention(q, k, v, *past, scale=s)
        if past is not None and isinstance(past[2], Ragged):
            raise NotImplementedError("Gemma 2's soft-capped attention takes no ragged step (ragged_steps)")
        if past is not None and isinstance(past[2], Mixed):  # a mixed step's tokens, by sequence
            return past[2].split(lambda *a: self._attend(*a[:3], a[3:]), q, k, v, *past[:2])
        # soft-capped scores: the attention written in ops, over the window (if any) and the new keys
        b, h, t, d = q.shape
        kv = self.n_kv_heads
        if past is None:
            keys_t, values = k.mT, v
            positions = arange(t)
            bias = where(positions[:, None] >= positions[None, :], 0.0, float("-inf"))
        else:
            (past_kt, past_v), bias = float_window(*past[:2]), past[2]
            if bias.ndim == 3:  # each sequence's own [B, T, S] (a batched step's rows)
                bias = bias.reshape(b, 1, 1, t, bias.shape[2])
            keys_t, values = concat(past_kt, k.mT, axis=3), concat(past_v, v, axis=2)
        scores = q.reshape(b, kv, h // kv, t, d) @ keys_t.unsqueeze(2)  # [B, KV, G, T, S]
        scale = scale_tensor(self.scale, d, q.dtype)
        p = softmax(_softcapped(scores * scale, self.softcap) + bias, axis=-1)
        return (p @ values.unsqueeze(2)).reshape(b, h, t, d)


class GemmaBlock(Module):
    def __init__(self, config: GemmaConfig, local: bool):
        super().__init__()
        half = config.head_dim // 2  # Gemma 3's tables: [global | local] angles; a layer reads its half
        self.rope_half = (
            None if config.local_rope_base is None else slice(half, None) if local else slice(None, half)
        )
        self.input_layernorm = RMSNorm(config.dim, eps=config.norm_eps)
        self.self_attn = GemmaAttention(config)
        self.post_attention_layernorm = RMSNorm(config.dim, eps=config.norm_eps)
        self.pre_feedforward_layernorm = RMSNorm(config.dim, eps=config.norm_eps)
        self.mlp = GemmaMLP(config)
        self.post_feedforward_layernorm = RMSNorm(config.dim, eps=config.norm_eps)

    def forward(self, x: Tensor, rope: Any, past: tuple | None) -> tuple[Tensor, Tensor, Tensor]:
        cos, sin = rope
        if self.rope_half is not None:
            cos, sin = cos[..., self.rope_half], sin[..., self.rope_half]
        y, k, v = self.self_attn(x, (cos, sin), past, self.input_layernorm)
        x = x + self.post_attention_layernorm(y)
        return x + self.post_feedforward_layernorm(self.mlp(x, self.pre_feedforward_layernorm)), k, v


class Gemma(Llama):
    """`Gemma.from_gguf(path)` loads a gemma2 or gemma3 GGUF file (see `Llama.from_gguf`)."""

    config: GemmaConfig
    GGUF_BLOCK = _BLOCK | {
        "post_attention_norm": "post_attention_layernorm",
        "ffn_norm": "pre_feedforward_layernorm",
        "post_ffw_norm": "post_feedforward_layernorm",
    }

    @property
    def ragged_steps(self) -> bool:  # type: ignore[override]
        """Soft-capped attention (Gemma 2) is written in ops, by sequence: no ragged step."""
        return self.config.attn_softcap is None

    def _block(self, config: LlamaConfig, index: int) -> Module:
        return GemmaBlock(config, local=(index + 1) % GLOBAL_EVERY != 0)  # type: ignore[arg-type]

    def _embed(self, ids: Tensor) -> Tensor:
        d, x = self.config.dim, self.embed_tokens(ids)
        return x * (math.sqrt(d) if isinstance(d, int) else full((), d, dtype=f64).sqrt().cast(x.dtype))

    def _rope_tables(self, rows: int) -> tuple[np.ndarray, np.ndarray]:
        """Gemma 3's tables hold the global base's angles, then the local base's, side by side."""
        c = self.config
        cos, sin = rope_tables(rows, c.head_dim, c.rope_base, c.rope_factor)  # scaled: the global layers
        if c.local_rope_base is None:
            return cos, sin
        local = rope_tables(rows, c.head_dim, c.local_rope_base)
        return np.concatenate([cos, local[0]], axis=1), np.concatenate([sin, local[1]], axis=1)

    def _logits(self, x: Tensor) -> Tensor:
        return _softcapped(super()._logits(x), self.config.final_softcap)

    @staticmethod
    def config_from_gguf(gguf: GGUFFile) -> GemmaConfig:
        base = gguf_config(gguf, GEMMA_VARIANTS)
        arch = gguf.arch
        caps = {}
        for key, field in (
            ("attn_logit_softcapping", "attn_softcap"),
            ("final_logit_softcapping", "final_softcap"),
        ):
            value = gguf.get(f"{arch}.{key}")
            if value is not None and arch == "gemma2":
                caps[field] = _positive(gguf, f"{arch}.{key}", value)
        large = base.n_layers == _LARGE[arch]
        return GemmaConfig(
            **dataclasses.asdict(base),
            query_scale=(base.dim / base.n_heads) ** -0.5 if large else None,
            local_rope_base=LOCAL_ROPE_BASE if arch == "gemma3" else None,
            **caps,
        )


def _positive(gguf: GGUFFile, key: str, value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < math.inf:
        raise WeightFileError(f"{gguf.path}: {key} is {value!r:.60}; it must be a positive number")
    return float(value)
