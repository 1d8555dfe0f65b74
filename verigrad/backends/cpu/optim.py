"""Optimizer kernels: Adam (weight decay added to the gradient) and AdamW (decoupled weight decay), and SGD
(momentum, dampening, Nesterov, weight decay), as one C pass over a parameter (parameter, gradient and
state read once, the parameter and state updated in place), registered by (optimizer, dtype); and Adam's
and AdamW's over many parameters at once ("adam_all", "adamw_all": one parallel pass over all their
elements, the same operations on each).
verigrad.optim's Adam, AdamW and SGD use them in eager mode when the active backend has one; they give the
op-based update's bits (tests/test_cpu_optim.py). A parameter they cannot take (another layout) goes the
op-based way."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _ffi
from ._ffi import DTYPES, Library

OPTIMIZERS = ("adam", "adamw", "sgd")
_ADAM_ARGS = [ctypes.c_void_p] * 5 + [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
_ADAM_ALL_ARGS = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int]
_ADAM_ALL_ARGS += [ctypes.c_int64, ctypes.c_int]
_SGD_ARGS = [ctypes.c_void_p] * 4 + [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]
SGD_DECAY, SGD_MOMENTUM, SGD_FIRST, SGD_NESTEROV = 1, 2, 4, 8  # optim.c's flags


def _rounded(settings: Any, dtype: np.dtype) -> np.ndarray:
    """The settings (doubles) as the kernels read them: each rounded once to the dtype, as the ops do."""
    return np.asarray(settings, dtype=np.float64).astype(dtype)


def _adam(fn: Any, dtype: np.dtype, backend: Any, ptr: Callable, decoupled: bool) -> Callable:
    chunk = _ffi.min_chunk
    decay_mode = 2 if decoupled else 1  # optim.c's modes: 1 adds wd p to g, 2 scales p by 1 - lr wd first

    def kernel(p: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, settings: Any) -> bool:
        """One Adam (AdamW) step in place; `settings` as in optim.c (doubles; a weight decay of 0 skips
        it). False, with nothing written, when an array is not a contiguous one of the kernel's dtype."""
        if not all(_ffi.writable(a, p.shape, dtype) for a in (p, g, m, v)):
            return False
        s = _rounded(settings, dtype)
        mode = decay_mode if settings[1] else 0
        fn(ptr(p), ptr(g), ptr(m), ptr(v), ptr(s), mode, p.size, chunk(), backend.threads)
        return True

    return kernel


def _adam_all(fn: Any, dtype: np.dtype, backend: Any, lib: Library, decoupled: bool) -> Callable:
    chunk, data, ptr = _ffi.min_chunk, lib.data, lib.ptr
    decay_mode = 2 if decoupled else 1

    def kernel(
        params: list[np.ndarray],
        grads: list[np.ndarray],
        ms: list[np.ndarray],
        vs: list[np.ndarray],
        settings: Any,
    ) -> bool:
        """One Adam (AdamW) step in place of every parameter of `params`, all with the same `settings` (as
        `_adam`'s), in one parallel pass; False, with nothing written, when an array is not a contiguous
        one of the kernel's dtype."""
        for p, g, m, v in zip(params, grads, ms, vs):
            shape = p.shape
            if not (
                _ffi.writable(p, shape, dtype)
                and _ffi.writable(g, shape, dtype)
                and _ffi.writable(m, shape, dtype)
                and _ffi.writable(v, shape, dtype)
            ):
                return False
        arrays = np.array([data(a) for group in (params, grads, ms, vs) for a in group], np.int64)
        offsets = np.zeros(len(params) + 1, np.int64)
        np.cumsum([p.size for p in params], out=offsets[1:])
        s = _rounded(settings, dtype)
        mode = decay_mode if settings[1] else 0
        fn(ptr(arrays), ptr(offsets), len(params), ptr(s), mode, chunk(), backend.threads)
        return True

    return kernel


def _sgd(fn: Any, dtype: np.dtype, backend: Any, ptr: Callable) -> Callable:
    chunk = _ffi.min_chunk

    def kernel(
        p: np.ndarray, g: np.ndarray, buf: np.ndarray | None, settings: Any, *, decay: bool, first: bool,
        nesterov: bool,
    ) -> bool:  # fmt: skip
        """One SGD step in place; `settings` as in optim.c (doubles), `buf` the momentum buffer or None
        (no momentum). False, with nothing written, when an array is not a contiguous one of the
        kernel's dtype."""
        state = (p, g) if buf is None else (p, g, buf)
        if not all(_ffi.writable(a, p.shape, dtype) for a in state):
            return False
        s = _rounded(settings, dtype)
        flags = SGD_DECAY * decay
        if buf is not None:
            flags |= SGD_MOMENTUM | SGD_FIRST * first | SGD_NESTEROV * nesterov
        fn(
            ptr(p),
            ptr(g),
            None if buf is None else ptr(buf),
            ptr(s),
            flags,
            p.size,
            chunk(),
            backend.threads,
        )
        return True

    return kernel


def register(backend: Any, lib: Library) -> None:
    for dtype_name, dtype in DTYPES.items():
        fn = lib.fn(f"vg_adam_{dtype_name}", _ADAM_ARGS)
        every = lib.fn(f"vg_adam_all_{dtype_name}", _ADAM_ALL_ARGS)
        for name in ("adam", "adamw"):
            backend.register_optimizer(name, dtype_name, _adam(fn, dtype, backend, lib.ptr, name == "adamw"))
            backend.register_optimizer(
                f"{name}_all", dtype_name, _adam_all(every, dtype, backend, lib, name == "adamw")
            )
        fn = lib.fn(f"vg_sgd_{dtype_name}", _SGD_ARGS)
        backend.register_optimizer("sgd", dtype_name, _sgd(fn, dtype, backend, lib.ptr))
