"""Reduction kernels: sum, max and min over the last axis of a C-contiguous array with a non-empty last
axis, one thread per block of output rows.

All three give the reference's bits. sum reproduces NumPy's pairwise summation in double (blocks of 8
accumulators, halves above 128 elements) and, for f32, the 8192-element cast buffer (`np.getbufsize()`)
whose pairwise sums NumPy adds in order.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _ffi
from ._ffi import DTYPES, Library

REDUCE = ("sum", "max", "min")

_EXTREME_ARGS = [ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 3, ctypes.c_int]
_SUM_ARGS = [ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int64] * 4, ctypes.c_int]


def _reduce(
    name: str, fn: Any, dtype: np.dtype, reference: Callable, backend: Any, data: Callable
) -> Callable:
    """sum/max/min over the last axis of a C-contiguous array with a non-empty last axis; the reference
    for every other case."""
    chunk = _ffi._min_chunk

    def kernel(x: np.ndarray, axis: tuple, keepdim: bool) -> np.ndarray:
        if (
            type(x) is not np.ndarray
            or x.dtype != dtype
            or x.ndim == 0
            or tuple(axis) != (x.ndim - 1,)
            or x.shape[-1] == 0
            or not (x.flags.c_contiguous and x.flags.aligned)
        ):
            return reference(x, axis, keepdim)
        cols = x.shape[-1]
        out = np.empty(x.shape[:-1] + ((1,) if keepdim else ()), dtype)
        min_rows = max(1, chunk[0] // cols)
        if name == "sum":
            # NumPy sums an f32 row through its cast buffer: pairwise within each buffer, in order across
            block = np.getbufsize() if dtype == np.float32 else 0
            fn(data(x), data(out), x.size // cols, cols, block, min_rows, backend.threads)
        else:
            fn(data(x), data(out), x.size // cols, cols, min_rows, backend.threads)
        return out

    return kernel


def register(backend: Any, lib: Library) -> None:
    from ...registry import OPS

    for dtype_name, dtype in DTYPES.items():
        for name in REDUCE:
            fn = lib.fn(f"vg_{name}_{dtype_name}", _SUM_ARGS if name == "sum" else _EXTREME_ARGS)
            backend.register(
                name, _reduce(name, fn, dtype, OPS[name].reference, backend, lib.data), dtype_name
            )
