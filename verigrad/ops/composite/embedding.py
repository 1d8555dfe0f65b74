"""embedding: rows of a [V, D] table picked by integer indices of any shape, through `take`; an index
outside [0, V) raises IndexError (as PyTorch's, negative ones too), eagerly and compiled alike
(`check_index`)."""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ...errors import DTypeError, ShapeError
from ...shapes import shape_text
from .._op import Op, Sample
from .._samples import uniform
from ..checks import checked
from ..index import take


def _shape(weight: tuple, idx: tuple) -> tuple:
    if len(weight) != 2:
        raise ShapeError(f"the table must be [V, D] (one row per token id), got {shape_text(weight)}")
    return (*idx, weight[1])


def _dtype(weight: DType, idx: DType) -> DType:
    if idx.kind != "i":
        raise DTypeError(f"indices must be an integer tensor (i32 or i64), got {idx.name}")
    return weight


embedding = Op(
    "embedding",
    shape=_shape,
    dtype=_dtype,
    decompose=lambda weight, idx: take(weight, checked(idx, weight.shape[0], "embedding"), axis=0),
    samples=lambda rng: [
        Sample((uniform(rng, (6, 3)), np.array([[0, 5, 2], [2, 2, 1]]))),
        Sample((uniform(rng, (4, 1)), np.array([3, 0, 3]))),
        Sample((uniform(rng, (1, 5)), np.array([0]))),
        Sample((uniform(rng, (5, 2)), np.array(4))),
        Sample((uniform(rng, (3, 4)), np.zeros((0,), np.int64))),
    ],
    torch=lambda t, weight, idx: t.nn.functional.embedding(idx, weight),
    exact=True,
    doc="weight[idx]: [V, D] rows at integer indices of shape [...], giving [..., D].",
)
