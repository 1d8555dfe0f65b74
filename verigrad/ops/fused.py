"""fma(a, b, c) = a * b + c rounded once: the last step of PyTorch's addcmul (its CPU kernel is
`x + (value * t1) * t2` with a fused multiply-add, f16 computed in f32 and rounded once more).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, f16, f32, promote
from ..shapes import broadcast
from ._fma import fma_f32, fma_f64
from ._op import Sample, no_bf16, unbroadcast
from ._samples import uniform
from .binary import Elementwise, _np_dtype


def _fma_dtype(a: DType, b: DType, c: DType) -> DType:
    no_bf16(a, b, c)
    return promote(a, b, c)


def _fma_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Floats rounded once (f16 in f32, then rounded to f16), integers wrapping around."""
    out = promote(_np_dtype(a), _np_dtype(b), _np_dtype(c)).np
    a, b, c = (v.astype(out, copy=False) for v in (a, b, c))
    if out.kind in "iub":
        with np.errstate(over="ignore"):
            return (a * b + c).astype(out, copy=False)
    if out == np.float64:
        return fma_f64(a, b, c)
    return fma_f32(*(v.astype(np.float32) for v in (a, b, c))).astype(out, copy=False)


def _fma_vjp(g, out, a, b, c):
    return (
        unbroadcast(g * b, a.shape) if a.requires_grad else None,
        unbroadcast(g * a, b.shape) if b.requires_grad else None,
        unbroadcast(g, c.shape) if c.requires_grad else None,
    )


def _fma_samples(rng: np.random.Generator) -> list[Sample]:
    shapes = [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), ()), ((4,), (3, 4), (1,))]
    return [Sample(tuple(uniform(rng, s) for s in three)) for three in shapes]


fma = Elementwise(
    "fma",
    shape=broadcast,
    dtype=_fma_dtype,
    reference=_fma_reference,
    vjp=_fma_vjp,
    samples=_fma_samples,
    torch=lambda t, a, b, c: t.addcmul(c, a, b),
    doc="a * b + c with one rounding (f16: in f32, then rounded to f16), integers wrapping: the last step "
    "of PyTorch's addcmul.",
)

OPMATH = {f16: f32}  # the dtype PyTorch's pointwise kernels compute a dtype in (f16 in f32)
