"""Sizes of convolution and pooling windows, and the 1-D ops as the 2-D ones over [N, C, 1, L]."""

from __future__ import annotations

from typing import Any

from ... import ops
from ...tensor import Tensor

IntPair = int | tuple[int, int]


def as_2d(fn: Any, x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """A 1-D op of [N, C, L] as the 2-D one of [N, C, 1, L] (int sizes become (1, k), (0, p), ...)."""
    return fn(ops.unsqueeze(x, 2), *args, **kwargs).squeeze(2)


def pair_1d(value: Any, unit: int) -> tuple[int, int] | None:
    """A 1-D size as the 2-D pair whose first size is `unit` (None stays None)."""
    if value is None:
        return None
    (n,) = (value,) if isinstance(value, int) else tuple(value)
    return (unit, n)


def sizes_nd(value: Any, n: int, what: str, minimum: int) -> tuple[int, ...]:
    """An int, or n ints, as n ints, each at least `minimum` (PyTorch's _single/_pair/_triple)."""
    items = (
        (value,) * n if isinstance(value, int) else tuple(value) if isinstance(value, list | tuple) else ()
    )
    if len(items) == 1:
        items = items * n
    if len(items) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise ValueError(f"{what} must be an int or {n} ints, got {value!r}")
    if any(v < minimum for v in items):
        raise ValueError(f"{what} must be at least {minimum}, got {value!r}")
    return items


def unbatched(fn: Any, x: Tensor, *args: Any, **kwargs: Any) -> Any:
    """fn of an input without its batch axis, as of a batch of one (PyTorch's unbatched inputs)."""
    out = fn(ops.unsqueeze(x, 0), *args, **kwargs)
    return tuple(o.squeeze(0) for o in out) if isinstance(out, tuple) else out.squeeze(0)
