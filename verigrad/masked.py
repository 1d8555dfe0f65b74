"""`verigrad.masked`, as torch.masked's functions on strided tensors: each reduction or normalization of
`input` where `mask` (broadcast to input's shape) is True, the masked-out entries replaced by the
operation's identity first (0 for sum, 1 for prod, -inf for amax, ...), as PyTorch's implementation does;
so a fully masked-out reduction answers the identity (nan for mean, var, std and median). Written with
Tensor methods and verigrad's functions: gradients are theirs, 0 at masked-out entries. MaskedTensor and
sparse layouts are not supported.
"""

from __future__ import annotations

import math
from typing import Any

from . import functions, linalg, ops
from .dtypes import as_dtype, bool_, f32, i8, i16, i32, i64, u8
from .errors import ShapeError
from .nn import functional as F
from .shapes import normalize_axis
from .tensor import Tensor
from .typeinfo import iinfo

__all__ = [
    "amax",
    "amin",
    "argmax",
    "argmin",
    "cumprod",
    "cumsum",
    "log_softmax",
    "logaddexp",
    "logsumexp",
    "mean",
    "median",
    "norm",
    "normalize",
    "prod",
    "softmax",
    "softmin",
    "std",
    "sum",
    "var",
]

_SMALL_INTEGERS = (bool_, u8, i8, i16, i32)


def _dims(name: str, dim: Any, ndim: int) -> tuple[int, ...]:
    """dim as sorted non-negative axes; None and () mean every axis (PyTorch's _canonical_dim)."""
    if dim is None or dim == ():
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    axes = [normalize_axis(d, max(ndim, 1)) for d in dims]
    if len(set(axes)) != len(axes):
        raise RuntimeError(f"masked.{name}: dim={dim} names an axis more than once")
    return tuple(sorted(axes))


def _identity(name: str, x: Tensor, ord: float = 2.0) -> float | int:
    floating = x.dtype.is_floating_point
    if name in ("sum", "cumsum"):
        return 0
    if name in ("prod", "cumprod"):
        return 1
    if name in ("amax", "argmax", "logaddexp", "logsumexp"):
        return -math.inf if floating else iinfo(x.dtype).min
    if name in ("amin", "argmin"):
        return math.inf if floating else iinfo(x.dtype).max
    if name == "norm":
        return math.inf if ord == -math.inf else 0
    return math.nan  # median (through nanmedian)


def _input_mask(name: str, x: Tensor, mask: Tensor) -> Tensor:
    """mask as bool, broadcast to x's shape."""
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked.{name}: mask must be a Tensor, got {type(mask).__name__}")
    if mask.ndim > x.ndim:
        raise ShapeError(f"masked.{name}: mask {tuple(mask.shape)} has more axes than input {tuple(x.shape)}")
    if tuple(mask.shape) != tuple(x.shape):
        mask = functions.broadcast_to(mask, tuple(x.shape))
    return mask.to(bool_)


def _combined(name: str, x: Tensor, mask: Tensor | None, ord: float = 2.0) -> Tensor:
    """x with its masked-out entries replaced by the identity of `name`."""
    if mask is None:
        return x
    fill = ops.full((), _identity(name, x, ord), dtype=x.dtype)
    return ops.where(_input_mask(name, x, mask), x, fill)


def _sum_dtype(x: Tensor, dtype: Any) -> Any:
    if dtype is not None:
        return as_dtype(dtype)
    return i64 if x.dtype in _SMALL_INTEGERS else x.dtype


