"""PyTorch's F.multi_head_attention_forward: nn.MultiheadAttention's forward pass with the weights given
as arguments (code that holds its own projections calls it, as CLIP's attention pooling does)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ..tensor import Tensor
from . import functional as F
from .attention import MultiheadAttention


def multi_head_attention_forward(
    query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
    in_proj_weight: Tensor | None, in_proj_bias: Tensor | None, bias_k: Tensor | None, bias_v: Tensor | None,
    add_zero_attn: bool, dropout_p: float, out_proj_weight: Tensor, out_proj_bias: Tensor | None,
    training: bool = True, key_padding_mask: Tensor | None = None, need_weights: bool = True,
    attn_mask: Tensor | None = None, use_separate_proj_weight: bool = False,
    q_proj_weight: Tensor | None = None, k_proj_weight: Tensor | None = None,
    v_proj_weight: Tensor | None = None, static_k: Tensor | None = None, static_v: Tensor | None = None,
    average_attn_weights: bool = True, is_causal: bool = False,
) -> tuple[Tensor, Tensor | None]:  # fmt: skip
    """Multi-head attention of query [L, N, E] (or [L, E]) over key and value [S, N, *], as PyTorch's
    functional form: (output, weights averaged over heads unless average_attn_weights; None without
    need_weights). static_k/static_v (precomputed keys and values) are not supported."""
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k and static_v are not supported")
    embed_dim = query.shape[-1]
    if embed_dim != embed_dim_to_check:
        raise ValueError(
            f"multi_head_attention_forward: was expecting embedding dimension of {embed_dim_to_check}, "
            f"but got {embed_dim}"
        )
    if embed_dim % num_heads:
        raise ValueError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    layer = SimpleNamespace(
        in_proj_weight=None if use_separate_proj_weight else in_proj_weight,
        q_proj_weight=q_proj_weight, k_proj_weight=k_proj_weight, v_proj_weight=v_proj_weight,
        _qkv_same_embed_dim=not use_separate_proj_weight, in_proj_bias=in_proj_bias, num_heads=num_heads,
        embed_dim=embed_dim, bias_k=bias_k, bias_v=bias_v, add_zero_attn=add_zero_attn, dropout=dropout_p,
        training=training, batch_first=False,
        out_proj=lambda x: F.linear(x, out_proj_weight, out_proj_bias),
    )  # fmt: skip
    forward: Any = MultiheadAttention.forward
    return forward(
        layer, query, key, value, key_padding_mask, need_weights, attn_mask, average_attn_weights, is_causal
    )
