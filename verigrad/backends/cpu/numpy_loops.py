"""NumPy's own f64 inner loops of exp, expm1, log, log1p, sin, cos and power, for the C kernels to call.

On its AVX-512 builds NumPy computes these with its own SIMD and SVML routines, not the C library's, and
the references (f32 ones round the doubles) follow them; elementwise.c's f64 kernels run these loops a
block at a time, and its f32 kernels recompute with them the few elements whose rounding the C library's
routines leave in doubt, so that both give the reference's bits. A loop is read from its ufunc's C struct
(NumPy's public `PyUFuncObject`: the `functions` and `data` arrays, `ntypes` and `types`), checked against
what the struct says of itself (nargs, ntypes, name) and then by calling it on probe values, which must
give the ufunc's own bits; any mismatch, and the kernels keep the C library's routines alone.
"""

from __future__ import annotations

import ctypes
import sys

import numpy as np

# elementwise.c's NP_exp .. NP_power, in order: ufuncs of one operand, then power's two
ROUTINES = ("exp", "expm1", "log", "log1p", "sin", "cos", "power")
_DOUBLE = 12  # NPY_DOUBLE
LOOP = ctypes.CFUNCTYPE(  # a d->d (or dd->d) inner loop: (args, dimensions, steps, data)
    None,
    ctypes.POINTER(ctypes.c_void_p),
    ctypes.POINTER(ctypes.c_ssize_t),
    ctypes.POINTER(ctypes.c_ssize_t),
    ctypes.c_void_p,
)


def _field(address: int, kind: type) -> object:
    return kind.from_address(address).value


def find(ufunc: np.ufunc) -> tuple[int, int | None] | None:
    """The address of `ufunc`'s f64 inner loop (d->d, or dd->d for two operands) and its data pointer,
    or None where the struct does not read as expected."""
    if sys.implementation.name != "cpython" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return None
    base = id(ufunc) + 16  # past PyObject_HEAD: nin, nout, nargs, identity (ints), then the pointers
    nin, nout, nargs = (_field(base + 4 * i, ctypes.c_int) for i in range(3))
    functions, data = _field(base + 16, ctypes.c_void_p), _field(base + 24, ctypes.c_void_p)
    ntypes, name = _field(base + 32, ctypes.c_int), _field(base + 40, ctypes.c_void_p)
    types = _field(base + 48, ctypes.c_void_p)
    if (nin, nout, nargs, ntypes) != (ufunc.nin, 1, ufunc.nin + 1, ufunc.ntypes) or nin not in (1, 2):
        return None
    if not (functions and name and types) or ctypes.string_at(name) != ufunc.__name__.encode():
        return None
    signatures = ctypes.string_at(types, ntypes * nargs)
    for i in range(ntypes):
        if set(signatures[nargs * i : nargs * (i + 1)]) == {_DOUBLE}:
            loop = _field(functions + 8 * i, ctypes.c_void_p)
            return (loop, _field(data + 8 * i, ctypes.c_void_p) if data else None) if loop else None
    return None


def _agrees(ufunc: np.ufunc, loop: int, data: int | None, x: np.ndarray) -> bool:
    """Whether the loop gives the ufunc's bits on x (contiguous f64; a binary ufunc's second operand is
    x reversed), every operand with unit strides."""
    operands = [x, x[::-1].copy()][: ufunc.nin]
    out = np.empty_like(x)
    args = (ctypes.c_void_p * (ufunc.nin + 1))(*(a.ctypes.data for a in [*operands, out]))
    steps = (ctypes.c_ssize_t * (ufunc.nin + 1))(*[8] * (ufunc.nin + 1))
    with np.errstate(all="ignore"):
        LOOP(loop)(args, (ctypes.c_ssize_t * 1)(x.size), steps, data)
        expected = ufunc(*operands)
    return bool(np.array_equal(out, expected, equal_nan=True))


def loops(probe: np.ndarray) -> list[tuple[int, int | None]] | None:
    """The loops of ROUTINES in order, each checked on `probe` (f64 values), or None."""
    found = []
    for name in ROUTINES:
        ufunc = getattr(np, name)
        loop = find(ufunc)
        if loop is None or not _agrees(ufunc, *loop, np.ascontiguousarray(probe, np.float64)):
            return None
        found.append(loop)
    return found
