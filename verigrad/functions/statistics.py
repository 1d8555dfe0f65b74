"""Reductions written with the ops: amax / amin, var and std (`correction`), var_mean / std_mean,
logsumexp, argmin, all / any, norm, count_nonzero, sum_to_size; and the value-dependent counts bincount
and histc (eager only)."""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import modes
from ..dtypes import bool_, f32, f64, i64, u8
from ..errors import DTypeError, ShapeError
from ..ops._op import no_bf16, unbroadcast
from ..ops.binary import eq, maximum, ne, sub, where
from ..ops.creation import from_numpy, full
from ..ops.linalg import svdvals
from ..ops.reduce import argmax, max, numel_of, sum
from ..ops.reduce import min as reduce_min
from ..shapes import normalize_axes, shape_text
from ..tensor import Tensor, describe
from .pointwise import isinf, values_of


def pick(axis: Any, dim: Any) -> Any:
    """`axis`, or PyTorch's `dim` when it is given."""
    return dim if dim is not None else axis


Axis = int | Sequence[int] | None


def _all_if_empty(dim: Axis) -> Axis:
    """PyTorch's amax, amin, var, std, norm and count_nonzero read dim=() as all dims."""
    return None if isinstance(dim, Sequence) and not len(dim) else dim


def amax(x: Tensor, dim: Axis = None, keepdim: bool = False, *, axis: Axis = None) -> Tensor:
    """The largest value over `dim` (all when None or ()), without indices; ties share the gradient."""
    return max(x, axis=_all_if_empty(pick(axis, dim)), keepdim=keepdim)


def amin(x: Tensor, dim: Axis = None, keepdim: bool = False, *, axis: Axis = None) -> Tensor:
    """The smallest value over `dim` (all when None or ()), as amax."""
    return reduce_min(x, axis=_all_if_empty(pick(axis, dim)), keepdim=keepdim)


def var(
    x: Tensor,
    axis: Axis = None,
    correction: int | float | None = 1,
    keepdim: bool = False,
    *,
    dim: Axis = None,
    unbiased: bool | None = None,
) -> Tensor:
    """The variance over `axis` (all when None): the mean squared deviation, summed and divided by
    (count - correction); correction 1 (the default, or `unbiased=True`) is Bessel's, 0 the biased one.
    f16 and f32 are computed in f64 and rounded once, as PyTorch's CPU kernel accumulates them."""
    return _in_f64(x, axis, correction, keepdim, dim, unbiased).cast(x.dtype)


def _in_f64(
    x: Tensor, axis: Axis, correction: Any, keepdim: bool, dim: Axis, unbiased: bool | None
) -> Tensor:
    """var's value in f64 (of an f64 tensor, in its own dtype)."""
    if not x.dtype.is_float or x.dtype.name == "bf16":
        raise DTypeError(f"var and std need an f16, f32 or f64 tensor, got {x.dtype.name}; cast it first")
    if correction is None:  # PyTorch's default, spelled out
        correction = 1
    if isinstance(axis, bool):  # x.var(True): PyTorch's var(input, unbiased), over every axis
        if unbiased is not None:
            raise TypeError("var: unbiased given twice (positionally and by keyword)")
        axis, unbiased = None, axis
    if unbiased is not None or isinstance(correction, bool):  # x.var(dim, True): PyTorch's unbiased
        correction = 1 if (correction if unbiased is None else unbiased) else 0
    axes = normalize_axes(_all_if_empty(pick(axis, dim)), x.ndim)
    x = x.cast(f64)
    deviation = x - x.mean(axis=axes, keepdim=True)
    # PyTorch's: no fewer than 0 degrees of freedom (a positive sum over 0 is inf, 0 over 0 NaN)
    count = numel_of(x, axis=axes)
    freedom = maximum(count - correction, 0)
    return _nan_if_empty(sum(deviation * deviation, axis=axes, keepdim=keepdim) / freedom, count)


def _nan_if_empty(value: Tensor, count: Tensor) -> Tensor:
    """`value`, a positive NaN where it reduced no elements (PyTorch's fill for var and var_mean's mean
    over nothing; 0 / 0 would give x86's negative NaN)."""
    return where(eq(count, 0), math.nan, value)


def std(
    x: Tensor,
    axis: Axis = None,
    correction: int | float | None = 1,
    keepdim: bool = False,
    *,
    dim: Axis = None,
    unbiased: bool | None = None,
) -> Tensor:
    """The square root of `var` (same arguments), taken in f64 before f16 and f32 are rounded (PyTorch's)."""
    return _in_f64(x, axis, correction, keepdim, dim, unbiased).sqrt().cast(x.dtype)


