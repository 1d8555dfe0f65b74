"""Element-wise binary ops with NumPy broadcasting, comparisons and `where` (bitwise ops: bitwise.py).

Operands are computed in the dtype PyTorch's promotion gives them (`result_type`): bool < integers <
floats; within a category, tensors with dimensions decide over 0-d tensors, and those over Python
scalars (an f32 tensor times an f64 0-d tensor is f32; an i32 tensor plus 2.5 is f32). Gradients are
summed back to each operand's shape.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .. import modes
from ..dtypes import DEFAULT_FLOAT, DEFAULT_INT, DType, bf16, bool_, f16, f32, from_numpy_dtype, promote
from ..errors import DTypeError
from ..shapes import broadcast
from ..tensor import Tensor
from ._fma import fma_f32, fma_f64
from ._op import Op, Sample, float_dtype, lift, no_bf16, numeric_dtype, promoted_float, unbroadcast
from ._samples import BINARY_SHAPES, binary, uniform
from .data_in import check_number
from .movement import cast


# PyTorch's promotion of operands --------------------------------------------------------------
def result_type(*operands: object) -> DType:
    """PyTorch's torch.result_type: the dtype an element-wise op computes these operands in. Each
    group, tensors with dimensions, 0-d tensors and Python scalars, is promoted on its own; a later group
    counts only where its category (bool < integer < float) is higher than the earlier ones'."""
    groups: list[DType | None] = [None, None, None]
    for a in operands:
        if isinstance(a, Tensor):
            group, d = (0 if a.ndim else 1), a.dtype
        else:
            group, d = 2, _scalar_dtype(a)
        groups[group] = d if groups[group] is None else promote(groups[group], d)
    return _combine(groups[0], _combine(groups[1], groups[2]))


def _scalar_dtype(value: object) -> DType:
    if isinstance(value, list | tuple):  # a Python sequence of numbers is weak as its numbers are
        value = _KIND_EXAMPLE.get(np.asarray(value).dtype.kind, value)
    if isinstance(value, bool):
        return bool_
    if isinstance(value, int | np.integer):
        return DEFAULT_INT
    if isinstance(value, float | np.floating | np.bool_):  # PyTorch reads a NumPy bool as a float
        return DEFAULT_FLOAT
    raise TypeError(f"result_type takes tensors and Python numbers, got {type(value).__name__} {value!r}")


_KIND_EXAMPLE = {"b": True, "i": 0, "u": 0, "f": 0.0}


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    """`higher`, unless `lower` is of a higher category (PyTorch's combine_categories)."""
    if higher is None or lower is None:
        return lower if higher is None else higher
    if higher.is_float:
        return higher
    if higher is bool_ or lower.is_float:
        return promote(higher, lower)
    return higher


class Elementwise(Op):
    """An element-wise op whose operands (from `first` on; where's condition is not one) are promoted as
    PyTorch's: Python scalars and the 0-d tensors of a category its operands with dimensions already
    hold take the dtype the op computes in before anything else (an f32 tensor times an f64 0-d tensor
    is computed in f32; -1 in a u8 tensor's division stays -1.0, in its sum wraps to 255).

    With `opmath_scalar` (mul: "either" operand; the divisions: "second", the divisor), an f16 result
    with such a scalar operand there is computed in f32 with the scalar's f32 value and rounded once to
    f16, as PyTorch's kernels take that operand in their f32 arithmetic (f16 x * 0.1 is x * 0.1f
    rounded, not x * f16(0.1)).

    `no_derivative` marks an op PyTorch records but cannot differentiate (floor_divide): its result
    requires grad, and a backward pass through it raises this message, as PyTorch's does."""

    def __init__(
        self,
        name: str,
        *,
        first: int = 0,
        no_derivative: str | None = None,
        opmath_scalar: str | None = None,
        **kw,
    ) -> None:
        if no_derivative is not None:
            kw["vjp"] = _refusing_vjp(no_derivative)
        super().__init__(name, **kw)
        self.first = first
        self.no_derivative = no_derivative
        self.opmath_scalar = opmath_scalar
        self.to_float = kw.get("dtype") is float_dtype  # integers computed in the default float

    def __call__(self, *args, **params) -> Tensor:
        if len(args) - self.first > 1:
            args, back = _weak_operands(self, args)
            if back is not None:
                return cast(super().__call__(*args, **params), back)
        return super().__call__(*args, **params)


