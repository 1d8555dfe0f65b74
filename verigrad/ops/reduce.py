"""Reductions over one or several axes, with keepdim: sum, mean, prod, max, min, argmax, and numel_of;
max_of_all and min_of_all, PyTorch's max() and min() of every element.

Rounding rule (kernels must reproduce it): a float sum or mean of f16/f32 values accumulates in f64
and rounds once to the input dtype at the end; f64 accumulates in f64. Integer and bool sums give i64.
"""

from __future__ import annotations

import math

import numpy as np

from ..dtypes import DType, bool_, f32, f64, i64
from ..errors import DTypeError, ShapeError
from ..shapes import Spec, normalize_axes, plain_int
from ._op import Op, Sample, no_bf16
from ._samples import uniform
from .binary import where
from .movement import broadcast_to, reshape

_SHAPES = [
    ((3, 4), None),
    ((3, 4), 0),
    ((3, 4), (0, 1)),
    ((2, 3, 4), (0, 2)),
    ((2, 1, 3), 1),
    ((5,), 0),
    ((0, 3), 0),
    ((0, 3), 1),
    ((), None),
]


def _canon(x: Spec, axis=None, keepdim: bool = False, dim=None) -> dict:
    """NumPy's `axis` (an int, a sequence of ints, or None for all axes: `()` reduces none) or PyTorch's
    `dim` (the same, but `()` or `[]` reduces all, as PyTorch's sum, mean and prod do)."""
    if dim is not None:
        axis = None if not isinstance(dim, int | np.integer | np.bool_) and len(dim) == 0 else dim
    return {"axis": normalize_axes(axis, x.ndim), "keepdim": bool(keepdim)}


def _reduced_shape(shape: tuple, axis: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in axis else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axis)


def _nonempty_shape(shape: tuple, axis: tuple, keepdim: bool) -> tuple:
    if any(shape[i] == 0 for i in axis):
        raise ShapeError(f"cannot reduce over the empty axis {[i for i in axis if shape[i] == 0]}")
    return _reduced_shape(shape, axis, keepdim)


def _sum_dtype(x: DType, **_) -> DType:
    no_bf16(x)
    return x if x.is_float else i64


def _mean_dtype(x: DType, **_) -> DType:
    if not x.is_float or x.name == "bf16":
        raise DTypeError(f"mean needs a float tensor, got {x.name}; cast it first")
    return x


def _float_sum(x: np.ndarray, axis: tuple, keepdim: bool) -> np.ndarray:
    if x.dtype.kind != "f":
        return np.sum(x, axis=axis, keepdims=keepdim, dtype=np.int64)
    return np.sum(x, axis=axis, keepdims=keepdim, dtype=np.float64).astype(x.dtype)


def _sum_fast(out: DType, dtypes: tuple[DType, ...], axis: tuple, keepdim: bool):
    """_float_sum of a float tensor (np.sum of an ndarray is np.add.reduce)."""
    if not dtypes[0].is_float:
        return None
    storage = dtypes[0].np
    return lambda x: np.add.reduce(x, axis, np.float64, None, keepdims=keepdim).astype(storage)


def _mean(x: np.ndarray, axis: tuple, keepdim: bool) -> np.ndarray:
    count = math.prod(x.shape[a] for a in axis)
    total = np.sum(x, axis=axis, keepdims=keepdim, dtype=np.float64)
    return (total / count).astype(x.dtype)


def _mean_fast(out: DType, dtypes: tuple[DType, ...], axis: tuple, keepdim: bool):
    """_mean with np.sum of an ndarray written as the np.add.reduce it calls."""
    storage = dtypes[0].np

    def mean(x: np.ndarray) -> np.ndarray:
        count = math.prod(x.shape[a] for a in axis)
        return (np.add.reduce(x, axis, np.float64, None, keepdims=keepdim) / count).astype(storage)

    return mean


def _expand_back(g, x, axis: tuple, keepdim: bool):
    """A reduced gradient reshaped with ones at the reduced axes, broadcast to x's shape."""
    # (the ops called directly: the methods' argument handling is a backward's cost; a 0-d gradient, of a
    # sum of every element, broadcasts as it is)
    if not keepdim and g.ndim:
        g = reshape(g, shape=_reduced_shape(x.shape, axis, True))
    return broadcast_to(g, shape=tuple(x.shape))


def _mean_vjp(g, out, x, axis, keepdim):
    """The gradient divided by the count, then spread evenly (each element is the same one division, done
    once per reduced element instead of once per input element). In f32 and f64, where the sizes are ints
    and the count is exact in f32, the count is a Python int (lifted to g's dtype: numel_of's 0-d divisor,
    without its two calls); else numel_of's (symbolic in a trace; f16 divides by a Python int in f32)."""
    sizes = [x.shape[a] for a in axis]
    if g.dtype in _EXACT_COUNT and all(type(d) is int for d in sizes) and math.prod(sizes) <= 1 << 24:
        return (_expand_back(g / math.prod(sizes), x, axis, keepdim),)
    return (_expand_back(g / numel_of(x, axis=axis).cast(g.dtype), x, axis, keepdim),)


