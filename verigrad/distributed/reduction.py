"""PyTorch's `ReduceOp` and the one definition of a reduction across ranks: the ranks' values combined
in rank order, ((r0 op r1) op r2) ..., whatever order their messages arrive in; AVG is that sum divided
by the world's size. `reduce_reference` is it in NumPy (the collectives' reference, given every rank's
input); `ordered_reduce` is it in ops (a one-process run that simulates the ranks)."""

from __future__ import annotations

import enum
from collections.abc import Sequence

import numpy as np

from ..tensor import Tensor


class ReduceOp(enum.Enum):
    SUM = "sum"
    AVG = "avg"
    PRODUCT = "product"
    MIN = "min"
    MAX = "max"

    def __repr__(self) -> str:
        return f"ReduceOp.{self.name}"


_NUMPY = {"sum": np.add, "avg": np.add, "product": np.multiply, "min": np.minimum, "max": np.maximum}


def op_name(op: ReduceOp | str, where: str) -> str:
    """The op's name ("sum", ...), or a ValueError naming `where` and the ops there are."""
    name = op.value if isinstance(op, ReduceOp) else op
    if name not in _NUMPY:
        allowed = ", ".join(f"ReduceOp.{o.name}" for o in ReduceOp)
        raise ValueError(f"{where}: op must be one of {allowed}, got {op!r}")
    return name


def reduce_reference(inputs: Sequence[np.ndarray], op: ReduceOp | str = "sum") -> np.ndarray:
    """The ranks' `inputs` (in rank order) reduced by `op` in rank order; AVG divides the sum by their
    count in the inputs' dtype."""
    name = op_name(op, "reduce_reference")
    combine = _NUMPY[name]
    acc = np.array(inputs[0], copy=True)
    for x in inputs[1:]:
        acc = combine(acc, x).astype(acc.dtype, copy=False)
    if name == "avg":
        if acc.dtype.kind not in "fc":
            raise TypeError(f"ReduceOp.AVG needs floating-point tensors, got {acc.dtype}")
        acc = (acc / np.asarray(len(inputs), acc.dtype)).astype(acc.dtype, copy=False)
    return acc


def ordered_reduce(tensors: Sequence[Tensor], op: ReduceOp | str = "sum") -> Tensor:
    """`reduce_reference` written in ops, on the per-rank tensors of one process (same bits)."""
    name = op_name(op, "ordered_reduce")
    acc = tensors[0]
    for t in tensors[1:]:
        if name in ("sum", "avg"):
            acc = acc + t
        elif name == "product":
            acc = acc * t
        elif name == "min":
            acc = acc.minimum(t)
        else:
            acc = acc.maximum(t)
    return acc / len(tensors) if name == "avg" else acc
