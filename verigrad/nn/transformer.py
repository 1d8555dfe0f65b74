"""PyTorch's transformer: `TransformerEncoderLayer` (self-attention and a feed-forward block),
`TransformerDecoderLayer` (self-attention, attention over the encoder's output, a feed-forward block),
each block with dropout, a residual connection and layer norm (after it, or before with norm_first);
`TransformerEncoder` and `TransformerDecoder` (stacks of copies of one layer, and an optional final
norm); and `Transformer`, the encoder-decoder model. Parameters are named as PyTorch names them, so its
state dicts load."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

from ..functions import triu
from ..ops import full
from ..tensor import Tensor
from . import functional as F
from . import init
from .activations import GELU, ReLU
from .attention import MultiheadAttention
from .containers import ModuleList
from .dropout import Dropout
from .linear import Linear
from .module import Module, check_dtypes, factory_dtype
from .normalization import LayerNorm
from .transformer_padding import padded_positions, zero_padded

_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {"relu": F.relu, "gelu": F.gelu}
_Activation = str | Callable[[Tensor], Tensor]


class _Layer(Module):
    """What both layers have: self-attention, the feed-forward block, `norms` layer norms and dropouts
    (and with `cross_attention`, attention over another sequence), made from PyTorch's arguments."""

    norms = 2
    cross_attention = False

    def __init__(
        self,
        d_model: int,
        nhead: int,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: _Activation = F.relu,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype(type(self).__name__, device, dtype)
        if isinstance(activation, str) and activation not in _ACTIVATIONS:
            raise ValueError(f"activation should be relu or gelu, not {activation!r}")
        self.self_attn = MultiheadAttention(
            d_model, nhead, dropout, bias, batch_first=batch_first, dtype=dtype
        )
        if self.cross_attention:
            self.multihead_attn = MultiheadAttention(
                d_model, nhead, dropout, bias, batch_first=batch_first, dtype=dtype
            )
        self.linear1 = Linear(d_model, dim_feedforward, bias, dtype=dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, dtype=dtype)
        self.norm_first = norm_first
        for i in range(1, self.norms + 1):  # the norms, then the dropouts: PyTorch's order (and repr)
            setattr(self, f"norm{i}", LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype))
        for i in range(1, self.norms + 1):
            setattr(self, f"dropout{i}", Dropout(dropout))
        self.activation = _ACTIVATIONS[activation] if isinstance(activation, str) else activation

    def _attend(
        self, attention: MultiheadAttention, dropout: Dropout, x: Tensor, memory: Tensor, masks: tuple
    ) -> Tensor:
        mask, padding, is_causal = masks
        out, _ = attention(
            x,
            memory,
            memory,
            attn_mask=mask,
            key_padding_mask=padding,
            need_weights=False,
            is_causal=is_causal,
        )
        return dropout(out)

    def _feed_forward(self, x: Tensor, dropout: Dropout) -> Tensor:
        return dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def _blocks(self, x: Tensor, blocks: list[tuple[Module, Callable[[Tensor], Tensor]]]) -> Tensor:
        """Each (norm, block): x + block(norm(x)) with norm_first, else norm(x + block(x))."""
        for norm, block in blocks:
            x = x + block(norm(x)) if self.norm_first else norm(x + block(x))
        return x


class TransformerEncoderLayer(_Layer):
    """x + dropout1(self_attn(x)), then x + dropout2(linear2(dropout(activation(linear1(x))))), each
    followed by its layer norm (norm1, norm2), or with norm_first each applied to the norm of x. Sequences
    first ([S, N, E]) unless batch_first; `activation` "relu", "gelu" or a function of a tensor."""

    def forward(
        self,
        src: Tensor,
        src_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        is_causal: bool = False,
    ) -> Tensor:
        check_dtypes(type(self).__name__, self.linear1.weight, ("src", src))  # before a norm_first norm
        masks = (src_mask, src_key_padding_mask, is_causal)
        return self._blocks(
            src,
            [
                (self.norm1, lambda x: self._attend(self.self_attn, self.dropout1, x, x, masks)),
                (self.norm2, lambda x: self._feed_forward(x, self.dropout2)),
            ],
        )


class TransformerDecoderLayer(_Layer):
    """Self-attention over the target (norm1, dropout1), attention from it over the encoder's output
    `memory` (multihead_attn, norm2, dropout2), and the feed-forward block (norm3, dropout3), each with a
    residual connection, as TransformerEncoderLayer's."""

    norms = 3
    cross_attention = True

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool = False,
        memory_is_causal: bool = False,
    ) -> Tensor:
        check_dtypes(type(self).__name__, self.linear1.weight, ("tgt", tgt), ("memory", memory))
        own = (tgt_mask, tgt_key_padding_mask, tgt_is_causal)
        other = (memory_mask, memory_key_padding_mask, memory_is_causal)
        return self._blocks(
            tgt,
            [
                (self.norm1, lambda x: self._attend(self.self_attn, self.dropout1, x, x, own)),
                (self.norm2, lambda x: self._attend(self.multihead_attn, self.dropout2, x, memory, other)),
                (self.norm3, lambda x: self._feed_forward(x, self.dropout3)),
            ],
        )


def _copies(layer: Module, num_layers: int, what: str) -> ModuleList:
    if num_layers < 1:
        raise ValueError(f"{what}: num_layers must be at least 1, got {num_layers}")
    return ModuleList(copy.deepcopy(layer) for _ in range(num_layers))


