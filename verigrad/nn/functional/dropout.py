"""Dropout, as in `torch.nn.functional`: of elements (dropout) or of whole channels (dropout2d)."""

from __future__ import annotations

from ... import ops
from ...errors import ShapeError
from ...ops.creation import Generator, _seed
from ...shapes import shape_text
from ...tensor import Tensor
from .activations import _inplace


def dropout(
    input: Tensor,
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    """Zero elements with probability p and scale the rest by 1/(1-p); the identity when not training;
    `inplace` as PyTorch's (the result written into `input`)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return input
    return _inplace(input, ops.dropout(input, p=p, seed=_seed(generator)), inplace)


def dropout2d(
    input: Tensor,
    p: float = 0.5,
    training: bool = True,
    inplace: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    """Zero whole channels of [N, C, H, W] (or [C, H, W]) with probability p, scaling the rest by
    1/(1-p); the identity when not training; `inplace` as PyTorch's."""
    if input.ndim not in (3, 4):
        raise ShapeError(f"dropout2d takes [N, C, H, W] or [C, H, W], got {shape_text(input.shape)}")
    if not training or p == 0.0:
        return dropout(input, p, training)  # checks p
    keep = dropout(ops.ones(*input.shape[: input.ndim - 2], 1, 1, dtype=input.dtype), p, generator=generator)
    return _inplace(input, input * keep, inplace)


_SELU_SATURATION = 1.7580993408473766  # -scale * alpha of SELU: where a dropped unit is set


def alpha_dropout(
    input: Tensor,
    p: float = 0.5,
    training: bool = False,
    inplace: bool = False,
    generator: Generator | None = None,
) -> Tensor:
    """SELU's dropout, as PyTorch's: a dropped element is set to SELU's saturation value and the result
    is scaled and shifted so that a standard normal input keeps mean 0 and variance 1; the identity when
    not training."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return _inplace(input, input * 0.0, inplace)
    keep = ops.dropout(ops.ones(*input.shape, dtype=input.dtype), p=p, seed=_seed(generator)) * (1.0 - p)
    a = 1.0 / ((_SELU_SATURATION**2 * p + 1) * (1 - p)) ** 0.5
    shift = (keep - 1.0) * (_SELU_SATURATION * a) + _SELU_SATURATION * a * p
    return _inplace(input, input * (keep * a) + shift, inplace)
