"""Draws from distributions, as PyTorch's (its distributions, not its draws): bernoulli and
multinomial."""

from __future__ import annotations

from ..errors import ShapeError
from ..ops.binary import minimum
from ..ops.creation import Generator, rand
from ..ops.index import searchsorted
from ..ops.scan import cumsum
from ..ops.shaping import getitem
from ..tensor import Tensor, describe
from .ordering import topk


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
        cdf = cumsum(input, axis=-1)
        uniform = rand(*input.shape[:-1], num_samples, dtype=cdf.dtype, generator=generator)
        draws = uniform * getitem(cdf, (..., slice(-1, None)))
        return minimum(searchsorted(cdf, draws, right=True), categories - 1)
    noise = -(-rand(*input.shape, dtype=input.dtype, generator=generator).log()).log()
    return topk(input.log() + noise, num_samples, -1).indices
