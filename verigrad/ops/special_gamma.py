"""The regularized incomplete gamma functions P(a, x) = gamma(a, x) / Gamma(a) (PyTorch's igamma,
special.gammainc) and Q(a, x) = 1 - P(a, x) (igammac, special.gammaincc), element-wise on floats.

The reference, in f64 rounded once: the power series of P for x < a + 1, Legendre's continued fraction
of Q (modified Lentz) elsewhere, the other as 1 minus it. Both carry the factor x^a e^-x / Gamma(a),
taken as exp(a log1pmx((x - a) / a)) sqrt(a / 2 pi) / exp(Stirling's correction) for a >= 10, where
a log x - x - lgamma(a) would cancel. Special values are PyTorch's (NaN for a or x below 0; a = 0 gives
1 for P where x > 0, NaN at x = 0; x = 0 gives 0; a = inf gives 0 for finite x, NaN for x = inf;
x = inf gives 1). The gradient is PyTorch's: with respect to x only (exp((a - 1) log x - x - lgamma(a))),
a gradient with respect to a raises NotImplementedError at backward, as PyTorch's does.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import from_numpy_dtype, promote
from ..shapes import broadcast
from ._op import Op, promoted_float, unbroadcast
from ._samples import binary
from .binary import Elementwise
from .special import _lgamma_object, lgamma
from .special_zeta import _zeta_scalar
from .unary import exp, log

_EPS = 1e-17  # the series and the fraction stop when a step changes the sum by less than this
_MAX_STEPS = 100_000  # enough for a up to about 1e8 near x = a (the steps grow as sqrt(a))
# Stirling's series of lgamma(a) - ((a - 1/2) log a - a + log(2 pi) / 2): B_2k / (2k (2k - 1))
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156, -3617 / 122400)


# (-1)^k zeta(k) / k, k = 2, 3, ...: the series of lgamma(1 + a) + gamma a for |a| <= 1/2
_LGAMMA1P = [(-1) ** k * _zeta_scalar(float(k), 1.0) / k for k in range(2, 60)]
_EULER = 0.57721566490153286061


def _lgamma1p(a: np.ndarray) -> np.ndarray:
    """lgamma(1 + a) for |a| <= 1/2, with a's own digits (1 + a rounds them away)."""
    total = np.zeros_like(a)
    for c in reversed(_LGAMMA1P):
        total = (total + c) * a
    return (total - _EULER) * a


