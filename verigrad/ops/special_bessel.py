"""Bessel functions of integer order and the Airy function Ai, element-wise, as torch.special's:
bessel_j0, bessel_j1, bessel_y0, bessel_y1, modified_bessel_k0, modified_bessel_k1, their scaled
exp(x) K forms, and airy_ai. PyTorch records no gradient for any of them; neither does verigrad.

Each is evaluated in f64 and rounded once to the input's float dtype (integers and bool give f32). The
references come from the definitions, in three regimes of |x|:

- up to 2, the power series (Neumann's with the logarithm for Y and K; Maclaurin's for Ai);
- the middle, the integrals: Bessel's J_nu(z) = 1/pi int_0^pi cos(nu t - z sin t) dt - sin(nu pi)/pi
  int_0^inf exp(-z sinh t - nu t) dt (for integer nu the first alone, by the trapezoid rule, exact for
  this periodic integrand) and its Y counterpart (Gauss-Legendre), and
  K_nu(z) = int_0^inf exp(-z cosh t) cosh(nu t) dt (the trapezoid rule, exact to rounding for an
  integrand analytic in a strip: every z above 2);
- above 25, Hankel's asymptotic expansion (its terms below 1e-20 there).

Ai(x) is (1/pi) sqrt(x/3) K_1/3(zeta) for x > 2 and (sqrt(-x)/3) (J_1/3(zeta) + J_-1/3(zeta)) for
x < -2, with zeta = 2/3 |x|^3/2. Special values are PyTorch's: J at +-inf is NaN, Y and K are NaN below
0 and -inf (Y) or inf (K) at 0, Ai at +-inf is NaN.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..dtypes import DType
from ..errors import DTypeError
from ._op import Op, Sample, float_dtype, same_shape
from ._samples import UNARY_SHAPES, uniform
from .unary import in_f64

_EULER = 0.57721566490153286061
_SERIES_END = 2.0  # |x| up to this: the power series
_HANKEL_START = 25.0  # z above this: Hankel's expansion
_CHUNK = 4096  # elements a quadrature evaluates at once (its nodes times these are held in memory)


# power series (|x| <= 2, about 25 terms) -----------------------------------------------------------
def _j_series(x: np.ndarray, order: int) -> np.ndarray:
    """J_0 or J_1: sum_k (-x^2/4)^k / (k! (k + order)!) (x/2)^order."""
    q = -x * x / 4
    term = np.ones_like(x)
    total = term.copy()
    for k in range(1, 30):
        term = term * q / (k * (k + order))
        total = total + term
    return total if order == 0 else total * (x / 2)


def _log_series(x: np.ndarray, order: int, sign: float) -> np.ndarray:
    """sum_k (psi(k + 1) + psi(k + 1 + order)) (sign x^2/4)^k / (k! (k + order)!), where
    psi(k + 1) = H_k - gamma."""
    q = sign * x * x / 4
    term = np.ones_like(x)
    total = term * (-2 * _EULER + (1.0 if order else 0.0))
    h = 0.0  # the harmonic number H_k
    for k in range(1, 30):
        term = term * q / (k * (k + order))
        h += 1.0 / k
        total = total + term * (2 * h - 2 * _EULER + (1.0 / (k + 1) if order else 0.0))
    return total


def _y_series(x: np.ndarray, order: int) -> np.ndarray:
    """Y_0, Y_1 by Neumann's series (A&S 9.1.11) for 0 < x <= 2."""
    log = np.log(x / 2)
    if order == 0:  # the series' sum holds psi(k + 1) twice: halved
        return (2 / np.pi) * (log * _j_series(x, 0) - _log_series(x, 0, -1.0) / 2)
    tail = (x / (2 * np.pi)) * _log_series(x, 1, -1.0)
    return -2 / (np.pi * x) + (2 / np.pi) * log * _j_series(x, 1) - tail


def _i_series(x: np.ndarray, order: int) -> np.ndarray:
    q = x * x / 4
    term = np.ones_like(x)
    total = term.copy()
    for k in range(1, 30):
        term = term * q / (k * (k + order))
        total = total + term
    return total if order == 0 else total * (x / 2)


def _k_series(x: np.ndarray, order: int) -> np.ndarray:
    """K_0, K_1 by their series (A&S 9.6.13, 9.6.11) for 0 < x <= 2."""
    log = np.log(x / 2)
    if order == 0:
        return -log * _i_series(x, 0) + _log_series(x, 0, 1.0) / 2
    return 1 / x + log * _i_series(x, 1) - (x / 4) * _log_series(x, 1, 1.0)


