"""softmax and log_softmax along one axis, max-subtracted so large logits do not overflow.

Both are written in primitives (max, sub, exp, sum, div, log) and carry their own VJPs, so eager
autograd records one node each: softmax's is out * (g - sum(g * out)), computed in f64 and rounded once
(`_softmax_vjp`), log_softmax's is g - exp(out) * sum(g).
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType, f64
from ...shapes import Spec, normalize_axis
from .._op import Op, Sample
from .._samples import uniform
from ._common import float_inputs


def _canon(x: Spec, axis: int = -1, dim: int | None = None) -> dict:
    """`axis` (or PyTorch's `dim`)."""
    axis = dim if dim is not None else axis
    return {"axis": normalize_axis(axis, x.ndim)}


def _shape(x: tuple, axis: int) -> tuple:
    return x


def _dtype(x: DType, axis: int) -> DType:
    return float_inputs(x, what="input")


def _empty_along(x, axis: int) -> bool:
    """Whether there is nothing to normalize over: the result is x's (empty) shape, as PyTorch's."""
    return bool(x.ndim) and isinstance(x.shape[axis], int) and x.shape[axis] == 0


def _softmax(x, axis: int):
    if _empty_along(x, axis):
        return x * 1
    e = (x - x.amax(axis=axis, keepdim=True)).exp()
    return e / e.sum(axis=axis, keepdim=True)


def _log_softmax(x, axis: int):
    if _empty_along(x, axis):
        return x * 1
    z = x - x.amax(axis=axis, keepdim=True)
    return z - z.exp().sum(axis=axis, keepdim=True).log()


def _softmax_vjp(g, out, x, axis: int) -> tuple:
    """out * (g - sum(g * out)) in f64, rounded once to out's dtype: in f32 the subtraction cancels where a
    row is nearly one-hot (g large, sum(g * out) close to it), and the rounding of the f32 sum would be all
    that is left of the difference (products of two f32s are exact in f64)."""
    if out.dtype == f64:
        return (out * (g - (g * out).sum(axis=axis, keepdim=True)),)
    out64, g64 = out.cast(f64), g.cast(f64)
    return ((out64 * (g64 - (g64 * out64).sum(axis=axis, keepdim=True))).cast(out.dtype),)


def _samples(rng: np.random.Generator) -> list[Sample]:
    cases = [
        ((3, 4), -1),
        ((2, 3, 4), 1),
        ((5,), 0),
        ((1, 5), -1),
        ((4, 1), -1),
        ((0, 3), 1),
        ((2, 3), 0),
        ((), 0),
        ((), -1),
    ]
    out = [Sample((uniform(rng, s),), {"axis": a}) for s, a in cases]
    out.append(Sample((np.array([[30.0, 30.0, -30.0], [1.0, 2.0, 3.0]]),), {"axis": -1}))
    return out


softmax = Op(
    "softmax",
    shape=_shape,
    dtype=_dtype,
    params=_canon,
    positional=("axis",),
    decompose=_softmax,
    vjp=_softmax_vjp,
    samples=_samples,
    torch=lambda t, x, axis: t.softmax(x, dim=axis),
    exact=False,
    doc="exp(x - max) / sum(exp(x - max)) along `axis`: softmax([1000, 1000]) is [0.5, 0.5].",
)

log_softmax = Op(
    "log_softmax",
    shape=_shape,
    dtype=_dtype,
    params=_canon,
    positional=("axis",),
    decompose=_log_softmax,
    vjp=lambda g, out, x, axis: (g - out.exp() * g.sum(axis=axis, keepdim=True),),
    samples=_samples,
    torch=lambda t, x, axis: t.log_softmax(x, dim=axis),
    exact=False,
    doc="(x - max) - log(sum(exp(x - max))) along `axis`.",
)
