"""Every f32 input of a native build's float gelu, gelu_tanh and gelu_deriv (VERIGRAD_NATIVE=1) against
the reference: the most ulps for gelu and gelu_tanh, and for gelu_deriv (whose terms cancel near
x = -0.7518) the most ulps and the smallest absolute tolerance that covers it beside a relative one of
RTOL. The reference is computed in chunks as the ops' references compute it (erf the C library's,
through the erf kernel), so a full sweep takes a few minutes where `verigrad verify --every-f32` calls
Python's erf an element at a time.

    VERIGRAD_NATIVE=1 python tools/gelu_float_sweep.py            # all 2^32 inputs
    VERIGRAD_NATIVE=1 python tools/gelu_float_sweep.py --step 97  # every 97th pattern
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

CHUNK = 1 << 22
RTOL = 2.0**-22


def ordered(a: np.ndarray) -> np.ndarray:
    """f32 bit patterns as integers in the order of their values (ulp distance = difference)."""
    i = a.view(np.int32).astype(np.int64)
    return np.where(i < 0, -(2**31) - i, i)


def references(x: np.ndarray, erf: object) -> dict[str, np.ndarray]:
    """unary.py's _gelu and _gelu_deriv on f64 x, erf through `erf` (the C library's, as math.erf)."""
    e = erf(x / math.sqrt(2.0))
    with np.errstate(all="ignore"):
        pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        return {"gelu": 0.5 * x * (1.0 + e), "gelu_deriv": 0.5 * (1.0 + e) + x * pdf}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", type=int, default=1, help="every STEP-th bit pattern (1: all)")
    args = parser.parse_args()
    assert cpu.build_info()["native"], "run with VERIGRAD_NATIVE=1"
    verigrad.set_threads(1)
    names = ("gelu", "gelu_deriv", "gelu_tanh")
    kernels = {name: cpu.cpu.native(REGISTRY[name], verigrad.f32) for name in names}
    erf = cpu.cpu.native(REGISTRY["erf"], verigrad.f64)
    worst = {name: (0, 0.0, 0.0) for name in kernels}  # ulps, its input, atol needed beside RTOL
    total = 0
    for start in range(0, 1 << 32, CHUNK * args.step):
        bits = np.arange(start, min(start + CHUNK * args.step, 1 << 32), args.step, dtype=np.uint64)
        x = bits.astype(np.uint32).view(np.float32)
        total += x.size
        refs = references(x.astype(np.float64), erf)
        with np.errstate(all="ignore"):
            refs["gelu_tanh"] = REGISTRY["gelu_tanh"].reference(x)  # NumPy's expm1: its own loop
        for name, kernel in kernels.items():
            with np.errstate(invalid="ignore"):
                ref, y = refs[name].astype(np.float32), kernel(x)
            nan = np.isnan(ref)
            assert (np.isnan(y) == nan).all(), f"{name}: NaN where the reference has none, or the reverse"
            ulps = np.abs(ordered(y) - ordered(ref))
            ulps[nan] = 0
            i = int(ulps.argmax())
            with np.errstate(invalid="ignore"):
                excess = np.abs(y.astype(np.float64) - ref) - RTOL * np.abs(ref.astype(np.float64))
            excess[nan | np.isinf(ref)] = 0.0
            most, x_at, atol = worst[name]
            worst[name] = (
                max(most, int(ulps[i])),
                x_at if most >= ulps[i] else float(x[i]),
                max(atol, float(excess.max())),
            )
    print(f"{total} inputs, path {cpu.vector_path()}")
    for name, (most, x_at, atol) in worst.items():
        needed = math.log2(max(atol, 2.0**-200))
        print(f"{name}: at most {most} ulps (x = {x_at!r}); atol beside rtol 2^-22: 2^{needed:.2f}")


if __name__ == "__main__":
    main()
