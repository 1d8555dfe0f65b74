"""gelu_grad (activations.c): gelu's backward g * gelu_deriv(x) in one pass, on C-contiguous f32 arrays of
one shape; each element the bits of the gelu_deriv and mul kernels one after the other: the reference's
bits where gelu_deriv's kernel states them, else what `claim` derives from its statement. Other layouts
(and f64) run those two kernels one after the other: the same bits, never the reference's slower erf."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ...dtypes import as_dtype
from ...ops import gelu_deriv, mul
from ...ops._op import never_warns
from ..kernel_table import EXACT, Exactness, tolerance, ulp
from . import _ffi
from ._ffi import Library

ACTIVATIONS = ("gelu_grad",)
_ARGS = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
GRAD_UNIT = 4.0  # the |g| up to which a tolerance's absolute part holds


def claim(deriv: Exactness) -> Exactness:
    """gelu_grad's exactness from gelu_deriv's: d within k ulps moves g d by at most 2k ulps of it (its
    binade may be lower than d's), the product's rounding adds one; d within rtol |d| + atol moves g d by
    rtol |g d| + |g| atol, and the rounding adds 2^-23 relatively (|g| <= GRAD_UNIT)."""
    if deriv.is_exact:
        return EXACT
    if deriv.ulps:
        return ulp(2 * deriv.ulps + 1)
    return tolerance(deriv.rtol + 2.0**-23, GRAD_UNIT * deriv.atol)


def _composed(backend: Any, dtype_name: str) -> Callable:
    """g * gelu_deriv(x) by the backend's gelu_deriv and mul kernels for `dtype_name`: mul(g, gelu_deriv(x))'s
    bits, broadcasting as mul does."""
    dtype = as_dtype(dtype_name)
    deriv, times = backend.kernel(gelu_deriv, dtype), backend.kernel(mul, dtype)
    return lambda g, x: times(g, deriv(x))


def register(backend: Any, lib: Library) -> None:
    fn, ptr = lib.fn("vg_gelu_grad_f32", _ARGS), lib.ptr
    composed = {name: _composed(backend, name) for name in ("f32", "f64")}

    def kernel(g: np.ndarray, x: np.ndarray) -> np.ndarray:
        """g * gelu_deriv(x) in a new array."""
        arrays = (g, x)
        if any(type(a) is not np.ndarray or a.dtype != np.float32 for a in arrays) or g.shape != x.shape:
            return composed["f32"](g, x)
        if not all(a.flags.c_contiguous and a.flags.aligned for a in arrays):
            return composed["f32"](g, x)
        out = np.empty(x.shape, np.float32)
        fn(ptr(g), ptr(x), ptr(out), x.size, _ffi.min_chunk(), backend.threads)
        return out

    for name, run in (("f32", kernel), ("f64", composed["f64"])):
        stated = claim(backend.exactness("gelu_deriv", name))  # what elementwise.py registered, native or not
        backend.register("gelu_grad", never_warns(run), name, stated, native=stated)
