"""angle of real numbers, as PyTorch's on real tensors: pi below 0, 0 at and above 0 (-0.0 included),
NaN at NaN; integers and bool give the default float. Its gradient is 0 everywhere (NaN included), as
PyTorch's for real input. verigrad has no complex numbers."""

from __future__ import annotations

import math

import numpy as np

from ._op import Op, float_dtype, same_shape
from ._samples import unary
from .creation import zeros_like


def _angle(x: np.ndarray) -> np.ndarray:
    x = x if x.dtype.kind == "f" else x.astype(np.float32)
    return np.where(np.isnan(x), x, np.where(x < 0, x.dtype.type(math.pi), x.dtype.type(0)))


angle = Op(
    "angle",
    shape=same_shape,
    dtype=float_dtype,
    reference=_angle,
    vjp=lambda g, out, x: (zeros_like(g),),
    samples=unary(-2.0, 2.0),
    torch=lambda t, x: t.angle(x),
    doc="The argument of a real number: pi below 0, 0 elsewhere, NaN at NaN.",
)
