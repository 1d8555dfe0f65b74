"""Special functions, element-wise: erfc, erfinv, lgamma, digamma, polygamma, i0, i1, and the
bit-level nextafter and signbit.

Each is evaluated in f64 and rounded once to the input's float dtype (ints give f32), as the other
transcendentals. NumPy has none of erfinv, lgamma, digamma, polygamma or i1; their references are
written here: lgamma and erfc vectorise Python's `math` functions (correctly rounded to about an ulp),
erfinv refines a rational first guess by Newton steps on `math.erf`, digamma and polygamma shift the
argument up by the recurrence and sum the asymptotic series with Bernoulli numbers (about 1e-15
relative away from the poles), i1 sums its power series or, for |x| > 30, its asymptotic series.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..dtypes import DType, bool_, from_numpy_dtype, promote
from ..shapes import broadcast
from ..tensor import Tensor
from ._op import Op, Sample, float_dtype, no_bf16, promoted_float, same_shape, unbroadcast
from ._samples import UNARY_SHAPES, binary, unary, uniform
from .binary import Elementwise, where
from .creation import zeros_like
from .unary import in_f64, log, log1p

_erfc_object = np.frompyfunc(math.erfc, 1, 1)
_erf_object = np.frompyfunc(math.erf, 1, 1)
_lgamma_object = np.frompyfunc(lambda v: math.lgamma(v) if v != -math.inf else math.inf, 1, 1)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
# Bernoulli numbers B_2k for the asymptotic series of digamma and polygamma
_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798]
_SHIFT = 20.0  # the argument is moved above this before the asymptotic series


def _as_f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _float_input(x: np.ndarray) -> np.ndarray:
    return x if x.dtype.kind == "f" else x.astype(np.float32)


def _special_op(name: str, formula, vjp, *, low: float = -2.0, high: float = 2.0, doc: str, **kw) -> Op:
    return Op(
        name,
        shape=same_shape,
        dtype=float_dtype,
        reference=lambda x: in_f64(formula)(_float_input(x)),
        vjp=vjp,
        samples=unary(low, high),
        exact=False,
        doc=doc,
        **kw,
    )


# the formulas below take and give f64 ---------------------------------------------------------------
def _erfc(x: np.ndarray) -> np.ndarray:
    return _as_f64(_erfc_object(x))


def _lgamma(x: np.ndarray) -> np.ndarray:
    out = np.full(x.shape, np.inf)
    poles = (x <= 0) & (x == np.floor(x))  # lgamma has poles at 0, -1, -2, ...: +inf as PyTorch's
    ok = ~poles & ~np.isnan(x)
    out[ok] = _as_f64(_lgamma_object(x[ok]))
    out[np.isnan(x)] = np.nan
    return out


def _erfinv(y: np.ndarray) -> np.ndarray:
    """Giles' single-precision approximation, then two Newton steps on erf(x) - y (quadratic, so the
    error falls below an ulp of f64); +-inf at +-1 and NaN outside [-1, 1]."""
    w = -np.log((1.0 - y) * (1.0 + y))
    small = w < 5.0
    ws, wl = w - 2.5, np.sqrt(np.where(small, 5.0, w)) - 3.0
    ps = np.polyval(
        [2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
         -0.00125372503, -0.00417768164, 0.246640727, 1.50140941], ws)  # fmt: skip
    pl = np.polyval(
        [-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
         -0.0076224613, 0.00943887047, 1.00167406, 2.83297682], wl)  # fmt: skip
    x = np.where(small, ps, pl) * y
    for _ in range(2):
        inside = np.isfinite(x)
        err = _as_f64(_erf_object(np.where(inside, x, 0.0))) - y
        x = np.where(inside, x - err / (_TWO_OVER_SQRT_PI * np.exp(-x * x)), x)
    x = np.where(np.abs(y) == 1.0, np.copysign(np.inf, y), x)
    return np.where(np.abs(y) > 1.0, np.nan, x)


def _polygamma_f64(n: int, x: np.ndarray) -> np.ndarray:
    """psi^(n)(x): the recurrence moves x above _SHIFT, then the asymptotic series (n = 0: digamma)."""
    x = x.copy()
    acc = np.zeros_like(x)
    poles = (x <= 0) & (x == np.floor(x))
    sign = -1.0 if n % 2 == 0 else 1.0  # (-1)^(n+1)
    fact = math.factorial(n)
    while True:
        low = (x < _SHIFT) & ~poles & np.isfinite(x)
        if not low.any():
            break
        acc[low] += (-1.0 / x[low]) if n == 0 else sign * fact / x[low] ** (n + 1)
        x[low] += 1.0
    inv = 1.0 / x
    if n == 0:
        series = np.log(x) - 0.5 * inv
        inv2, power = inv * inv, inv * inv
        for k, b in enumerate(_BERNOULLI, start=1):
            series -= b / (2 * k) * power
            power = power * inv2
    else:
        # psi^(n)(x) ~ (-1)^(n+1) [ (n-1)!/x^n + n!/(2 x^(n+1)) + sum B_2k (2k+n-1)!/((2k)! x^(2k+n)) ]
        series = math.factorial(n - 1) * inv**n + fact * 0.5 * inv ** (n + 1)
        for k, b in enumerate(_BERNOULLI, start=1):
            series += b * math.factorial(2 * k + n - 1) / math.factorial(2 * k) * inv ** (2 * k + n)
        series = sign * series
    out = acc + series
    if n == 0:
        out = np.where(x == np.inf, np.inf, out)
        zero = np.copysign(np.inf, -x)  # PyTorch: -inf at +0, +inf at -0, NaN at the negative integers
        return np.where(poles, np.where(x == 0, zero, np.nan), out)
    # psi^(n)(inf) -> 0; PyTorch's trigamma gives 0, its zeta-based n >= 2 NaN (0/0 in its series)
    out = np.where(x == np.inf, 0.0 if n == 1 else np.nan, out)
    return np.where(poles, np.inf if n % 2 else -np.inf, out)  # (-1)^(n+1) inf, as PyTorch's zeta


def _polygamma(n: int, x: np.ndarray) -> np.ndarray:
    """psi^(n)(x) in x's float dtype. At the negative integers PyTorch's trigamma (n = 1) reflects,
    -pi^2 / sin(pi x)^2 + psi^(1)(1 - x), and sin(pi x) in the dtype is the rounding error of pi x, not
    0: a large finite number (1.3e15 at -1 in f32), reproduced here; the series term is below its ulp."""
    x = _float_input(x)
    out = _polygamma_f64(n, _as_f64(x)).astype(x.dtype)
    poles = (x < 0) & (x == np.floor(x))
    if n != 1 or not poles.any():
        return out
    pi = x.dtype.type(math.pi)
    sin = np.sin(_as_f64(pi * x[poles])).astype(x.dtype)
    with np.errstate(divide="ignore", over="ignore"):
        out[poles] = (pi * pi) / (sin * sin)
    return out


def _digamma(x: np.ndarray) -> np.ndarray:
    return _polygamma_f64(0, x)


def _i1(x: np.ndarray) -> np.ndarray:
    """The modified Bessel function I1: its power series for |x| <= 30, else the asymptotic series."""
    ax = np.abs(x)
    small = np.where(ax <= 30.0, ax, 0.0)
    half, term = small / 2, small / 2
    total = term.copy()
    for k in range(1, 120):
        term = term * half * half / (k * (k + 1))
        total = total + term
    big = np.where(ax > 30.0, ax, 31.0)
    mu, corr, term = 4.0, np.ones_like(big), np.ones_like(big)
    for k in range(1, 12):
        term = -term * (mu - (2 * k - 1) ** 2) / (k * 8.0 * big)
        corr = corr + term
    with np.errstate(over="ignore"):
        asym = np.exp(big) / np.sqrt(2 * np.pi * big) * corr
    out = np.copysign(np.where(ax <= 30.0, total, asym), x)
    return np.where(np.isfinite(x), out, np.nan)  # PyTorch's i1 is NaN at +-inf too


# the ops ----------------------------------------------------------------------------------------------
erfc = _special_op(
    "erfc",
    _erfc,
    lambda g, out, x: (g * (x * x * -1.0).exp() * -_TWO_OVER_SQRT_PI,),
    torch=lambda t, x: t.erfc(x),
    doc="1 - erf(x), without the cancellation for large x.",
)
erfinv = _special_op(
    "erfinv",
    _erfinv,
    lambda g, out, x: (g * (out * out).exp() * (math.sqrt(math.pi) / 2),),
    low=-0.99,
    high=0.99,
    torch=lambda t, x: t.erfinv(x),
    doc="The inverse of erf on [-1, 1]; +-inf at +-1, NaN outside.",
)
lgamma = _special_op(
    "lgamma",
    _lgamma,
    lambda g, out, x: (g * digamma(x),),
    low=0.1,
    high=6.0,
    torch=lambda t, x: t.lgamma(x),
    doc="log|Gamma(x)|; +inf at the poles 0, -1, -2, ...",
)
digamma = _special_op(
    "digamma",
    _digamma,
    lambda g, out, x: (g * polygamma(x, n=1),),
    low=0.1,
    high=6.0,
    torch=lambda t, x: t.digamma(x),
    doc="d/dx lgamma(x); -inf at 0 and NaN at the negative integers, as PyTorch's.",
)


def _polygamma_samples(rng: np.random.Generator) -> list[Sample]:
    # n = 1 is held to exact values in the parity tests: PyTorch's trigamma is a short series (1e-10)
    return [Sample((uniform(rng, s, 1.0, 6.0),), {"n": n}) for s in UNARY_SHAPES for n in (2, 3)]


def _polygamma_params(x, n: int) -> dict:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"polygamma takes an order n >= 0, got {n!r}")
    return {"n": n}


polygamma = Op(
    "polygamma",
    shape=lambda x, n: x,
    dtype=lambda x, n: float_dtype(x),
    params=_polygamma_params,
    reference=lambda x, n: _polygamma(n, x),
    vjp=lambda g, out, x, n: (g * polygamma(x, n=n + 1),),
    samples=_polygamma_samples,
    exact=False,
    torch=lambda t, x, n: t.polygamma(n, x),
    doc="The n-th derivative of digamma (n = 0 is digamma itself).",
)
i1 = _special_op(
    "i1",
    _i1,
    lambda g, out, x: (g * where(x == 0, 0.5, i0(x) - out / x),),  # I1' = I0 - I1/x; 1/2 at 0
    low=-3.0,
    high=3.0,
    torch=lambda t, x: t.special.i1(x),
    doc="The modified Bessel function of the first kind, order 1.",
)
i0 = _special_op(
    "i0",
    np.i0,
    lambda g, out, x: (g * i1(x),),
    low=-3.0,
    high=3.0,
    torch=lambda t, x: t.i0(x),
    doc="The modified Bessel function of the first kind, order 0.",
)


def _nextafter(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.nextafter in the operands' promoted dtype (PyTorch's: f32 with f64 steps in f64)."""
    out = promote(from_numpy_dtype(a.dtype), from_numpy_dtype(b.dtype)).np
    return np.nextafter(a.astype(out, copy=False), b.astype(out, copy=False))