def _refusing_vjp(message: str) -> Callable:
    def vjp(*_, **__):
        raise NotImplementedError(message)

    return vjp


def _weak_operands(op: Elementwise, args: tuple) -> tuple[tuple, DType | None]:
    """The operands promoted as PyTorch's (see Elementwise), and the dtype to cast the result to where
    it is computed in f32 for f16 (`opmath_scalar`), else None."""
    first = op.first
    operands = args[first:]
    if all(type(a) is Tensor for a in operands):
        dtype = operands[0].dtype
        if all(a.dtype is dtype for a in operands):
            return args, None  # the common case: nothing to promote
        if all(a.ndim for a in operands) or not any(a.ndim for a in operands):
            return args, None  # no 0-d tensor beside one with dimensions: the reference converts them
    operands = tuple(_operand(a) for a in operands)
    out = result_type(*operands)
    compute = DEFAULT_FLOAT if op.to_float and not out.is_float else out
    if compute is bf16:
        return (*args[:first], *lift(operands)), None  # refused by the dtype rule
    dims = any(isinstance(a, Tensor) and a.ndim for a in operands)
    weak = [not isinstance(a, Tensor) or (dims and not a.ndim and a.dtype is not bool_) for a in operands]
    back = None
    placed = weak[-1] if op.opmath_scalar == "second" else any(weak)
    if op.opmath_scalar and compute is f16 and placed and not all(weak):
        compute, back = f32, f16
    tensors = []
    for a, is_weak in zip(operands, weak):
        if not isinstance(a, Tensor):
            a = _scalar(a, compute)
        elif is_weak and a.dtype is not compute:
            a = cast(a, compute)  # a bool never changes the promoted dtype and stays bool for the rules
        tensors.append(a)
    return (*args[:first], *tensors), back


def _operand(value: object) -> object:
    """An array as a tensor (its dtype strong); a NumPy bool as the float PyTorch reads it as."""
    if isinstance(value, np.ndarray):
        return lift((value,))[0]
    return float(value) if isinstance(value, np.bool_) else value


def _scalar(value: object, compute: DType) -> Tensor:
    """A Python (or NumPy) scalar as a constant in the dtype the op computes in, wrapping around as
    PyTorch's conversion does (u8 + 300 adds 44); a bool stays bool."""
    array = np.asarray(value)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"cannot make a tensor from {type(value).__name__} {value!r}")
    dtype = bool_ if array.dtype.kind == "b" else compute
    with np.errstate(all="ignore"):
        return modes.current().constant(np.array(array.astype(dtype.np)), dtype)


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


def _sub_dtype(*dtypes: DType, **_) -> DType:
    """numeric_dtype, refusing any bool operand as PyTorch's subtraction does."""
    if bool_ in dtypes:
        raise DTypeError(
            "subtraction with a bool tensor is not supported (as in PyTorch); use ~ or logical_not to "
            "invert a mask, or cast to an integer dtype first"
        )
    return numeric_dtype(*dtypes)


def _arith(
    name: str, fn: Callable, vjp: Callable, *, dtype=numeric_dtype, low=-2.0, high=2.0, fast=None, **kw
):
    def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = dtype(_np_dtype(a), _np_dtype(b))
        return fn(*_in(out, a, b))

    return Elementwise(
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
    dtype=_sub_dtype,
    torch=lambda t, a, b: a - b,
    doc="x - y",
)
mul = _arith(
    "mul",
    np.multiply,
    lambda g, out, x, y: _both(x, y, lambda: g * y, lambda: g * x),
    dtype=_logical_on_bool,
    opmath_scalar="either",
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
    opmath_scalar="second",
    torch=lambda t, a, b: a / b,
    doc="True division; int operands give f32.",
)


