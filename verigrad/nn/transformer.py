"""PyTorch's transformer encoder: `TransformerEncoderLayer` (self-attention and a feed-forward block, each
with dropout, a residual connection and layer norm, after or before) and `TransformerEncoder` (a stack of
copies of one layer, and an optional final norm). Parameters are named as PyTorch names them, so its
state dicts load."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from .. import functional as F
from ..dtypes import f32
from ..tensor import Tensor
from .layers import Dropout, LayerNorm, Linear, ModuleList, MultiheadAttention
from .module import Module

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}


class TransformerEncoderLayer(Module):
    """x + dropout1(self_attn(x)), then x + dropout2(linear2(dropout(activation(linear1(x))))), each
    followed by its layer norm (norm1, norm2), or with norm_first each applied to the norm of x. Sequences
    first ([S, N, E]) unless batch_first; `activation` "relu", "gelu" or a function of a tensor."""

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: str | Callable[[Tensor], Tensor] = "relu",
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        dtype: Any = f32,
    ):
        super().__init__()
        if isinstance(activation, str) and activation not in _ACTIVATIONS:
            raise ValueError(f"activation should be relu or gelu, not {activation!r}")
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first, dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1, self.dropout2 = Dropout(dropout), Dropout(dropout)
        self.activation = _ACTIVATIONS[activation] if isinstance(activation, str) else activation

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        x = src
        if self.norm_first:
            x = x + self._attention(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._feed_forward(self.norm2(x))
        x = self.norm1(x + self._attention(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._feed_forward(x))

    def _attention(self, x: Tensor, mask: Tensor | None, padding: Tensor | None, is_causal: bool) -> Tensor:
        out, _ = self.self_attn(
            x, x, x, attn_mask=mask, key_padding_mask=padding, need_weights=False, is_causal=is_causal
        )
        return self.dropout1(out)

    def _feed_forward(self, x: Tensor) -> Tensor:
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """`num_layers` copies of `encoder_layer` (each with its own parameters, starting from the layer's),
    applied in turn with the same masks, then `norm` if given."""

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ):
        super().__init__()
        if num_layers < 1:
            raise ValueError(f"TransformerEncoder: num_layers must be at least 1, got {num_layers}")
        self.layers = ModuleList(copy.deepcopy(encoder_layer) for _ in range(num_layers))
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self,
        src: Tensor,
        mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool | None = None,
    ) -> Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        return x if self.norm is None else self.norm(x)
