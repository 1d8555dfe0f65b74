"""Running sums along one axis: cumsum.

Rounding rule (as the sums'): an f16/f32 running sum accumulates in f64 and each output is rounded once
to the input dtype; f64 accumulates in f64; integer and bool inputs give i64.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import i64
from ..shapes import Spec, normalize_axis
from ._op import Op, Sample, no_bf16
from ._samples import uniform
from .derived import flip


def _canon(x: Spec, axis: int = 0, dim: int | None = None) -> dict:
    return {"axis": normalize_axis(dim if dim is not None else axis, x.ndim)}


def _reference(x: np.ndarray, axis: int) -> np.ndarray:
    if x.ndim == 0:
        x = x.reshape(1)  # NumPy flattens a 0-d input; its running sum is itself
        return _reference(x, 0).reshape(())
    if x.dtype.kind != "f":
        return np.cumsum(x, axis=axis, dtype=np.int64)
    return np.cumsum(x, axis=axis, dtype=np.float64).astype(x.dtype)


def _vjp(g, out, x, axis):
    """Each input reaches every output from its position on: the running sum of g from the end."""
    if x.ndim == 0:
        return (g,)
    return (flip(cumsum(flip(g, axis), axis=axis), axis),)


cumsum = Op(
    "cumsum",
    shape=lambda x, axis: x,
    dtype=lambda x, axis: (no_bf16(x), x if x.is_float else i64)[1],
    params=_canon,
    positional=("axis",),
    reference=_reference,
    vjp=_vjp,
    samples=lambda rng: [
        Sample((uniform(rng, s),), {"axis": a})
        for s, a in [((5,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 0, 3), 2), ((), 0)]
    ],
    torch=lambda t, x, axis: t.cumsum(x, dim=axis),
    exact=False,
    doc="Running sums along `axis`: out[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...].",
)