def var_mean(x: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
    """(var, mean) over the same axes (`var`'s arguments; PyTorch's var_mean)."""
    axis = kwargs.get("dim", kwargs.get("axis", args[0] if args else None))
    axis = None if isinstance(axis, bool) else axis  # var_mean(x, True): PyTorch's (input, unbiased)
    keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
    axes = normalize_axes(_all_if_empty(axis), x.ndim)
    return var(x, *args, **kwargs), _nan_if_empty(x.mean(axis=axes, keepdim=keepdim), numel_of(x, axis=axes))


def std_mean(x: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
    """(std, mean) over the same axes (PyTorch's std_mean)."""
    v, m = var_mean(x, *args, **kwargs)
    return v.sqrt(), m


def logsumexp(x: Tensor, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
    """log(sum(exp(x))) over `axis`, shifted by the maximum so that nothing overflows (an infinite
    maximum is not subtracted, as in PyTorch: all -inf gives -inf); its gradient is the softmax. Integers
    and bools are taken as f32, as PyTorch's."""
    if not x.dtype.is_float:
        x = x.to(f32)
    axes = normalize_axes(_all_if_empty(pick(axis, dim)), x.ndim)
    if builtins.any(x.shape[a] == 0 for a in axes if isinstance(x.shape[a], int)):
        top = 0.0  # over no elements: log(0) = -inf, as PyTorch's (max would refuse the empty axis)
    else:
        top = max(x, axis=axes, keepdim=True).detach()
        top = where(isinf(top), 0.0, top)
    out = (x - top).exp().sum(axes, keepdim=True).log() + top
    return out if keepdim else out.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


def argmin(x: Tensor, axis: int | None = None, keepdim: bool = False, *, dim: int | None = None) -> Tensor:
    """Index of the first smallest value along `axis` (of the flattened tensor when None), as i64: the
    first largest of -x, or of -1 - x for integers (which, unlike -x, does not overflow)."""
    if x.dtype is bool_:
        raise DTypeError("argmin does not support bool input (as PyTorch); cast it to an integer dtype first")
    flipped = sub(-1, x) if not x.dtype.is_float else -x
    return argmax(flipped, axis=pick(axis, dim), keepdim=keepdim)


def all(x: Tensor, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
    """Whether every element over `axis` is nonzero (NaN counts as nonzero), as bool (as u8 for a u8 x,
    PyTorch's); over dim=(), each element (PyTorch's)."""
    if _none(pick(axis, dim)):
        return _truth(x, ne(x, 0))
    return _truth(x, eq(sum(eq(x, 0), axis=pick(axis, dim), keepdim=keepdim), 0))


def any(x: Tensor, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
    """Whether some element over `axis` is nonzero (NaN counts as nonzero), as bool (as u8 for a u8 x,
    PyTorch's); over dim=(), each element (PyTorch's)."""
    if _none(pick(axis, dim)):
        return _truth(x, ne(x, 0))
    return _truth(x, ne(sum(ne(x, 0), axis=pick(axis, dim), keepdim=keepdim), 0))


def _truth(x: Tensor, answer: Tensor) -> Tensor:
    """all's and any's answer in PyTorch's dtype: u8 for a u8 input (its legacy), else bool."""
    return answer.cast(u8) if x.dtype is u8 else answer


def _none(dim: Axis) -> bool:
    """An empty sequence of dims: PyTorch's all and any reduce over none."""
    return isinstance(dim, Sequence) and not len(dim)


def norm(x: Tensor, p: float = 2.0, dim: Axis = None, keepdim: bool = False) -> Tensor:
    """The p-norm over `dim` (all elements when None), as PyTorch's: p 2 (the square root of the sum of
    squares, with gradient 0 at a zero vector, as PyTorch's; "fro" too), 1, inf (the largest |x|), -inf
    (the smallest), 0 (the count of non-zeros), "nuc" (the sum of a matrix's singular values) or any
    other p, (sum |x|^p)^(1/p)."""
    if not x.dtype.is_float or x.dtype.name == "bf16":
        raise DTypeError(f"norm needs an f16, f32 or f64 tensor, got {x.dtype.name}; cast it first")
    if isinstance(p, str):  # PyTorch's matrix norms: "fro" is the 2-norm of the elements
        if p == "nuc":
            return _nuclear(x, dim, keepdim)
        if p != "fro":
            raise ValueError(f"norm: p must be a number, 'fro' or 'nuc', got {p!r}")
        p = 2.0
    p = 2.0 if p is None else p  # PyTorch's default, given as None
    axes = normalize_axes(_all_if_empty(dim), x.ndim)
    if p < 0 and builtins.any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"norm: cannot compute the {p} norm over an empty dimension (it has no identity)")
    if p == 2:
        squares = (x * x).sum(axes, keepdim=keepdim)
        zero = eq(squares, 0)  # sqrt's gradient at 0 is infinite: the zero vector's is taken as 0 (NaN stays)
        return where(zero, 0.0, where(zero, 1.0, squares).sqrt())
    if p == math.inf:
        return max(abs(x), axis=axes, keepdim=keepdim)
    if p == -math.inf:
        return reduce_min(abs(x), axis=axes, keepdim=keepdim)
    if p == 0:  # the count of non-zeros; in the graph with gradient 0, as PyTorch's (+ an exact 0.0)
        nothing = where(full(tuple(x.shape), False, dtype=bool_), x, 0.0).sum(axes, keepdim=keepdim)
        return ne(x, 0).cast(x.dtype).sum(axes, keepdim=keepdim) + nothing
    if p == 1:
        return abs(x).sum(axes, keepdim=keepdim)
    # as PyTorch's: a zero element, and a zero vector, get gradient 0 (|x| ** p's is infinite or NaN
    # there); with p < 0 a zero element makes the sum infinite and the norm 0
    nonzero = ne(x, 0)
    zero_power = 0.0 if p > 0 else math.inf
    powers = where(nonzero, where(nonzero, abs(x), 1.0) ** p, zero_power).sum(axes, keepdim=keepdim)
    if p < 0:
        return powers ** (1.0 / p)
    zero = eq(powers, 0)
    return where(zero, 0.0, where(zero, 1.0, powers) ** (1.0 / p))


def _nuclear(x: Tensor, dim: Axis, keepdim: bool) -> Tensor:
    """The sum of the singular values of the matrices in the two axes `dim` (those of a matrix if None)."""
    axes = normalize_axes(dim, x.ndim) if dim is not None else ((0, 1) if x.ndim == 2 else ())
    if len(axes) != 2:
        raise ValueError(f"norm: 'nuc' needs a matrix or two dims, got {x.ndim}-D input and dim={dim}")
    out = svdvals(x.movedim(axes, (-2, -1))).sum(-1)
    for axis in sorted(axes) if keepdim else ():
        out = out.unsqueeze(axis)
    return out


def count_nonzero(x: Tensor, dim: Any = None) -> Tensor:
    """How many elements are not zero, over `dim` (default all)."""
    return sum(ne(x, 0).cast(i64), axis=_all_if_empty(dim))


def bincount(x: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..max(x) occurs in the non-negative integer vector x (at least `minlength`
    bins), or the sum of `weights` at each (f32 for f32 weights, else f64, as PyTorch's). Its size depends
    on the values: eager."""
    modes.eager_only("bincount")
    values = values_of(x, "bincount")
    if values.ndim != 1 or values.dtype.kind not in "iu" or (values.size and values.min() < 0):
        raise ValueError(f"bincount takes a 1-D tensor of non-negative integers, got {describe(x)}")
    w = None if weights is None else values_of(weights, "bincount")
    counts = np.bincount(values, w, minlength)
    dtype = np.int64 if w is None else np.float32 if w.dtype == np.float32 else np.float64
    return from_numpy(counts.astype(dtype))


def histc(x: Tensor, bins: int = 100, min: float = 0.0, max: float = 0.0) -> Tensor:
    """Counts of x's values in `bins` equal bins over [min, max] (min == max: x's own least and largest,
    as PyTorch's), values outside ignored, in x's float dtype: eager only. A value's bin is PyTorch's
    int((v - min) * bins / (max - min)) in x's dtype (the last bin holding max), so values on or near an
    edge fall where PyTorch's do (NumPy's histogram compares them with its own edges)."""
    modes.eager_only("histc")
    if not x.dtype.is_float:
        raise DTypeError(f"histc takes a float tensor (as PyTorch's CPU kernel), got {x.dtype.name}")
    no_bf16(x.dtype)  # PyTorch counts in bf16 (saturating at 256); bf16 is only loaded, moved and cast here
    values = values_of(x, "histc").reshape(-1)
    if not isinstance(bins, int) or bins <= 0:
        raise ValueError(f"histc needs a positive number of bins, got {bins!r}")
    low, high = float(min), float(max)
    if low == high and values.size:
        low, high = float(values.min()), float(values.max())  # NaN propagates: refused below
    if low == high:
        low, high = low - 1, high + 1  # PyTorch's: a range of one value is widened by one each side
    if not (math.isfinite(low) and math.isfinite(high)):
        raise ValueError(f"histc: the range [{low}, {high}] is not finite")
    if low > high:
        raise ValueError(f"histc: max must be larger than min, got [{min}, {max}]")
    dtype = values.dtype.type
    left, right = dtype(low), dtype(high)
    inside = values[(values >= left) & (values <= right)]  # NaN outside
    with np.errstate(over="ignore", invalid="ignore"):
        where = ((inside - left) * dtype(bins) / (right - left)).astype(np.int64)
    counts = np.bincount(np.minimum(where, bins - 1), minlength=bins)
    return from_numpy(counts.astype(values.dtype))


def sum_to_size(x: Tensor, *size: Any) -> Tensor:
    """x summed over the axes along which `size` broadcasts to x's shape, to `size` (PyTorch's
    Tensor.sum_to_size, as a gradient is summed back to its operand's shape): x itself where size is x's
    shape but for size () (PyTorch's sum of all); a sum widens integers and bools to int64, as sum does."""
    shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], list | tuple) else size
    if not builtins.all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
        raise TypeError(f"sum_to_size: size must be ints, got {size!r}")
    lead = x.ndim - len(shape)
    if lead < 0 or builtins.any(n not in (1, m) for n, m in zip(shape, x.shape[lead:])):
        raise ShapeError(f"sum_to_size: size {shape_text(shape)} is not expandable to {shape_text(x.shape)}")
    return sum(x) if not shape else unbroadcast(x, shape)
