"""Tensors rearranged or combined by position, as PyTorch's: kron, rot90, diff and cross, written with
the movement ops (so they differentiate and trace)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..registry import FUNCS
from ..shapes import normalize_axis
from ..tensor import Tensor
from .derived import flip
from .movement import concat
from .shaping import getitem, stack


def kron(a: Tensor, b: Tensor) -> Tensor:
    """The Kronecker product: block (i, j, ...) is a[i, j, ...] * b (the shorter operand's shape padded
    with leading ones)."""
    rank = max(a.ndim, b.ndim)
    a = a.reshape(*([1] * (rank - a.ndim)), *a.shape)
    b = b.reshape(*([1] * (rank - b.ndim)), *b.shape)
    spread_a = a.reshape(*(d for s in a.shape for d in (s, 1)))
    spread_b = b.reshape(*(d for s in b.shape for d in (1, s)))
    return (spread_a * spread_b).reshape(*(sa * sb for sa, sb in zip(a.shape, b.shape)))


def rot90(x: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """x rotated by 90 degrees k times in the plane of `dims`, from the first axis towards the second."""
    if len(dims) != 2:
        raise ValueError(f"rot90 takes two dims, got {tuple(dims)}")
    d0, d1 = (normalize_axis(d, x.ndim) for d in dims)
    if d0 == d1:
        raise ValueError(f"rot90 needs two different dims, got {tuple(dims)}")
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, d0), d1)
    if k == 1:
        return flip(x, d1).transpose(d0, d1)
    return flip(x.transpose(d0, d1), d1)


def diff(
    x: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None, append: Tensor | None = None
) -> Tensor:
    """The n-th forward difference along `dim`, out[i] = x[i + 1] - x[i] applied n times, after
    `prepend` and `append` are joined to x along it."""
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"diff takes a whole number n >= 0, got {n!r}")
    axis = normalize_axis(dim, x.ndim)
    parts = [t for t in (prepend, x, append) if t is not None]
    if len(parts) > 1:
        x = concat(parts, axis=axis)
    head = (slice(None),) * axis
    for _ in range(n):
        x = getitem(x, (*head, slice(1, None))) - getitem(x, (*head, slice(None, -1)))
    return x


def cross(a: Tensor, b: Tensor, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along `dim` (operands broadcast), as torch.linalg.cross."""
    axis = normalize_axis(dim, max(a.ndim, b.ndim))
    for t in (a, b):
        if t.ndim == max(a.ndim, b.ndim) and t.shape[axis] != 3:
            raise ValueError(f"cross needs 3 components along dim {dim}, got a shape {tuple(t.shape)}")

    def part(t: Tensor, i: int) -> Any:
        at = axis - (max(a.ndim, b.ndim) - t.ndim)
        return getitem(t, (*(slice(None),) * at, i))

    a0, a1, a2 = (part(a, i) for i in range(3))
    b0, b1, b2 = (part(b, i) for i in range(3))
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=axis)


FUNCS.update(kron=kron, rot90=rot90, diff=diff, cross=cross)
