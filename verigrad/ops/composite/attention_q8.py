"""cached_attention_q8(q, k, v, past_k, past_v, bias): `cached_attention` over a window of a q8_0 KV cache.

The window's keys and values come as the cache stores them, u8 [B, KV, W, D / 32 * 34] each (llama.cpp's
q8_0 blocks along the head dimension: an f16 scale d, then 32 int8 q; keys not transposed); every other
operand, the result and the rules are cached_attention's (q [B, H, T, D], the new keys and values
[B, KV, T, D] in f32, bias [T, W+T] or [B, T, W+T]). Its reference de-quantizes the window (d q, exact in
f32) and runs cached_attention's reference, so a kernel reading the blocks directly is held to the same
bound as cached_attention's f32 kernel on the de-quantized window. Inference only (no gradient).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dtypes import DType, u8
from ...errors import DTypeError, ShapeError
from ...shapes import exact_div, shape_text
from .._op import Op
from ..quant import FORMATS, dequantize
from .attention import (
    _cached_reference,
    _cached_shape,
    _dtype,
    _heads,
    _torch_cached,
    cached_params,
    cached_samples,
)

Q8 = FORMATS["q8_0"]


def _shape(q: tuple, k: tuple, v: tuple, past_k: tuple, past_v: tuple, bias: tuple, scale: Any) -> tuple:
    _heads(q, k, v)
    d, dv = k[3], v[3]
    for name, size in (("k", d), ("v", dv)):
        if exact_div(size, Q8.block) is None:
            raise ShapeError(f"cached_attention_q8: {name}'s head dim must be a multiple of 32, got {size}")
    if len(past_k) != 4 or len(past_v) != 4 or past_k[:3] != past_v[:3] or past_k[:2] != k[:2]:
        raise ShapeError(
            f"cached_attention_q8: the window must be past_k and past_v [{k[0]}, {k[1]}, W, bytes], got "
            f"{shape_text(past_k)} and {shape_text(past_v)}"
        )
    if past_k[3] != Q8.row_bytes(d) or past_v[3] != Q8.row_bytes(dv):
        raise ShapeError(
            f"cached_attention_q8: a q8_0 row of {d} and {dv} values takes {Q8.row_bytes(d)} and "
            f"{Q8.row_bytes(dv)} bytes, got past_k {shape_text(past_k)} and past_v {shape_text(past_v)}"
        )
    b, kv, w = past_k[:3]
    return _cached_shape(q, k, v, (b, kv, d, w), (b, kv, w, dv), bias, scale)


def _dtype_rule(q: DType, k: DType, v: DType, past_k: DType, past_v: DType, bias: DType, scale: Any) -> DType:
    if past_k is not u8 or past_v is not u8:
        raise DTypeError(
            f"cached_attention_q8: the window's keys and values must be u8 (q8_0 blocks), got {past_k.name} "
            f"and {past_v.name}"
        )
    return _dtype(q, k, v, bias, scale=scale)


def dequantized(past: np.ndarray) -> np.ndarray:
    """A q8_0 window u8 [..., W, D / 32 * 34] as f32 [..., W, D] (exact)."""
    shape = (*past.shape[:-1], past.shape[-1] // Q8.nbytes * Q8.block)
    return dequantize(past, "q8_0", shape)


def _reference(q, k, v, past_k, past_v, bias, scale: float | None) -> np.ndarray:
    keys_t = np.swapaxes(dequantized(past_k), -1, -2)
    return _cached_reference(q, k, v, keys_t, dequantized(past_v), bias, scale)


def _torch(t, q, k, v, past_k, past_v, bias, scale):
    def values(past):  # the blocks' d q, exact in f32, then in q's dtype
        blocks = past.reshape(*past.shape[:-1], -1, Q8.nbytes)
        d = blocks[..., :2].contiguous().view(t.float16).float()
        return (d * blocks[..., 2:].contiguous().view(t.int8).float()).flatten(-2).to(q.dtype)

    return _torch_cached(t, q, k, v, values(past_k).transpose(-1, -2), values(past_v), bias, scale)


def q8_blocks(rng: np.random.Generator, shape: tuple, largest: float = 2.0) -> np.ndarray:
    """Random q8_0 rows u8 [*shape[:-1], shape[-1] / 32 * 34] whose values are at most `largest` in
    magnitude (f16 scales up to largest / 127)."""
    rows = int(np.prod(shape[:-1], dtype=np.int64)) * (shape[-1] // Q8.block)
    blocks = np.empty((rows, Q8.nbytes), np.uint8)
    scales = rng.uniform(-largest / 127, largest / 127, rows).astype("<f2")
    blocks[:, :2] = scales.view(np.uint8).reshape(-1, 2)
    blocks[:, 2:] = rng.integers(-127, 128, (rows, Q8.block), dtype=np.int8).view(np.uint8)
    return blocks.reshape(*shape[:-1], Q8.row_bytes(shape[-1]))


cached_attention_q8 = Op(
    "cached_attention_q8",
    shape=_shape,
    dtype=_dtype_rule,
    params=cached_params,
    reference=_reference,
    samples=lambda rng: cached_samples(
        rng, (32, 64, 32, 32), lambda rng, s: (q8_blocks(rng, s), q8_blocks(rng, s))
    ),
    torch=_torch,
    exact=False,
    differentiable=False,
    doc="cached_attention over a window of q8_0 blocks (a q8_0 KV cache's keys and values, u8 [B, KV, W, "
    "D / 32 * 34] each, keys not transposed): see the module docstring.",
)
