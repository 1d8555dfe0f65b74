"""Stand-ins for NumPy's f64 inner loops that write NaN for every element: handed to the C kernels in
place of NumPy's routines, they show which elements go through those routines."""

from __future__ import annotations

import ctypes

from verigrad.backends.cpu import numpy_loops


def _nan_loop(result: int) -> numpy_loops.LOOP:
    """A loop over dims[0] contiguous doubles whose result is args[result]: NaN for each."""

    @numpy_loops.LOOP
    def loop(args, dims, steps, data):
        for i in range(dims[0]):
            ctypes.c_double.from_address(args[result] + 8 * i).value = float("nan")

    return loop


NAN_UNARY = _nan_loop(1)  # d->d (exp, expm1, ..)
NAN_BINARY = _nan_loop(2)  # dd->d (power)
