"""cached_attention (attention.c) on f32 arrays of any strides: the decode step's attention over a window
of the KV cache (a view: no copy) and the new tokens.

Like the reference it computes the scores, softmax and weighted sums in f64 and rounds once; only the
order and rounding of its sums (fused multiply-adds where the CPU has them) and its exp (a few ulps of
f64) differ from the reference's, so each result is within an f32 rounding of the reference's:
|c - ref| <= 2^-23 |ref| + atol, atol bounding the f64 sums' error for |q|, |k|, |v| <= `UNIT`, head dims
up to `D_STATED` and windows up to `W_STATED` positions (scale <= 1). Other dtypes run the reference.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ...ops import cached_attention
from ..kernel_table import tolerance
from . import _ffi, matmul
from ._ffi import Library

ATTENTION = ("cached_attention",)
UNIT, D_STATED, W_STATED = 2.0, 256, 8192
# a score errs by <= D 2^-53 D UNIT^2, which moves each weight p by twice that relatively (exp, then the
# normalization); the weighted sum of <= W values (sum p = 1) adds <= W 2^-53 UNIT
ATTENTION_EXACTNESS = tolerance(2.0**-23, 4 * (D_STATED**2 * UNIT**2 + W_STATED * UNIT) * 2.0**-53)

_I64 = ctypes.c_int64 * 4
_ARGS = [ctypes.c_void_p] + [ctypes.c_void_p, ctypes.c_void_p] * 6 + [ctypes.c_double, ctypes.c_void_p]
_ARGS += [ctypes.c_int]


def register(backend: Any, lib: Library) -> None:
    from ...ops.composite.attention import resolve_scale

    fn = lib.fn("vg_cached_attention_f32", _ARGS, restype=ctypes.c_int)
    reference, data = matmul.single_threaded(cached_attention.reference), lib.data

    layouts: dict[tuple, Any] = {}
    ptr = lib.ptr

    def layout(arrays: tuple) -> Any:
        """(the sizes-and-strides array, the addresses of each array's strides in it, the output
        shape) for arrays of these shapes, strides and dtypes; False where the C function does not take
        them (another dtype, a partial element)."""
        if any(not isinstance(a, np.ndarray) or a.dtype != np.float32 for a in arrays):
            return False
        strides = [s for a in arrays for s in a.strides]
        if any(s % 4 for s in strides):  # not whole elements
            return False
        q, k, v, _, past_v, _ = arrays
        (b, h, t, d), dv, w = q.shape, v.shape[3], past_v.shape[2]
        # sizes, then each array's element strides (4 each, the bias's 2)
        ints = np.array([b, h, k.shape[1], t, d, dv, w, *strides], np.int64)
        ints[7:] //= 4
        at = data(ints)
        return ints, [at + 8 * (7 + 4 * i) for i in range(6)], (b, h, t, dv)

    def kernel(q, k, v, past_kt, past_v, bias, scale: float | None) -> np.ndarray:
        arrays = (q, k, v, past_kt, past_v, bias)
        try:  # the checks once per layout
            key = (q.shape, q.strides, k.shape, k.strides, v.shape, v.strides, past_kt.shape, past_kt.strides)
            key = (key, past_v.shape, past_v.strides, bias.shape, bias.strides, q.dtype, k.dtype, v.dtype)
            key = (key, past_kt.dtype, past_v.dtype, bias.dtype)
        except AttributeError:  # not an array
            return reference(*arrays, scale=scale)
        found = layouts.get(key)
        if found is None:
            found = _ffi.remember(layouts, key, layout(arrays))
        if found is False or not all(a.flags.aligned for a in arrays):
            return reference(*arrays, scale=scale)
        ints, s, shape = found
        out = np.empty(shape, np.float32)
        if out.size and fn(
            ptr(ints), ptr(q), s[0], ptr(k), s[1], ptr(v), s[2], ptr(past_kt), s[3], ptr(past_v), s[4],
            ptr(bias), s[5], float(resolve_scale(scale, q.shape[3])), ptr(out), backend.threads,
        ):  # fmt: skip
            raise MemoryError(f"cached_attention: out of memory for a window of {past_v.shape[2]} positions")
        return out

    backend.register("cached_attention", kernel, "f32", ATTENTION_EXACTNESS)
