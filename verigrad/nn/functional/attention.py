"""Attention, as in `torch.nn.functional`: scaled_dot_product_attention, and the rotary embedding of
queries and keys (rope)."""

from __future__ import annotations

import math

from ... import ops
from ...errors import ShapeError
from ...functions import all as all_of
from ...functions import repeat_interleave
from ...ops.composite.attention import scale_tensor
from ...shapes import DimLike, shape_text
from ...tensor import Tensor
from .dropout import dropout


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> Tensor:
    """softmax(q k^T * scale + mask) v over the last two axes ([..., Hq, L, E], [..., Hkv, S, E],
    [..., Hkv, S, Ev]), as PyTorch's: a bool mask keeps where True, a float mask is added; is_causal
    keeps key j <= query i (aligned at the top left; not with a mask); scale defaults to
    1/sqrt(E); dropout_p drops attention weights (always, as PyTorch's function); enable_gqa lets key and
    value have fewer heads, Hq a multiple of Hkv, each repeated Hq / Hkv times (query head h reads
    h // (Hq / Hkv)). A query whose keys are all masked gets zeros (PyTorch's safe softmax). A causal
    [B, H, T, D] call with no mask or dropout runs the attention op (its kernel); the rest is ops."""
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1], got {dropout_p}")
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ShapeError(
            "scaled_dot_product_attention needs query, key and value of at least 2 dimensions, got "
            f"{shape_text(query.shape)}, {shape_text(key.shape)}, {shape_text(value.shape)}"
        )
    if is_causal and attn_mask is not None:
        raise ValueError(
            "scaled_dot_product_attention: explicit attn_mask should not be set when is_causal=True "
            "(as PyTorch's)"
        )
    if attn_mask is not None and attn_mask.dtype.name not in ("bool", "f32", query.dtype.name):
        raise TypeError(
            "scaled_dot_product_attention: attn_mask must be bool, f32 or the query's dtype "
            f"({query.dtype.name}), as PyTorch's; got {attn_mask.dtype.name}"
        )
    if attn_mask is not None and attn_mask.ndim < 2 and query.ndim == 4 and not dropout_p:
        raise IndexError(  # PyTorch's fused CPU path of a 4-D query reads the mask's dimension -2
            f"scaled_dot_product_attention: a 4-D query needs an attn_mask of at least 2 dimensions "
            f"(as PyTorch's), got {shape_text(attn_mask.shape)}"
        )
    if attn_mask is not None and attn_mask.dtype.name == "f32" and query.dtype.name in ("f16", "bf16"):
        # PyTorch's: an f16 / bf16 query with an f32 mask, computed in f32 (as its kernel accumulates)
        # and rounded to the query's dtype
        args = (query.float(), key.float(), value.float(), attn_mask, dropout_p, is_causal, scale)
        return scaled_dot_product_attention(*args, enable_gqa=enable_gqa).to(query.dtype)
    if enable_gqa:
        key, value = _repeat_heads(query, key, "key"), _repeat_heads(query, value, "value")
    length, size = query.shape[-2], key.shape[-2]
    if (
        is_causal
        and attn_mask is None
        and not dropout_p
        and query.ndim == 4
        and key.ndim == 4
        and length == size
        and query.shape[1] == key.shape[1]
    ):
        return ops.attention(query, key, value, scale=scale)
    scores = (query @ key.mT) * scale_tensor(scale, query.shape[-1], query.dtype)
    if is_causal:
        attn_mask = ops.unsqueeze(ops.arange(0, length), -1) >= ops.arange(0, size)
    if attn_mask is not None and attn_mask.dtype.name == "bool":
        scores = ops.where(attn_mask, scores, -math.inf)
    elif attn_mask is not None:
        scores = scores + attn_mask
    if attn_mask is None:
        weights = ops.softmax(scores, axis=-1)
    else:  # a query with every key masked: zeros, not NaN (its scores made finite, so no NaN gradient)
        hidden = all_of(scores == -math.inf, dim=-1, keepdim=True)
        weights = ops.where(hidden, 0.0, ops.softmax(ops.where(hidden, 0.0, scores), axis=-1))
    if dropout_p:
        weights = dropout(weights, dropout_p)
    return weights @ value


def _repeat_heads(query: Tensor, kv: Tensor, name: str) -> Tensor:
    """kv [..., Hkv, S, E], each head repeated Hq / Hkv times (dimension -3): PyTorch's enable_gqa."""
    if query.ndim < 3 or kv.ndim < 3:
        raise ShapeError(
            f"scaled_dot_product_attention: enable_gqa needs heads (dimension -3) in query and {name}"
        )
    heads, kv_heads = query.shape[-3], kv.shape[-3]
    if isinstance(heads, int) and isinstance(kv_heads, int) and (kv_heads == 0 or heads % kv_heads):
        raise ShapeError(
            f"scaled_dot_product_attention: the number of heads in {name} ({kv_heads}) must divide the "
            f"number of heads in query ({heads})"
        )
    return kv if heads == kv_heads else repeat_interleave(kv, heads // kv_heads, dim=-3)


def rope(x: Tensor, cos: Tensor, sin: Tensor, offset: DimLike = 0, interleaved: bool = True) -> Tensor:
    """Rotary embedding of x [..., T, D] with table rows offset..offset+T of cos/sin [Tmax, D/2]."""
    return ops.rope(x, cos, sin, offset=offset, interleaved=interleaved)
