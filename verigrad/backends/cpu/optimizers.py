"""Optimizer kernels: Adam and AdamW as one C pass over a parameter (parameter, gradient and both moments
read once, the parameter and moments updated in place), registered by (optimizer, dtype). verigrad.optim's
Adam and AdamW use them in eager mode when the active backend has one; they give the op-based update's
bits (tests/test_cpu_optim.py). A parameter they cannot take (another layout) goes the op-based way.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _ffi
from ._ffi import DTYPES, Library

OPTIMIZERS = ("adam",)
_ADAM_ARGS = [ctypes.c_void_p] * 5 + [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]


def _adam(fn: Any, dtype: np.dtype, backend: Any, ptr: Callable) -> Callable:
    chunk = _ffi._min_chunk

    def kernel(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, settings: Any, mode: int) -> bool:
        """One Adam step in place; `settings` as in optim.c (doubles), `mode` 0, 1 (L2) or 2 (decoupled).
        False, with nothing written, when an array is not a contiguous one of the kernel's dtype."""
        if not all(_ffi.writable(a, p.shape, dtype) for a in (p, g, m, v)):
            return False
        s = np.asarray(settings, dtype=np.float64).astype(dtype)  # each rounded once, as the ops do
        fn(ptr(p), ptr(g), ptr(m), ptr(v), ptr(s), int(mode), p.size, chunk[0], backend.threads)
        return True

    return kernel


def register(backend: Any, lib: Library) -> None:
    for dtype_name, dtype in DTYPES.items():
        fn = lib.fn(f"vg_adam_{dtype_name}", _ADAM_ARGS)
        backend.register_optimizer("adam", dtype_name, _adam(fn, dtype, backend, lib.ptr))
