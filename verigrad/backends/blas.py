"""The thread count of the BLAS library NumPy uses (OpenBLAS), set through its C API.

Small matrix products are slower with threads than without, and much slower when the cores are
busy, so verigrad starts BLAS on one thread; `verigrad.set_threads(n)` raises it. A NumPy built on
another BLAS is left as it is (`blas_threads()` then returns None).
"""

from __future__ import annotations

import ctypes
import functools
import sys

_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads")
_GETTERS = ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_", "openblas_get_num_threads")


@functools.cache
def _library() -> ctypes.CDLL | None:
    import numpy as np

    np.dot(np.ones(2), np.ones(2))  # make sure the library is loaded
    if not sys.platform.startswith("linux"):
        return None
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    for path in sorted(paths):
        lib = ctypes.CDLL(path)
        if any(hasattr(lib, name) for name in _SETTERS):
            return lib
    return None


def _first(lib: ctypes.CDLL, names: tuple[str, ...]):
    return next(getattr(lib, n) for n in names if hasattr(lib, n))


def set_blas_threads(n: int) -> bool:
    """Use `n` BLAS threads; False when NumPy's BLAS is not an OpenBLAS verigrad can reach."""
    lib = _library()
    if lib is None:
        return False
    _first(lib, _SETTERS)(ctypes.c_int(n))
    return True


def blas_threads() -> int | None:
    lib = _library()
    return None if lib is None else int(_first(lib, _GETTERS)())
