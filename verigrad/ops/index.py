"""Integer-array indexing: `take` gathers along an axis; `take_grad` (its VJP) adds back into zeros."""

from __future__ import annotations

import numpy as np

from ..dtypes import DType
from ..errors import DTypeError
from ..shapes import Spec, normalize_axis
from ._op import Op, Sample, no_bf16
from ._samples import uniform


def _take_canon(x: Spec, idx: Spec, axis: int = 0) -> dict:
    return {"axis": normalize_axis(axis, x.ndim)}


def _take_dtype(x: DType, idx: DType, axis: int) -> DType:
    if idx.kind != "i":
        raise DTypeError(f"indices must be an integer tensor, got {idx.name}")
    return x


def _take_grad_reference(g: np.ndarray, idx: np.ndarray, axis: int, size: int) -> np.ndarray:
    moved = np.moveaxis(g.reshape((*g.shape[:axis], idx.size, *g.shape[axis + idx.ndim :])), axis, 0)
    out = np.zeros((size, *moved.shape[1:]), dtype=g.dtype)
    np.add.at(out, idx.reshape(-1), moved)
    return np.moveaxis(out, 0, axis)


def _take_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((uniform(rng, (5, 3)), rng.integers(0, 5, (4,))), {"axis": 0}),
        Sample((uniform(rng, (2, 6)), rng.integers(0, 6, (2, 3))), {"axis": 1}),
        Sample((uniform(rng, (4,)), np.array([3, 3, 0])), {"axis": 0}),
    ]


take = Op(
    "take",
    shape=lambda x, idx, axis: (*x[:axis], *idx, *x[axis + 1 :]),
    dtype=_take_dtype,
    params=_take_canon,
    reference=lambda x, idx, axis: np.take(x, idx, axis=axis),
    vjp=lambda g, out, x, idx, axis: (take_grad(g, idx, axis=axis, size=x.shape[axis]), None),
    samples=_take_samples,
    torch=lambda t, x, idx, axis: t.index_select(x, axis, idx.reshape(-1)).reshape(
        (*x.shape[:axis], *idx.shape, *x.shape[axis + 1 :])
    ),
    exact=True,
    doc="x indexed along `axis` by an integer tensor: the output has idx's shape in place of that axis.",
)

take_grad = Op(
    "take_grad",
    shape=lambda g, idx, axis, size: (*g[:axis], size, *g[axis + len(idx) :]),
    dtype=lambda g, idx, axis, size: (no_bf16(g), g)[1],  # it adds: no bf16 arithmetic
    reference=_take_grad_reference,
    vjp=lambda g2, out, g, idx, axis, size: (take(g2, idx, axis=axis), None),
    samples=lambda rng: [Sample((uniform(rng, (4, 3)), np.array([1, 0, 1, 3])), {"axis": 0, "size": 5})],
    exact=False,
    doc="Zeros with `size` entries along `axis`, and g's slices added at the positions idx names.",
)