def sum(
    input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Tensor:
    """The sum over `dim` of the entries where mask is True (0 where none is)."""
    dims = _dims("sum", dim, input.ndim)
    return _combined("sum", input, mask).sum(dims, keepdim=bool(keepdim), dtype=_sum_dtype(input, dtype))


def prod(
    input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Tensor:
    """The product over `dim` of the entries where mask is True (1 where none is)."""
    dims = _dims("prod", dim, input.ndim)
    result = _combined("prod", input, mask).to(_sum_dtype(input, dtype))
    for d in reversed(dims):
        result = result.prod(dim=d, keepdim=bool(keepdim))
    return result


def _out_dtype(x: Tensor, dtype: Any) -> Any:
    return x.dtype if dtype is None else as_dtype(dtype)


def amax(
    input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Tensor:
    """The largest entry over `dim` where mask is True (-inf, or the dtype's least, where none is)."""
    dims = _dims("amax", dim, input.ndim)
    return functions.amax(_combined("amax", input, mask), dims, bool(keepdim)).to(_out_dtype(input, dtype))


def amin(
    input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Tensor:
    """The least entry over `dim` where mask is True (inf, or the dtype's largest, where none is)."""
    dims = _dims("amin", dim, input.ndim)
    return functions.amin(_combined("amin", input, mask), dims, bool(keepdim)).to(_out_dtype(input, dtype))


def argmax(
    input: Tensor, dim: int | None = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Tensor:
    """The position of the largest entry over `dim` where mask is True, in input's dtype (PyTorch's)."""
    return _combined("argmax", input, mask).argmax(dim, bool(keepdim)).to(_out_dtype(input, dtype))


def argmin(
    input: Tensor, dim: int | None = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Tensor:
    """The position of the least entry over `dim` where mask is True, in input's dtype (PyTorch's)."""
    return _combined("argmin", input, mask).argmin(dim, bool(keepdim)).to(_out_dtype(input, dtype))


def _count(name: str, x: Tensor, dim: Any, keepdim: bool, mask: Any) -> Tensor:
    """How many entries the reduction over `dim` takes (int64)."""
    inmask = ops.ones(tuple(x.shape), dtype=bool_) if mask is None else _input_mask(name, x, mask)
    return inmask.sum(_dims(name, dim, x.ndim), keepdim=keepdim, dtype=i64)


def mean(
    input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Tensor:
    """The mean over `dim` of the entries where mask is True (nan where none is)."""
    out = _out_dtype(input, dtype)
    if not out.is_floating_point:
        raise ValueError(f"masked.mean: the dtype must be a floating point one, got {out}")
    total = sum(input, dim, keepdim=keepdim, dtype=out, mask=mask)
    return total / _count("mean", input, dim, bool(keepdim), mask)


def median(
    input: Tensor, dim: int = -1, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Tensor:
    """The median over `dim` of the entries where mask is True (nan where none is; an integer input
    with a fully masked-out row raises, as PyTorch's)."""
    axis = _dims("median", dim, input.ndim)[0]
    floating = input.dtype.is_floating_point
    x = input if floating else input.to(f32)
    result = functions.nanmedian(_combined("median", x, mask), axis, keepdim)[0]
    if floating:
        return result
    if bool(result.isnan().any()):
        raise ValueError("masked.median: an integer input must have no fully masked-out row")
    return result.to(_out_dtype(input, dtype))


def logsumexp(
    input: Tensor, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None
) -> Tensor:
    """log(sum(exp)) over `dim` of the entries where mask is True (-inf where none is)."""
    dims = _dims("logsumexp", dim, input.ndim)
    combined = _combined("logsumexp", input, mask)
    return functions.logsumexp(combined, dims, keepdim).to(_out_dtype(input, dtype))


def logaddexp(
    input: Tensor, other: Tensor, *, dtype: Any = None, input_mask: Any = None, other_mask: Any = None
) -> Tensor:
    """logaddexp of input and other, each's masked-out entries taken as -inf."""
    a = _combined("logaddexp", input, input_mask)
    b = _combined("logaddexp", other, other_mask)
    return ops.logaddexp(a, b).to(_out_dtype(input, dtype))


def norm(
    input: Tensor,
    ord: float = 2.0,
    dim: Any = None,
    *,
    keepdim: bool = False,
    dtype: Any = None,
    mask: Any = None,
) -> Tensor:
    """The vector `ord`-norm over `dim` of the entries where mask is True (0 where none is; inf for
    ord = -inf)."""
    dims = _dims("norm", dim, input.ndim)
    combined = _combined("norm", input, mask, ord)
    return linalg.vector_norm(combined, ord, dims, bool(keepdim), dtype=_out_dtype(input, dtype))


def _std_var(
    name: str,
    input: Tensor,
    dim: Any,
    unbiased: bool | None,
    correction: float | None,
    keepdim: bool,
    dtype: Any,
    mask: Any,
) -> Tensor:
    if unbiased is not None and correction is not None:
        raise ValueError(f"masked.{name}: give unbiased or correction, not both")
    c = float(correction) if correction is not None else (0.0 if unbiased is False else 1.0)
    out = _out_dtype(input, dtype)
    if not out.is_floating_point:
        out = f32
    count = _count(name, input, dim, True, mask)
    total = sum(input, dim, keepdim=True, dtype=out, mask=mask)
    x = input - total / count
    squares = sum(x * x, dim, keepdim=keepdim, dtype=out, mask=mask)
    if not keepdim:
        count = count.reshape(tuple(squares.shape))
    if c != 0:
        count = ops.maximum(count.to(out) - c, ops.zeros((), dtype=out))
    result = (squares / count).to(out)
    return result.sqrt() if name == "std" else result


def var(
    input: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    *,
    correction: float | None = None,
    keepdim: bool = False,
    dtype: Any = None,
    mask: Any = None,
) -> Tensor:
    """The variance over `dim` of the entries where mask is True, divided by count - correction (1 by
    default; nan where no entry is)."""
    return _std_var("var", input, dim, unbiased, correction, keepdim, dtype, mask)


def std(
    input: Tensor,
    dim: Any = None,
    unbiased: bool | None = None,
    *,
    correction: float | None = None,
    keepdim: bool = False,
    dtype: Any = None,
    mask: Any = None,
) -> Tensor:
    """The standard deviation over `dim` of the entries where mask is True (see `var`)."""
    return _std_var("std", input, dim, unbiased, correction, keepdim, dtype, mask)


def cumsum(input: Tensor, dim: int, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """The cumulative sum along `dim`, masked-out entries taken as 0."""
    axis = _dims("cumsum", dim, input.ndim)[0]
    out = _out_dtype(input, dtype)
    return _combined("sum", input, mask).cumsum(axis, dtype=out).to(out)


def cumprod(input: Tensor, dim: int, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """The cumulative product along `dim`, masked-out entries taken as 1."""
    axis = _dims("cumprod", dim, input.ndim)[0]
    out = _out_dtype(input, dtype)
    return _combined("prod", input, mask).cumprod(axis, dtype=out).to(out)


def softmax(input: Tensor, dim: int, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """softmax along `dim`, masked-out entries taken as -inf (0 there; nan where a row has none)."""
    axis = _dims("softmax", dim, input.ndim)[0]
    return F.softmax(_combined("amax", input, mask), axis, dtype=_out_dtype(input, dtype))


def log_softmax(input: Tensor, dim: int, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """log_softmax along `dim`, masked-out entries taken as -inf."""
    axis = _dims("log_softmax", dim, input.ndim)[0]
    return F.log_softmax(_combined("amax", input, mask), axis, dtype=_out_dtype(input, dtype))


def softmin(input: Tensor, dim: int, *, dtype: Any = None, mask: Any = None) -> Tensor:
    """softmin along `dim`, masked-out entries taken as inf."""
    axis = _dims("softmin", dim, input.ndim)[0]
    return F.softmin(_combined("amin", input, mask), axis, dtype=_out_dtype(input, dtype))


def normalize(
    input: Tensor, ord: float, dim: int, *, eps: float = 1e-12, dtype: Any = None, mask: Any = None
) -> Tensor:
    """input (masked-out entries 0) divided by its masked `ord`-norm along `dim`, at least eps."""
    out = _out_dtype(input, dtype)
    nrm = norm(input, ord, dim, keepdim=True, dtype=out, mask=mask)
    return _combined("sum", input, mask) / ops.maximum(nrm, ops.full((), eps, dtype=nrm.dtype))