# integrals (2 < z <= 25 for J and Y; every z > 2 for K) ------------------------------------------------
@functools.cache
def _legendre(m: int) -> tuple[np.ndarray, np.ndarray]:
    return np.polynomial.legendre.leggauss(m)


def _chunked(fn, z: np.ndarray) -> np.ndarray:
    out = np.empty_like(z)
    for start in range(0, z.size, _CHUNK):
        out[start : start + _CHUNK] = fn(z[start : start + _CHUNK])
    return out


def _bessel_integrals(nu: float, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(J_nu(z), Y_nu(z)) for 2 <= z <= 25 (1-d) by Bessel's and Schlaefli's integrals (A&S 9.1.22, 9.1.23
    with DLMF 10.9.6), each by 96-point Gauss-Legendre (exact to rounding: the integrands are smooth and
    oscillate at most 25 / pi times)."""
    nodes, weights = _legendre(96)
    theta = (nodes + 1) * (np.pi / 2)  # [0, pi]
    phase = nu * theta[None, :] - z[:, None] * np.sin(theta)[None, :]
    w = weights * (np.pi / 2) / np.pi
    j = np.cos(phase) @ w
    y = -np.sin(phase) @ w
    # int_0^T e^{-z sinh t} (...) dt, T where z sinh T - |nu| T passes 46: what is left is below e^-46
    end = np.arcsinh(50.0 / z)
    t = (nodes[None, :] + 1) * (end[:, None] / 2)
    decay = np.exp(-z[:, None] * np.sinh(t))
    scale = end / 2
    up, down = np.exp(nu * t), np.exp(-nu * t)
    j = j - (math.sin(nu * np.pi) / np.pi) * ((decay * down) @ weights) * scale
    y = y - (1 / np.pi) * ((decay * (up + down * math.cos(nu * np.pi))) @ weights) * scale
    return j, y


def _j_trapezoid(order: int, z: np.ndarray) -> np.ndarray:
    """J_order(z) for integer order and 2 <= z <= 25 (1-d): Bessel's integral 1/pi int_0^pi cos(order t -
    z sin t) dt by the trapezoid rule on 48 intervals, which for this periodic (and even) integrand is the
    rule over a whole period, exact up to J_96(z) (below 1e-40)."""
    steps = 48
    theta = np.linspace(0.0, np.pi, steps + 1)
    weights = np.full(steps + 1, 1.0 / steps)
    weights[[0, -1]] = 0.5 / steps
    return np.cos(order * theta[None, :] - z[:, None] * np.sin(theta)[None, :]) @ weights


def _k_scaled(nu: float, z: np.ndarray) -> np.ndarray:
    """exp(z) K_nu(z) for z > 2 (1-d): exp(z) int_0^inf exp(-z cosh t) cosh(nu t) dt by the trapezoid
    rule, whose error for an integrand analytic in |Im t| < pi/2 falls as exp(-pi^2 / h); h also resolves
    the peak's width 1/sqrt(z). 24 steps reach where z (cosh t - 1) passes 45 for every z > 2."""
    h = np.minimum(0.2, 0.5 / np.sqrt(z))
    total = np.full_like(z, 0.5)
    for j in range(1, 25):
        t = j * h
        total = total + np.exp(-2 * z * np.sinh(t / 2) ** 2) * np.cosh(nu * t)
    return total * h


# Hankel's expansion (z > 25) -------------------------------------------------------------------------
def _hankel(nu: float, z: np.ndarray, shift: float) -> tuple[np.ndarray, np.ndarray]:
    """(J_nu(z), Y_nu(z)) for z > 25 (A&S 9.2.5-9.2.10): sqrt(2/(pi z)) (P cos chi - Q sin chi) and
    (P sin chi + Q cos chi), chi = z - shift with shift = (nu/2 + 1/4) pi; 40 terms, the last below 1e-20."""
    mu = 4 * nu * nu
    term = np.ones_like(z)
    p, q = term.copy(), np.zeros_like(z)
    for k in range(1, 41):
        term = term * (mu - (2 * k - 1) ** 2) / (k * 8 * z)
        if k % 2:
            q = q + (term if k % 4 == 1 else -term)
        else:
            p = p + (term if k % 4 == 0 else -term)
    chi = z - shift
    c, s = np.cos(chi), np.sin(chi)
    amplitude = np.sqrt(2 / (np.pi * z))
    return amplitude * (p * c - q * s), amplitude * (p * s + q * c)


