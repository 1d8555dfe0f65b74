"""Element-wise binary ops with NumPy broadcasting, comparisons, and `where`.

Operands are computed in their promoted dtype (bool < i32 < i64 < f16 < bf16 < f32 < f64); Python
scalars take the tensor's dtype. Gradients are summed back to each operand's shape.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import DType, bool_, from_numpy_dtype, promote
from ..errors import DTypeError
from ..shapes import broadcast
from ..tensor import Tensor
from ._op import Op, Sample, float_dtype, no_bf16, numeric_dtype, unbroadcast
from ._samples import BINARY_SHAPES, binary, uniform


def _in(dtype: DType, *arrays: np.ndarray) -> list[np.ndarray]:
    return [a.astype(dtype.np, copy=False) for a in arrays]


def _logical_on_bool(*dtypes: DType, **_) -> DType:
    """add and mul keep two bools bool (or, and), as PyTorch's; other dtypes as numeric_dtype."""
    no_bf16(*dtypes)
    out = promote(*dtypes)
    return bool_ if out is bool_ else numeric_dtype(*dtypes)


def _refusing_bool(name: str, hint: str) -> Callable[..., DType]:
    """numeric_dtype, refusing two bools as PyTorch does (`name` of two bool tensors is not supported)."""

    def rule(*dtypes: DType, **_) -> DType:
        if promote(*dtypes) is bool_:
            raise DTypeError(f"{name} of two bool tensors is not supported (as in PyTorch){hint}")
        return numeric_dtype(*dtypes)

    return rule


def _arith(
    name: str, fn: Callable, vjp: Callable, *, dtype=numeric_dtype, low=-2.0, high=2.0, fast=None, **kw
):
    def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = dtype(_np_dtype(a), _np_dtype(b))
        return fn(*_in(out, a, b))

    return Op(
        name,
        shape=broadcast,
        dtype=dtype,
        reference=reference,
        vjp=vjp,
        samples=binary(low, high),
        fast=fast or _same_dtype_fast(fn),
        **kw,
    )


def _same_dtype_fast(fn: Callable, *, check: slice = slice(None)) -> Callable:
    """The plain NumPy function when the operands (those in `check`) already have the dtype the
    reference would convert them to: the conversions are then no-ops."""

    def fast(out: DType, dtypes: tuple[DType, ...], **_) -> Callable | None:
        return fn if all(d is out for d in dtypes[check]) else None

    return fast


def _np_dtype(a: np.ndarray) -> DType:
    return from_numpy_dtype(a.dtype)


def _both(x, y, gx: Callable, gy: Callable):
    """The operands' gradients, gx() and gy() summed to their shapes, each formed only if that operand
    wants one (`x * 0.5` would otherwise multiply and sum its whole gradient for the constant)."""
    return (
        unbroadcast(gx(), x.shape) if x.requires_grad else None,
        unbroadcast(gy(), y.shape) if y.requires_grad else None,
    )


def _pow_vjp(g, out, x, y):
    """PyTorch's: 0 for x where y == 0 (even at x == 0, where y x^(y-1) is NaN), and 0 for y where x == 0
    and y >= 0 (where out log(x) is 0 * -inf); formed in the result's dtype (log of an f32 base in f64
    where the exponent is f64), each cast back to its operand's dtype by autograd."""
    a, b = x.cast(out.dtype), y.cast(out.dtype)
    return _both(
        x,
        y,
        lambda: where(b == 0, 0.0, g * (b * a ** (b - 1))),
        lambda: g * where((a == 0) & (b >= 0), 0.0, out * a.log()),
    )


def _tie_split(g, x, y, x_loses, y_loses):
    """max/min gradient, as PyTorch's: half to each operand on ties, none to the one that loses, all to
    both where neither loses nor ties (a NaN on either side)."""
    return _both(
        x,
        y,
        lambda: where(x == y, g * 0.5, where(x_loses, 0.0, g)),
        lambda: where(x == y, g * 0.5, where(y_loses, 0.0, g)),
    )


