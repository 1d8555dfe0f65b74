"""Smaller PyTorch functions written with the ops: dist, rsub, float_power, cov / corrcoef, trapezoid /
trapz / cumulative_trapezoid, unravel_index, isin, isposinf / isneginf, the identities of real tensors
(real, conj, resolve_conj, resolve_neg, conj_physical, isreal), nonzero_static, put, fill, zero_, resize_as_,
scalar_tensor, vander, broadcast_shapes and native_dropout_backward."""

from __future__ import annotations

import builtins
import math
from typing import Any

from .. import settings
from ..dtypes import as_dtype, bool_, f64, i64
from ..errors import DTypeError, ShapeError
from ..ops.binary import where
from ..ops.creation import full, ones_like, tensor, zeros
from ..ops.scan import cumprod
from ..ops.shaping import concat, unsqueeze
from ..shapes import Size, broadcast, normalize_axis
from ..tensor import Tensor, describe
from .indexing import index_put, nonzero
from .matrices import diag
from .pointwise import same_dtype
from .statistics import norm


def dist(input: Tensor, other: Tensor, p: float = 2) -> Tensor:
    """The p-norm of input - other (operands broadcast), as torch.dist."""
    return norm(input - other, float(p))


def rsub(input: Tensor, other: Any, alpha: Any = 1) -> Tensor:
    """other - alpha * input, as torch.rsub."""
    if input.dtype is bool_ or (isinstance(other, Tensor) and other.dtype is bool_):
        raise DTypeError("rsub: subtraction of bool tensors is not supported, use logical_xor or ~")
    return other - (input if alpha == 1 else input * alpha)


def float_power(input: Any, exponent: Any) -> Tensor:
    """input ** exponent computed in f64, as torch.float_power."""
    base = input.cast(f64) if isinstance(input, Tensor) else input
    power = exponent.cast(f64) if isinstance(exponent, Tensor) else exponent
    if not isinstance(base, Tensor):
        base = full((), base, dtype=f64)
    return base**power


def cov(
    input: Tensor, *, correction: int = 1, fweights: Tensor | None = None, aweights: Tensor | None = None
) -> Tensor:
    """The covariance matrix of the variables in input's rows (observations in its columns), with
    frequency and importance weights, as torch.cov (a 0-d result for one variable)."""
    if input.ndim > 2:
        raise ShapeError(f"cov: expected input to have two or fewer dimensions, got {describe(input)}")
    _no_bool("cov", input)
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_float:
        x = x.cast(settings.get_default_dtype())
    n = x.shape[1]
    w = None
    if fweights is not None:
        if fweights.ndim > 1 or fweights.dtype.kind not in "iu" or fweights.numel() != n:
            raise ShapeError(f"cov: fweights must be integer and have {n} entries, got {describe(fweights)}")
        w = fweights
    if aweights is not None:
        if aweights.ndim > 1 or not aweights.dtype.is_float or aweights.numel() != n:
            raise ShapeError(f"cov: aweights must be floating and have {n} entries, got {describe(aweights)}")
        w = aweights if w is None else w * aweights
    if w is None:
        avg = x.mean(1)
        w_sum = full((), n, dtype=i64)
        factor = w_sum - correction
    else:  # w keeps its dtype, as PyTorch's: an f32 weight's sums are f32 ones
        w_sum = w.sum()
        avg = (x * w).sum(1) / w_sum
        if correction == 0:
            factor = w_sum
        elif aweights is None:
            factor = w_sum - correction
        else:
            factor = w_sum - correction * (w * aweights).sum() / w_sum
    factor = where(factor > 0, factor, 0).cast(x.dtype) if isinstance(factor, Tensor) else factor
    xm = x - unsqueeze(avg, 1)
    weighted = xm if w is None else xm * w
    return ((xm @ weighted.mT) / factor).squeeze()