def _nextafter_vjp(g: Tensor, out: Tensor, x: Tensor, y: Tensor) -> tuple:
    """PyTorch's: the gradient passes to x as through the identity, y's is zero."""
    return unbroadcast(g, x.shape), zeros_like(y)


nextafter = Elementwise(
    "nextafter",
    shape=broadcast,
    dtype=promoted_float,
    reference=_nextafter,
    vjp=_nextafter_vjp,
    samples=binary(),
    torch=lambda t, a, b: t.nextafter(a, b),
    doc="The next float after x in the direction of y (its gradient PyTorch's: 1 for x, 0 for y).",
)


def _signbit_dtype(x: DType, **_) -> DType:
    no_bf16(x)
    return bool_


def _signbit(x: np.ndarray) -> np.ndarray:
    """np.signbit; False everywhere for bool (PyTorch's: no sign bit)."""
    return np.zeros(x.shape, bool) if x.dtype == np.bool_ else np.signbit(x)


signbit = Op(
    "signbit",
    shape=same_shape,
    dtype=_signbit_dtype,
    reference=_signbit,
    differentiable=False,
    samples=unary(),
    torch=lambda t, x: t.signbit(x),
    doc="True where the sign bit is set (negative numbers and -0.0).",
)


def _x_times(a: np.ndarray, b: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """x * fn(y) as PyTorch's xlogy / xlog1py: 0 where x == 0, NaN where y is NaN; f16 and f32 round
    fn(y) to f32 (its C routine), then to their dtype, before the product (exact in f64) is rounded."""
    dtype = np.result_type(a, b)
    dtype = dtype if dtype.kind == "f" else np.dtype(np.float32)
    x, y = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(all="ignore"):
        factor = fn(y) if dtype == np.float64 else fn(y).astype(np.float32).astype(dtype)
        out = np.where(x == 0, 0.0, x * factor)
    return np.where(np.isnan(y), np.nan, out).astype(dtype)


def _xlogy(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _x_times(a, b, np.log)


def _xlogy_vjp(g, out, x, y):
    """PyTorch's: log(y) for x (0 where x == 0 and y <= 0), x / y for y."""
    gx = where((x == 0) & (y <= 0), 0.0, g * log(y)) if x.requires_grad else None
    gy = g * x / y if y.requires_grad else None
    return (
        unbroadcast(gx, x.shape) if gx is not None else None,
        unbroadcast(gy, y.shape) if gy is not None else None,
    )


xlogy = Op(
    "xlogy",
    shape=broadcast,
    dtype=float_dtype,
    reference=_xlogy,
    vjp=_xlogy_vjp,
    samples=binary(0.0, 2.0),
    torch=lambda t, x, y: t.xlogy(x, y),
    exact=False,
    doc="x * log(y), 0 where x == 0 (even where y is 0 or inf), NaN where y is NaN; log(y) rounded to the "
    "dtype, then the product, as PyTorch's.",
)


def _xlog1py(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _x_times(a, b, np.log1p)


def _xlog1py_vjp(g, out, x, y):
    """PyTorch's: log1p(y) for x (0 where x == 0 and y <= -1), x / (1 + y) for y."""
    gx = where((x == 0) & (y <= -1), 0.0, g * log1p(y)) if x.requires_grad else None
    gy = g * x / (y + 1) if y.requires_grad else None
    return (
        unbroadcast(gx, x.shape) if gx is not None else None,
        unbroadcast(gy, y.shape) if gy is not None else None,
    )


xlog1py = Op(
    "xlog1py",
    shape=broadcast,
    dtype=float_dtype,
    reference=_xlog1py,
    vjp=_xlog1py_vjp,
    samples=binary(0.0, 2.0),
    torch=lambda t, x, y: t.special.xlog1py(x, y),
    exact=False,
    doc="x * log1p(y), 0 where x == 0 (even where y is -1 or inf), NaN where y is NaN; log1p(y) rounded "
    "to the dtype, then the product, as PyTorch's.",
)