def _j_far(order: int, z: np.ndarray) -> np.ndarray:
    """J_order(z) for z > 2 (1-d)."""
    j = np.empty_like(z)
    middle = z <= _HANKEL_START
    if middle.any():
        j[middle] = _chunked(lambda v: _j_trapezoid(order, v), z[middle])
    if (~middle).any():
        j[~middle] = _hankel(order, z[~middle], (order / 2 + 0.25) * np.pi)[0]
    return j


def _y_far(order: int, z: np.ndarray) -> np.ndarray:
    """Y_order(z) for z > 2 (1-d)."""
    y = np.empty_like(z)
    middle = z <= _HANKEL_START
    if middle.any():
        y[middle] = _chunked(lambda v: _bessel_integrals(order, v)[1], z[middle])
    if (~middle).any():
        y[~middle] = _hankel(order, z[~middle], (order / 2 + 0.25) * np.pi)[1]
    return y


# the functions (f64 in and out) ----------------------------------------------------------------------
def _pieces(x: np.ndarray, small, large) -> np.ndarray:
    """`small` (the series) where |x| <= 2, `large` of the 1-d array of the other finite |x| elsewhere;
    NaN where x is not finite (the callers set the limits PyTorch gives)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, np.nan)
    ax = np.abs(x)
    near = ax <= _SERIES_END
    if near.any():
        out[near] = small(x[near])
    far = ~near & np.isfinite(x)
    if far.any():
        out[far] = large(x[far])
    return out


def _bessel_j0(x: np.ndarray) -> np.ndarray:
    return _pieces(x, lambda v: _j_series(v, 0), lambda v: _j_far(0, np.abs(v)))


def _bessel_j1(x: np.ndarray) -> np.ndarray:
    return _pieces(x, lambda v: _j_series(v, 1), lambda v: np.sign(v) * _j_far(1, np.abs(v)))


def _positive_only(x: np.ndarray, fn, at_zero: float) -> np.ndarray:
    """fn where x > 0; `at_zero` at +-0; NaN below 0 (and at NaN)."""
    x = np.asarray(x, dtype=np.float64)
    out = np.full(x.shape, np.nan)
    pos = x > 0
    out[pos] = fn(x[pos])
    out[x == 0] = at_zero
    return out


def _bessel_y(order: int):
    def y(v: np.ndarray) -> np.ndarray:
        out = np.full(v.shape, np.nan)  # +inf: NaN, as PyTorch's
        near = v <= _SERIES_END
        out[near] = _y_series(v[near], order)
        far = ~near & np.isfinite(v)
        if far.any():
            out[far] = _y_far(order, v[far])
        return out

    return lambda x: _positive_only(x, y, -np.inf)


def _bessel_k(order: int, scaled: bool):
    def k(v: np.ndarray) -> np.ndarray:
        out = np.zeros(v.shape)  # K(inf) = exp(inf) K(inf) = 0, as PyTorch's
        near = v <= _SERIES_END
        with np.errstate(over="ignore"):
            series = _k_series(v[near], order)
            out[near] = series * np.exp(v[near]) if scaled else series
            far = ~near & np.isfinite(v)
            if far.any():
                value = _chunked(lambda z: _k_scaled(order, z), v[far])
                out[far] = value if scaled else value * np.exp(-v[far])
        return out

    return lambda x: _positive_only(x, k, np.inf)


_AI0 = 0.355028053887817239260  # Ai(0) = 1 / (3^(2/3) Gamma(2/3))
_AIP0 = 0.258819403792806798405  # -Ai'(0) = 1 / (3^(1/3) Gamma(1/3))


def _airy_series(x: np.ndarray) -> np.ndarray:
    """Ai(x) = Ai(0) f(x) + Ai'(0) g(x), f and g Maclaurin's series (A&S 10.4.2-10.4.3) for |x| <= 2."""
    cube = x * x * x
    f_term, g_term = np.ones_like(x), x.copy()
    f, g = f_term.copy(), g_term.copy()
    for k in range(1, 30):
        f_term = f_term * cube / ((3 * k - 1) * (3 * k))
        g_term = g_term * cube / ((3 * k) * (3 * k + 1))
        f, g = f + f_term, g + g_term
    return _AI0 * f - _AIP0 * g


def _airy_far(x: np.ndarray) -> np.ndarray:
    """Ai(x) for |x| > 2 by Bessel functions of order 1/3 (A&S 10.4.14-10.4.15)."""
    out = np.empty_like(x)
    ax = np.abs(x)
    zeta = (2.0 / 3.0) * ax * np.sqrt(ax)
    pos = x > 0
    if pos.any():
        z = zeta[pos]
        with np.errstate(under="ignore"):
            scaled = _chunked(lambda v: _k_scaled(1.0 / 3.0, v), z)
            out[pos] = np.sqrt(ax[pos] / 3) / np.pi * scaled * np.exp(-z)
    neg = ~pos
    if neg.any():
        z = zeta[neg]
        total = np.empty_like(z)
        middle = z <= _HANKEL_START
        for nu in (1.0 / 3.0, -1.0 / 3.0):
            part = np.empty_like(z)
            if middle.any():
                part[middle] = _chunked(lambda v, nu=nu: _bessel_integrals(nu, v)[0], z[middle])
            if (~middle).any():
                part[~middle] = _hankel(nu, z[~middle], (nu / 2 + 0.25) * np.pi)[0]
            total = part if nu > 0 else total + part
        out[neg] = np.sqrt(ax[neg]) / 3 * total
    return out


def _airy_ai(x: np.ndarray) -> np.ndarray:
    return _pieces(x, _airy_series, _airy_far)


# the ops -------------------------------------------------------------------------------------------
def _samples(low: float, high: float):
    """Each regime: the shapes of every unary op over [low, high], and points around the seams."""

    def make(rng: np.random.Generator) -> list[Sample]:
        seams = np.array([-30.0, -25.5, -24.5, -2.01, -1.99, 1e-3, 1.99, 2.01, 7.3, 24.5, 25.5, 60.0])
        seams = seams[(seams >= low) & (seams <= high)]
        return [Sample((uniform(rng, s, low, high),)) for s in UNARY_SHAPES] + [Sample((seams,))]

    return make


def _no_half(name: str):
    """float_dtype, refusing f16 as PyTorch's CPU kernels do (they have no f16 version)."""

    def rule(x: DType, **_) -> DType:
        d = float_dtype(x)
        if d.name == "f16":
            raise DTypeError(f"special.{name} is not implemented for f16 (nor is PyTorch's); cast to float32")
        return d

    return rule


