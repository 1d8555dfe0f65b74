"""The softmax_grad kernel (softmax_grad.c): f32 over the last axis, the reference's bits (the f64 row sum
in its 16 lanes, out * (g - s) rounded once) on every vector path and thread count.

f32 operands of the same shape take the C path: a view, or softmax over another axis (that axis moved
last), is first copied by the backend's `contiguous` kernel (a C copy, which a compiled plan's replay
makes again), and a result over another axis is copied back to the operands' layout the same way. Any
other case (another dtype, 0-d or empty arrays) runs the op's reference.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ...dtypes import as_dtype
from ...ops import contiguous, softmax_grad
from ...ops._op import never_warns, silenced
from ..kernel_table import EXACT
from . import _ffi
from ._ffi import Library

SOFTMAX_GRAD = ("softmax_grad",)
_ARGS = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3 + [ctypes.c_int]


def _kernel(fn: Any, backend: Any, ptr: Callable, reference: Callable) -> Callable:
    def copy(x: np.ndarray) -> np.ndarray:
        return (backend.native(contiguous, as_dtype("f32")) or np.ascontiguousarray)(x)

    def rows_of(x: Any, axis: int) -> np.ndarray | None:
        """x with `axis` last, as C-contiguous rows; None if x is not an f32 array."""
        if type(x) is not np.ndarray or x.dtype != np.float32:
            return None
        x = np.moveaxis(x, axis, -1)
        return x if x.flags.c_contiguous and x.flags.aligned else copy(x)

    def kernel(g: np.ndarray, out: np.ndarray, axis: int) -> np.ndarray:
        """softmax's input gradient from g and softmax's output `out` along `axis`."""
        if getattr(out, "ndim", 0) == 0 or out.size == 0 or getattr(g, "shape", None) != out.shape:
            return reference(g, out, axis=axis)
        g_rows, o_rows = rows_of(g, axis), rows_of(out, axis)
        if g_rows is None or o_rows is None:
            return reference(g, out, axis=axis)
        n = o_rows.shape[-1]
        result = np.empty(o_rows.shape, np.float32)
        min_rows = max(1, _ffi.min_chunk() // n)
        fn(ptr(g_rows), ptr(o_rows), ptr(result), result.size // n, n, min_rows, backend.threads)
        return result if axis == out.ndim - 1 else copy(np.moveaxis(result, -1, axis))

    return never_warns(kernel)


def register(backend: Any, lib: Library) -> None:
    fn = lib.fn("vg_softmax_grad_f32", _ARGS)
    reference = silenced(softmax_grad.reference)
    backend.register("softmax_grad", _kernel(fn, backend, lib.ptr, reference), "f32", EXACT)
