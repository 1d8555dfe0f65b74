"""Draws from distributions, as PyTorch's (its distributions, not its draws): bernoulli, multinomial and
normal."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ops.binary import minimum, result_type
from ..ops.creation import Generator, rand, randn
from ..ops.index import searchsorted
from ..ops.scan import cumsum
from ..ops.shaping import getitem
from ..shapes import plain_int
from ..tensor import Tensor, describe
from .ordering import topk


def bernoulli(p: Tensor, generator: Generator | None = None) -> Tensor:
    """1 with probability p, else 0, elementwise, in p's dtype (a uniform draw below p)."""
    return (rand(*p.shape, dtype=p.dtype, generator=generator) < p).cast(p.dtype)


def normal(
    mean: Any, std: Any = 1.0, size: Any = None, *, generator: Generator | None = None, out: Any = None,
    dtype: Any = None, layout: Any = None, device: Any = None, requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """Draws from N(mean, std^2): mean + std * a standard normal draw, of the tensors' broadcast shape
    (their gradients too, as PyTorch's), or of `size` where both are numbers (the default float dtype
    unless `dtype`)."""
    if out is not None:
        raise NotImplementedError("normal: out= is not supported; use the result")
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal: give size= where mean and std are both numbers")
        _nonnegative(std)
        draws = randn(*tuple(size), dtype=dtype, device=device, generator=generator) * std + mean
        return draws.requires_grad_(True) if requires_grad else draws
    if size is not None:
        raise TypeError("normal: size= is only taken where mean and std are both numbers")
    kind = result_type(*tensors)
    if not kind.is_float:
        given = ", ".join(map(describe, tensors))
        raise DTypeError(f"normal: mean and std must be float tensors, got {given}")
    _nonnegative(std)
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return randn(*shape, dtype=kind, generator=generator) * std + mean


def _nonnegative(std: Any) -> None:
    """PyTorch's check of std (of a tensor's values where they are at hand: eagerly)."""
    values = std.payload if isinstance(std, Tensor) else np.asarray(std)
    if isinstance(values, np.ndarray) and values.size and (values < 0).any():
        raise ValueError(f"normal expects std >= 0.0, got {float(values[values < 0].flat[0])}")


def _distribution(weights: Tensor) -> None:
    """PyTorch's check of multinomial's weights (of their values where they are at hand: eagerly):
    none negative, NaN or infinite, and each row's sum above 0."""
    values = weights.payload
    if not isinstance(values, np.ndarray) or not values.size:
        return
    values = values.astype(np.float64)
    if not (values >= 0).all():
        raise ValueError("multinomial: invalid distribution (a weight < 0 or NaN)")
    if np.isinf(values).any():
        raise ValueError("multinomial: invalid distribution (a weight is infinite)")
    if (values.sum(-1) <= 0).any():
        raise ValueError("multinomial: invalid distribution (the weights of a row sum to 0)")


def multinomial(
    input: Tensor, num_samples: int, replacement: bool = False, generator: Generator | None = None
) -> Tensor:
    """`num_samples` categories drawn per row of the non-negative weights input [C] or [N, C] (in
    proportion to them; they need not sum to 1), as i64. With `replacement`, uniform draws through the
    cumulative weights; without, the `num_samples` largest of log(weight) plus Gumbel noise, which draws
    each next category in proportion to the weights left (PyTorch's distribution; not its draws)."""
    if input.ndim not in (1, 2):
        raise ShapeError(f"multinomial takes weights [C] or [N, C], got {describe(input)}")
    num_samples = plain_int(num_samples)
    if not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"multinomial: num_samples must be a positive integer, got {num_samples!r}")
    categories = input.shape[-1]
    if not replacement and isinstance(categories, int) and num_samples > categories:
        raise ValueError(f"multinomial: {num_samples} draws without replacement from {categories} categories")
    _distribution(input)
    if replacement:
        cdf = cumsum(input, axis=-1)
        uniform = rand(*input.shape[:-1], num_samples, dtype=cdf.dtype, generator=generator)
        draws = uniform * getitem(cdf, (..., slice(-1, None)))
        return minimum(searchsorted(cdf, draws, right=True), categories - 1)
    noise = -(-rand(*input.shape, dtype=input.dtype, generator=generator).log()).log()
    return topk(input.log() + noise, num_samples, -1).indices
