"""MultiheadAttention, as PyTorch's."""

from __future__ import annotations

import math
from typing import Any

from ..ops import arange, zeros
from ..tensor import Tensor
from . import functional as F
from .init import uniform
from .linear import Linear
from .module import Module, check_dtypes, factory_dtype


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name of the attention's output projection, a Linear (its repr shows the name)."""


class MultiheadAttention(Module):
    """PyTorch's multi-head attention: in_proj_weight [3E, E] (and in_proj_bias) project query, key and
    value; heads of E / num_heads; out_proj a Linear(E, E). forward(query, key, value,
    key_padding_mask=None, need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False)
    gives (output, weights): masks as PyTorch's (a bool one is True where a key may NOT be attended to, a
    float one is added); sequences first ([L, N, E]) unless batch_first; weights averaged over heads
    unless average_attn_weights=False, None without need_weights. In training, `dropout` zeroes
    attention weights (those returned too, as PyTorch's)."""

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        dropout: float = 0.0,
        bias: bool = True,
        add_bias_kv: bool = False,
        add_zero_attn: bool = False,
        kdim: int | None = None,
        vdim: int | None = None,
        batch_first: bool = False,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype("MultiheadAttention", device, dtype)
        if add_bias_kv or add_zero_attn or kdim not in (None, embed_dim) or vdim not in (None, embed_dim):
            raise NotImplementedError(
                "MultiheadAttention: add_bias_kv, add_zero_attn and a kdim or vdim other than embed_dim are "
                "not supported"
            )
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiheadAttention: dropout must be in [0, 1], got {dropout}")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not a multiple of num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.batch_first = embed_dim, num_heads, batch_first
        self.dropout = dropout
        bound = math.sqrt(6.0 / (embed_dim + 3 * embed_dim))  # PyTorch's xavier_uniform_ of [3E, E]
        self.in_proj_weight = uniform((3 * embed_dim, embed_dim), bound, dtype)
        self.in_proj_bias = zeros(3 * embed_dim, dtype=dtype, requires_grad=True) if bias else None
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if bias:
            self.out_proj.bias = zeros(embed_dim, dtype=dtype, requires_grad=True)

    def forward(
        self,
        query: Tensor,
        key: Tensor,
        value: Tensor,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = True,
        attn_mask: Tensor | None = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        check_dtypes(
            "MultiheadAttention", self.in_proj_weight, ("query", query), ("key", key), ("value", value)
        )
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        length, batch, size = query.shape[0], query.shape[1], key.shape[0]
        heads, e = self.num_heads, self.embed_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        projected = []
        for i, t in enumerate((query, key, value)):
            p = t @ w[i * e : (i + 1) * e].mT
            if b is not None:
                p = p + b[i * e : (i + 1) * e]
            rows = p.shape[0]
            projected.append(p.reshape(rows, batch * heads, e // heads).transpose(0, 1))  # [N*H, L, D]
        q, k, v = projected
        scores = (q @ k.mT) * (1.0 / math.sqrt(e // heads))  # [N*H, L, S]
        if is_causal and attn_mask is None:
            attn_mask = arange(0, length).unsqueeze(-1) < arange(0, size)  # True: not attended to
        if attn_mask is not None:
            if attn_mask.ndim == 3:
                attn_mask = attn_mask.reshape(batch * heads, length, size)
            scores = _masked(scores, attn_mask)
        if key_padding_mask is not None:
            padding = key_padding_mask.reshape(batch, 1, 1, size)
            scores = _masked(scores.reshape(batch, heads, length, size), padding).reshape(
                batch * heads, length, size
            )
        weights = F.softmax(scores, -1)
        if self.dropout and self.training:
            weights = F.dropout(weights, self.dropout, training=True)
        out = (weights @ v).transpose(0, 1).reshape(length, batch, e)
        out = self.out_proj(out)
        if unbatched:
            out = out.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        weights = weights.reshape(batch, heads, length, size)
        if average_attn_weights:
            weights = weights.mean(1)
        return out, weights.squeeze(0) if unbatched else weights


def _masked(scores: Tensor, mask: Tensor) -> Tensor:
    """PyTorch's attention masks: a bool one is True where a key is NOT attended to; a float one adds."""
    if mask.dtype.name == "bool":
        return scores.masked_fill(mask, -math.inf)
    return scores + mask