add = _arith(
    "add",
    np.add,
    lambda g, out, x, y: _both(x, y, lambda: g, lambda: g),
    dtype=_logical_on_bool,
    torch=lambda t, a, b: a + b,
    doc="x + y",
)
sub = _arith(
    "sub",
    np.subtract,
    lambda g, out, x, y: _both(x, y, lambda: g, lambda: -g),
    dtype=_refusing_bool("sub", "; cast them to an integer dtype first"),
    torch=lambda t, a, b: a - b,
    doc="x - y",
)
mul = _arith(
    "mul",
    np.multiply,
    lambda g, out, x, y: _both(x, y, lambda: g * y, lambda: g * x),
    dtype=_logical_on_bool,
    torch=lambda t, a, b: a * b,
    doc="x * y",
)
div = _arith(
    "div",
    np.divide,
    lambda g, out, x, y: _both(x, y, lambda: g / y, lambda: -(g * out) / y),
    dtype=float_dtype,
    low=0.5,
    high=2.0,
    torch=lambda t, a, b: a / b,
    doc="True division; int operands give f32.",
)


def _in_f64(fn: Callable) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """fn evaluated in f64 on operands of a common dtype, rounded once to it."""

    def evaluate(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return fn(a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)).astype(a.dtype)

    return evaluate