_EXACT_COUNT = (f32, f64)


def _extreme_vjp(g, out, x, axis, keepdim):
    """max/min gradient, shared evenly among the elements that reach the extreme (as amax does)."""
    hit = (x == _expand_back(out, x, axis, keepdim)).cast(g.dtype)
    count = hit.sum(axis=axis, keepdim=True)
    return (_expand_back(g, x, axis, keepdim) * hit / count,)


def _samples(rng: np.random.Generator, nonempty: bool = False) -> list[Sample]:
    return [
        Sample((uniform(rng, s),), {"axis": a, "keepdim": k})
        for s, a in _SHAPES
        for k in (False, True)
        if not (nonempty and 0 in s)
    ]


def _torch_reduce(name: str):
    def call(t, x, axis, keepdim):
        dims = list(range(x.ndim)) if axis is None else axis
        if name == "sum":
            return t.sum(x, dim=dims, keepdim=keepdim) if x.ndim else x.clone()
        return getattr(t, name)(x, dim=dims, keepdim=keepdim) if x.ndim else x.clone()

    return call


sum = Op(
    "sum",
    shape=_reduced_shape,
    dtype=_sum_dtype,
    params=_canon,
    positional=("dim", "keepdim"),  # PyTorch's sum(input, dim, keepdim)
    reference=_float_sum,
    vjp=lambda g, out, x, axis, keepdim: (_expand_back(g, x, axis, keepdim),),
    fast=_sum_fast,
    samples=_samples,
    torch=_torch_reduce("sum"),
    exact=False,
    doc="Sum over `axis` (all axes when None). f16/f32 accumulate in f64 and round once.",
)
mean = Op(
    "mean",
    shape=_reduced_shape,  # over no elements: NaN, as PyTorch's
    dtype=_mean_dtype,
    params=_canon,
    positional=("dim", "keepdim"),  # PyTorch's sum(input, dim, keepdim)
    reference=_mean,
    fast=_mean_fast,
    vjp=_mean_vjp,
    samples=lambda rng: _samples(rng, nonempty=True),
    torch=_torch_reduce("mean"),
    exact=False,
    doc="Mean over `axis`: the f64 sum divided by the count, rounded once.",
)


def _float_prod(x: np.ndarray, axis: tuple, keepdim: bool) -> np.ndarray:
    if x.dtype.kind != "f":
        return np.prod(x, axis=axis, keepdims=keepdim, dtype=np.int64)
    return np.prod(x, axis=axis, keepdims=keepdim, dtype=np.float64).astype(x.dtype)


def _prod_vjp(g, out, x, axis, keepdim):
    """(g * prod) / x at a non-zero x (PyTorch's order; differentiable also where another element of
    the group is zero: prod is then 0 and its own gradient is right); at a zero, the product of the
    group's other elements where it is the group's only zero, else 0. The second derivative is right
    but where a group holds two zeros or more (taken as 0 there: PyTorch's cumulative products get it)."""
    zero = x == 0
    safe = where(zero, 1, x)
    full_g, full_out = _expand_back(g, x, axis, keepdim), _expand_back(out, x, axis, keepdim)
    only_zero = zero & (zero.cast(i64).sum(axis=axis, keepdim=True) == 1)
    others = _expand_back(prod(safe, axis=axis, keepdim=True), x, axis, True)
    return (where(zero, where(only_zero, full_g * others, 0), full_g * full_out / safe),)


def _prod_samples(rng: np.random.Generator) -> list[Sample]:
    with_zeros, one_zero = uniform(rng, (3, 4)), uniform(rng, (2, 3))
    with_zeros[0, 1] = with_zeros[2, 3] = 0.0  # a zero in two rows and two columns
    one_zero[1, 2] = 0.0
    cases = [(with_zeros, 1), (with_zeros, 0), (one_zero, None)]
    return _samples(rng) + [Sample((a,), {"axis": axis, "keepdim": False}) for a, axis in cases]


def _torch_prod(t, x, axis, keepdim):
    """PyTorch's prod takes one dim: the axes one at a time, from the last."""
    for a in sorted(range(x.ndim) if axis is None else axis, reverse=True):
        x = t.prod(x, dim=a, keepdim=keepdim)
    return x


prod = Op(
    "prod",
    shape=_reduced_shape,
    dtype=_sum_dtype,
    params=_canon,
    positional=("dim", "keepdim"),  # PyTorch's sum(input, dim, keepdim)
    reference=_float_prod,
    vjp=_prod_vjp,
    samples=_prod_samples,
    torch=_torch_prod,
    exact=False,
    doc="Product over `axis` (all axes when None). f16/f32 multiply in f64 and round once.",
)


