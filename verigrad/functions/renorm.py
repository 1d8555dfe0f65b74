"""renorm written with the ops: each slice along `dim` whose p-norm exceeds maxnorm scaled down to
maxnorm (PyTorch's: by maxnorm / (norm + 1e-7), the norm's gradient included)."""

from __future__ import annotations

from ..errors import ShapeError
from ..shapes import normalize_axis
from ..tensor import Tensor, describe
from .statistics import norm as p_norm


def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
    """input with every slice input.select(dim, i) of p-norm above maxnorm scaled to norm maxnorm."""
    if p <= 0:
        raise ValueError(f"renorm: p must be positive (non-positive norms are not supported), got {p}")
    if maxnorm < 0:
        raise ValueError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    if input.ndim < 2:
        raise ShapeError(f"renorm: input needs at least 2 dimensions, got {describe(input)}")
    dim = normalize_axis(dim, input.ndim)
    others = tuple(i for i in range(input.ndim) if i != dim)
    norm = p_norm(input, p, others, keepdim=True)
    factor = (maxnorm / (norm + 1e-7)).where(norm > maxnorm, 1.0)
    return input * factor.cast(input.dtype)
