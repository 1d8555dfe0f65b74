"""Reductions that skip NaN, and quantiles: nansum, nanmean, quantile, nanquantile, as PyTorch's.

Quantiles sort along the axis and interpolate between the two order statistics around the rank
q * (n - 1) (n counting the non-NaN entries for nanquantile), so their gradient goes to those entries
through the sort's gather."""

from __future__ import annotations

import math
from typing import Any

from ..dtypes import i64
from ..errors import DTypeError
from ..ops.binary import where
from ..ops.creation import tensor
from ..ops.index import gather
from ..ops.movement import concat
from ..ops.reduce import sum
from ..shapes import normalize_axis
from ..tensor import Tensor, describe
from .ordering import sort
from .pointwise import isnan
from .statistics import pick

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _float_only(name: str, x: Tensor) -> None:
    if not x.dtype.is_float:
        raise DTypeError(f"{name} takes a float tensor, got {describe(x)}")


def nansum(
    x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, axis: Any = None
) -> Tensor:
    """The sum treating NaN as 0 (its gradient 0 at the NaN entries)."""
    dim = pick(dim, axis)
    if dtype is not None:
        x = x.to(dtype)
    kept = where(isnan(x), 0.0, x) if x.dtype.is_float else x
    return sum(kept, dim, keepdim)


def nanmean(
    x: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, axis: Any = None
) -> Tensor:
    """The mean of the non-NaN entries (NaN where there are none)."""
    dim = pick(dim, axis)
    _float_only("nanmean", x)  # the input's dtype, before any cast (PyTorch refuses an integer x with dtype=)
    if dtype is not None:
        x = x.to(dtype)
    count = sum((~isnan(x)).cast(x.dtype), dim, keepdim)
    return nansum(x, dim, keepdim) / count


def quantile(
    x: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *, interpolation: str = "linear"
) -> Tensor:
    """The q-th quantiles along `dim` (of all entries when None); NaN where the slice holds a NaN."""
    return _quantile("quantile", x, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(
    x: Tensor, q: Any, dim: int | None = None, keepdim: bool = False, *, interpolation: str = "linear"
) -> Tensor:
    """quantile of the non-NaN entries along `dim` (NaN where a slice has none)."""
    return _quantile("nanquantile", x, q, dim, keepdim, interpolation, ignore_nan=True)


def _quantile(
    name: str, x: Tensor, q: Any, dim: int | None, keepdim: bool, interpolation: str, ignore_nan: bool
) -> Tensor:
    _float_only(name, x)
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(
            f"{name}: interpolation must be one of {', '.join(_INTERPOLATIONS)}, got {interpolation!r}"
        )
    scalar_q = not isinstance(q, Tensor)
    qs = tensor(q, dtype=x.dtype) if scalar_q else q
    if qs.ndim > 1:
        raise ValueError(f"{name}: q must be a scalar or a 1-d tensor, got {describe(qs)}")
    if not qs.is_abstract and bool(((qs < 0) | (qs > 1)).any()):
        raise ValueError(f"{name}: q values must be in the range [0, 1]")
    if qs.dtype is not x.dtype:
        raise DTypeError(f"{name}: q must have the input's dtype {x.dtype.name}, got {qs.dtype.name}")
    if x.numel() == 0:
        raise IndexError(f"{name}: the input tensor must be non-empty")
    ndim = x.ndim
    if dim is None:
        flat, axis = x.reshape(-1), 0
    else:
        axis = normalize_axis(dim, max(ndim, 1))
        flat = x.reshape(1) if ndim == 0 else x
    values = sort(flat, axis).values  # NaN sorts last
    n = flat.shape[axis]
    nan_count = sum(isnan(flat).cast(x.dtype), axis, keepdim=True)
    count = n - nan_count if ignore_nan else nan_count * 0 + n
    results = []
    for k in range(qs.numel() if qs.ndim else 1):
        qk = qs.reshape(-1)[k] if qs.ndim else qs
        rank = qk * (count - 1).clamp(0, None)
        below = rank.floor()
        above = rank.ceil()
        if interpolation == "lower":
            above = below
        elif interpolation == "higher":
            below = above
        elif interpolation == "nearest":
            below = above = rank.round()
        lo = _pick(values, below, axis)
        hi = _pick(values, above, axis)
        if interpolation == "midpoint":
            weight = 0.5 * (above > below).cast(x.dtype)
        elif interpolation == "linear":
            weight = rank - below
        if interpolation in ("linear", "midpoint"):  # PyTorch's lerp: exact at both ends
            out = where(weight < 0.5, lo + weight * (hi - lo), hi - (hi - lo) * (1 - weight))
        else:
            out = lo
        bad = (count == 0) if ignore_nan else (nan_count > 0)
        out = where(bad, math.nan, out)
        results.append(out if keepdim else out.squeeze(axis))
    if dim is None and keepdim:
        results = [r.reshape((1,) * ndim) for r in results]
    elif dim is None or ndim == 0:
        results = [r.reshape(()) for r in results]
    if scalar_q or qs.ndim == 0:
        return results[0]
    return concat([r.unsqueeze(0) for r in results], 0)


def _pick(values: Tensor, positions: Tensor, axis: int) -> Tensor:
    """values[..., positions, ...] along `axis`, one position per slice (positions keep the axis, size 1)."""
    return gather(values, positions.clamp(0, None).cast(i64), axis=axis)