def _small_a_upper(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Q(a, x) for a < 1/2 and x < a + 1, where P is near 1 and 1 - P would lose Q's digits:
    1 - x^a / Gamma(1 + a) S with S = 1 + a sum_n>=1 (-x)^n / ((a + n) n!), taken as -expm1(u) - e^u (S - 1),
    u = a log x - lgamma(1 + a)."""
    term = np.ones_like(a)
    rest = np.zeros_like(a)
    for n in range(1, 40):
        term = term * -x / n
        rest = rest + term / (a + n)
    u = a * np.log(x) - _lgamma1p(a)
    return -np.expm1(u) - np.exp(u) * a * rest


def _log1pmx(t: np.ndarray) -> np.ndarray:
    """log(1 + t) - t without cancellation near 0 (its series for |t| < 1/2)."""
    with np.errstate(divide="ignore"):
        out = np.log1p(t) - t
    small = np.abs(t) < 0.5
    if small.any():
        s = t[small]
        power, total = s * s, np.zeros_like(s)
        for k in range(2, 60):
            total += (power / k) * (-1.0 if k % 2 == 0 else 1.0)
            power = power * s
        out[small] = total
    return out


def _log_factor(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """log(x^a e^-x / Gamma(a)) for a, x > 0 (finite)."""
    with np.errstate(all="ignore"):
        plain = a * np.log(x) - x - np.asarray(_lgamma_object(a), dtype=np.float64)
    large = a >= 10
    if large.any():
        b = a[large]
        correction = np.zeros_like(b)
        inverse = 1 / b
        for k, c in enumerate(_STIRLING):
            correction += c * inverse ** (2 * k + 1)
        plain[large] = b * _log1pmx((x[large] - b) / b) + 0.5 * np.log(b / (2 * np.pi)) - correction
    return plain


def _series(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """P(a, x) = x^a e^-x / Gamma(a + 1) sum_n x^n / ((a + 1) ... (a + n))."""
    term = np.ones_like(a)
    total = term.copy()
    active = np.ones(a.shape, dtype=bool)
    denominator = a.copy()
    for _ in range(_MAX_STEPS):
        denominator[active] += 1
        term[active] *= x[active] / denominator[active]
        total[active] += term[active]
        active &= term > _EPS * total
        if not active.any():
            break
    return np.exp(_log_factor(a, x)) * total / a


def _fraction(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Q(a, x) = x^a e^-x / Gamma(a) / (x + 1 - a - 1 (1 - a) / (x + 3 - a - 2 (2 - a) / ...)), by the
    modified Lentz method (x >= a + 1)."""
    tiny = 1e-300
    b = x + 1 - a
    c = np.full_like(a, 1 / tiny)
    d = 1 / b
    h = d.copy()
    active = np.ones(a.shape, dtype=bool)
    for i in range(1, _MAX_STEPS):
        an = -i * (i - a[active])
        b[active] += 2
        dd = an * d[active] + b[active]
        dd = np.where(np.abs(dd) < tiny, tiny, dd)
        cc = b[active] + an / c[active]
        cc = np.where(np.abs(cc) < tiny, tiny, cc)
        d[active] = 1 / dd
        c[active] = cc
        step = d[active] * cc
        h[active] *= step
        done = np.abs(step - 1) < _EPS
        active[np.flatnonzero(active)[done]] = False
        if not active.any():
            break
    return np.exp(_log_factor(a, x)) * h


def _regularized(a: np.ndarray, x: np.ndarray, upper: bool) -> np.ndarray:
    """P(a, x), or Q(a, x) with `upper`, in f64 with PyTorch's special values."""
    a, x = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(x, np.float64))
    out = np.full(a.shape, np.nan)
    with np.errstate(invalid="ignore"):
        negative = (a < 0) | (x < 0)
        rules = [  # the first that applies decides, in PyTorch's order
            (negative, np.nan),
            ((a == 0) & (x > 0), 0.0 if upper else 1.0),
            (a == 0, np.nan),
            (x == 0, 1.0 if upper else 0.0),
            (np.isinf(a) & np.isinf(x), np.nan),
            (np.isinf(a), 1.0 if upper else 0.0),
            (np.isinf(x), 0.0 if upper else 1.0),
        ]
    decided = np.zeros(a.shape, dtype=bool)
    for where, value in rules:
        now = where & ~decided
        out[now] = value
        decided |= now
    rest = ~decided & ~np.isnan(a) & ~np.isnan(x)
    if rest.any():
        ar, xr = a[rest], x[rest]
        by_series = xr < ar + 1
        p = np.empty_like(ar)
        q = np.empty_like(ar)
        if by_series.any():
            p[by_series] = _series(ar[by_series], xr[by_series])
            q[by_series] = 1 - p[by_series]
            small = by_series & (ar < 0.5)
            if small.any():
                q[small] = _small_a_upper(ar[small], xr[small])
        if (~by_series).any():
            q[~by_series] = _fraction(ar[~by_series], xr[~by_series])
            p[~by_series] = 1 - q[~by_series]
        out[rest] = np.clip(q if upper else p, 0.0, 1.0)
    return out


def _reference(upper: bool):
    def run(a: np.ndarray, x: np.ndarray) -> np.ndarray:
        dtype = promote(from_numpy_dtype(a.dtype), from_numpy_dtype(x.dtype)).np  # an i64 a with f16 x: f16
        return _regularized(a, x, upper).astype(dtype)

    return run


def _vjp(upper: bool):
    name = "igammac" if upper else "igamma"

    def vjp(g, out, a, x):
        if a.requires_grad:
            raise NotImplementedError(f"the derivative for '{name}: input' is not implemented, as in PyTorch")
        if not x.requires_grad:
            return None, None
        density = exp((a - 1) * log(x) - x - lgamma(a))  # d/dx P, PyTorch's formula
        return None, unbroadcast(g * (-density if upper else density), x.shape)

    return vjp


def _op(name: str, upper: bool, doc: str) -> Op:
    op = Elementwise(  # a 0-d or Python-number operand takes the other's dtype, as PyTorch's
        name,
        shape=broadcast,
        dtype=promoted_float,  # an integer beside a float is promoted, as PyTorch's
        reference=_reference(upper),
        vjp=_vjp(upper),
        samples=binary(0.1, 6.0),
        torch=lambda t, a, x: getattr(t, name)(a, x),
        exact=False,
        doc=doc,
    )
    # PyTorch records it but cannot differentiate it in a: the registry's finite-difference checks skip it
    op.no_derivative = f"the derivative for '{name}: input' is not implemented, as in PyTorch"
    return op


igamma = _op("igamma", False, "The regularized lower incomplete gamma function P(a, x).")
igammac = _op("igammac", True, "The regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x).")
