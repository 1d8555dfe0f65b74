"""cached_attention (attention.c) on f32 arrays of any strides: the decode step's attention over a window
of the KV cache (a view: no copy) and the new tokens.

Like the reference it computes the scores, softmax and weighted sums in f64 and rounds once; only the
order of its sums differs from the reference's (BLAS's), so each result is within an f32 rounding of the
reference's: |c - ref| <= 2^-23 |ref| + atol, atol the f64 sums' error for |q|, |k|, |v| <= `UNIT`,
head dims and positions up to `N_STATED` (scores within `SCORE_SPAN` of their maximum). Other dtypes
run the reference.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from .._registry import tolerance
from ._ffi import Library

UNIT, N_STATED, SCORE_SPAN = 2.0, 4096, 64.0
# the f64 scores err by <= N 2^-53 N UNIT^2 (scale <= 1), which moves each p by that relative amount
# times the span; the weighted sums of <= N values err by <= N 2^-53 UNIT on top
ATTENTION_EXACTNESS = tolerance(2.0**-23, 4 * N_STATED**2 * 2.0**-53 * UNIT**3 * SCORE_SPAN)

_I64 = ctypes.c_int64 * 4
_ARGS = [ctypes.c_void_p] + [ctypes.c_void_p, ctypes.c_void_p] * 6 + [ctypes.c_double, ctypes.c_void_p]
_ARGS += [ctypes.c_int]


def _strides(a: np.ndarray) -> Any:
    """Element strides of a (rank 4 or 2) as int64, or None when one is not a whole element."""
    if any(s % a.itemsize for s in a.strides):
        return None
    return np.array([s // a.itemsize for s in a.strides], np.int64)


def register(backend: Any, lib: Library) -> None:
    from ...registry import OPS

    fn = lib.fn("vg_cached_attention_f32", _ARGS, restype=ctypes.c_int)
    reference, data = OPS["cached_attention"].reference, lib.data

    def kernel(q, k, v, past_kt, past_v, bias, scale: float) -> np.ndarray:
        arrays = (q, k, v, past_kt, past_v, bias)
        if any(type(a) is not np.ndarray or a.dtype != np.float32 for a in arrays):
            return reference(*arrays, scale=scale)
        strides = [_strides(a) for a in arrays]
        if any(s is None for s in strides):
            return reference(*arrays, scale=scale)
        (b, h, t, d), dv, w = q.shape, v.shape[3], past_v.shape[2]
        out = np.empty((b, h, t, dv), np.float32)
        if out.size:
            sizes = np.array([b, h, k.shape[1], t, d, dv, w], np.int64)
            pairs = [x for a, s in zip(arrays, strides) for x in (data(a), data(s))]
            if fn(data(sizes), *pairs, float(scale), data(out), backend.threads):
                raise MemoryError(f"cached_attention: out of memory for a window of {w} positions")
        return out

    backend.register("cached_attention", kernel, "f32", ATTENTION_EXACTNESS)
