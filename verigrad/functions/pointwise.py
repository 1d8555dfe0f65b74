"""Element-wise functions PyTorch users reach for, written with the ops: add / sub with alpha, div with
a rounding mode, clamp, masked_fill, the NaN and infinity tests, isclose / allclose / equal, lerp,
addcmul / addcdiv, frac, angle conversions and log2 / log10."""

from __future__ import annotations

import builtins
import math
from typing import Any

import numpy as np

from ..dtypes import bf16, bool_, f16, f32, f64, i64, promote
from ..errors import DTypeError
from ..ops import binary, cast, from_numpy
from ..ops._op import floating_only
from ..ops.binary import eq, ne, where
from ..ops.creation import tensor
from ..ops.data_in import check_number
from ..ops.fused import OPMATH, fma
from ..ops.unary import round_ as _round_half_even
from ..tensor import Tensor

_ROUNDING = {None: binary.div, "trunc": binary.div_trunc, "floor": binary.div_floor}


def add(x: Any, y: Any, *, alpha: Any = 1) -> Tensor:
    """x + alpha * y (PyTorch's add): with an alpha other than 1, one fused multiply-add (a single
    rounding, as PyTorch's); an integer result takes an integer alpha, a bool alpha a bool result."""
    if type(alpha) is int and alpha == 1:
        return binary.add(x, y)
    check_number(alpha, binary.result_type(x, y), "add")  # PyTorch refuses 300 for an i8 result
    return binary.scaled_add(x, y, alpha=alpha)


def sub(x: Any, y: Any, *, alpha: Any = 1) -> Tensor:
    """x - alpha * y (PyTorch's sub): add with -alpha; a bool tensor and a bool alpha are refused, as in
    PyTorch."""
    if type(alpha) is int and alpha == 1:
        return binary.sub(x, y)
    if isinstance(alpha, bool):
        raise DTypeError(f"sub: alpha={alpha!r}: a bool alpha is not supported for subtraction (as PyTorch)")
    if any(isinstance(a, Tensor) and a.dtype.kind == "b" for a in (x, y)):
        return binary.sub(x, y)  # raises, naming sub
    check_number(alpha, binary.result_type(x, y), "sub")
    return binary.scaled_add(x, y, alpha=-alpha)


def div(x: Any, y: Any, *, rounding_mode: str | None = None) -> Tensor:
    """x / y (PyTorch's div): true division, or with rounding_mode "trunc" (towards zero) or "floor"
    (down), which keep integer dtypes and raise ZeroDivisionError for an integer divisor of 0."""
    if rounding_mode not in _ROUNDING:
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    return _ROUNDING[rounding_mode](x, y)


