"""An ndarray's data address, read fast: where NumPy's object layout keeps the pointer, found by probing."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np


def _interface_data(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def data_offset() -> int | None:
    """Where an ndarray object keeps its data pointer (NumPy's stable object layout), found by probing;
    reading it there costs a tenth of `__array_interface__`. None when the probe is not conclusive."""
    probes = [np.empty(n, np.float32) for n in (3, 5, 7)]
    for offset in range(8, 129, 8):
        if all(ctypes.c_void_p.from_address(id(a) + offset).value == _interface_data(a) for a in probes):
            return offset
    return None


def data_reader() -> Callable[[np.ndarray], int]:
    """A function giving an ndarray's data address."""
    offset = data_offset()
    if offset is None:
        return _interface_data
    at = ctypes.c_void_p.from_address
    return lambda a: at(id(a) + offset).value or 0
