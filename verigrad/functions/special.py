"""PyTorch's element-wise special and sign functions written with the ops: xlogy, logit, fmax / fmin,
reciprocal, sgn, heaviside, ldexp, logical_xor, mvlgamma, logaddexp2, the probit pair ndtr / log_ndtr
and ndtri, erfcx, the scaled Bessel functions i0e / i1e, spherical_bessel_j0, entr, and PyTorch's
aliases (positive, negative, absolute, arc*, fix). Their gradients are the ops'."""

from __future__ import annotations

import math
from typing import Any

from ..dtypes import DEFAULT_FLOAT, bool_, f16, f32
from ..errors import DTypeError
from ..ops._op import floating_only
from ..ops.binary import atan2, div, maximum, ne, result_type, where
from ..ops.creation import tensor
from ..ops.special import erfc, erfinv, i0, i1, lgamma
from ..ops.special import polygamma as _polygamma
from ..ops.special import xlog1py as _xlog1py
from ..ops.special import xlogy as _xlogy
from ..ops.unary import abs, acos, acosh, asin, asinh, atan, atanh, exp, exp2, log, log1p, neg, sin, trunc
from ..tensor import Tensor
from .pointwise import isinf, isnan

_LN2 = math.log(2.0)


def _as_tensor(x: Any, like: Any = None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    dtype = like.dtype if isinstance(like, Tensor) and like.dtype.is_float else None
    return tensor(x, dtype=dtype)


def _promoted(x: Any, y: Any) -> tuple[Tensor, Tensor]:
    """x and y as tensors of PyTorch's result type where it is a float: Python numbers and a 0-d tensor
    beside one with dimensions take its dtype (an f64 0-d x with an f32 y computes in f32)."""
    dtype = result_type(x, y)
    x, y = _as_tensor(x, y), _as_tensor(y, x)
    if not dtype.is_float:
        return x, y
    return (x if x.dtype is dtype else x.cast(dtype)), (y if y.dtype is dtype else y.cast(dtype))


def xlogy(x: Any, y: Any) -> Tensor:
    """x * log(y), 0 where x is 0, NaN where y is NaN, in PyTorch's result type."""
    return _xlogy(*_promoted(x, y))


def xlog1py(x: Any, y: Any) -> Tensor:
    """x * log1p(y), 0 where x is 0, NaN where y is NaN, in PyTorch's result type."""
    return _xlog1py(*_promoted(x, y))


def sinc(x: Tensor) -> Tensor:
    """sin(pi x) / (pi x), 1 at 0 (the normalised sinc, as PyTorch's); integers give f32."""
    x = _floating(x)
    scaled = where(x == 0, 1.0, x) * math.pi  # 1 where x is 0, so that no 0/0 reaches the gradient
    return where(x == 0, 1.0, sin(scaled) / scaled)


def logit(x: Tensor, eps: float | None = None) -> Tensor:
    """log(p / (1 - p)); with `eps`, p is x clamped to [eps, 1 - eps] first (its gradient 0 outside);
    integers and bools in the default float dtype."""
    x = _floating(x)
    p = x if eps is None else x.clamp(eps, 1.0 - eps)
    return log(p / (1.0 - p))


def fmax(x: Any, y: Any) -> Tensor:
    """The larger of x and y element by element; where one is NaN, the other (NumPy's fmax)."""
    x, y = _as_tensor(x, y), _as_tensor(y, x)
    return where((x >= y) | isnan(y), x, y)


def fmin(x: Any, y: Any) -> Tensor:
    """The smaller of x and y element by element; where one is NaN, the other (NumPy's fmin)."""
    x, y = _as_tensor(x, y), _as_tensor(y, x)
    return where((x <= y) | isnan(y), x, y)


def reciprocal(x: Tensor) -> Tensor:
    """1 / x (integers give f32, as PyTorch's)."""
    return div(1.0, x)


def sgn(x: Tensor) -> Tensor:
    """The sign of x: -1, 0 or 1 (for real tensors PyTorch's sgn is sign)."""
    return x.sign()


def positive(x: Tensor) -> Tensor:
    """x itself; refused for bool tensors, as PyTorch's."""
    if x.dtype is bool_:
        raise DTypeError("positive is not defined for bool tensors (as in PyTorch)")
    return x


def heaviside(x: Tensor, values: Any) -> Tensor:
    """0 where x < 0, `values` where x == 0, 1 where x > 0 (x and values of one dtype, as PyTorch's)."""
    values = _as_tensor(values, x)
    if values.dtype is not x.dtype:
        raise DTypeError(
            f"heaviside takes x and values of one dtype, got {x.dtype.name} and {values.dtype.name}"
        )
    return where(x == 0, values, (x > 0).cast(x.dtype))


def ldexp(x: Tensor, other: Any) -> Tensor:
    """x * 2 ** other, as PyTorch's kernel: 2 ** other in other's float dtype (an integer exponent in the
    result type of x and other, f32 if that is an integer too), then multiplied by x as any mul. A bool
    exponent is refused with a float x, as PyTorch's (which takes it with an integer or bool x)."""
    other = _as_tensor(other)
    if not other.dtype.is_float:
        dtype = result_type(x, other)
        if other.dtype is bool_ and dtype.is_float:
            raise DTypeError(
                f"ldexp: a bool exponent of a {dtype.name} x is not supported (as PyTorch's); "
                "cast it to an integer"
            )
        other = other.cast(dtype if dtype.is_float else DEFAULT_FLOAT)
    return x * exp2(other)


def logical_xor(x: Any, y: Any) -> Tensor:
    """True where exactly one of x and y is non-zero (any dtypes)."""
    return ne(_as_tensor(x) != 0, _as_tensor(y) != 0)


def mvlgamma(x: Tensor, p: int) -> Tensor:
    """The multivariate log-gamma of dimension p: sum of lgamma(x - i/2) for i < p, plus
    p(p-1)/4 log(pi); x must exceed (p - 1) / 2, as PyTorch checks."""
    if not isinstance(p, int) or p < 1:
        raise ValueError(f"mvlgamma takes a dimension p >= 1, got {p!r}")
    if not x.is_abstract and bool((x <= (p - 1) / 2).any()):
        raise ValueError(f"mvlgamma: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    total = lgamma(x)
    for i in range(1, p):
        total = total + lgamma(x - i / 2)
    return total + p * (p - 1) / 4 * math.log(math.pi)


def logaddexp2(x: Any, y: Any) -> Tensor:
    """log2(2**x + 2**y) without overflow, in PyTorch's result type and with PyTorch's formula (an f16
    one computed in f32 and rounded once, as PyTorch's)."""
    x, y = _promoted(x, y)
    dtype = floating_only(x.dtype, y.dtype, what="logaddexp2")
    if dtype is f16:
        x, y = x.cast(f32), y.cast(f32)
    # PyTorch's formula, max + log1p(2^-|x - y|) / ln 2; equal infinities give a gap of 0, not NaN
    gap = where((x == y) & isinf(x), 0.0, x - y)
    out = maximum(x, y) + log1p(exp2(neg(abs(gap)))) * (1 / _LN2)
    return out.cast(f16) if dtype is f16 else out


def _floating(x: Tensor) -> Tensor:
    """x, or an integer or bool x in the default float dtype (first: -x of a u8 tensor would wrap)."""
    return x if x.dtype.is_float else x.cast(DEFAULT_FLOAT)


def ndtr(x: Tensor) -> Tensor:
    """The standard normal CDF, erfc(-x / sqrt 2) / 2; integers give f32."""
    return erfc(neg(_floating(x)) * (1 / math.sqrt(2.0))) * 0.5


def log_ndtr(x: Tensor) -> Tensor:
    """log of the standard normal CDF."""
    return log(ndtr(x))


def ndtri(p: Tensor) -> Tensor:
    """The inverse of the standard normal CDF, sqrt 2 erfinv(2p - 1); integers give f32."""
    return erfinv(_floating(p) * 2 - 1) * math.sqrt(2.0)


def erfcx(x: Tensor) -> Tensor:
    """The scaled complementary error function exp(x^2) erfc(x); integers give f32."""
    x = _floating(x)
    return exp(x * x) * erfc(x)


def i0e(x: Tensor) -> Tensor:
    """The exponentially scaled modified Bessel function of order 0, exp(-|x|) i0(x)."""
    x = _floating(x)
    return i0(x) * exp(neg(abs(x)))


def i1e(x: Tensor) -> Tensor:
    """The exponentially scaled modified Bessel function of order 1, exp(-|x|) i1(x)."""
    x = _floating(x)
    return i1(x) * exp(neg(abs(x)))


def spherical_bessel_j0(x: Tensor) -> Tensor:
    """The spherical Bessel function of the first kind of order 0, sin(x) / x (1 at 0)."""
    x = _floating(x)
    safe = where(x == 0, 1.0, x)  # no 0/0 reaches the gradient
    return where(x == 0, 1.0, sin(safe) / safe)


def entr(x: Tensor) -> Tensor:
    """-x log x elementwise: 0 at 0, -inf below 0, NaN at NaN; integers give f32."""
    x = _floating(x)
    value = neg(x) * log(where(x > 0, x, 1.0))
    return where(x > 0, value, where(x == 0, 0.0 * value, where(isnan(x), x, -math.inf)))


negative = neg
absolute = abs
arccos, arcsin, arctan, arctan2 = acos, asin, atan, atan2
arccosh, arcsinh, arctanh = acosh, asinh, atanh
fix = trunc


def polygamma(n: int, x: Tensor) -> Tensor:
    """PyTorch's polygamma(n, input): the n-th derivative of digamma."""
    return _polygamma(x, n=n)
