"""Functions PyTorch users reach for, written with the ops: clamp, masked_fill, var and std,
logsumexp, argmin, all and any, isnan / isinf / isfinite, tril and triu, chunk and split, flip,
repeat, repeat_interleave, index_select, sort and topk. None is an op of its own: its shapes,
dtypes, errors and gradients are those of the ops it is made of, so it works eagerly, under `check`
and in traces alike, symbolic sizes included.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import modes
from ..dtypes import bool_, i64
from ..errors import DTypeError, ShapeError
from ..registry import FUNCS, OPS
from ..shapes import broadcast, normalize_axes, normalize_axis, shape_text
from ..tensor import Tensor, describe
from .binary import eq, gt, minimum, ne, sub, where
from .creation import Generator, arange, from_numpy, full, rand
from .index import argsort, gather, gather_grad, searchsorted, take, take_grad
from .matmul import matmul
from .movement import concat
from .reduce import argmax, max, numel_of, sum
from .reduce import min as reduce_min
from .shaping import getitem, unsqueeze

Axis = int | Sequence[int] | None


def _pick(axis: Any, dim: Any) -> Any:
    """`axis`, or PyTorch's `dim` when it is given."""
    return dim if dim is not None else axis


# element-wise ----------------------------------------------------------------------------------
def clamp(x: Tensor, min: Any = None, max: Any = None) -> Tensor:
    """x limited to [min, max] (either may be None, or a tensor that broadcasts); NaN stays NaN, and
    where min > max every value is max, as in PyTorch. The gradient goes as PyTorch's: to x where
    min <= x <= max, to min where x < min < max, to max where x > max or max < min (so to none where x
    is outside min == max)."""
    if min is None and max is None:
        raise ValueError("clamp needs min or max (or both)")
    y = x
    if min is not None:
        if isinstance(min, Tensor) and max is not None:
            min = where(min < max, min, min.detach())
        y = where(x < min, min, y)
    if max is not None:
        y = where(y > max, max, y)
    return y


def masked_fill(x: Tensor, mask: Tensor, value: Any) -> Tensor:
    """x with `value` where the bool `mask` (broadcast to x) holds."""
    return where(mask, value, x)


def isnan(x: Tensor) -> Tensor:
    return ne(x, x)


def isinf(x: Tensor) -> Tensor:
    return eq(abs(x), math.inf) if x.dtype.is_float else ne(x, x)


def isfinite(x: Tensor) -> Tensor:
    """Neither NaN nor infinite (x - x is 0 exactly then); every integer is."""
    return eq(sub(x, x), 0)


def _triangle(x: Tensor, diagonal: int, lower: bool, name: str) -> Tensor:
    if x.ndim < 2:
        raise ShapeError(f"{name} needs a matrix (or a batch of them), got {shape_text(x.shape)}")
    rows, cols = unsqueeze(arange(0, x.shape[-2]), -1), arange(0, x.shape[-1])
    keep = (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)
    return where(keep, x, 0)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two axes (j - i <= diagonal); the rest 0."""
    return _triangle(x, diagonal, True, "tril")


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two axes (j - i >= diagonal); the rest 0."""
    return _triangle(x, diagonal, False, "triu")


# reductions ------------------------------------------------------------------------------------
def var(
    x: Tensor,
    axis: Axis = None,
    correction: int | float = 1,
    keepdim: bool = False,
    *,
    dim: Axis = None,
    unbiased: bool | None = None,
) -> Tensor:
    """The variance over `axis` (all when None): the mean squared deviation, summed and divided by
    (count - correction); correction 1 (the default, or `unbiased=True`) is Bessel's, 0 the biased one."""
    if not x.dtype.is_float or x.dtype.name == "bf16":
        raise DTypeError(f"var and std need an f16, f32 or f64 tensor, got {x.dtype.name}; cast it first")
    if unbiased is not None:
        correction = 1 if unbiased else 0
    axes = normalize_axes(_pick(axis, dim), x.ndim)
    deviation = x - x.mean(axes, keepdim=True)
    return sum(deviation * deviation, axis=axes, keepdim=keepdim) / (numel_of(x, axis=axes) - correction)


