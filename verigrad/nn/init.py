"""Parameter initialisation as in PyTorch, drawn from the seedable generator.

Sizes may be symbolic (inside `verigrad.abstract()`): the bounds then do not matter, only the specs.
"""

from __future__ import annotations

import math

from ..dtypes import DType, f32
from ..ops import rand, randn
from ..shapes import DimLike
from ..tensor import Tensor


def uniform(shape: tuple, bound: float, dtype: DType | str = f32) -> Tensor:
    """Uniform in [-bound, bound), as a parameter (requires grad)."""
    return (rand(*shape, dtype=dtype) * (2 * bound) - bound).detach().requires_grad_(True)


def normal(shape: tuple, std: float = 1.0, dtype: DType | str = f32) -> Tensor:
    return (randn(*shape, dtype=dtype) * std).detach().requires_grad_(True)


def fan_in_bound(fan_in: DimLike) -> float:
    """1/sqrt(fan_in): PyTorch's Kaiming-uniform bound with a=sqrt(5), and its bias bound."""
    return 1.0 / math.sqrt(fan_in) if isinstance(fan_in, int) and fan_in > 0 else 1.0
