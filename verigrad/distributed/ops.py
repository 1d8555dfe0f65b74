"""The collectives as `Op` records, so a traced training step holds its communication as instructions
(printed, planned and replayed as any other) and eager mode runs the same ops.

Each op's reference runs on this rank's array: it sends it, receives the other ranks' and combines them
by `reduction.reduce_reference` (the rank order), so every rank computes the same bits. Without a process
group (or with one rank) it is that reference on the one input: the registry's suites check the rules,
the reference and the VJPs there. The VJPs are the adjoint collectives (all_reduce's is all_reduce of the
cotangent; all_gather's is reduce_scatter's, and back)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import DType
from ..errors import DTypeError, ShapeError
from ..ops import Op, Sample
from ..ops._op import no_bf16
from ..tensor import Tensor
from .comm import all_gather_arrays, all_reduce_array, alltoall_arrays, broadcast_array
from .reduction import op_name, reduce_reference
from .world import size_or_one, world

_LINEAR = ("sum", "avg")  # the reductions with a gradient


def _rank() -> int:
    return 0 if size_or_one() == 1 else world().rank


def _same_dtype(d: DType, **_: Any) -> DType:
    return d


def _reduced_dtype(d: DType, op: str = "sum", **_: Any) -> DType:
    """Arithmetic in the operands' dtype; bf16 is for moving only (as the other ops' rules say), and
    AVG needs a float."""
    no_bf16(d)
    if op == "avg" and not d.is_float:
        raise DTypeError(f"ReduceOp.AVG needs a floating-point tensor, got {d.name}")
    return d


def _checked_size(name: str, world_size: int) -> int:
    live = size_or_one()
    if world_size != live:
        raise RuntimeError(
            f"{name}: traced for {world_size} ranks, run with {live}: trace the function again on this world"
        )
    return live


def _reduce_params(spec: Any, op: str = "sum") -> dict:
    return {"op": op_name(op, "all_reduce")}


def _all_reduce_reference(x: np.ndarray, op: str = "sum") -> np.ndarray:
    return reduce_reference([x], op) if size_or_one() == 1 else all_reduce_array(x, op, f"all_reduce({op})")


def _linear_only(name: str, op: str) -> None:
    if op not in _LINEAR:
        raise RuntimeError(f"{name} with ReduceOp.{op.upper()} has no gradient; SUM and AVG have one")


def _all_reduce_vjp(g: Tensor, out: Tensor, x: Tensor, op: str = "sum") -> tuple:
    _linear_only("all_reduce", op)
    return (all_reduce(g, op=op),)


def _reduce_samples(rng: np.random.Generator) -> list[Sample]:
    return [Sample((rng.uniform(-2, 2, s),), {"op": op}) for s in [(), (0,), (3, 4)] for op in _LINEAR]


all_reduce = Op(
    "all_reduce",
    shape=lambda x, **_: x,
    dtype=_reduced_dtype,
    reference=_all_reduce_reference,
    vjp=_all_reduce_vjp,
    params=_reduce_params,
    samples=_reduce_samples,
    doc="Every rank's x combined by op (sum, avg, product, min, max) in rank order, on every rank.",
)


def _broadcast_reference(x: np.ndarray, src: int = 0) -> np.ndarray:
    return np.array(x, copy=True) if size_or_one() == 1 else broadcast_array(x, src, f"broadcast(src={src})")


def _broadcast_vjp(g: Tensor, out: Tensor, x: Tensor, src: int = 0) -> tuple:
    total = all_reduce(g, op="sum")  # every rank's cotangent reaches the source's x
    return (total if _rank() == src else total * 0,)


def _src_params(spec: Any, src: int = 0) -> dict:
    if isinstance(src, bool) or not isinstance(src, int) or not 0 <= src < size_or_one():
        raise ValueError(f"broadcast: src must be a rank in [0, {size_or_one()}), got {src!r}")
    return {"src": src}


broadcast = Op(
    "dist_broadcast",
    shape=lambda x, **_: x,
    dtype=_same_dtype,
    reference=_broadcast_reference,
    vjp=_broadcast_vjp,
    params=_src_params,
    samples=lambda rng: [Sample((rng.uniform(-2, 2, s),), {"src": 0}) for s in [(), (2, 3)]],
    doc="Rank src's x on every rank.",
)


def _gather_shape(x: tuple, world_size: int = 1) -> tuple:
    if not x:
        raise ShapeError("all_gather: x must have at least one dimension (ranks are joined along the first)")
    return (x[0] * world_size, *x[1:])


def _all_gather_reference(x: np.ndarray, world_size: int = 1) -> np.ndarray:
    n = _checked_size("all_gather", world_size)
    return np.array(x, copy=True) if n == 1 else np.concatenate(all_gather_arrays(x, "all_gather"))


def _all_gather_vjp(g: Tensor, out: Tensor, x: Tensor, world_size: int = 1) -> tuple:
    return (reduce_scatter(g, op="sum", world_size=world_size),)


def _size_params(spec: Any, world_size: int | None = None, **rest: Any) -> dict:
    return {**rest, "world_size": size_or_one() if world_size is None else world_size}


all_gather = Op(
    "all_gather",
    shape=_gather_shape,
    dtype=_same_dtype,
    reference=_all_gather_reference,
    vjp=_all_gather_vjp,
    params=_size_params,
    samples=lambda rng: [Sample((rng.uniform(-2, 2, s),)) for s in [(1,), (3, 2)]],
    doc="Every rank's x joined along the first dimension, in rank order.",
)


def _scatter_shape(x: tuple, op: str = "sum", world_size: int = 1) -> tuple:
    if not x or (isinstance(x[0], int) and x[0] % world_size):
        raise ShapeError(
            f"reduce_scatter: the first dimension of x ({x[0] if x else 'none'}) must be a multiple of the "
            f"{world_size} ranks"
        )
    return (x[0] // world_size, *x[1:])


def _reduce_scatter_reference(x: np.ndarray, op: str = "sum", world_size: int = 1) -> np.ndarray:
    n = _checked_size("reduce_scatter", world_size)
    chunks = x.reshape(n, x.shape[0] // n, *x.shape[1:])
    mine = [chunks[0]] if n == 1 else alltoall_arrays(chunks, f"reduce_scatter({op})")
    return reduce_reference(mine, op)


def _reduce_scatter_vjp(g: Tensor, out: Tensor, x: Tensor, op: str = "sum", world_size: int = 1) -> tuple:
    _linear_only("reduce_scatter", op)
    joined = all_gather(g, world_size=world_size)
    return (joined / world_size if op == "avg" else joined,)


def _scatter_params(spec: Any, op: str = "sum", world_size: int | None = None) -> dict:
    return _size_params(spec, world_size, op=op_name(op, "reduce_scatter"))


reduce_scatter = Op(
    "reduce_scatter",
    shape=_scatter_shape,
    dtype=_reduced_dtype,
    reference=_reduce_scatter_reference,
    vjp=_reduce_scatter_vjp,
    params=_scatter_params,
    samples=lambda rng: [Sample((rng.uniform(-2, 2, (4, 3)),), {"op": op}) for op in _LINEAR],
    doc="This rank's chunk (of the first dimension) of every rank's x reduced by op in rank order.",
)
