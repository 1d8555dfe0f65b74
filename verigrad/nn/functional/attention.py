"""Attention, as in `torch.nn.functional`: scaled_dot_product_attention, and the rotary embedding of
queries and keys (rope)."""

from __future__ import annotations

import math

from ... import ops
from ...ops.composite.attention import scale_tensor
from ...shapes import DimLike
from ...tensor import Tensor


def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
) -> Tensor:
    """softmax(q k^T * scale + mask) v over the last two axes ([..., L, E], [..., S, E], [..., S, Ev]), as
    PyTorch's: a bool mask keeps where True, a float mask is added; is_causal keeps key j <= query i
    (aligned at the top left); scale defaults to 1/sqrt(E). A causal [B, H, T, D] call with no mask
    runs the attention op (its kernel); the rest is written with ops."""
    if dropout_p != 0.0:
        raise ValueError("scaled_dot_product_attention: dropout_p must be 0 (no attention dropout here)")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: give attn_mask or is_causal, not both")
    length, size = query.shape[-2], key.shape[-2]
    if is_causal and query.ndim == 4 and key.ndim == 4 and length == size and query.shape[1] == key.shape[1]:
        return ops.attention(query, key, value, scale=scale)
    scores = (query @ key.mT) * scale_tensor(scale, query.shape[-1], query.dtype)
    if is_causal:
        attn_mask = ops.unsqueeze(ops.arange(0, length), -1) >= ops.arange(0, size)
    if attn_mask is not None and attn_mask.dtype.name == "bool":
        scores = ops.where(attn_mask, scores, -math.inf)
    elif attn_mask is not None:
        scores = scores + attn_mask
    return ops.softmax(scores, axis=-1) @ value


def rope(x: Tensor, cos: Tensor, sin: Tensor, offset: DimLike = 0, interleaved: bool = True) -> Tensor:
    """Rotary embedding of x [..., T, D] with table rows offset..offset+T of cos/sin [Tmax, D/2]."""
    return ops.rope(x, cos, sin, offset=offset, interleaved=interleaved)
