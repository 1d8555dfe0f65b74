"""Lookups by integer index, as in `torch.nn.functional`: embedding (rows of a table) and one_hot."""

from __future__ import annotations

import numpy as np

from ... import ops
from ...tensor import Tensor


def embedding(weight: Tensor, idx: Tensor, padding_idx: int | None = None) -> Tensor:
    """Rows of `weight` [V, D] at the integer indices `idx` [...], giving [..., D]; the row
    `padding_idx` gets no gradient (as PyTorch's).

    PyTorch's argument order (idx, weight) is accepted too: the integer tensor is the index.
    """
    if weight.dtype.kind == "i" and idx.dtype.kind != "i":
        weight, idx = idx, weight
    rows = ops.embedding(weight, idx)
    if padding_idx is None:
        return rows
    padding = ops.unsqueeze(idx == padding_idx % weight.shape[0], -1)  # over the lookups, not the table
    return ops.where(padding, rows.detach(), rows)


def one_hot(target: Tensor, num_classes: int = -1) -> Tensor:
    """[..., num_classes] i64 with 1 at each integer target's class (num_classes -1: the largest + 1)."""
    if target.dtype.kind != "i":
        raise TypeError(f"one_hot takes integer classes, got {target.dtype.name}")
    if num_classes == -1:
        if not isinstance(target.payload, np.ndarray):
            raise ValueError("one_hot of an abstract or traced tensor needs num_classes")
        num_classes = int(target.payload.max()) + 1 if target.payload.size else 0
    return (ops.unsqueeze(target, -1) == ops.arange(0, num_classes)).cast("i64")
