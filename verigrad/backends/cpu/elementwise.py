"""Element-wise kernels: unary ops on contiguous arrays; binary ops on operands of one shape or of shapes
that broadcast (rank at most 4, any element strides, broadcast dimensions read with stride 0).

relu, relu_deriv, neg, abs, sqrt, sigmoid_deriv, tanh_deriv and the binary ops give the reference's bits.
The transcendentals (exp, log, tanh, sin, cos, sigmoid) use the C library and are within `ULP_BOUNDS` ulps
of NumPy's routines (a NaN may have another sign bit). silu and silu_deriv have C kernels but are not
registered: their products and cancellations turn an ulp of exp into many ulps of the result.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from .._registry import ulp
from . import _ffi
from ._ffi import DTYPES, Library

UNARY_EXACT = ("relu", "relu_deriv", "neg", "abs", "sqrt", "sigmoid_deriv", "tanh_deriv")
UNARY_LIBM = ("exp", "log", "tanh", "sin", "cos", "sigmoid")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")

# The largest difference in ulps from the reference, per (op, dtype), that the tests allow; the exact
# ops are 0. See tests/test_cpu_backend.py for the values measured.
ULP_BOUNDS: dict[tuple[str, str], int] = {(op, d): 4 for op in UNARY_LIBM for d in DTYPES}

_UNARY_ARGS = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
_BINARY_ARGS = [ctypes.c_void_p, *_UNARY_ARGS]
_BC_ARGS = [ctypes.c_void_p] * 4 + [ctypes.c_int64, ctypes.c_int]


def _unary(fn: Any, dtype: np.dtype, reference: Callable, backend: Any, data: Callable) -> Callable:
    chunk = _ffi._min_chunk

    def kernel(x: np.ndarray) -> np.ndarray:
        if type(x) is not np.ndarray or x.dtype != dtype or not (x.flags.c_contiguous and x.flags.aligned):
            return reference(x)
        out = np.empty(x.shape, dtype)
        fn(data(x), data(out), x.size, chunk[0], backend.threads)
        return out

    return kernel


def broadcast_dims(a: np.ndarray, b: np.ndarray) -> tuple[tuple[int, ...], Any] | None:
    """The output shape and the `dims` argument of a broadcast kernel (the output's shape padded to rank
    4, then each operand's element strides after broadcasting); None when the shapes do not broadcast,
    the rank is over 4, or a stride is not a whole number of elements."""
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        return None
    if len(shape) > 4:
        return None
    pad = 4 - len(shape)
    dims = [1] * pad + list(shape)
    for x in (a, b):
        item = x.itemsize
        strides = [0] * (4 - x.ndim)
        for size, step in zip(x.shape, x.strides):
            if step % item:
                return None
            strides.append(0 if size == 1 else step // item)
        dims += strides
    return shape, (ctypes.c_int64 * 12)(*dims)


def _binary(
    fn: Any, fn_bc: Any, dtype: np.dtype, reference: Callable, backend: Any, data: Callable
) -> Callable:
    chunk = _ffi._min_chunk

    def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if (
            type(a) is not np.ndarray
            or type(b) is not np.ndarray
            or a.dtype != dtype
            or b.dtype != dtype
            or not (a.flags.aligned and b.flags.aligned)
        ):
            return reference(a, b)
        if a.shape == b.shape and a.flags.c_contiguous and b.flags.c_contiguous:
            out = np.empty(a.shape, dtype)
            fn(data(a), data(b), data(out), a.size, chunk[0], backend.threads)
            return out
        found = broadcast_dims(a, b)
        if found is None:
            return reference(a, b)
        shape, dims = found
        out = np.empty(shape, dtype)
        fn_bc(data(a), data(b), data(out), dims, chunk[0], backend.threads)
        return out

    return kernel


def register(backend: Any, lib: Library) -> None:
    from ...registry import OPS

    for dtype_name, dtype in DTYPES.items():
        for name in UNARY_EXACT + UNARY_LIBM:
            fn = lib.fn(f"vg_{name}_{dtype_name}", _UNARY_ARGS)
            kernel = _unary(fn, dtype, OPS[name].reference, backend, lib.data)
            backend.register(name, kernel, dtype_name, ulp(ULP_BOUNDS.get((name, dtype_name), 0)))
        for name in BINARY:
            fn = lib.fn(f"vg_{name}_{dtype_name}", _BINARY_ARGS)
            fn_bc = lib.fn(f"vg_{name}_bc_{dtype_name}", _BC_ARGS)
            kernel = _binary(fn, fn_bc, dtype, OPS[name].reference, backend, lib.data)
            backend.register(name, kernel, dtype_name)
