"""The Hurwitz zeta function zeta(x, q) = sum_k (k + q)^-x (PyTorch's special.zeta), its reference
Cephes' zeta.c, as PyTorch's kernel: the series summed directly until its terms pass 9, then the
Euler-Maclaurin tail with Bernoulli-number coefficients; evaluated in f64 and rounded once."""

from __future__ import annotations

import math

import numpy as np

from ..shapes import broadcast
from ._op import Op, float_dtype, unbroadcast
from ._samples import binary

# Cephes' A[i] = (2i + 2)! / B_(2i+2)
_A = (
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1.8924375803183791606e9,
    7.47242496e10,
    -2.950130727918164224e12,
    1.1646782814350067249e14,
    -4.5979787224074726105e15,
    1.8152105401943546773e17,
    -7.1661652561756670113e18,
)
_MACHEP = 1.11022302462515654042e-16


def _zeta_scalar(x: float, q: float) -> float:
    x, q = np.float64(x), np.float64(q)  # IEEE arithmetic, as the C: 0 / 0 is NaN, an overflow inf
    if x == 1.0:
        return math.inf
    if x < 1.0:
        return math.nan
    if q <= 0.0:
        if q == np.floor(q):
            return math.inf
        if x != np.floor(x):
            return math.nan  # q^-x is not real
    s = q**-x
    a, i, b = q, 0, 0.0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a**-x
        s += b
        if abs(b / s) < _MACHEP:
            return s
    w = a
    s += b * w / (x - 1.0)
    s -= 0.5 * b
    a, k = 1.0, 0.0
    for coefficient in _A:
        a *= x + k
        b /= w
        t = a * b / coefficient
        s += t
        if abs(t / s) < _MACHEP:
            break
        k += 1.0
        a *= x + k
        b /= w
        k += 1.0
    return s


_zeta_object = np.frompyfunc(_zeta_scalar, 2, 1)


def _zeta(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    dtype = np.result_type(x, q)
    dtype = dtype if dtype.kind == "f" else np.dtype(np.float32)
    with np.errstate(all="ignore"):
        # np.asarray: of 0-d operands a ufunc of objects answers a Python float, not an array
        out = np.asarray(_zeta_object(x.astype(np.float64), q.astype(np.float64)), dtype=np.float64)
    return out.astype(dtype)


def _zeta_vjp(g, out, x, q):
    """PyTorch's: -x * zeta(x + 1, q) for q; none for x (PyTorch raises, as here)."""
    if x.requires_grad:
        raise NotImplementedError(
            "the derivative of special.zeta with respect to x is not implemented, as in PyTorch"
        )
    return None, unbroadcast(g * -x * zeta(x + 1.0, q), q.shape) if q.requires_grad else None


zeta = Op(
    "zeta",
    shape=broadcast,
    dtype=float_dtype,
    reference=_zeta,
    vjp=_zeta_vjp,
    samples=binary(1.5, 4.0),
    torch=lambda t, x, q: t.special.zeta(x, q),
    exact=False,
    doc="The Hurwitz zeta function sum_k (k + q)^-x: inf at x == 1 and at q a non-positive integer, NaN for "
    "x < 1 (Cephes' zeta, as PyTorch's). Differentiable in q only, as PyTorch's.",
)
# PyTorch records zeta but cannot differentiate it in x: the registry's finite-difference checks skip it
zeta.no_derivative = "the derivative of special.zeta with respect to x is not implemented, as in PyTorch"