def clamp(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """x limited to [min, max] (either may be None, or a tensor that broadcasts); NaN stays NaN, a NaN
    bound gives NaN, and where min > max every value is max, as in PyTorch. The gradient goes as
    PyTorch's: to x where min <= x <= max, to min where x < min < max, to max where x > max or max < min
    (so to none where x is outside min == max), and none to a NaN x."""
    if min is None and max is None:
        raise ValueError("clamp needs min or max (or both)")
    check_numbers("clamp", x, min, max)
    y = x
    if min is not None:
        if isinstance(min, Tensor) and max is not None:
            min = where(min < max, min, min.detach())
        y = where(_or_nan(x < min, min), min, y)
    if max is not None:
        y = where(_or_nan(y > max, max), max, y)
    if x.requires_grad:  # a NaN x takes no gradient, as in PyTorch (the value is NaN either way)
        y = where(ne(x, x), x.detach(), y)
    return y


def check_numbers(where: str, *operands: Any) -> None:
    """Refuse a Python number among `operands` (None ones left out) that their promoted dtype cannot
    hold, as PyTorch's clamp and where do (300 with an i8 tensor, 1e300 with an f32 one; PyTorch's where
    lets an f16 result take inf instead)."""
    given = [a for a in operands if a is not None]
    if not builtins.all(isinstance(a, Tensor) for a in given):
        dtype = binary.result_type(*given)
        if where == "where" and dtype is f16:
            return
        for a in given:
            check_number(a, dtype, where)


def same_dtype(x: Tensor, other: Any, what: str, name: str = "source") -> None:
    """Refuse a tensor `other` of another dtype than x's, as PyTorch's index_add, scatter, scatter_add,
    put and lerp do (they do not promote: an f64 source would silently change the result's dtype)."""
    if isinstance(other, Tensor) and other.dtype is not x.dtype:
        raise DTypeError(
            f"{what}: self ({x.dtype.name}) and {name} ({other.dtype.name}) must have the same dtype"
        )


def _or_nan(past: Tensor, bound: Any) -> Tensor:
    """`past`, and True where the bound is NaN (PyTorch's clamp gives the bound there)."""
    if isinstance(bound, Tensor) and bound.dtype.is_float:
        return past | ne(bound, bound)
    return past | True if isinstance(bound, float) and math.isnan(bound) else past


def clamp_min(input: Tensor, min: Any) -> Tensor:
    """clamp(input, min=min), as torch.clamp_min."""
    return clamp(input, min=min)


def clamp_max(input: Tensor, max: Any) -> Tensor:
    """clamp(input, max=max), as torch.clamp_max."""
    return clamp(input, max=max)


def masked_fill(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """x with `value` where the bool `mask` (broadcast to x) holds, in x's dtype (as PyTorch's: 2.5 fills
    an integer tensor with 2)."""
    if isinstance(value, Tensor):
        value = value if value.dtype is x.dtype else cast(value, x.dtype)
    else:
        check_number(value, x.dtype, "masked_fill")
        value = from_numpy(np.array(value).astype(x.dtype.np))
    return where(mask, value, x)


def isnan(x: Tensor) -> Tensor:
    """True where x is NaN."""
    return ne(x, x)


def isinf(x: Tensor) -> Tensor:
    """True where x is +-inf."""
    return eq(abs(x), math.inf) if x.dtype.is_float else ne(x, x)


def isfinite(x: Tensor) -> Tensor:
    """Neither NaN nor infinite (x - x is 0 exactly then); every integer and bool is."""
    return eq(x, x) if x.dtype is bool_ else eq(sub(x, x), 0)


_BF16_MAX = float.fromhex("0x1.fep127")  # the largest finite bf16


def nan_to_num(x: Tensor, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Tensor:
    """NaN replaced by `nan`, +inf and -inf by `posinf` and `neginf` (default: the dtype's largest and
    least finite values)."""
    if not x.dtype.is_float:
        return x
    if x.dtype is bf16:  # computed in f32 (exact both ways) with the numbers rounded to bf16 first
        fills = [nan, _BF16_MAX if posinf is None else posinf, -_BF16_MAX if neginf is None else neginf]
        nan, posinf, neginf = tensor(fills, dtype=f64).cast(bf16).cast(f32).tolist()
        return nan_to_num(x.cast(f32), nan, posinf, neginf).cast(bf16)
    info = np.finfo(x.dtype.np)
    top = float(info.max) if posinf is None else posinf
    bottom = float(info.min) if neginf is None else neginf
    return where(isnan(x), nan, where(eq(x, math.inf), top, where(eq(x, -math.inf), bottom, x)))


def isclose(a: Tensor, b: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> Tensor:
    """|a - b| <= atol + rtol |b| elementwise (PyTorch's): equal values (infinities too) are close, and
    NaNs are close to each other with `equal_nan`; bools are close where equal. Two tensors must be of
    one dtype, as PyTorch's."""
    _one_dtype("isclose", a, b)
    if (
        isinstance(a, Tensor)
        and a.dtype.name == "bool"
        and (not isinstance(b, Tensor) or b.dtype.name == "bool")
    ):
        return eq(a, b)
    gap = abs(sub(a, b))
    close = eq(a, b) | (isfinite(gap) & (gap <= atol + rtol * abs(b)))  # an infinity: only if equal
    return close | (isnan(a) & isnan(b)) if equal_nan else close


def allclose(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:
    """Whether |a - b| <= atol + rtol |b| everywhere (broadcast), as NumPy's and PyTorch's allclose (two
    tensors of one dtype)."""
    _one_dtype("allclose", a, b)
    return bool(np.allclose(values_of(a, "allclose"), values_of(b, "allclose"), rtol, atol, equal_nan))


def _one_dtype(what: str, a: Any, b: Any) -> None:
    """PyTorch's isclose and allclose refuse two tensors of other dtypes ("Float did not match Double")."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype is not b.dtype:
        raise DTypeError(
            f"{what}: {a.dtype.name} did not match {b.dtype.name}; cast one of them (as PyTorch)"
        )


def equal(a: Tensor, b: Tensor) -> bool:
    """Whether a and b have the same shape and the same values (PyTorch's torch.equal)."""
    x, y = values_of(a, "equal"), values_of(b, "equal")
    return x.shape == y.shape and bool(np.array_equal(x, y))


def values_of(x: Any, what: str) -> np.ndarray:
    if isinstance(x, Tensor):
        if not isinstance(x.payload, np.ndarray):
            raise TypeError(f"{what} reads values, but this tensor is abstract or traced: {x.spec!r}")
        return x.numpy()
    return np.asarray(x)


def square(x: Tensor) -> Tensor:
    """x * x; of a bool tensor, in i64 (PyTorch's square is pow(x, 2))."""
    if x.dtype is bool_:
        x = cast(x, i64)
    return x * x


def in_dtype(value: Any, dtype: Any) -> Any:
    """A Python scalar multiplier as PyTorch's kernels read it for a result of `dtype`: a float truncated
    toward zero for an integer result (C++'s cast), any number as its truth for a bool one; one the
    dtype cannot hold raises, as PyTorch's."""
    check_number(value, dtype, "a scalar multiplier")
    if dtype is bool_:
        return bool(value)
    if not dtype.is_float and isinstance(value, float):
        return math.trunc(value)
    return value


def lerp(start: Tensor, end: Any, weight: Any) -> Tensor:
    """PyTorch's formula: start + weight (end - start) where |weight| < 0.5, else end - (end - start)
    (1 - weight) (lerp(inf, 0, 0.5) is inf, not NaN; weight = 1 gives end exactly); with a number weight
    each one fused multiply-add, rounded once as PyTorch's kernel; f16 computed in f32, as PyTorch's."""
    floating_only(start.dtype, what="lerp")
    same_dtype(start, end, "lerp", "end")
    if start.dtype is f16:  # any weight goes, as PyTorch's
        up = [a.float() if isinstance(a, Tensor) else a for a in (start, end, weight)]
        return lerp(*up).half()
    check_number(weight, start.dtype, "lerp")
    diff = end - start
    if isinstance(weight, Tensor):
        return where(weight.abs() < 0.5, start + diff * weight, end + diff * (weight - 1))
    w = np.asarray(weight, dtype=start.dtype.np)  # the weight, and 1 - weight, in the dtype
    if abs(float(w)) < 0.5:
        return binary.scaled_add(start, diff, alpha=float(w))
    return binary.scaled_add(end, diff, alpha=-float(np.asarray(1, dtype=start.dtype.np) - w))


def addcmul(x: Tensor, tensor1: Any, tensor2: Any, value: Any = 1) -> Tensor:
    """x + value * tensor1 * tensor2 in the operands' promoted dtype, value truncated for an integer one
    (bool operands alone refused, as PyTorch's). Floats as PyTorch's kernel: (value * tensor1) * tensor2 + x
    with a fused multiply-add, f16 computed in f32 and rounded once."""
    if all(isinstance(t, Tensor) and t.dtype is bool_ for t in (x, tensor1, tensor2)):
        raise DTypeError("addcmul of bool tensors is not supported (as PyTorch); cast them to a number dtype")
    dtype = promote(*(t.dtype for t in (x, tensor1, tensor2) if isinstance(t, Tensor)))
    if not dtype.is_float:
        # the operands in the result's dtype first, then x + value * tensor1 * tensor2 from the left
        t1, t2 = (t.cast(dtype) if isinstance(t, Tensor) else t for t in (tensor1, tensor2))
        return x + t1 * in_dtype(value, dtype) * t2
    compute = OPMATH.get(dtype, dtype)
    x, t1, t2 = (t.cast(compute) if isinstance(t, Tensor) else t for t in (x, tensor1, tensor2))
    out = fma(t1 * in_dtype(value, dtype), t2, x)
    return out if compute is dtype else out.cast(dtype)


def _no_integer_division(tensor1: Any, tensor2: Any) -> None:
    """PyTorch's addcdiv refuses two integer (or bool) operands of its division."""
    kinds = [t.dtype.is_float if isinstance(t, Tensor) else isinstance(t, float) for t in (tensor1, tensor2)]
    if not any(kinds):
        raise DTypeError(
            "addcdiv: integer division of tensor1 by tensor2 is not supported (as PyTorch); use true_divide "
            "or cast one to a float dtype"
        )


def addcdiv(x: Tensor, tensor1: Any, tensor2: Any, value: Any = 1) -> Tensor:
    """x + value * tensor1 / tensor2, as PyTorch's kernel orders it: (value * tensor1) / tensor2 + x, f16
    computed in f32 and rounded once."""
    _no_integer_division(tensor1, tensor2)
    dtype = binary.result_type(x, tensor1, tensor2)
    check_number(value, dtype, "addcdiv")
    compute = OPMATH.get(dtype, dtype)  # the operands in it first, as PyTorch's common dtype
    x, tensor1, tensor2 = (t.cast(compute) if isinstance(t, Tensor) else t for t in (x, tensor1, tensor2))
    out = x + tensor1 * value / tensor2
    return out if compute is dtype else out.cast(dtype)


def frac(x: Tensor) -> Tensor:
    """x - trunc(x): the fractional part, with x's sign; its gradient is 1. Of a float tensor only, as
    PyTorch's (an integer has no fractional part to take)."""
    if not x.dtype.is_float:
        raise DTypeError(f"frac takes a floating tensor, got {x.dtype.name}")
    return x - x.trunc()


def deg2rad(x: Tensor) -> Tensor:
    """Degrees to radians."""
    return x * (math.pi / 180)


def rad2deg(x: Tensor) -> Tensor:
    """Radians to degrees."""
    return x * (180 / math.pi)


def log2(x: Tensor) -> Tensor:
    """log(x) / log(2), within an ulp or two of a direct log2."""
    return x.log() * (1 / math.log(2))


def log10(x: Tensor) -> Tensor:
    """log(x) / log(10), within an ulp or two of a direct log10."""
    return x.log() * (1 / math.log(10))


def round(x: Tensor, *, decimals: int = 0) -> Tensor:
    """x rounded half to even to `decimals` places, as PyTorch's: round(x * 10^d) / 10^d for d > 0,
    round(x / 10^-d) * 10^-d for d < 0 (f16 computed in f32 and rounded once)."""
    if not isinstance(decimals, int | np.integer) or isinstance(decimals, bool):
        raise TypeError(f"round: decimals must be an int, got {decimals!r}")
    decimals = int(decimals)
    if decimals == 0:
        return _round_half_even(x)
    if not x.dtype.is_float:
        raise DTypeError(f"round with decimals takes a float tensor, got {x.dtype.name} (as PyTorch)")
    dtype = x.dtype
    x = x.cast(OPMATH.get(dtype, dtype))
    scale = 10.0 ** abs(decimals)
    out = _round_half_even(x * scale) / scale if decimals > 0 else _round_half_even(x / scale) * scale
    return out.cast(dtype)
