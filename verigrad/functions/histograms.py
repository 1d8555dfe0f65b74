"""torch.histogram and torch.histogramdd: counts (or weights' sums, or densities) of the values (the
points: rows of the last axis) in bins given by a number of equal bins (over `range`, else the values'
least and largest; a single value widened by 0.5 each side) or by their edges. A value on the last edge
is in the last bin; values outside, ignored. They read values (eager only) and have no gradient, as in
PyTorch."""

from __future__ import annotations

import builtins
from typing import Any, NamedTuple

import numpy as np

from .. import modes
from ..errors import DTypeError, ShapeError
from ..ops.creation import from_numpy, linspace
from ..tensor import Tensor, describe
from .pointwise import values_of


class HistogramResult(NamedTuple):
    hist: Tensor
    bin_edges: Any


def _edges(name: str, column: np.ndarray, bins: Any, low: Any, high: Any, dtype: Any, d: int) -> np.ndarray:
    if isinstance(bins, Tensor):
        if bins.dtype is not dtype:
            raise DTypeError(
                f"{name}: dimension {d}'s bin edges must be {dtype.name} as the input, got {bins.dtype.name}"
            )
        edges = values_of(bins, name)
        if edges.ndim != 1 or edges.size < 1:
            raise ShapeError(
                f"{name}: bin edges must be a vector of at least one value, got {describe(bins)}"
            )
        return edges
    if not isinstance(bins, int) or isinstance(bins, bool) or bins < 1:
        raise ValueError(f"{name}: the number of bins must be a positive int, got {bins!r}")
    if low is None:
        low, high = (float(column.min()), float(column.max())) if column.size else (0.0, 1.0)
    if not (np.isfinite(low) and np.isfinite(high)):
        raise ValueError(f"{name}: dimension {d}'s range [{low}, {high}] is not finite")
    if low > high:
        raise ValueError(f"{name}: dimension {d}'s range [{low}, {high}] has its minimum above its maximum")
    if low == high:
        low, high = low - 0.5, high + 0.5
    # PyTorch's edges: its linspace in the values' dtype
    return linspace(float(low), float(high), bins + 1, dtype=dtype).numpy()


def _counts(
    name: str, points: np.ndarray, edges: list[np.ndarray], weight: np.ndarray | None, density: bool
) -> np.ndarray:
    shape = tuple(builtins.max(e.size - 1, 0) for e in edges)
    hist = np.zeros(shape, dtype=points.dtype)
    if not all(shape):
        return hist
    inside = np.ones(points.shape[0], dtype=bool)
    where = []
    for d, e in enumerate(edges):
        x = points[:, d]
        inside &= (x >= e[0]) & (x <= e[-1])
        pos = np.searchsorted(e, x, side="right") - 1
        where.append(np.minimum(pos, e.size - 2))  # the last edge belongs to the last bin
    w = np.ones(points.shape[0], dtype=points.dtype) if weight is None else weight.astype(points.dtype)
    np.add.at(hist, tuple(p[inside] for p in where), w[inside])
    if density:
        total = hist.sum()
        for d, e in enumerate(edges):
            widths = np.diff(e).reshape([-1 if i == d else 1 for i in range(len(edges))])
            hist = hist / widths
        hist = hist / total
    return hist.astype(points.dtype)


def histogramdd(
    input: Tensor, bins: Any, *, range: Any = None, weight: Tensor | None = None, density: bool = False
) -> HistogramResult:
    """The D-dimensional histogram of the points input [..., D] (bins: an int, one int per dimension, or
    one edge tensor per dimension; range: (low, high) for each dimension), as torch.histogramdd."""
    modes.eager_only("histogramdd")
    return _histogram("histogramdd", input, bins, range, weight, density, dd=True)


def histogram(
    input: Tensor, bins: Any, *, range: Any = None, weight: Tensor | None = None, density: bool = False
) -> HistogramResult:
    """The histogram of input's values (bins: an int or an edge tensor; range: (low, high)), as
    torch.histogram."""
    modes.eager_only("histogram")
    return _histogram("histogram", input, bins, range, weight, density, dd=False)


def _histogram(
    name: str, input: Tensor, bins: Any, rng: Any, weight: Any, density: bool, dd: bool
) -> HistogramResult:
    if not input.dtype.is_float or input.dtype.name in ("f16", "bf16"):
        raise DTypeError(f"{name}: input must be f32 or f64, got {input.dtype.name}")
    values = values_of(input, name)
    if dd and values.ndim < 1:
        raise ShapeError(f"{name}: input must have at least one dimension, got {describe(input)}")
    points = values.reshape(-1, values.shape[-1]) if dd else values.reshape(-1, 1)
    dims = points.shape[1]
    per_dim = list(bins) if dd and not isinstance(bins, int | Tensor) else [bins] * dims
    if len(per_dim) != dims:
        raise ValueError(f"{name}: {dims} dimensions need {dims} bin specifications, got {len(per_dim)}")
    ranges = [None, None] * dims if rng is None else [float(v) for v in rng]
    if len(ranges) != 2 * dims:
        raise ValueError(f"{name}: range must give (low, high) for each of {dims} dimensions, got {rng!r}")
    if weight is not None:
        if tuple(weight.shape) != (tuple(input.shape[:-1]) if dd else tuple(input.shape)):
            raise ShapeError(f"{name}: weight must have the shape of input's points, got {describe(weight)}")
        weight = values_of(weight, name).reshape(-1)
    edges = [
        _edges(name, points[:, d], per_dim[d], ranges[2 * d], ranges[2 * d + 1], input.dtype, d)
        for d in builtins.range(dims)
    ]
    hist = from_numpy(_counts(name, points, edges, weight, density))
    edge_tensors = [from_numpy(np.ascontiguousarray(e)) for e in edges]
    return HistogramResult(hist, tuple(edge_tensors) if dd else edge_tensors[0])