class TransformerEncoder(Module):
    """`num_layers` copies of `encoder_layer` (each with its own parameters, starting from the layer's),
    applied in turn with the same masks, then `norm` if given. In inference with a padding mask, the
    padded positions are PyTorch's nested-tensor zeros (`enable_nested_tensor`; transformer_padding)."""

    def __init__(
        self,
        encoder_layer: TransformerEncoderLayer,
        num_layers: int,
        norm: Module | None = None,
        enable_nested_tensor: bool = True,
        mask_check: bool = True,
    ):
        super().__init__()
        self.layers = _copies(encoder_layer, num_layers, "TransformerEncoder")
        self.num_layers, self.norm = num_layers, norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check
        self.use_nested_tensor = enable_nested_tensor and nested_tensor_possible(encoder_layer)

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
        padded = padded_positions(self, src, mask, src_key_padding_mask)
        if padded is not None:
            x = zero_padded(x, padded)
        return x if self.norm is None else self.norm(x)


class TransformerDecoder(Module):
    """`num_layers` copies of `decoder_layer`, each attending over the same `memory`, then `norm`."""

    def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm: Module | None = None):
        super().__init__()
        self.layers = _copies(decoder_layer, num_layers, "TransformerDecoder")
        self.num_layers, self.norm = num_layers, norm

    def forward(
        self,
        tgt: Tensor,
        memory: Tensor,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        x = tgt
        for layer in self.layers:
            x = layer(
                x,
                memory,
                tgt_mask,
                memory_mask,
                tgt_key_padding_mask,
                memory_key_padding_mask,
                bool(tgt_is_causal),
                memory_is_causal,
            )
        return x if self.norm is None else self.norm(x)


class Transformer(Module):
    """The encoder-decoder transformer, as PyTorch's: an encoder and a decoder of the given layer counts,
    each ending in a layer norm, every parameter of two or more dimensions Xavier-uniform initialised."""

    def __init__(
        self,
        d_model: int = 512,
        nhead: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        dim_feedforward: int = 2048,
        dropout: float = 0.1,
        activation: _Activation = F.relu,
        custom_encoder: Module | None = None,
        custom_decoder: Module | None = None,
        layer_norm_eps: float = 1e-5,
        batch_first: bool = False,
        norm_first: bool = False,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype("Transformer", device, dtype)
        settings = (
            dim_feedforward,
            dropout,
            activation,
            layer_norm_eps,
            batch_first,
            norm_first,
            bias,
        )

        def norm() -> LayerNorm:
            return LayerNorm(d_model, layer_norm_eps, bias=bias, dtype=dtype)

        self.encoder = custom_encoder or TransformerEncoder(
            TransformerEncoderLayer(d_model, nhead, *settings, dtype=dtype), num_encoder_layers, norm()
        )
        self.decoder = custom_decoder or TransformerDecoder(
            TransformerDecoderLayer(d_model, nhead, *settings, dtype=dtype), num_decoder_layers, norm()
        )
        self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
        for p in self.parameters():
            if p.ndim > 1:
                init.xavier_uniform_(p)

    def forward(
        self,
        src: Tensor,
        tgt: Tensor,
        src_mask: Tensor | None = None,
        tgt_mask: Tensor | None = None,
        memory_mask: Tensor | None = None,
        src_key_padding_mask: Tensor | None = None,
        tgt_key_padding_mask: Tensor | None = None,
        memory_key_padding_mask: Tensor | None = None,
        src_is_causal: bool | None = None,
        tgt_is_causal: bool | None = None,
        memory_is_causal: bool = False,
    ) -> Tensor:
        batch = 0 if self.batch_first else 1
        if src.ndim == 3 and src.shape[batch] != tgt.shape[batch]:
            raise RuntimeError("the batch number of src and tgt must be equal")
        if src.shape[-1] != self.d_model or tgt.shape[-1] != self.d_model:
            raise RuntimeError("the feature number of src and tgt must be equal to d_model")
        memory = self.encoder(src, src_mask, src_key_padding_mask, src_is_causal)
        return self.decoder(
            tgt,
            memory,
            tgt_mask,
            memory_mask,
            tgt_key_padding_mask,
            memory_key_padding_mask,
            tgt_is_causal,
            memory_is_causal,
        )

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device: Any = None, dtype: Any = None) -> Tensor:
        """The causal mask [sz, sz]: -inf above the diagonal (a later position), 0 elsewhere; f32 unless
        `dtype` (True above the diagonal in bool), on the CPU (PyTorch's arguments, in its order)."""
        return triu(full((sz, sz), -math.inf, dtype=dtype, device=device), 1)


def nested_tensor_possible(layer: Any) -> bool:
    """PyTorch's `use_nested_tensor` test of the encoder's layer, made when the encoder is."""
    attention = getattr(layer, "self_attn", None)
    return (
        isinstance(layer, TransformerEncoderLayer)
        and not layer.norm_first
        and attention.batch_first
        and attention._qkv_same_embed_dim
        and attention.in_proj_bias is not None
        and (layer.activation in (F.relu, F.gelu) or isinstance(layer.activation, (ReLU, GELU)))
        and layer.norm1.eps == layer.norm2.eps
        and attention.num_heads % 2 == 0
    )
