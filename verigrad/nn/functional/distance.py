"""Distances between tensors along a dimension, as in `torch.nn.functional`: pairwise_distance,
cosine_similarity and pdist."""

from __future__ import annotations

import numpy as np

from ... import functions, ops
from ...functions.tensor_arguments import refuse_non_tensors
from ...ops._op import floating_only
from ...tensor import Tensor


def pairwise_distance(
    x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False
) -> Tensor:
    """||x1 - x2 + eps||_p along the last dimension of the broadcast operands (PyTorch's: eps inside the
    norm)."""
    refuse_non_tensors("pairwise_distance", ("x1", "x2"), (x1, x2), 2)
    return functions.norm(x1 - x2 + eps, p, dim=-1, keepdim=keepdim)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """sum((x1 / max(||x1||, eps)) * (x2 / max(||x2||, eps))) along `dim` of the broadcast operands
    (PyTorch's: each norm clamped to eps outside the graph, so the gradient is that of the norm)."""
    refuse_non_tensors("cosine_similarity", ("x1", "x2"), (x1, x2), 2)
    x1, x2 = functions.broadcast_tensors(x1, x2)
    n1, n2 = (_clamped_norm(x, dim, eps) for x in (x1, x2))
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def _clamped_norm(x: Tensor, dim: int, eps: float) -> Tensor:
    """||x|| along dim (kept), its value clamped to at least eps as PyTorch's clamp_min_ under no_grad."""
    norm = functions.norm(x, 2.0, dim=dim, keepdim=True)
    return functions.clamp(norm, min=eps).detach() + (norm - norm.detach())


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The p-norm distances between each pair of rows i < j of input [N, M], in row-major order of the
    pairs (PyTorch's: the upper triangle of cdist(input, input), flattened): [N (N - 1) / 2]."""
    floating_only(input.dtype, what="pdist")
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    first, second = np.triu_indices(input.shape[0], 1)
    rows = functions.index_select(input, 0, ops.tensor(first))
    rows = rows - functions.index_select(input, 0, ops.tensor(second))
    if p == 0:  # the count of differing coordinates; PyTorch's gradient of it is zero
        return functions.norm(rows, 0.0, dim=-1) + rows.sum(-1) * 0.0
    same = (rows == 0).all(-1, keepdim=True)  # two equal rows: distance 0, gradient 0 (PyTorch's)
    distance = functions.norm(ops.where(same, 1.0, rows), p, dim=-1)
    return ops.where(same.squeeze(-1), 0.0, distance)
