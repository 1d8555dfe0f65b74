"""gelu_grad (activations.c): gelu's backward g * gelu_deriv(x) in one pass, on C-contiguous f32 arrays of
one shape; each element the bits of the gelu_deriv and mul kernels one after the other: the reference's
bits where gelu_deriv's kernel states them, else what `claim` derives from its statement. Other dtypes
and layouts run the reference."""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from ...ops import gelu_grad
from ...ops._op import never_warns, silenced
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


def register(backend: Any, lib: Library) -> None:
    fn, ptr, reference = lib.fn("vg_gelu_grad_f32", _ARGS), lib.ptr, silenced(gelu_grad.reference)

    def kernel(g: np.ndarray, x: np.ndarray) -> np.ndarray:
        """g * gelu_deriv(x) in a new array."""
        arrays = (g, x)
        if any(type(a) is not np.ndarray or a.dtype != np.float32 for a in arrays) or g.shape != x.shape:
            return reference(g, x)
        if not all(a.flags.c_contiguous and a.flags.aligned for a in arrays):
            return reference(g, x)
        out = np.empty(x.shape, np.float32)
        fn(ptr(g), ptr(x), ptr(out), x.size, _ffi.min_chunk(), backend.threads)
        return out

    stated = claim(backend.exactness("gelu_deriv", "f32"))  # what elementwise.py registered, native or not
    backend.register("gelu_grad", never_warns(kernel), "f32", stated, native=stated)
