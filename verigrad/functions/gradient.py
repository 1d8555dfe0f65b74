"""torch.gradient written with the ops: second-order central differences inside, first- or second-order
one-sided ones at the edges, over uniform spacings or given coordinates (NumPy's np.gradient formulas,
which PyTorch's follows)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import f64, u8
from ..errors import DTypeError, ShapeError
from ..ops.creation import tensor
from ..ops.movement import concat
from ..settings import get_default_dtype
from ..shapes import normalize_axis
from ..tensor import Tensor, describe


def _coefficients(coords: np.ndarray, edge_order: int) -> tuple[np.ndarray, ...]:
    """(a, b, c) per position: out[i] = a f[i-1] + b f[i] + c f[i+1] inside, and the edge rows' weights
    on f[0..2] and f[-3..-1] (first-order edges weigh two points, the third weight 0)."""
    dx = np.diff(coords)
    dx1, dx2 = dx[:-1], dx[1:]
    a = -dx2 / (dx1 * (dx1 + dx2))
    b = (dx2 - dx1) / (dx1 * dx2)
    c = dx1 / (dx2 * (dx1 + dx2))
    if edge_order == 1:
        first = np.array([-1.0, 1.0, 0.0]) / dx[0]
        last = np.array([0.0, -1.0, 1.0]) / dx[-1]
    else:
        d1, d2 = dx[0], dx[1]
        first = np.array([-(2 * d1 + d2) / (d1 * (d1 + d2)), (d1 + d2) / (d1 * d2), -d1 / (d2 * (d1 + d2))])
        d1, d2 = dx[-2], dx[-1]
        last = np.array([d2 / (d1 * (d1 + d2)), -(d2 + d1) / (d1 * d2), (2 * d2 + d1) / (d2 * (d1 + d2))])
    return a, b, c, first, last


def _along(x: Tensor, axis: int, coords: np.ndarray, edge_order: int) -> Tensor:
    n = int(x.shape[axis])
    a, b, c, first, last = _coefficients(coords, edge_order)
    shape = [1] * x.ndim
    shape[axis] = n - 2

    def weights(w: np.ndarray) -> Tensor:
        return tensor(w.reshape(shape), dtype=x.dtype)

    def part(start: int, length: int) -> Tensor:
        return x.narrow(axis, start, length)

    inside = part(0, n - 2) * weights(a) + part(1, n - 2) * weights(b) + part(2, n - 2) * weights(c)
    head = sum(part(i, 1) * float(first[i]) for i in range(3) if first[i] != 0.0)
    tail = sum(part(n - 3 + i, 1) * float(last[i]) for i in range(3) if last[i] != 0.0)
    return concat([head, inside, tail], axis=axis)


def _uniform(x: Tensor, axis: int, h: float, edge_order: int) -> Tensor:
    """The differences over a uniform spacing h in PyTorch's order of operations (its gradient_helper_float):
    (f[i+1] - f[i-1]) / h / 2 inside, so that f[i] is never read there (0 * inf would be NaN)."""
    n = int(x.shape[axis])

    def part(start: int, length: int = 1) -> Tensor:
        return x.narrow(axis, start, length)

    inside = (part(2, n - 2) - part(0, n - 2)) / h / 2
    if edge_order == 1:
        head, tail = (part(1) - part(0)) / h, (part(n - 1) - part(n - 2)) / h
    else:
        head = (part(0) * -1.5 + part(1) * 2 - part(2) * 0.5) / h
        tail = (part(n - 3) * 0.5 - part(n - 2) * 2 + part(n - 1) * 1.5) / h
    return concat([head, inside, tail], axis=axis)


def gradient(input: Tensor, *, spacing: Any = 1, dim: Any = None, edge_order: int = 1) -> tuple[Tensor, ...]:
    """The derivative of input estimated along each of `dim` (all axes by default), one tensor per
    axis (PyTorch's torch.gradient): spacing is one number, one per axis, or one coordinate tensor per
    axis; an integer input answers the default float dtype."""
    if edge_order not in (1, 2):
        raise ValueError(f"torch.gradient only supports edge_order=1 and edge_order=2, got {edge_order!r}")
    axes = (
        tuple(range(input.ndim))
        if dim is None
        else tuple(normalize_axis(d, input.ndim) for d in ((dim,) if isinstance(dim, int) else dim))
    )
    if spacing is None:
        spacing = 1
    spacings = list(spacing) if isinstance(spacing, list | tuple) else [spacing] * len(axes)
    if len(spacings) != len(axes):
        raise ValueError(
            f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length {len(axes)} "
            f"(one per dim), got {len(spacings)} values"
        )
    if input.dtype is u8:
        raise DTypeError("torch.gradient does not support uint8 input (as PyTorch)")
    x = input if input.dtype.is_float else input.cast(get_default_dtype())
    out = []
    for axis, h in zip(axes, spacings, strict=True):
        n = int(x.shape[axis])
        if n < edge_order + 1:
            raise ShapeError(
                "torch.gradient expected each dimension size to be at least edge_order+1, "
                f"got {describe(input)} with edge_order={edge_order} along dim {axis}"
            )
        if isinstance(h, Tensor):
            if h.ndim != 1 or int(h.shape[0]) != n:
                raise ShapeError(
                    f"torch.gradient: the coordinates of dim {axis} must be [{n}], got {describe(h)}"
                )
            coords = h.cast(f64).numpy()
            out.append(_along(x, axis, coords, edge_order))
        else:  # the input's own differences (an integer input's wrap as PyTorch's), then a float
            out.append(_uniform(input, axis, h, edge_order))
    return tuple(out)
