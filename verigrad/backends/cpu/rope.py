"""The rope kernel (rope.c): rotary embedding of x [..., T, D] by rows of cos/sin tables [Tmax, D/2], f32 and
f64, each product and sum rounded as the op's decomposition rounds them, so the reference's bits.

x's leading axes must merge into one (a view whose rows are evenly strided, its last axis contiguous);
other layouts, other dtypes and unaligned arrays run the reference.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from .._registry import EXACT
from ..reference import composite_reference
from . import _ffi
from ._ffi import DTYPES, Library

ROPE = ("rope",)
_ARGS = [ctypes.c_void_p] * 5 + [ctypes.c_int64, ctypes.c_int]


def rows_of(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int, int] | None:
    """(rows, row stride, position stride) in elements for x [..., T, D] whose leading axes merge into
    one evenly strided axis and whose last axis is contiguous; None otherwise."""
    if len(shape) < 2 or (shape[-1] > 1 and strides[-1] != itemsize) or any(s % itemsize for s in strides):
        return None
    n, step = 1, 0
    for size, stride in reversed(list(zip(shape[:-2], strides[:-2]))):
        if size == 1:
            continue
        if n > 1 and stride != step * n:
            return None
        step, n = (stride if n == 1 else step), n * size
    return n, step // itemsize, strides[-2] // itemsize


def _kernel(fn: Any, dtype: np.dtype, backend: Any, ptr: Callable, reference: Callable) -> Callable:
    layouts: dict[tuple, Any] = {}

    def layout(x: Any, cos: Any, sin: Any, offset: int, interleaved: bool) -> Any:
        """The g argument of rope.c for arrays of these shapes, strides and dtypes; False where it
        does not take them."""
        arrays = (x, cos, sin)
        if any(not isinstance(a, np.ndarray) or a.dtype != dtype for a in arrays) or not (
            cos.flags.c_contiguous and sin.flags.c_contiguous and cos.shape == sin.shape
        ):
            return False
        found = rows_of(x.shape, x.strides, x.itemsize)
        if found is None:
            return False
        n, sn, st = found
        return np.array([n, x.shape[-2], x.shape[-1], sn, st, offset, int(interleaved)], np.int64)

    def kernel(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, offset: int, interleaved: bool) -> np.ndarray:
        try:  # the checks once per layout (a NumPy scalar's shape () is no layout's)
            key = (x.shape, x.strides, x.dtype, cos.shape, cos.strides, cos.dtype, sin.strides, sin.dtype)
        except AttributeError:  # not an array
            return reference(x, cos, sin, offset=offset, interleaved=interleaved)
        key = (key, offset, interleaved)
        found = layouts.get(key)
        if found is None:
            found = _ffi.remember(layouts, key, layout(x, cos, sin, offset, interleaved))
        if found is False or not (x.flags.aligned and cos.flags.aligned and sin.flags.aligned):
            return reference(x, cos, sin, offset=offset, interleaved=interleaved)
        out = np.empty(x.shape, dtype)
        if out.size:
            min_rows = max(1, _ffi._min_chunk[0] // x.shape[-1])
            fn(ptr(x), ptr(cos), ptr(sin), ptr(out), ptr(found), min_rows, backend.threads)
        return out

    return kernel


def register(backend: Any, lib: Library) -> None:
    from ...registry import OPS

    reference = composite_reference(OPS["rope"])
    for dtype_name, dtype in DTYPES.items():
        fn = lib.fn(f"vg_rope_{dtype_name}", _ARGS)
        backend.register("rope", _kernel(fn, dtype, backend, lib.ptr, reference), dtype_name, EXACT)