def _bessel_op(name: str, formula, low: float, high: float, doc: str) -> Op:
    return Op(
        name,
        shape=same_shape,
        dtype=_no_half(name),
        reference=lambda x: in_f64(formula)(x if x.dtype.kind == "f" else x.astype(np.float32)),
        differentiable=False,  # PyTorch's records no gradient
        samples=_samples(low, high),
        torch=lambda t, x: getattr(t.special, name)(x),
        exact=False,
        doc=doc,
    )


bessel_j0 = _bessel_op("bessel_j0", _bessel_j0, -40.0, 40.0, "The Bessel function of the first kind J_0.")
bessel_j1 = _bessel_op("bessel_j1", _bessel_j1, -40.0, 40.0, "The Bessel function of the first kind J_1.")
bessel_y0 = _bessel_op(
    "bessel_y0", _bessel_y(0), 0.0, 40.0, "The Bessel function of the second kind Y_0 (NaN below 0)."
)
bessel_y1 = _bessel_op(
    "bessel_y1", _bessel_y(1), 0.0, 40.0, "The Bessel function of the second kind Y_1 (NaN below 0)."
)
modified_bessel_k0 = _bessel_op(
    "modified_bessel_k0", _bessel_k(0, False), 0.0, 30.0, "The modified Bessel function K_0 (NaN below 0)."
)
modified_bessel_k1 = _bessel_op(
    "modified_bessel_k1", _bessel_k(1, False), 0.0, 30.0, "The modified Bessel function K_1 (NaN below 0)."
)
scaled_modified_bessel_k0 = _bessel_op(
    "scaled_modified_bessel_k0", _bessel_k(0, True), 0.0, 60.0, "exp(x) K_0(x), without K_0's underflow."
)
scaled_modified_bessel_k1 = _bessel_op(
    "scaled_modified_bessel_k1", _bessel_k(1, True), 0.0, 60.0, "exp(x) K_1(x), without K_1's underflow."
)
airy_ai = _bessel_op("airy_ai", _airy_ai, -30.0, 30.0, "The Airy function Ai.")