def std(x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """The square root of `var` (same arguments)."""
    return var(x, *args, **kwargs).sqrt()


# products ---------------------------------------------------------------------------------------
def _ranks(name: str, a: Tensor, b: Tensor, rank: int, what: str) -> None:
    if a.ndim != rank or b.ndim != rank:
        raise ShapeError(f"{name} multiplies {what}, got {describe(a)} and {describe(b)}")


def mm(a: Tensor, b: Tensor) -> Tensor:
    """The product of two matrices (PyTorch's mm: 2-D operands only; matmul broadcasts)."""
    _ranks("mm", a, b, 2, "two matrices")
    return a @ b


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix products of [B, n, k] and [B, k, m] (PyTorch's bmm: 3-D operands only)."""
    _ranks("bmm", a, b, 3, "two batches of matrices [B, n, k] and [B, k, m]")
    return a @ b


def outer(a: Tensor, b: Tensor) -> Tensor:
    """a[i] * b[j] for two vectors."""
    _ranks("outer", a, b, 1, "two vectors")
    return unsqueeze(a, -1) * b


def norm(x: Tensor, p: float = 2.0, dim: Axis = None, keepdim: bool = False) -> Tensor:
    """The p-norm over `dim` (all elements when None), as PyTorch's: p 2 (the square root of the sum of
    squares, with gradient 0 at a zero vector, as PyTorch's), 1, inf (the largest |x|), -inf (the
    smallest), 0 (the count of non-zeros) or any other p, (sum |x|^p)^(1/p)."""
    if not x.dtype.is_float or x.dtype.name == "bf16":
        raise DTypeError(f"norm needs an f16, f32 or f64 tensor, got {x.dtype.name}; cast it first")
    axes = normalize_axes(dim, x.ndim)
    if p == 2:
        squares = (x * x).sum(axes, keepdim=keepdim)
        some = squares > 0  # sqrt's gradient at 0 is infinite: the zero vector's is taken as 0
        return where(some, where(some, squares, 1.0).sqrt(), 0.0)
    if p == math.inf:
        return max(abs(x), axis=axes, keepdim=keepdim)
    if p == -math.inf:
        return reduce_min(abs(x), axis=axes, keepdim=keepdim)
    if p == 0:
        return ne(x, 0).cast(x.dtype).sum(axes, keepdim=keepdim)
    if p == 1:
        return abs(x).sum(axes, keepdim=keepdim)
    return (abs(x) ** p).sum(axes, keepdim=keepdim) ** (1.0 / p)


def var_mean(x: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
    """(var, mean) over the same axes (`var`'s arguments; PyTorch's var_mean)."""
    axis = kwargs.get("dim", kwargs.get("axis", args[0] if args else None))
    keepdim = kwargs.get("keepdim", args[2] if len(args) > 2 else False)
    return var(x, *args, **kwargs), x.mean(normalize_axes(axis, x.ndim), keepdim=keepdim)


def std_mean(x: Tensor, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
    """(std, mean) over the same axes (PyTorch's std_mean)."""
    v, m = var_mean(x, *args, **kwargs)
    return v.sqrt(), m


def logsumexp(x: Tensor, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
    """log(sum(exp(x))) over `axis`, shifted by the maximum so that nothing overflows (an infinite
    maximum is not subtracted, as in PyTorch: all -inf gives -inf); its gradient is the softmax."""
    axes = normalize_axes(_pick(axis, dim), x.ndim)
    top = max(x, axis=axes, keepdim=True).detach()
    top = where(isinf(top), 0.0, top)
    out = (x - top).exp().sum(axes, keepdim=True).log() + top
    return out if keepdim else out.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


def argmin(x: Tensor, axis: int | None = None, keepdim: bool = False, *, dim: int | None = None) -> Tensor:
    """Index of the first smallest value along `axis` (of the flattened tensor when None), as i64: the
    first largest of -x, or of -1 - x for integers (which, unlike -x, does not overflow)."""
    flipped = sub(-1, x.cast(i64) if x.dtype is bool_ else x) if not x.dtype.is_float else -x
    return argmax(flipped, axis=_pick(axis, dim), keepdim=keepdim)


def all(x: Tensor, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
    """Whether every element over `axis` is nonzero (NaN counts as nonzero), as bool."""
    return eq(sum(eq(x, 0), axis=_pick(axis, dim), keepdim=keepdim), 0)


def any(x: Tensor, axis: Axis = None, keepdim: bool = False, *, dim: Axis = None) -> Tensor:
    """Whether some element over `axis` is nonzero (NaN counts as nonzero), as bool."""
    return ne(sum(ne(x, 0), axis=_pick(axis, dim), keepdim=keepdim), 0)


# movement --------------------------------------------------------------------------------------
def _concrete_size(x: Tensor, axis: int, name: str) -> int:
    size = x.shape[axis]
    if not isinstance(size, int):
        reason = f"{name} needs a concrete size along axis {axis}, got {size}"
        raise ShapeError(reason).locate(name, (describe(x),))
    return size


def split(x: Tensor, split_size_or_sections: int | Sequence[int], axis: int = 0, *, dim: int | None = None):
    """Views of consecutive pieces along `axis`: of `split_size` each (the last may be shorter), or of
    the given sizes, which must add up to the axis' size."""
    axis = normalize_axis(_pick(axis, dim), x.ndim)
    size = _concrete_size(x, axis, "split")
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split needs a positive size, got {step}")
        sizes = [min(step, size - start) for start in range(0, size, step)] or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if builtins.min(sizes, default=0) < 0 or builtins.sum(sizes) != size:
            raise ValueError(f"split sizes {sizes} must be non-negative and add up to {size}")
    lead = (slice(None),) * axis
    pieces, start = [], 0
    for n in sizes:
        pieces.append(getitem(x, (*lead, slice(start, start + n))))
        start += n
    return tuple(pieces)


def chunk(x: Tensor, chunks: int, axis: int = 0, *, dim: int | None = None):
    """`chunks` views along `axis` (fewer when the size does not allow so many), each of
    ceil(size / chunks) elements but the last, as PyTorch's chunk."""
    if not isinstance(chunks, int) or chunks <= 0:
        raise ValueError(f"chunk needs a positive number of chunks, got {chunks}")
    axis = normalize_axis(_pick(axis, dim), x.ndim)
    size = _concrete_size(x, axis, "chunk")
    return split(x, builtins.max(1, -(-size // chunks)), axis)


def flip(x: Tensor, dims: int | Sequence[int]) -> Tensor:
    """x reversed along each axis of `dims` (a copy, as in PyTorch)."""
    for axis in normalize_axes(dims, x.ndim):
        last = full((), x.shape[axis] - 1, dtype=i64)  # a size that may be a symbol, bound at run time
        x = take(x, sub(last, arange(0, x.shape[axis])), axis=axis)
    return x


def repeat(x: Tensor, *sizes: Any) -> Tensor:
    """PyTorch's repeat: x tiled sizes[i] times along axis i (leading sizes add new axes)."""
    if len(sizes) == 1 and isinstance(sizes[0], list | tuple):
        sizes = tuple(sizes[0])
    if len(sizes) < x.ndim:
        raise ShapeError(
            f"repeat needs a count for each of the {x.ndim} axes of {shape_text(x.shape)}, got {len(sizes)}"
        )
    shape = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
    spread = x.reshape(tuple(d for s in shape for d in (1, s)))  # a unit axis before each axis
    tiled = spread.broadcast_to(tuple(d for r, s in zip(sizes, shape) for d in (r, s)))
    return tiled.reshape(tuple(r * s for r, s in zip(sizes, shape)))


class SortResult(NamedTuple):
    """PyTorch's (values, indices) of sort and topk."""

    values: Tensor
    indices: Tensor


def sort(x: Tensor, axis: int = -1, descending: bool = False, *, dim: int | None = None) -> SortResult:
    """x sorted along `axis` (stably; NaN above every number), with the indices it came from."""
    order = argsort(x, axis=_pick(axis, dim), descending=descending)
    return SortResult(gather(x, order, axis=_pick(axis, dim)), order)


def topk(
    x: Tensor, k: int, axis: int = -1, largest: bool = True, sorted: bool = True, *, dim: int | None = None
) -> SortResult:
    """The k largest (or smallest) entries along `axis`, in order, with their indices (ties: the
    earlier index first)."""
    axis = normalize_axis(_pick(axis, dim), x.ndim)
    size = _concrete_size(x, axis, "topk")
    if not isinstance(k, int) or not 0 <= k <= size:
        raise ValueError(f"topk needs 0 <= k <= {size}, got {k}")
    order = argsort(x, axis=axis, descending=largest)
    first = getitem(order, (slice(None),) * axis + (slice(0, k),))
    return SortResult(gather(x, first, axis=axis), first)


def repeat_interleave(x: Tensor, repeats: int, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """Each element repeated `repeats` times in place along `axis` ([a, b] -> [a, a, b, b]); with no
    axis, of the flattened tensor. An integer count (PyTorch also takes a tensor of counts)."""
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 0:
        raise ValueError(f"repeat_interleave takes a whole number of repeats >= 0, got {repeats!r}")
    axis = _pick(axis, dim)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = normalize_axis(axis, x.ndim)
    spread = unsqueeze(x, axis + 1)
    shape = (*x.shape[: axis + 1], repeats, *x.shape[axis + 1 :])
    merged = (*x.shape[:axis], x.shape[axis] * repeats, *x.shape[axis + 1 :])
    return spread.broadcast_to(shape).reshape(merged)


def index_select(x: Tensor, axis: int, index: Tensor) -> Tensor:
    """The entries of x at the integer `index` (1-D) along `axis`."""
    if index.ndim != 1:
        raise ShapeError(f"index_select needs a 1-D index, got {shape_text(index.shape)}")
    return take(x, index, axis=axis)


def index_add(x: Tensor, dim: int, index: Tensor, source: Tensor, alpha: Any = 1) -> Tensor:
    """x with source's slices (times alpha) added at the positions `index` names along `dim`; repeated
    positions add up (PyTorch's index_add)."""
    axis = normalize_axis(dim, x.ndim)
    if index.ndim != 1 or index.dtype.kind != "i":
        raise ShapeError(f"index_add needs a vector of integer positions, got {describe(index)}")
    added = source if alpha == 1 else source * alpha
    return x + take_grad(added, index, axis=axis, size=x.shape[axis])


def _scatter_index(x: Tensor, dim: int, index: Tensor, src: Any, what: str) -> int:
    """The axis of a scatter into x, after checking PyTorch's rules: an integer index of x's rank, no
    larger than src in any dimension, nor than x but along the axis."""
    axis = normalize_axis(dim, x.ndim)
    if not isinstance(index, Tensor) or index.dtype.kind != "i":
        raise DTypeError(f"{what} needs an integer index tensor, got {describe(index)}")
    shapes = [("the input", x.shape, axis)] + ([("src", src.shape, None)] if isinstance(src, Tensor) else [])
    for name, shape, skip in shapes:
        fits = len(shape) == index.ndim and builtins.all(
            d == skip or not (isinstance(i, int) and isinstance(n, int) and i > n)
            for d, (i, n) in enumerate(zip(index.shape, shape))
        )
        if not fits:
            along = f" but along dim {axis}" if skip is not None else ""
            raise ShapeError(
                f"{what}: the index {shape_text(index.shape)} must have the rank of {name} "
                f"{shape_text(shape)} and be no larger{along}"
            )
    return axis


def _spread(values: Tensor, index: Tensor, axis: int, shape: tuple) -> Tensor:
    """Zeros of `shape` with values[..., j, ...] (values cut to index's shape) added at index[..., j, ...]
    along `axis`."""
    if tuple(values.shape) != tuple(index.shape):
        values = getitem(values, tuple(slice(0, n) for n in index.shape))
    added = gather_grad(values, index, axis=axis, size=shape[axis])
    widths = tuple((0, n - m) for n, m in zip(shape, added.shape))
    return added if not builtins.any(w for _, w in widths) else OPS["pad"](added, widths=widths, value=0.0)


def scatter_add(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """x with each src[..., j, ...] added at the position index[..., j, ...] names along `dim` (PyTorch's
    scatter_add; repeated positions add up)."""
    axis = _scatter_index(x, dim, index, src, "scatter_add")
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_add adds a tensor src, got {type(src).__name__}")
    return x + _spread(src, index, axis, tuple(x.shape))


def scatter(
    x: Tensor, dim: int, index: Tensor, src: Any = None, *, value: Any = None, reduce: Any = None
) -> Tensor:
    """x with src[..., j, ...] (or the number `value`) written at the position index[..., j, ...] names
    along `dim` (PyTorch's scatter). A position the index repeats gets the sum of the values written
    there (PyTorch leaves which one unspecified); use scatter_add to add into x. reduce="add" or
    "multiply" reduces into x instead (PyTorch's older form of scatter_reduce)."""
    if (src is None) == (value is None):
        raise TypeError("scatter takes one of src (a tensor or a number) and value")
    src = value if src is None else src
    axis = _scatter_index(x, dim, index, src, "scatter")
    if reduce is not None:
        kinds = {"add": "sum", "multiply": "prod"}
        if reduce not in kinds:
            raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
        values = src if isinstance(src, Tensor) else full(tuple(index.shape), src, dtype=x.dtype)
        return FUNCS["scatter_reduce"](x, axis, index, values, kinds[reduce])
    shape = tuple(x.shape)
    hit = gt(_spread(full(tuple(index.shape), 1.0), index, axis, shape), 0)  # the positions written
    written = _spread(src, index, axis, shape) if isinstance(src, Tensor) else src
    return where(hit, written, x)


def fill_diagonal_(x: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """x's main diagonal set to `fill_value`, in place (PyTorch's): a matrix, or a tensor whose sides
    are all equal; with `wrap`, a tall matrix's diagonal starts again after each (columns + 1) rows."""
    shape = tuple(x.shape)
    if x.ndim < 2 or not builtins.all(isinstance(n, int) for n in shape):
        raise ShapeError(
            f"fill_diagonal_ needs a tensor of rank 2 or more with known sides, got {describe(x)}"
        )
    if x.ndim > 2 and len(set(shape)) != 1:
        raise ShapeError(f"fill_diagonal_ needs all sides equal above rank 2, got {shape_text(shape)}")
    if x.ndim == 2 and wrap and shape[0] > shape[1]:
        mask = np.arange(shape[0] * shape[1]).reshape(shape) % (shape[1] + 1) == 0
    else:
        grid = np.indices(shape)
        mask = np.all(grid == grid[0], axis=0)
    return x.assign(where(from_numpy(mask), fill_value, x))


def addmm(x: Tensor, a: Tensor, b: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """beta x + alpha (a @ b) (PyTorch's addmm; baddbmm is the same on batches)."""
    product = matmul(a, b)
    product = product if alpha == 1 else product * alpha
    return product if beta == 0 else (x if beta == 1 else x * beta) + product


def isclose(a: Tensor, b: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> Tensor:
    """|a - b| <= atol + rtol |b| elementwise (PyTorch's): equal values (infinities too) are close, and
    NaNs are close to each other with `equal_nan`."""
    gap = abs(sub(a, b))
    close = eq(a, b) | (isfinite(gap) & (gap <= atol + rtol * abs(b)))  # an infinity: only if equal
    return close | (isnan(a) & isnan(b)) if equal_nan else close


def count_nonzero(x: Tensor, dim: Any = None) -> Tensor:
    """How many elements are not zero, over `dim` (default all)."""
    return sum(ne(x, 0).cast(i64), axis=dim)


def roll(x: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """x shifted cyclically by `shifts` along `dims` (the flattened x without dims), as PyTorch's."""
    if dims is None:
        return roll(x.reshape(-1), shifts, 0).reshape(x.shape)
    pairs = list(zip(shifts, dims)) if isinstance(shifts, Sequence) else [(shifts, dims)]
    for shift, dim in pairs:
        axis = normalize_axis(dim, x.ndim)
        size = x.shape[axis]
        if not isinstance(size, int):
            raise ShapeError(f"roll needs a concrete size along dim {dim}, got {size}")
        cut = size - shift % size if size else 0
        if cut not in (0, size):
            head = (slice(None),) * axis
            x = concat([getitem(x, (*head, slice(cut, None))), getitem(x, (*head, slice(0, cut)))], axis=axis)
    return x


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """x[..., start:start + length, ...] along `dim`."""
    axis = normalize_axis(dim, x.ndim)
    return getitem(x, (*(slice(None),) * axis, slice(start, start + length)))


def unbind(x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices of x along `dim`, that axis removed."""
    axis = normalize_axis(dim, x.ndim)
    if not isinstance(x.shape[axis], int):
        raise ShapeError(f"unbind needs a concrete size along dim {dim}, got {x.shape[axis]}")
    return tuple(getitem(x, (*(slice(None),) * axis, i)) for i in range(x.shape[axis]))


def nan_to_num(x: Tensor, nan: float = 0.0, posinf: Any = None, neginf: Any = None) -> Tensor:
    """NaN replaced by `nan`, +inf and -inf by `posinf` and `neginf` (default: the dtype's largest and
    least finite values)."""
    if not x.dtype.is_float:
        return x
    info = np.finfo(x.dtype.np)
    top = float(info.max) if posinf is None else posinf
    bottom = float(info.min) if neginf is None else neginf
    return where(isnan(x), nan, where(eq(x, math.inf), top, where(eq(x, -math.inf), bottom, x)))


def cdist(a: Tensor, b: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm distances between the rows of a [..., P, M] and of b [..., R, M]: [..., P, R]."""
    return norm(unsqueeze(a, -2) - unsqueeze(b, -3), p, dim=-1)


def masked_select(x: Tensor, mask: Tensor) -> Tensor:
    """The elements of x where the bool mask (broadcast with x) holds, in order, as a vector (eager
    only: its size depends on the mask)."""
    x, mask = broadcast_tensors(x, mask)
    return getitem(x.reshape(-1), mask.reshape(-1))


def broadcast_tensors(*tensors: Any) -> tuple[Tensor, ...]:
    """The tensors broadcast to their common shape."""
    lifted = [t if isinstance(t, Tensor) else full((), t) for t in tensors]
    shape = broadcast(*(t.shape for t in lifted))
    return tuple(t if tuple(t.shape) == tuple(shape) else t.broadcast_to(shape) for t in lifted)


def bernoulli(p: Tensor, generator: Generator | None = None) -> Tensor:
    """1 with probability p, else 0, elementwise, in p's dtype (a uniform draw below p)."""
    return (rand(*p.shape, dtype=p.dtype, generator=generator) < p).cast(p.dtype)


def multinomial(
    input: Tensor, num_samples: int, replacement: bool = False, generator: Generator | None = None
) -> Tensor:
    """`num_samples` categories drawn per row of the non-negative weights input [C] or [N, C] (in
    proportion to them; they need not sum to 1), as i64. With `replacement`, uniform draws through the
    cumulative weights; without, the `num_samples` largest of log(weight) plus Gumbel noise, which draws
    each next category in proportion to the weights left (PyTorch's distribution; not its draws)."""
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial takes weights [C] or [N, C], got {describe(input)}")
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"multinomial: num_samples must be a positive integer, got {num_samples!r}")
    categories = input.shape[-1]
    if not replacement and isinstance(categories, int) and num_samples > categories:
        raise ValueError(f"multinomial: {num_samples} draws without replacement from {categories} categories")
    if replacement:
        cdf = OPS["cumsum"](input, axis=-1)  # (scan.py imports this module)
        uniform = rand(*input.shape[:-1], num_samples, dtype=cdf.dtype, generator=generator)
        draws = uniform * getitem(cdf, (..., slice(-1, None)))
        return minimum(searchsorted(cdf, draws, right=True), categories - 1)
    noise = -(-rand(*input.shape, dtype=input.dtype, generator=generator).log()).log()
    return topk(input.log() + noise, num_samples, -1).indices


def bucketize(input: Tensor, boundaries: Tensor, *, right: bool = False) -> Tensor:
    """The bucket of each value among the sorted `boundaries` (PyTorch's): searchsorted(boundaries,
    input, right=right)."""
    return searchsorted(boundaries, input, right=right)


def square(x: Tensor) -> Tensor:
    return x * x


def lerp(start: Tensor, end: Any, weight: Any) -> Tensor:
    """start + weight * (end - start)."""
    return start + (end - start) * weight


def addcmul(x: Tensor, tensor1: Any, tensor2: Any, value: Any = 1) -> Tensor:
    """x + value * tensor1 * tensor2."""
    return x + tensor1 * tensor2 * value


def addcdiv(x: Tensor, tensor1: Any, tensor2: Any, value: Any = 1) -> Tensor:
    """x + value * tensor1 / tensor2."""
    return x + tensor1 / tensor2 * value


def frac(x: Tensor) -> Tensor:
    """x - trunc(x): the fractional part, with x's sign; its gradient is 1."""
    return x - x.trunc()


def deg2rad(x: Tensor) -> Tensor:
    return x * (math.pi / 180)


def rad2deg(x: Tensor) -> Tensor:
    return x * (180 / math.pi)


def movedim(x: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    """x with its dimensions `source` moved to the places `destination`, the others in their order."""
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError(f"movedim: {len(src)} source dimensions but {len(dst)} destinations")
    src, dst = [normalize_axis(a, x.ndim) for a in src], [normalize_axis(a, x.ndim) for a in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dimensions in {source} or {destination}")
    rest = iter(a for a in range(x.ndim) if a not in src)
    placed = dict(zip(dst, src))
    return x.permute(*(placed[i] if i in placed else next(rest) for i in range(x.ndim)))


def unflatten(x: Tensor, dim: int, sizes: Sequence[Any]) -> Tensor:
    """x with dimension `dim` split into `sizes` (one of them may be -1)."""
    axis = normalize_axis(dim, x.ndim)
    return x.reshape(*x.shape[:axis], *sizes, *x.shape[axis + 1 :])


def log2(x: Tensor) -> Tensor:
    """log(x) / log(2), within an ulp or two of a direct log2."""
    return x.log() * (1 / math.log(2))


def log10(x: Tensor) -> Tensor:
    """log(x) / log(10), within an ulp or two of a direct log10."""
    return x.log() * (1 / math.log(10))


def logspace(start: float, end: float, steps: int, base: float = 10.0, dtype: Any = "f32") -> Tensor:
    """base ** linspace(start, end, steps), computed in f64 and rounded once to `dtype`."""
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"logspace needs a whole number of steps >= 0, got {steps}")
    return from_numpy(np.power(float(base), np.linspace(start, end, steps))).cast(dtype)


def tril_indices(row: int, col: int, offset: int = 0) -> Tensor:
    """The [2, n] positions of the lower triangle of a row x col matrix (PyTorch's order)."""
    return from_numpy(np.stack(np.tril_indices(row, offset, col)).astype(np.int64))


def triu_indices(row: int, col: int, offset: int = 0) -> Tensor:
    """The [2, n] positions of the upper triangle of a row x col matrix (PyTorch's order)."""
    return from_numpy(np.stack(np.triu_indices(row, offset, col)).astype(np.int64))


def unique(
    x: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim: Any = None
) -> Any:
    """The distinct values of x in increasing order (PyTorch's, which sorts them on the CPU whatever
    `sorted` says), with the index of each element's value (`return_inverse`, shaped as x) and each
    value's count; with `dim`, the distinct slices along it, in lexicographic order (the inverse then
    one index per slice). Its size depends on the values: it runs eagerly, not in traces or `check`."""
    modes.eager_only("unique")
    axis = None if dim is None else normalize_axis(dim, x.ndim)
    found = np.unique(_values(x, "unique"), return_inverse=True, return_counts=True, axis=axis)
    values, inverse, counts = found
    out = [from_numpy(np.ascontiguousarray(values))]
    if return_inverse:
        shape = x.shape if axis is None else (x.shape[axis],)
        out.append(from_numpy(inverse.reshape(shape).astype(np.int64)))
    if return_counts:
        out.append(from_numpy(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def nonzero(x: Tensor, as_tuple: bool = False) -> Any:
    """The positions of x's non-zero elements: [n, ndim] i64, or one vector per axis with as_tuple.
    How many depends on the values: eager only."""
    modes.eager_only("nonzero")
    found = np.nonzero(_values(x, "nonzero"))
    if as_tuple:
        return tuple(from_numpy(np.ascontiguousarray(i, dtype=np.int64)) for i in found)
    return from_numpy(np.ascontiguousarray(np.stack(found, axis=-1), dtype=np.int64).reshape(-1, x.ndim))


def index_fill(x: Tensor, dim: int, index: Any, value: Any) -> Tensor:
    """x with the slices at `index` (a vector of positions) along `dim` set to `value`."""
    axis = normalize_axis(dim, x.ndim)
    positions = index if isinstance(index, Tensor) else from_numpy(np.asarray(index, dtype=np.int64))
    if positions.ndim > 1 or positions.dtype.kind != "i":
        raise ValueError(f"index_fill takes a vector of integer positions, got {describe(positions)}")
    positions = positions.reshape(-1)
    hit = gt(take_grad(full(tuple(positions.shape), 1.0), positions, axis=0, size=x.shape[axis]), 0)
    return where(hit.reshape(*([1] * axis), -1, *([1] * (x.ndim - axis - 1))), value, x)


def argwhere(x: Tensor) -> Tensor:
    """The positions of x's non-zero elements, [n, ndim] i64 (nonzero's): eager only."""
    return nonzero(x)


def bincount(x: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """How often each value 0..max(x) occurs in the non-negative integer vector x (at least `minlength`
    bins), or the sum of `weights` at each (in weights' dtype). Its size depends on the values: eager."""
    modes.eager_only("bincount")
    values = _values(x, "bincount")
    if values.ndim != 1 or values.dtype.kind not in "iub" or (values.size and values.min() < 0):
        raise ValueError(f"bincount takes a 1-D tensor of non-negative integers, got {describe(x)}")
    w = None if weights is None else _values(weights, "bincount")
    counts = np.bincount(values, w, minlength)
    return from_numpy(counts.astype(np.int64 if w is None else w.dtype))


def histc(x: Tensor, bins: int = 100, min: float = 0.0, max: float = 0.0) -> Tensor:
    """Counts of x's values in `bins` equal bins over [min, max] (min == max: x's own least and largest,
    as PyTorch's), values outside ignored, in x's float dtype: eager only."""
    modes.eager_only("histc")
    values = _values(x, "histc").reshape(-1)
    if not isinstance(bins, int) or bins <= 0:
        raise ValueError(f"histc needs a positive number of bins, got {bins!r}")
    low, high = (min, max) if min != max or not values.size else (np.nanmin(values), np.nanmax(values))
    if low == high:
        low, high = low - 1, high + 1  # PyTorch's: a range of one value is widened by one each side
    counts, _ = np.histogram(values[~np.isnan(values)], bins, (float(low), float(high)))
    return from_numpy(counts.astype(values.dtype))


def unique_consecutive(
    x: Tensor, return_inverse: bool = False, return_counts: bool = False, dim: Any = None
) -> Any:
    """x with each run of equal consecutive elements (or slices along `dim`) kept once, with each
    element's run (`return_inverse`) and each run's length: eager only."""
    modes.eager_only("unique_consecutive")
    values = _values(x, "unique_consecutive")
    axis = None if dim is None else normalize_axis(dim, x.ndim)
    rows = (
        values.reshape(-1, 1)
        if axis is None
        else np.moveaxis(values, axis, 0).reshape(values.shape[axis], -1)
    )
    starts = np.ones(rows.shape[0], dtype=bool)
    starts[1:] = (rows[1:] != rows[:-1]).any(axis=1)
    kept = rows[starts]
    kept = (
        kept.reshape(-1)
        if axis is None
        else np.moveaxis(kept.reshape(-1, *np.delete(values.shape, axis)), 0, axis)
    )
    out = [from_numpy(np.ascontiguousarray(kept))]
    if return_inverse:
        inverse = np.cumsum(starts) - 1
        out.append(from_numpy(inverse.reshape(values.shape if axis is None else -1).astype(np.int64)))
    if return_counts:
        out.append(from_numpy(np.diff(np.append(np.flatnonzero(starts), rows.shape[0])).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


_ABSENT = object()


def where_or_positions(condition: Any, x: Any = _ABSENT, y: Any = _ABSENT) -> Any:
    """`verigrad.where`: x where `condition` holds, else y (the where op); with the condition alone, the
    positions where it holds, one vector per axis (PyTorch's one-argument where: nonzero(as_tuple=True),
    eager only)."""
    if x is _ABSENT and y is _ABSENT:
        return nonzero(condition, as_tuple=True)
    if x is _ABSENT or y is _ABSENT:
        raise TypeError("where takes a condition alone, or a condition and the two values to choose from")
    return where(condition, x, y)


def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The elements x[..., i, i + offset] of the plane of axes dim1 and dim2 (moved to the end), as
    PyTorch's diagonal: a take of the flattened plane (sizes of that plane must be concrete)."""
    a, b = normalize_axis(dim1, x.ndim), normalize_axis(dim2, x.ndim)
    if a == b:
        raise ShapeError(f"diagonal needs two different axes, got {dim1} and {dim2}")
    rows, cols = x.shape[a], x.shape[b]
    if not isinstance(rows, int) or not isinstance(cols, int):
        raise ShapeError(f"diagonal needs the plane's sizes to be concrete, got {rows} x {cols}")
    rest = [i for i in range(x.ndim) if i not in (a, b)]
    plane = x.permute((*rest, a, b)).reshape((*[x.shape[i] for i in rest], rows * cols))
    first_row, first_col = (0, offset) if offset >= 0 else (-offset, 0)
    length = builtins.max(0, builtins.min(rows - first_row, cols - first_col))
    positions = (arange(0, length) + first_row) * cols + first_col + arange(0, length)
    return take(plane, positions, axis=plane.ndim - 1)


def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """A vector's square matrix with it on the `diagonal`-th diagonal (zeros elsewhere); a matrix's
    diagonal."""
    if x.ndim == 2:
        return x.diagonal(diagonal)
    if x.ndim != 1 or not isinstance(x.shape[0], int):
        raise ShapeError(f"diag takes a vector (of a concrete length) or a matrix, got {describe(x)}")
    n = x.shape[0] + builtins.abs(diagonal)
    row, col = unsqueeze(arange(0, n), -1), unsqueeze(arange(0, n), 0)
    reads = (row if diagonal >= 0 else col).broadcast_to((n, n)).clamp(0, builtins.max(x.shape[0] - 1, 0))
    return where(eq(col - row, diagonal), take(x, reads, axis=0), 0).cast(x.dtype)


def trace(x: Tensor) -> Tensor:
    """The sum of a matrix's diagonal."""
    if x.ndim != 2:
        raise ShapeError(f"trace takes a matrix, got {describe(x)}")
    return diagonal(x).sum()


def meshgrid(*tensors: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids of 1-D tensors: "ij" (PyTorch's default) gives shape (len0, len1, ...), "xy"
    swaps the first two."""
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if builtins.any(t.ndim != 1 for t in tensors):
        raise ShapeError(f"meshgrid takes vectors, got {', '.join(describe(t) for t in tensors)}")
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        order[0], order[1] = 1, 0
    shape = tuple(tensors[k].shape[0] for k in order)
    grids = []
    for k, t in enumerate(tensors):
        axis = order.index(k)
        grids.append(t.reshape(tuple(-1 if i == axis else 1 for i in range(len(shape)))).broadcast_to(shape))
    return tuple(grids)


def allclose(a: Any, b: Any, rtol: float = 1e-5, atol: float = 1e-8, equal_nan: bool = False) -> bool:
    """Whether |a - b| <= atol + rtol |b| everywhere (broadcast), as NumPy's and PyTorch's allclose."""
    return bool(np.allclose(_values(a, "allclose"), _values(b, "allclose"), rtol, atol, equal_nan))


def equal(a: Tensor, b: Tensor) -> bool:
    """Whether a and b have the same shape and the same values (PyTorch's torch.equal)."""
    x, y = _values(a, "equal"), _values(b, "equal")
    return x.shape == y.shape and bool(np.array_equal(x, y))


def _values(x: Any, what: str) -> np.ndarray:
    if isinstance(x, Tensor):
        if not isinstance(x.data, np.ndarray):
            raise TypeError(f"{what} reads values, but this tensor is abstract or traced: {x.spec!r}")
        return x.numpy()
    return np.asarray(x)


FUNCS.update(
    index_fill=index_fill,
    argwhere=argwhere,
    bincount=bincount,
    histc=histc,
    unique_consecutive=unique_consecutive,
    lerp=lerp,
    addcmul=addcmul,
    addcdiv=addcdiv,
    frac=frac,
    deg2rad=deg2rad,
    rad2deg=rad2deg,
    movedim=movedim,
    unflatten=unflatten,
    addmm=addmm,
    isclose=isclose,
    count_nonzero=count_nonzero,
    roll=roll,
    narrow=narrow,
    unbind=unbind,
    nan_to_num=nan_to_num,
    cdist=cdist,
    masked_select=masked_select,
    broadcast_tensors=broadcast_tensors,
    tril_indices=tril_indices,
    triu_indices=triu_indices,
    square=square,
    bucketize=bucketize,
    bernoulli=bernoulli,
    multinomial=multinomial,
    log2=log2,
    log10=log10,
    logspace=logspace,
    allclose=allclose,
    equal=equal,
    index_add=index_add,
    scatter=scatter,
    scatter_add=scatter_add,
    fill_diagonal_=fill_diagonal_,
    unique=unique,
    diagonal=diagonal,
    diag=diag,
    trace=trace,
    var_mean=var_mean,
    std_mean=std_mean,
    meshgrid=meshgrid,
    nonzero=nonzero,
    clamp=clamp,
    masked_fill=masked_fill,
    isnan=isnan,
    isinf=isinf,
    isfinite=isfinite,
    tril=tril,
    triu=triu,
    var=var,
    std=std,
    logsumexp=logsumexp,
    norm=norm,
    mm=mm,
    bmm=bmm,
    outer=outer,
    argmin=argmin,
    all=all,
    any=any,
    split=split,
    chunk=chunk,
    flip=flip,
    repeat=repeat,
    index_select=index_select,
    repeat_interleave=repeat_interleave,
    sort=sort,
    topk=topk,
)
