"""The check_index kernel (checks.c): i64 positions copied and checked in C, exact (the same result as
the reference, or its error: the reference raises it where the C function reports an entry out of
range)."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ops import check_index
from ...ops._op import never_warns
from ._ffi import Library

CHECKS = ("check_index",)

_I64 = np.dtype(np.int64)
_ARGS = [
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int64,
    ctypes.c_int,
    ctypes.c_int,
]


def _check_index(fn: Any, reference: Callable, ptr: Callable) -> Callable:
    def kernel(idx: np.ndarray, size: int, name: str, what: str, ignore: int | None) -> np.ndarray:
        plain = type(idx) is np.ndarray and idx.dtype == _I64
        if not (plain and idx.flags.c_contiguous and idx.flags.aligned):
            return reference(idx, size, name, what, ignore)
        out = np.empty(idx.shape, _I64)
        ignoring, wrap = ignore is not None, what == "item"
        if fn(ptr(idx), ptr(out), idx.size, size, ignore if ignoring else 0, ignoring, wrap):
            return reference(idx, size, name, what, ignore)  # which raises the op's error
        return out

    return never_warns(kernel)


def register(backend: Any, lib: Library) -> None:
    fn = lib.fn("vg_check_index_i64", _ARGS, ctypes.c_int)
    backend.register("check_index", _check_index(fn, check_index.reference, lib.ptr), "i64")