def _opmath(fn: Callable) -> Callable:
    """fn on operands of a common float dtype, f16 evaluated in f32 and rounded once (PyTorch's)."""

    def evaluate(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.dtype != np.float16:
            return fn(a, b)
        return fn(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)

    return evaluate


# x + alpha * y with one rounding (PyTorch's add and sub with alpha) ----------------------------
def _scaled_add_reference(x: np.ndarray, y: np.ndarray, alpha: float | int | bool) -> np.ndarray:
    """x + alpha * y in the common dtype: floats with one rounding (f16 computed in f32 with alpha rounded
    to f16, as PyTorch), integers wrapping around, bools as x or (alpha and y)."""
    out = promote(_np_dtype(x), _np_dtype(y)).np
    x, y = x.astype(out, copy=False), y.astype(out, copy=False)
    if out.kind == "b":
        return x | (y & bool(alpha))
    if out.kind in "iu":
        return (x + y * np.array(alpha).astype(out)).astype(out, copy=False)  # alpha wraps as y does
    if out == np.float64:
        return fma_f64(np.float64(alpha), y, x)
    if out == np.float16:  # PyTorch's vectorised loop takes alpha as an f16 (see the README's table)
        alpha = np.float16(alpha)
    return fma_f32(np.float32(alpha), y, x).astype(out, copy=False)


def _scaled_add_dtype(x: DType, y: DType, alpha: float | int | bool) -> DType:
    no_bf16(x, y)
    out = promote(x, y)
    if not out.is_float and isinstance(alpha, float):
        raise DTypeError(f"alpha={alpha!r}: for integer tensors, alpha must not be a float (as PyTorch)")
    if out is not bool_ and isinstance(alpha, bool):
        raise DTypeError(f"alpha={alpha!r}: a bool alpha is only supported for bool results (as PyTorch)")
    return out


def _scaled_add_samples(rng: np.random.Generator) -> list[Sample]:
    """The binary samples but those where y is broadcast along the last axis (one element, a column):
    PyTorch's loop then rounds alpha * y on its own for some elements (see the README's table)."""
    out = [Sample(s.args, {"alpha": -0.1}) for s in binary()(rng) if _y_along_last_axis(*s.args)]
    return [*out, Sample((uniform(rng, (37,)), uniform(rng, (37,))), {"alpha": 3.0})]


def _y_along_last_axis(x: np.ndarray, y: np.ndarray) -> bool:
    return np.ndim(y) > 0 and (np.shape(y)[-1] != 1 or np.ndim(x) == 0 or np.shape(x)[-1] == 1)


scaled_add = Elementwise(
    "scaled_add",
    shape=lambda a, b, alpha: broadcast(a, b),
    dtype=_scaled_add_dtype,
    reference=_scaled_add_reference,
    vjp=lambda g, out, x, y, alpha: _both(x, y, lambda: g, lambda: g * alpha),
    samples=_scaled_add_samples,
    torch=lambda t, a, b, alpha: t.add(a, b, alpha=alpha),
    doc="x + alpha * y with a single rounding (a fused multiply-add, as PyTorch's add(x, y, alpha=); "
    "f16 in f32 with alpha rounded to f16): PyTorch's add and sub with alpha.",
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
    """x ** y (the `pow` op); an integer or bool tensor to a negative Python int raises, as in PyTorch; a
    bool tensor to a Python bool is itself (True) or True (False), as PyTorch's powers 1 and 0."""
    if isinstance(x, Tensor) and not x.dtype.is_float and _is_negative_int(y):
        raise DTypeError(f"Integers to negative integer powers are not allowed ({x.dtype.name} ** {y}).")
    if isinstance(x, Tensor) and x.dtype.kind in "iu" and isinstance(y, int | np.integer):
        check_number(y, x.dtype, "pow")  # PyTorch refuses an exponent the integer dtype cannot hold
    if isinstance(x, Tensor) and x.dtype is bool_ and isinstance(y, bool):
        return logical_or(x, not y)
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
    dtype=promoted_float,  # PyTorch has no integer kernel; an integer beside a float is promoted
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
    dtype=promoted_float,  # PyTorch has no integer kernel; an integer beside a float is promoted
    low=-3.0,
    high=3.0,
    torch=lambda t, a, b: t.logaddexp(a, b),
    exact=False,  # a transcendental: libms may differ by an ulp
    doc="log(exp(x) + exp(y)) without overflow, evaluated in f64 and rounded once.",
)


copysign = _arith(
    "copysign",
    _opmath(np.copysign),
    # PyTorch's: to x, g * out / x (the sign change), 0 where x is 0; to y none (0)
    lambda g, out, x, y: _both(x, y, lambda: g * where(x == 0, 0.0, out / x), lambda: g * 0.0),
    dtype=float_dtype,
    torch=lambda t, a, b: t.copysign(a, b),
    doc="|x| with the sign of y (-0.0 and NaN's sign bit counted); integers give f32.",
)


def _divisor_samples(rng: np.random.Generator) -> list[Sample]:
    """Dividends of either sign and divisors kept away from zero (an integer remainder by zero has no
    value), broadcast as the binary samples are."""
    out = []
    for sa, sb in BINARY_SHAPES:
        b = np.asarray(rng.uniform(0.5, 3.0, sb) * rng.choice([-1.0, 1.0], sb))
        out.append(Sample((np.asarray(rng.uniform(-7.0, 7.0, sa)), b)))
    return out


def _rounded_quotient(x, y, rounding: str):
    """x / y rounded ("floor" or "trunc"), as the part of a remainder's gradient that has none."""
    return getattr((x / y).detach(), rounding)()


def _checked(fn: Callable) -> Callable:
    """fn, raising ZeroDivisionError first for an integer divisor of zero (as PyTorch)."""

    def evaluate(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        _no_zero_divisor(a, b)
        return fn(a, b)

    return evaluate


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """PyTorch's: fmod(a, b), plus b where that is non-zero and its sign is not b's (so a zero keeps
    a's sign, where Python's % gives b's); f16 computed in f32."""
    _no_zero_divisor(a, b)
    if a.dtype.kind != "f":
        return np.remainder(a, b)
    return _opmath(_float_remainder)(a, b)


def _float_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    mod = np.fmod(a, b)
    return np.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


remainder = _arith(
    "remainder",
    _remainder,
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
    _checked(np.fmod),
    lambda g, out, x, y: _both(x, y, lambda: g, lambda: -g * _rounded_quotient(x, y, "trunc")),
    dtype=_refusing_bool("fmod", ""),
    exact=True,
    torch=lambda t, a, b: t.fmod(a, b),
    doc="x - y trunc(x / y), with the sign of x (C's fmod: exact).",
)
fmod.samples = _divisor_samples


# integer division ------------------------------------------------------------------------------
def _no_zero_divisor(a: np.ndarray, b: np.ndarray) -> None:
    """Integer division by zero has no value: PyTorch raises ZeroDivisionError, so does verigrad (where a
    quotient is computed: not for an empty dividend)."""
    if b.dtype.kind in "biu" and a.size and not b.all():
        raise ZeroDivisionError("ZeroDivisionError: integer division (or remainder) by zero")


@_opmath
def _floor_floats(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """PyTorch's (and Python's) float floor division: (a - fmod(a, b)) / b, one less where the remainder's
    sign is not b's, rounded to the nearer whole number; a / b where b is 0; a signed zero for 0."""
    mod = np.fmod(a, b)
    div = (a - mod) / b
    div = np.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1, div)
    floored = np.floor(div)
    floored = np.where(div - floored > 0.5, floored + 1, floored)
    out = np.where(div != 0, floored, np.copysign(np.zeros_like(div), a / b))
    return np.where(b == 0, a / b, out).astype(a.dtype, copy=False)


def _floor_divide_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return _floor_floats(a, b)
    _no_zero_divisor(a, b)
    return np.floor_divide(a, b)


def _quotient(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b rounded to their dtype (f16: divided in f32, rounded once, as PyTorch's half arithmetic)."""
    if a.dtype == np.float16:
        return (a.astype(np.float32) / b.astype(np.float32)).astype(np.float16)
    return a / b


def _trunc_divide_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "f":
        return np.trunc(_quotient(a, b))
    _no_zero_divisor(a, b)
    return ((a - np.fmod(a, b)) // b).astype(a.dtype, copy=False)


def _zero_gradients(g, out, x, y):
    return _both(x, y, lambda: g * 0.0, lambda: g * 0.0)


floor_divide = _arith(
    "floor_divide",
    _floor_divide_reference,
    None,
    no_derivative="the derivative of floor_divide (//) is not implemented, as in PyTorch; "
    "div(x, y, rounding_mode='floor') has one (zero)",
    dtype=_refusing_bool("floor_divide", "; cast them to an integer dtype first"),
    opmath_scalar="second",
    torch=lambda t, a, b: t.floor_divide(a, b),
    doc="x / y rounded down (Python's //): floats as PyTorch's (a whole number, a / y where y is 0); "
    "integers raise ZeroDivisionError for a zero divisor. PyTorch gives it no derivative, nor does verigrad.",
)
floor_divide.samples = lambda rng: _divisor_samples(rng)
div_floor = _arith(
    "div_floor",
    _floor_divide_reference,
    _zero_gradients,
    dtype=_refusing_bool("div with rounding_mode='floor'", "; cast them to an integer dtype first"),
    opmath_scalar="second",
    torch=lambda t, a, b: t.div(a, b, rounding_mode="floor"),
    doc="div(x, y, rounding_mode='floor'): floor_divide, with PyTorch's zero gradient.",
)
div_floor.samples = lambda rng: _divisor_samples(rng)
div_trunc = _arith(
    "div_trunc",
    _trunc_divide_reference,
    _zero_gradients,
    dtype=_refusing_bool("div with rounding_mode='trunc'", "; cast them to an integer dtype first"),
    opmath_scalar="second",
    torch=lambda t, a, b: t.div(a, b, rounding_mode="trunc"),
    doc="div(x, y, rounding_mode='trunc'): x / y rounded towards zero (floats: trunc of the rounded "
    "quotient; integers as C's /, ZeroDivisionError for a zero divisor); its gradient is zero, as PyTorch's.",
)
div_trunc.samples = lambda rng: _divisor_samples(rng)


def true_divide(x: Tensor | float, y: Tensor | float) -> Tensor:
    """x / y (the `div` op): PyTorch's true_divide."""
    return div(x, y)


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

    return Elementwise(
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
    """Logical ops read any dtype as PyTorch's do (non-zero, NaN too, is true) and give bool."""
    no_bf16(*dtypes)
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
    doc="x and y, element-wise (non-zero is true).",
)
logical_or = Op(
    "logical_or",
    shape=broadcast,
    dtype=_bool_dtype,
    reference=np.logical_or,
    samples=_bool_samples(2),
    torch=lambda t, a, b: t.logical_or(a, b),
    doc="x or y, element-wise (non-zero is true).",
)
logical_not = Op(
    "logical_not",
    shape=lambda s: s,
    dtype=_bool_dtype,
    reference=np.logical_not,
    samples=_bool_samples(1),
    torch=lambda t, a: t.logical_not(a),
    doc="not x, element-wise (non-zero is true).",
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
    """Each branch's gradient only where it is wanted (masked_fill's fill value wants none: its gradient
    was a sum over the whole mask)."""
    gx = unbroadcast(where(c, g, 0.0), x.shape) if x.requires_grad else None
    gy = unbroadcast(where(c, 0.0, g), y.shape) if y.requires_grad else None
    return (None, gx, gy)


where = Elementwise(
    "where",
    first=1,
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
