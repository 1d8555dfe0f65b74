"""Distances as layers, as PyTorch's: CosineSimilarity and PairwiseDistance (see nn.functional)."""

from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from .module import Module


class CosineSimilarity(Module):
    """The cosine similarity of x1 and x2 along `dim`, each norm clamped to at least eps."""

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """||x1 - x2 + eps||_p along the last dimension."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
