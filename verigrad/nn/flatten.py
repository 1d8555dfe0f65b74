"""Flatten and Unflatten, as PyTorch's: the dimensions start_dim ... end_dim made one, and one dimension
made several."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .module import Module


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Dimension `dim` split into `unflattened_size` (one entry may be -1)."""

    def __init__(self, dim: int, unflattened_size: Any):
        super().__init__()
        if not isinstance(dim, int):
            raise TypeError(f"Unflatten: dim must be an int, got {dim!r}")
        if not isinstance(unflattened_size, tuple | list) or not all(
            isinstance(s, int) for s in unflattened_size
        ):
            raise TypeError(f"Unflatten: unflattened_size must be a tuple of ints, got {unflattened_size!r}")
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x: Tensor) -> Tensor:
        return x.unflatten(self.dim, self.unflattened_size)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
