"""The OpenBLAS verigrad's fast kernels call: its thread count, and its CBLAS functions through ctypes.

It is the one NumPy uses where that is an OpenBLAS (NumPy's wheels ship one), else the `scipy-openblas32`
package's where it is installed (`pip install verigrad[openblas]`: a NumPy built on another BLAS, or a
platform where NumPy's library cannot be found); `VERIGRAD_BLAS=scipy-openblas32` takes the package's
first, `VERIGRAD_BLAS=numpy` only NumPy's. With neither, `blas_threads()` returns None and `cblas(name)`
None (the cpu backend's products then take their exact path).

Small matrix products are slower with threads than without, and much slower when the cores are
busy, so verigrad starts BLAS on one thread; `verigrad.set_threads(n)` raises it.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
from typing import Any

from ..settings import env_choice


def _names(function: str) -> tuple[str, ...]:
    """How the OpenBLAS wheels (scipy-openblas64, scipy-openblas32) and plain builds name `function`."""
    return tuple(f"{prefix}{function}{suffix}" for prefix in ("scipy_", "") for suffix in ("64_", ""))


_SETTERS = _names("openblas_set_num_threads")
_GETTERS = _names("openblas_get_num_threads")
_CONFIGS = _names("openblas_get_config")
_CORENAMES = _names("openblas_get_corename")
PACKAGE = "scipy-openblas32"
SOURCES = ("numpy", PACKAGE)
# OpenBLAS's cores whose GEMM has small-matrix kernels (products of at most 100^3 multiply-adds, a and b
# read in place): its AVX-512 ones.
_SMALL_KERNEL_CORES = ("skylakex", "cooperlake", "sapphirerapids")
SMALL_KERNEL_WORK = 100**3
# How NumPy's OpenBLAS wheels (scipy-openblas64, scipy-openblas32) and plain builds name `cblas_sgemm`.
_CBLAS_NAMES = ("scipy_cblas_{}64_", "cblas_{}64_", "scipy_cblas_{}", "cblas_{}")


def _chosen() -> tuple[str, ...]:
    """The sources to try, in order, as `VERIGRAD_BLAS` says (unset: NumPy's, then the package's)."""
    choice = env_choice("VERIGRAD_BLAS", SOURCES)
    return (choice,) if choice else SOURCES


@functools.cache
def _found() -> tuple[ctypes.CDLL, str, str] | None:
    """The library, its source and its file, or None."""
    for source in _chosen():
        found = _numpys() if source == "numpy" else _package()
        if found is not None:
            return found[0], source, found[1]
    return None


def _library() -> ctypes.CDLL | None:
    found = _found()
    return None if found is None else found[0]


def source() -> tuple[str, str] | None:
    """Where the OpenBLAS comes from ("numpy" or "scipy-openblas32") and its file; None without one."""
    found = _found()
    return None if found is None else found[1:]


def _openblas(path: str) -> ctypes.CDLL | None:
    lib = ctypes.CDLL(path)
    return lib if any(hasattr(lib, name) for name in _SETTERS) else None


def _numpys() -> tuple[ctypes.CDLL, str] | None:
    """The OpenBLAS NumPy has loaded, found among the process's mapped files (Linux)."""
    import numpy as np

    np.dot(np.ones(2), np.ones(2))  # make sure the library is loaded
    if not sys.platform.startswith("linux"):
        return None
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and "/" in line}
    for path in sorted(paths):
        lib = _openblas(path)
        if lib is not None:
            return lib, path
    return None


def _package() -> tuple[ctypes.CDLL, str] | None:
    """The scipy-openblas32 package's library, where the package is installed."""
    try:
        import scipy_openblas32
    except ImportError:
        return None
    path = os.path.join(scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library(fullname=True))
    lib = _openblas(path)
    return None if lib is None else (lib, path)


def _first(lib: ctypes.CDLL, names: tuple[str, ...]):
    return next(getattr(lib, n) for n in names if hasattr(lib, n))


def set_blas_threads(n: int) -> bool:
    """Use `n` BLAS threads; False when NumPy's BLAS is not an OpenBLAS verigrad can reach."""
    lib = _library()
    if lib is None:
        return False
    _first(lib, _SETTERS)(ctypes.c_int(n))
    return True


def thread_functions() -> tuple[Any, Any] | None:
    """OpenBLAS's C functions `int get_num_threads(void)` and `void set_num_threads(int)`, or None."""
    lib = _library()
    return None if lib is None else (_first(lib, _GETTERS), _first(lib, _SETTERS))


def blas_threads() -> int | None:
    lib = _library()
    return None if lib is None else int(_first(lib, _GETTERS)())


def core() -> str | None:
    """The name of the kernels OpenBLAS chose for this CPU (e.g. "SkylakeX", "Haswell"), or None."""
    lib = _library()
    if lib is None or not any(hasattr(lib, n) for n in _CORENAMES):
        return None
    get = _first(lib, _CORENAMES)
    get.restype = ctypes.c_char_p
    return (get() or b"").decode() or None


def small_kernel_work() -> int:
    """The most multiply-adds OpenBLAS's small-matrix GEMM kernels take on this CPU; 0 where it has none."""
    name = core()
    return SMALL_KERNEL_WORK if name is not None and name.lower() in _SMALL_KERNEL_CORES else 0


def transposes_wide() -> bool:
    """Whether f32 products with a transposed b and fewer rows than columns run faster transposed (c^T =
    b^T a^T) on this CPU's OpenBLAS kernels: its AVX-512 ones, those with small-matrix kernels."""
    return small_kernel_work() > 0


def _int64(lib: ctypes.CDLL, symbol: str) -> bool:
    """Whether `symbol` takes 64-bit integers: named so, or an OpenBLAS built with USE64BITINT."""
    if symbol.endswith("64_"):
        return True
    get = _first(lib, _CONFIGS) if any(hasattr(lib, n) for n in _CONFIGS) else None
    if get is None:
        return False
    get.restype = ctypes.c_char_p
    return b"USE64BITINT" in (get() or b"")


@functools.cache
def cblas(name: str) -> tuple[Any, bool] | None:
    """NumPy's OpenBLAS function `cblas_<name>` (e.g. "sgemm") and whether its integers are 64-bit; None
    when there is no such library or function. The caller sets `argtypes` and `restype`."""
    lib = _library()
    if lib is None:
        return None
    for pattern in _CBLAS_NAMES:
        symbol = pattern.format(name)
        if hasattr(lib, symbol):
            return getattr(lib, symbol), _int64(lib, symbol)
    return None
