"""Distances between tensors along a dimension, as in `torch.nn.functional`: pairwise_distance and
cosine_similarity."""

from __future__ import annotations

from ... import functions
from ...tensor import Tensor


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """||x1 - x2 + eps||_p along the last dimension (PyTorch's eps inside the norm)."""
    return (x1 - x2 + eps).norm(p=p, dim=-1, keepdim=keepdim)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) along `dim` (PyTorch's: each norm
    clamped)."""
    n1 = functions.clamp(x1.norm(dim=dim), min=eps)
    n2 = functions.clamp(x2.norm(dim=dim), min=eps)
    return (x1 * x2).sum(axis=dim) / (n1 * n2)
