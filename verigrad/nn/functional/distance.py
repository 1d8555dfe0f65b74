"""Distances between tensors along a dimension, as in `torch.nn.functional`: pairwise_distance and
cosine_similarity."""

from __future__ import annotations

from ... import functions
from ...tensor import Tensor


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """||x1 - x2 + eps||_p along the last dimension of the broadcast operands (PyTorch's: eps inside the
    norm)."""
    return functions.norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))) along `dim` of the broadcast operands
    (PyTorch's: each norm clamped to eps outside the graph, so the gradient is that of the norm)."""
    x1, x2 = functions.broadcast_tensors(x1, x2)
    n1, n2 = (_clamped_norm(x, dim, eps) for x in (x1, x2))
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def _clamped_norm(x: Tensor, dim: int, eps: float) -> Tensor:
    """||x|| along dim (kept), its value clamped to at least eps as PyTorch's clamp_min_ under no_grad."""
    norm = functions.norm(x, 2.0, dim=dim, keepdim=True)
    return functions.clamp(norm, min=eps).detach() + (norm - norm.detach())
