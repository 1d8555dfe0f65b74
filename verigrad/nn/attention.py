"""MultiheadAttention, as PyTorch's."""

from __future__ import annotations

import math
import sys
from typing import Any

from ..autograd import is_grad_enabled
from ..backends import mha
from ..ops import arange, concat, where, zeros
from ..ops._aten import safe_softmax
from ..tensor import Tensor
from . import functional as F
from .init import _normal_param, _uniform_param
from .linear import Linear
from .module import Module, check_dtypes, factory_dtype


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name of the attention's output projection, a Linear (its repr shows the name)."""


class MultiheadAttention(Module):
    """PyTorch's multi-head attention: in_proj_weight [3E, E] (and in_proj_bias) project query, key and
    value (keys of kdim and values of vdim features other than E: q_proj_weight [E, E], k_proj_weight
    [E, kdim], v_proj_weight [E, vdim] instead); heads of E / num_heads; out_proj a Linear(E, E);
    add_bias_kv appends learned bias_k, bias_v [1, 1, E] to the keys and values, add_zero_attn a zero
    key and value. forward(query, key, value,
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
        if not 0.0 <= dropout <= 1.0:
            raise ValueError(f"MultiheadAttention: dropout must be in [0, 1], got {dropout}")
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(
                f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                f"num_heads={num_heads} instead"
            )
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim {embed_dim} is not a multiple of num_heads {num_heads}")
        self.embed_dim, self.num_heads, self.batch_first = embed_dim, num_heads, batch_first
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.head_dim = dropout, embed_dim // num_heads
        if self._qkv_same_embed_dim:
            bound = math.sqrt(6.0 / (embed_dim + 3 * embed_dim))  # PyTorch's xavier_uniform_ of [3E, E]
            self.in_proj_weight = _uniform_param((3 * embed_dim, embed_dim), bound, dtype)
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:  # one projection each, [E, E], [E, kdim], [E, vdim], xavier_uniform_ as PyTorch's
            for name, width in (("q", embed_dim), ("k", self.kdim), ("v", self.vdim)):
                bound = math.sqrt(6.0 / (embed_dim + width))
                setattr(self, f"{name}_proj_weight", _uniform_param((embed_dim, width), bound, dtype))
            self.register_parameter("in_proj_weight", None)
        self.in_proj_bias = zeros(3 * embed_dim, dtype=dtype, requires_grad=True) if bias else None
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        if bias:
            self.out_proj.bias = zeros(embed_dim, dtype=dtype, requires_grad=True)
        if add_bias_kv:  # xavier_normal_ of [1, 1, E]: std sqrt(2 / (E + E))
            std = math.sqrt(2.0 / (2 * embed_dim))
            self.bias_k = _normal_param((1, 1, embed_dim), std, dtype).requires_grad_(True)
            self.bias_v = _normal_param((1, 1, embed_dim), std, dtype).requires_grad_(True)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn

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
        first = self.in_proj_weight if self._qkv_same_embed_dim else self.q_proj_weight
        check_dtypes("MultiheadAttention", first, ("query", query), ("key", key), ("value", value))
        # a query whose keys are all masked: NaN in PyTorch's fast path and where it returns the weights,
        # else zero weights (its scaled_dot_product_attention's safe softmax)
        fast = _torch_fast_path(self, query, key, value, attn_mask, key_padding_mask)
        safe = not need_weights and not fast
        causal = False
        if is_causal and not fast:  # PyTorch's fast path merges the masks given and ignores is_causal
            if attn_mask is None:
                raise RuntimeError(
                    "Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                    "method `generate_square_subsequent_mask` to create this mask."
                )
            if key_padding_mask is None and not need_weights:  # PyTorch trusts the hint over the mask
                attn_mask, causal = None, True
        unbatched = query.ndim == 2
        if unbatched:
            query, key, value = (t.unsqueeze(1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        length, batch = query.shape[0], query.shape[1]
        heads, e = self.num_heads, self.embed_dim
        b = self.in_proj_bias
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            weights_qkv = [w[i * e : (i + 1) * e] for i in range(3)]
        else:
            weights_qkv = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        q, k, v = (
            t @ w.mT if b is None else t @ w.mT + b[i * e : (i + 1) * e]
            for i, (t, w) in enumerate(zip((query, key, value), weights_qkv))
        )
        if self.bias_k is not None:  # one more key and value, the learned biases (PyTorch's add_bias_kv)
            k = concat([k, self.bias_k.expand(1, batch, e)], axis=0)
            v = concat([v, self.bias_v.expand(1, batch, e)], axis=0)
            attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(key_padding_mask)
        q, k, v = (p.reshape(p.shape[0], batch * heads, e // heads).transpose(0, 1) for p in (q, k, v))
        if self.add_zero_attn:  # and a zero key and value
            zero = zeros(batch * heads, 1, e // heads, dtype=k.dtype)
            k, v = concat([k, zero], axis=1), concat([v, zero], axis=1)
            attn_mask, key_padding_mask = _one_more_key(attn_mask), _one_more_key(key_padding_mask)
        size = k.shape[1]
        if causal:  # scaled_dot_product_attention's is_causal over every key, the added ones too
            attn_mask = arange(0, length).unsqueeze(-1) < arange(0, size)  # True: not attended to
        scores = (q @ k.mT) * (1.0 / math.sqrt(e // heads))  # [N*H, L, S]
        if attn_mask is not None:
            if attn_mask.ndim == 3:
                attn_mask = attn_mask.reshape(batch * heads, length, size)
            scores = _masked(scores, attn_mask)
        if key_padding_mask is not None:
            padding = key_padding_mask.reshape(batch, 1, 1, size)
            scores = _masked(scores.reshape(batch, heads, length, size), padding).reshape(
                batch * heads, length, size
            )
        weights = safe_softmax(scores, -1) if safe else F.softmax(scores, -1)
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


def autocast_on() -> bool:
    """Whether an autocast block runs: verigrad.amp is a later layer, loaded once a program uses it."""
    amp = sys.modules.get("verigrad.amp")
    return amp is not None and amp.is_autocast_enabled()


def _torch_fast_path(
    attention: Any, query: Tensor, key: Tensor, value: Tensor, attn_mask: Any, key_padding_mask: Any
) -> bool:
    """Whether PyTorch's MultiheadAttention takes its fast path (`_native_multi_head_attention`): batched
    self-attention (query, key and value one tensor) in evaluation, batch_first, packed projections with
    biases, an even head count, no added keys, masks bool or absent, and no gradient to record."""
    if not isinstance(attention, MultiheadAttention):  # F.multi_head_attention_forward has none
        return False
    if not mha.get_fastpath_enabled():
        return False
    if any(m is not None and m.dtype.is_float for m in (attn_mask, key_padding_mask)):
        return False
    if query.ndim != 3 or query is not key or key is not value or attention.training:
        return False
    if not attention.batch_first or attention.num_heads % 2 or not attention._qkv_same_embed_dim:
        return False
    if attention.in_proj_bias is None or attention.bias_k is not None or attention.add_zero_attn:
        return False
    if autocast_on():
        return False
    projections = (attention.in_proj_weight, attention.in_proj_bias, *attention.out_proj.parameters())
    return not (is_grad_enabled() and any(t.requires_grad for t in (query, *projections)))


def _one_more_key(mask: Tensor | None) -> Tensor | None:
    """A mask with a column for one more key, which every query may attend to (PyTorch's pad by 0)."""
    if mask is None:
        return None
    return F.pad(mask, (0, 1), value=False if mask.dtype.name == "bool" else 0.0)


def _masked(scores: Tensor, mask: Tensor) -> Tensor:
    """PyTorch's attention masks: a bool one is True where a key is NOT attended to; a float one adds. A
    bool one is added as -inf too (PyTorch's `_canonical_mask`): a query with every key masked passes its
    softmax's NaN gradient on, as PyTorch's does."""
    if mask.dtype.name == "bool":
        return scores + where(mask, -math.inf, 0.0)
    return scores + mask
