"""Dropout, as in `torch.nn.functional`: of elements (dropout) or of whole channels (dropout2d)."""

from __future__ import annotations

from ... import ops
from ...errors import ShapeError
from ...ops.creation import Generator, _seed
from ...shapes import shape_text
from ...tensor import Tensor


def dropout(x: Tensor, p: float = 0.5, training: bool = True, generator: Generator | None = None) -> Tensor:
    """Zero elements with probability p and scale the rest by 1/(1-p); the identity when not training."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    return ops.dropout(x, p=p, seed=_seed(generator))


def dropout2d(x: Tensor, p: float = 0.5, training: bool = True, generator: Generator | None = None) -> Tensor:
    """Zero whole channels of [N, C, H, W] (or [C, H, W]) with probability p, scaling the rest by
    1/(1-p); the identity when not training."""
    if x.ndim not in (3, 4):
        raise ShapeError(f"dropout2d takes [N, C, H, W] or [C, H, W], got {shape_text(x.shape)}")
    if not training or p == 0.0:
        return dropout(x, p, training)  # checks p
    keep = dropout(ops.ones(*x.shape[: x.ndim - 2], 1, 1, dtype=x.dtype), p, generator=generator)
    return x * keep