def _extreme(name: str, reduce_fn, torch_name: str, which: str) -> Op:
    ufunc = {np.max: np.maximum, np.min: np.minimum}[reduce_fn]  # what np.max of an ndarray calls
    return Op(
        name,
        shape=_nonempty_shape,
        dtype=lambda x, **_: (no_bf16(x), x)[1],
        params=_canon,
        positional=("dim", "keepdim"),  # PyTorch's sum(input, dim, keepdim)
        reference=lambda x, axis, keepdim: reduce_fn(x, axis=axis, keepdims=keepdim),
        vjp=_extreme_vjp,
        samples=lambda rng: _samples(rng, nonempty=True),
        torch=_torch_reduce(torch_name),
        fast=lambda out, dtypes, axis, keepdim: lambda x: ufunc.reduce(x, axis, None, None, keepdims=keepdim),
        doc=f"{which} value over `axis`; ties share the gradient evenly.",
    )


max = _extreme("max", np.max, "amax", "Largest")
min = _extreme("min", np.min, "amin", "Smallest")


def _all_extreme_vjp(g, out, x):
    """PyTorch's max() / min() of every element: the gradient shared evenly among the elements equal to
    the result, or among the NaNs where it is NaN (amax's would be NaN everywhere)."""
    hit = where(out != out, x != x, x == out).cast(g.dtype)
    return (g * hit / hit.sum(),)


def _extreme_of_all(name: str, reduce_op: Op, torch_name: str, which: str) -> Op:
    return Op(
        name,
        shape=lambda x: _nonempty_shape(x, tuple(range(len(x))), False),
        dtype=lambda x: (no_bf16(x), x)[1],
        decompose=lambda x: reduce_op(x),
        vjp=_all_extreme_vjp,
        samples=lambda rng: [Sample((uniform(rng, s),), {}) for s in [(3, 4), (5,), (2, 3, 4), ()]],
        torch=lambda t, x: getattr(t, torch_name)(x),
        doc=f"{which} of all the elements (PyTorch's {torch_name}() without a dim); ties share the gradient "
        "evenly, and where some are NaN the NaNs share it.",
    )


max_of_all = _extreme_of_all("max_of_all", max, "max", "The largest")
min_of_all = _extreme_of_all("min_of_all", min, "min", "The smallest")


def _argmax_canon(x: Spec, axis=None, keepdim: bool = False, dim=None) -> dict:
    axis = plain_int(dim if dim is not None else axis)
    if axis is not None and not isinstance(axis, int):
        raise ShapeError(f"argmax takes one axis or None, got {axis}")
    if axis is not None and not x.ndim:
        normalize_axes(axis, 0)  # 0 or -1: of a 0-d tensor, the index 0 as with no axis
        return {"axis": None, "keepdim": keepdim}
    return {"axis": None if axis is None else normalize_axes(axis, x.ndim)[0], "keepdim": keepdim}


def _argmax_shape(x: tuple, axis: int | None, keepdim: bool) -> tuple:
    axes = tuple(range(len(x))) if axis is None else (axis,)
    if axis is None and keepdim:
        return tuple(1 for _ in x)
    return _nonempty_shape(x, axes, keepdim)


def _argmax(x: np.ndarray, axis: int | None, keepdim: bool) -> np.ndarray:
    if axis is None:
        flat = np.argmax(x.reshape(-1))
        return np.full((1,) * x.ndim if keepdim else (), flat, dtype=np.int64)
    return np.argmax(x, axis=axis, keepdims=keepdim).astype(np.int64)


def _argmax_dtype(x: DType, **_) -> DType:
    no_bf16(x)
    if x is bool_:
        raise DTypeError("argmax does not support bool input (as PyTorch); cast it to an integer dtype first")
    return i64


argmax = Op(
    "argmax",
    shape=_argmax_shape,
    dtype=_argmax_dtype,
    params=_argmax_canon,
    positional=("dim", "keepdim"),  # PyTorch's sum(input, dim, keepdim)
    reference=_argmax,
    samples=lambda rng: [
        Sample((uniform(rng, s),), {"axis": a, "keepdim": k})
        for s, a in [((3, 4), None), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), -1), ((5,), 0)]
        for k in (False, True)
    ],
    torch=lambda t, x, axis, keepdim: t.argmax(x, dim=axis, keepdim=keepdim),
    doc="Index of the first largest value along `axis` (of the flattened tensor when None), as i64.",
)


def _numel_dtype(x: DType, **_) -> DType:
    no_bf16(x)  # a count made in bf16 would be the integer's bits
    return x if x.is_float and x is not bool_ else i64


numel_of = Op(
    "numel_of",
    shape=lambda x, axis: (),
    dtype=_numel_dtype,
    params=lambda x, axis=None: {"axis": normalize_axes(axis, x.ndim)},
    reference=lambda x, axis: np.array(
        math.prod(x.shape[a] for a in axis), dtype=x.dtype if x.dtype.kind == "f" else np.int64
    ),
    samples=lambda rng: [Sample((uniform(rng, (3, 4)),), {"axis": (0, 1)})],
    doc="The number of elements over `axis`, as a 0-d tensor: a size that stays symbolic in traces.",
)