def corrcoef(input: Tensor) -> Tensor:
    """Pearson's correlation coefficients of the variables in input's rows, clipped to [-1, 1], as
    torch.corrcoef."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    stddev = diag(c).sqrt()
    c = c / unsqueeze(stddev, 1)
    c = c / unsqueeze(stddev, 0)
    return c.clamp(-1, 1)


def _trapezoid_sides(
    name: str, y: Tensor, x: Any, dx: Any, dim: int
) -> tuple[Tensor, Tensor | None, Any, int]:
    """(left + right, the spacings x's differences or None, the constant spacing, the axis) of PyTorch's
    trapezoidal rule along `dim`."""
    if x is not None and dx is not None:
        raise TypeError(f"{name}: give x or dx, not both")
    if x is not None and not isinstance(x, Tensor):  # PyTorch's TypeError: a spacing goes in dx
        raise TypeError(f"{name}: x must be a Tensor, got {type(x).__name__} (give a spacing as dx=)")
    _no_bool(name, y, x)
    axis = normalize_axis(dim, y.ndim)
    size = y.shape[axis]
    left, right = (
        y.narrow(axis, 0, builtins.max(size - 1, 0)),
        y.narrow(axis, builtins.min(1, size), builtins.max(size - 1, 0)),
    )
    if x is None:
        return left + right, None, 1 if dx is None else dx, axis
    if x.ndim == 1:
        if x.shape[0] != size:
            raise ShapeError(f"{name}: x {describe(x)} must have {size} entries, as y's axis {dim}")
        d = x[1:] - x[:-1]
        d = d.reshape(*([1] * (y.ndim - 1)), -1).movedim(-1, axis) if y.ndim else d
    else:
        d = x.diff(dim=dim)
    return left + right, d, None, axis


def _no_bool(name: str, *operands: Any) -> None:
    """PyTorch's refusal of bool tensors in these functions (cov, the trapezoidal rules, isin)."""
    if any(isinstance(a, Tensor) and a.dtype is bool_ for a in operands):
        raise DTypeError(f"{name}: bool tensors are not supported (as PyTorch); cast to an integer or float")


def trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The trapezoidal rule's integral of y along `dim`, at points x (a tensor or a spacing) or spaced
    by dx (1 by default), with PyTorch's formulas (their order of rounding; integers' products and sums
    wrap): sum((left + right) * diff(x)) / 2, or (sum(y) - (y[0] + y[-1]) * 0.5) * dx."""
    sides, d, spacing, axis = _trapezoid_sides("trapezoid", y, x, dx, dim)
    if d is not None:
        return (sides * d).sum(axis) / 2.0
    if not y.shape[axis]:
        return (sides * 1.0).sum(axis)
    ends = y.narrow(axis, 0, 1) + y.narrow(axis, y.shape[axis] - 1, 1)
    return (y.sum(axis) - ends.squeeze(axis) * 0.5) * float(spacing)


def trapz(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """torch.trapz: trapezoid."""
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y: Tensor, x: Any = None, *, dx: Any = None, dim: int = -1) -> Tensor:
    """The running trapezoidal integrals of y along `dim` (one fewer than y's entries), with PyTorch's
    formulas: cumsum((left + right) * diff(x)) / 2, or cumsum(dx / 2 * (left + right))."""
    sides, d, spacing, axis = _trapezoid_sides("cumulative_trapezoid", y, x, dx, dim)
    if d is not None:
        return (sides * d).cumsum(axis) / 2.0
    return (float(spacing) / 2.0 * sides).cumsum(axis)


def unravel_index(indices: Any, shape: Any) -> tuple[Tensor, ...]:
    """The coordinates in `shape` of each flat index (int64 tensors, one per axis), as
    torch.unravel_index."""
    indices = indices if isinstance(indices, Tensor) else tensor(indices)
    if indices.dtype.is_float or indices.dtype is bool_:
        raise DTypeError(
            f"unravel_index: expected 'indices' to be an integer tensor, got {indices.dtype.name}"
        )
    dims = (shape,) if isinstance(shape, int) else tuple(shape)
    if any(d < 0 for d in dims):
        raise ValueError(f"unravel_index: 'shape' cannot have negative values, got {dims}")
    total = math.prod(dims)
    flat = indices.cast(i64)
    if flat.numel() and bool(((flat < -total) | (flat >= total)).any()):
        raise IndexError(f"unravel_index: an index is out of range for shape {dims} ({total} elements)")
    flat = where(flat < 0, flat + total, flat)
    out = []
    for d in reversed(dims):
        out.append(flat % d if d else flat)
        flat = flat // d if d else flat
    return tuple(reversed(out))


def isin(elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """Whether each entry of elements is among test_elements (or not, with invert), as torch.isin (which
    refuses bool)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin: elements or test_elements must be a Tensor")
    e = elements if isinstance(elements, Tensor) else tensor(elements)
    t = test_elements if isinstance(test_elements, Tensor) else tensor(test_elements)
    _no_bool("isin", e, t)
    found = (unsqueeze(e, -1) == t.reshape(-1)).any(-1) if t.numel() else zeros(tuple(e.shape), dtype=bool_)
    return ~found if invert else found


def isposinf(input: Tensor) -> Tensor:
    """Whether each entry is +inf."""
    return input == math.inf if input.dtype.is_float else zeros(tuple(input.shape), dtype=bool_)


def isneginf(input: Tensor) -> Tensor:
    """Whether each entry is -inf."""
    return input == -math.inf if input.dtype.is_float else zeros(tuple(input.shape), dtype=bool_)


def isreal(input: Tensor) -> Tensor:
    """True for every entry: verigrad's tensors are real."""
    return ones_like(input, dtype=bool_)


def real(input: Tensor) -> Tensor:
    """input itself: verigrad's tensors are real (torch.real of a real tensor)."""
    return input


conj = resolve_conj = resolve_neg = real


def conj_physical(input: Tensor) -> Tensor:
    """A copy of input: the conjugate of a real tensor."""
    return input.clone()


def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """The positions of input's first `size` non-zero entries [size, ndim], rows past those found filled
    with fill_value, as torch.nonzero_static."""
    if size < 0:
        raise ValueError(f"nonzero_static: size must be non-negative, got {size}")
    found = nonzero(input)
    n = found.shape[0]
    if n >= size:
        return found[:size]
    return concat([found, full((size - n, found.shape[1]), fill_value, dtype=i64)], axis=0)


def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """input with source's entries put at the flat positions index (negative ones from the end; with
    accumulate, added), as torch.put."""
    if index.dtype is not i64:
        raise DTypeError(f"put: index must be an int64 tensor, got {index.dtype.name}")
    same_dtype(input, source, "put")
    if index.numel() != source.numel():
        raise ShapeError(
            f"put: index and source need as many entries, got {describe(index)}, {describe(source)}"
        )
    flat = input.reshape(-1)
    total = flat.shape[0]
    idx = index.reshape(-1)
    if idx.numel() and bool(((idx < -total) | (idx >= total)).any()):
        raise IndexError(f"put: an index is out of range for {describe(input)} ({total} elements)")
    idx = where(idx < 0, idx + total, idx)
    return index_put(flat, (idx,), source.reshape(-1).cast(input.dtype), accumulate).reshape(input.shape)


def fill(input: Tensor, value: Any) -> Tensor:
    """A tensor of input's shape and dtype holding value (a number or a 0-d tensor, whose gradient is
    the sum of the result's), as torch.fill."""
    if isinstance(value, Tensor) and value.ndim:
        raise ShapeError(f"fill: value must be a number or a 0-d tensor, got {describe(value)}")
    value = value.cast(input.dtype) if isinstance(value, Tensor) else full((), value, dtype=input.dtype)
    # every entry value's, input's gradient 0 (a result with history wherever input has one, as PyTorch's)
    return where(ones_like(input, dtype=bool_), value, input)


def resize_as_(input: Tensor, other: Tensor, memory_format: Any = None) -> Tensor:
    """input resized in place to other's shape (torch.resize_as_: Tensor.resize_as_'s function)."""
    return input.resize_as_(other)


def zero_(input: Tensor) -> Tensor:
    """input filled with zeros in place (torch.zero_, Tensor.zero_'s function)."""
    return input.zero_()


def scalar_tensor(
    s: Any, *, dtype: Any = None, device: Any = None, requires_grad: bool = False, **_: Any
) -> Tensor:
    """A 0-d tensor holding s (the default dtype unless dtype is given), as torch.scalar_tensor."""
    dtype = settings.get_default_dtype() if dtype is None else as_dtype(dtype)
    # an integer out of the dtype's range wraps, as PyTorch's
    out = (
        full((), s, dtype=i64).cast(dtype)
        if isinstance(s, int) and not dtype.is_float
        else full((), s, dtype=dtype)
    )
    return out.requires_grad_(True) if requires_grad else out


def broadcast_shapes(*shapes: Any) -> Size:
    """The shape that tensors of `shapes` broadcast to, as torch.broadcast_shapes."""
    return Size(broadcast(*[(s,) if isinstance(s, int) else tuple(s) for s in shapes]))


def native_dropout_backward(grad_output: Tensor, mask: Tensor, scale: float) -> Tensor:
    """The gradient through dropout: grad_output where mask keeps an entry, times scale (PyTorch's
    aten.native_dropout_backward)."""
    if mask.dtype is not bool_:
        raise DTypeError(f"native_dropout_backward: mask must be a bool tensor, got {mask.dtype.name}")
    return grad_output * mask.cast(grad_output.dtype) * scale


def vander(x: Tensor, N: int | None = None, increasing: bool = False) -> Tensor:
    """The Vandermonde matrix of the 1-D x with N columns (len(x) by default): powers x**0 .. x**(N-1),
    the highest first unless increasing, as torch.vander: the powers are running products (PyTorch's
    cumprod, so the same roundings), integer and bool inputs give i64."""
    if not isinstance(x, Tensor) or x.ndim != 1:
        raise ShapeError(f"vander: x must be a one-dimensional tensor, got {describe(x)}")
    n = x.shape[0] if N is None else N
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"vander: N must be a non-negative int, got {N!r}")
    dtype = x.dtype if x.dtype.is_float else i64
    column = x.cast(dtype).reshape(-1, 1)
    ones = ones_like(column)
    powers = cumprod(column.expand(x.shape[0], n - 1), axis=1) if n > 1 else None
    out = ones[:, :n] if powers is None else concat([ones, powers], axis=1)
    return out if increasing else out.flip(1)