def _f64_filled(a: np.ndarray, shape: tuple) -> np.ndarray:
    """`a` as f64 of `shape`, C-contiguous (unit strides, nothing broadcast): itself where it is."""
    if a.dtype == np.float64 and a.shape == shape and a.flags.c_contiguous:
        return a
    return np.broadcast_to(a, shape).astype(np.float64, order="C")


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x ** y: NumPy's f64 power element by element on operands of a common dtype, rounded once to it,
    but x * x where y is 2 and sqrt(x) where y is 0.5 (with power's +0 at -0 and +inf at -inf). NumPy
    itself takes those two shortcuts only where the exponent is a broadcast scalar (and its AVX-512 builds
    leave their own routine for the C library's on strides too long to gather), so its bits depend on
    the operands' layout; these do not."""
    shape = a.shape if a.shape == b.shape else np.broadcast_shapes(a.shape, b.shape)
    x, y = _f64_filled(a, shape), _f64_filled(b, shape)
    out = np.power(x, y, out=np.empty(shape))
    np.multiply(x, x, out=out, where=y == 2.0)
    root = (y == 0.5) & (x != -np.inf)
    np.sqrt(x, out=out, where=root)
    np.add(out, 0.0, out=out, where=root)  # -0 to +0
    return out.astype(a.dtype, copy=False)


def _integer_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """x ** y on integers, wrapping around as PyTorch's; a negative y gives 0, or 1 and -1 for the bases
    1 and -1 (PyTorch's integer power, where NumPy raises)."""
    negative = b < 0
    out = np.power(a, np.where(negative, 0, b).astype(b.dtype, copy=False))
    if negative.any():
        reciprocal = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
        out = np.where(negative, reciprocal, out).astype(a.dtype, copy=False)
    return out


def _any_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _pow(a, b) if a.dtype.kind == "f" else _integer_pow(a, b)


def _pow_dtype(*dtypes: DType, **_) -> DType:
    """The promoted dtype, integers kept (as PyTorch); bool ** bool has no power, as in PyTorch."""
    out = numeric_dtype(*dtypes)
    if all(d is bool_ for d in dtypes):
        raise DTypeError("pow is not defined for two bool tensors; cast one to an integer or float dtype")
    return out


_power = _arith(
    "pow",
    _any_pow,
    _pow_vjp,
    dtype=_pow_dtype,
    low=0.5,
    high=2.0,
    torch=lambda t, a, b: a**b,
    fast=lambda out, dtypes, **_: _any_pow if all(d is out for d in dtypes) else None,
    exact=False,  # a transcendental: libms differ by an ulp (0.5 ** 0.5 in f64, NumPy vs PyTorch)
    doc="x ** y in the promoted dtype, floats evaluated in f64 and rounded once, integers as PyTorch's "
    "(wrapping around; a negative tensor exponent gives 0, or +-1 for a base of +-1). The gradient in x is "
    "0 where y == 0, in y 0 where x == 0 and y >= 0.",
)


def pow(x: Tensor | float, y: Tensor | float) -> Tensor:
    """x ** y (the `pow` op); an integer or bool tensor to a negative Python int raises, as in PyTorch."""
    if isinstance(x, Tensor) and not x.dtype.is_float and _is_negative_int(y):
        raise DTypeError(f"Integers to negative integer powers are not allowed ({x.dtype.name} ** {y}).")
    return _power(x, y)


def _is_negative_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool) and value < 0


def _atan2_vjp(g, y, x):
    """PyTorch's: g x / r2 and -g y / r2 with r2 = x^2 + y^2, but 0 and -0 at the origin (0 / 0 there)."""
    r2 = x * x + y * y
    r2 = where(r2 == 0, 1.0, r2)
    return _both(y, x, lambda: g * x / r2, lambda: -g * y / r2)


atan2 = _arith(
    "atan2",
    _in_f64(np.arctan2),
    # d atan2(y, x) = (x dy - y dx) / (x^2 + y^2); at the origin 0 (and -0), as PyTorch's
    lambda g, out, y, x: _atan2_vjp(g, y, x),
    dtype=float_dtype,
    low=-2.0,
    high=2.0,
    torch=lambda t, a, b: t.atan2(a, b),
    exact=False,  # a transcendental: libms may differ by an ulp
    doc="The angle of the point (x, y) from the x axis, atan2(y, x) in (-pi, pi], evaluated in f64 and "
    "rounded once.",
)


hypot = _arith(
    "hypot",
    _in_f64(np.hypot),
    # d hypot(x, y) = (x dx + y dy) / hypot(x, y) (NaN at the origin, as PyTorch's)
    lambda g, out, x, y: _both(x, y, lambda: g * x / out, lambda: g * y / out),
    dtype=float_dtype,
    low=-2.0,
    high=2.0,
    torch=lambda t, a, b: t.hypot(a, b),
    exact=False,  # libms may differ by an ulp
    doc="sqrt(x^2 + y^2) without overflow or underflow on the way, evaluated in f64 and rounded once.",
)
logaddexp = _arith(
    "logaddexp",
    _in_f64(np.logaddexp),
    # d log(e^x + e^y) = e^x / (e^x + e^y) dx + ...: exp(x - out), which cannot overflow
    lambda g, out, x, y: _both(x, y, lambda: g * (x - out).exp(), lambda: g * (y - out).exp()),
    dtype=float_dtype,
    low=-3.0,
    high=3.0,
    torch=lambda t, a, b: t.logaddexp(a, b),
    exact=False,  # a transcendental: libms may differ by an ulp
    doc="log(exp(x) + exp(y)) without overflow, evaluated in f64 and rounded once.",
)


def _divisor_samples(rng: np.random.Generator) -> list[Sample]:
    """Dividends of either sign and divisors kept away from zero (an integer remainder by zero has no
    value), broadcast as the binary samples are."""
    out = []
    for sa, sb in BINARY_SHAPES:
        b = np.asarray(rng.uniform(0.5, 3.0, sb) * rng.choice([-1.0, 1.0], sb))
        out.append(Sample((np.asarray(rng.uniform(-7.0, 7.0, sa)), b)))
    return out


def _nonzero_integer_divisor(fn: Callable) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """fn, refusing an integer divisor that holds a zero as PyTorch does (NumPy would give 0)."""

    def evaluate(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if b.dtype.kind in "iub" and not b.all():
            raise ZeroDivisionError(f"{fn.__name__}: integer division by zero (PyTorch raises it too)")
        return fn(a, b)

    return evaluate


def _rounded_quotient(x, y, rounding: str):
    """x / y rounded ("floor" or "trunc"), as the part of a remainder's gradient that has none."""
    return getattr((x / y).detach(), rounding)()


remainder = _arith(
    "remainder",
    _nonzero_integer_divisor(np.remainder),
    # x - y floor(x / y): d/dx 1, d/dy -floor(x / y) (PyTorch's)
    lambda g, out, x, y: _both(x, y, lambda: g, lambda: -g * _rounded_quotient(x, y, "floor")),
    dtype=_refusing_bool("remainder", ""),
    exact=True,
    torch=lambda t, a, b: t.remainder(a, b),
    doc="x - y floor(x / y), with the sign of y (Python's %; as C's fmod, then y added where the signs "
    "differ).",
)
remainder.samples = _divisor_samples

fmod = _arith(
    "fmod",
    _nonzero_integer_divisor(np.fmod),
    lambda g, out, x, y: _both(x, y, lambda: g, lambda: -g * _rounded_quotient(x, y, "trunc")),
    dtype=_refusing_bool("fmod", ""),
    exact=True,
    torch=lambda t, a, b: t.fmod(a, b),
    doc="x - y trunc(x / y), with the sign of x (C's fmod: exact).",
)
fmod.samples = _divisor_samples


def _extreme_dtype(*dtypes: DType, **_) -> DType:
    """maximum / minimum in the promoted dtype: of two bools, a bool (as PyTorch's)."""
    no_bf16(*dtypes)
    return promote(*dtypes)


maximum = _arith(
    "maximum",
    np.maximum,
    lambda g, out, x, y: _tie_split(g, x, y, x < y, x > y),
    dtype=_extreme_dtype,
    exact=True,
    torch=lambda t, a, b: t.maximum(a, b),
    doc="The larger of x and y; on ties each gets half the gradient.",
)
minimum = _arith(
    "minimum",
    np.minimum,
    lambda g, out, x, y: _tie_split(g, x, y, x > y, x < y),
    dtype=_extreme_dtype,
    exact=True,
    torch=lambda t, a, b: t.minimum(a, b),
    doc="The smaller of x and y; on ties each gets half the gradient.",
)


# comparisons and logic -------------------------------------------------------------------------
def _compare_dtype(a: DType, b: DType) -> DType:
    no_bf16(a, b)
    return bool_


def _compare(name: str, fn: Callable, torch_name: str) -> Op:
    def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        joined = promote(_np_dtype(a), _np_dtype(b))
        return fn(*_in(joined, a, b))

    return Op(
        name,
        shape=broadcast,
        dtype=_compare_dtype,
        reference=reference,
        samples=binary(),
        torch=lambda t, a, b: getattr(t, torch_name)(a, b),
        fast=lambda out, dtypes: fn if dtypes[0] is dtypes[1] else None,
        doc=f"x {name} y, as bool.",
    )


eq = _compare("eq", np.equal, "eq")
ne = _compare("ne", np.not_equal, "ne")
lt = _compare("lt", np.less, "lt")
le = _compare("le", np.less_equal, "le")
gt = _compare("gt", np.greater, "gt")
ge = _compare("ge", np.greater_equal, "ge")


def _bool_dtype(*dtypes: DType) -> DType:
    if any(d is not bool_ for d in dtypes):
        raise DTypeError(f"logical ops take bool tensors, got {', '.join(d.name for d in dtypes)}")
    return bool_


def _bool_samples(n: int):
    return lambda rng: [Sample(tuple(rng.random((3, 4)) > 0.5 for _ in range(n)))]


logical_and = Op(
    "logical_and",
    shape=broadcast,
    dtype=_bool_dtype,
    reference=np.logical_and,
    samples=_bool_samples(2),
    torch=lambda t, a, b: t.logical_and(a, b),
    doc="x and y, element-wise on bool tensors.",
)
logical_or = Op(
    "logical_or",
    shape=broadcast,
    dtype=_bool_dtype,
    reference=np.logical_or,
    samples=_bool_samples(2),
    torch=lambda t, a, b: t.logical_or(a, b),
    doc="x or y, element-wise on bool tensors.",
)
logical_not = Op(
    "logical_not",
    shape=lambda s: s,
    dtype=_bool_dtype,
    reference=np.logical_not,
    samples=_bool_samples(1),
    torch=lambda t, a: t.logical_not(a),
    doc="not x, element-wise on a bool tensor.",
)


def _where_dtype(c: DType, a: DType, b: DType) -> DType:
    if c is not bool_:
        raise DTypeError(f"the condition of where must be bool, got {c.name}")
    no_bf16(a, b)
    return promote(a, b)


def _where_reference(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = promote(_np_dtype(a), _np_dtype(b))
    return np.where(c, *_in(out, a, b))


def _where_samples(rng: np.random.Generator) -> list[Sample]:
    shapes = [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), ()), ((4,), (3, 4), (1,))]
    return [Sample((rng.random(c) > 0.5, uniform(rng, a), uniform(rng, b))) for c, a, b in shapes]


def _where_vjp(g, out, c, x, y):
    return (None, unbroadcast(where(c, g, 0.0), x.shape), unbroadcast(where(c, 0.0, g), y.shape))


where = Op(
    "where",
    shape=broadcast,
    dtype=_where_dtype,
    reference=_where_reference,
    vjp=_where_vjp,
    samples=_where_samples,
    torch=lambda t, c, a, b: t.where(c, a, b),
    exact=True,
    fast=_same_dtype_fast(np.where, check=slice(1, None)),
    doc="where(cond, x, y): x where cond holds, else y.",
)
