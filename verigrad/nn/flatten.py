"""Flatten, as PyTorch's: the dimensions start_dim ... end_dim made one."""

from __future__ import annotations

from ..tensor import Tensor
from .module import Module


class Flatten(Module):
    def __init__(self, start_dim: int = 1, end_dim: int = -1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x: Tensor) -> Tensor:
        return x.flatten(self.start_dim, self.end_dim)
