"""layer_norm and rms_norm over the last axis, written in primitives (their gradient is the
decomposition's).

layer_norm: (x - mean) * rsqrt(var + eps) * weight + bias, with the biased variance.
rms_norm (Llama): x * rsqrt(mean(x^2) + eps) * weight.
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ...errors import ShapeError
from ...shapes import Spec, shape_text
from .._op import Op, Sample
from .._samples import uniform
from ._common import float_inputs


def _eps_canon(x: Spec, *affine: Spec, eps: float) -> dict:
    eps = float(eps)
    if not eps >= 0:
        raise ShapeError(f"eps must be a non-negative number, got {eps}")
    return {"eps": eps}


def _norm_shape(x: tuple, *affine: tuple, eps: float) -> tuple:
    if not x:
        raise ShapeError("needs a tensor of at least one dimension (normalized over the last), got a 0-d one")
    if x[-1] == 0:
        raise ShapeError(f"the normalized (last) axis of {shape_text(x)} is empty")
    for name, s in zip(("weight", "bias"), affine):
        if s != (x[-1],):
            raise ShapeError(f"{name} must be [{x[-1]}] (the size of x's last axis), got {shape_text(s)}")
    return x


def _norm_dtype(*dtypes: DType, eps: float) -> DType:
    return float_inputs(*dtypes)


def _layer_norm(x, weight, bias, eps: float):
    xc = x - x.mean(axis=-1, keepdim=True)
    var = (xc * xc).mean(axis=-1, keepdim=True)
    return xc * (var + eps).rsqrt() * weight + bias


def _rms_norm(x, weight, eps: float):
    return x * ((x * x).mean(axis=-1, keepdim=True) + eps).rsqrt() * weight


_SHAPES = [(3, 4), (2, 3, 5), (1, 6), (4, 1), (7,)]


def _layer_norm_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((uniform(rng, s), uniform(rng, s[-1:]), uniform(rng, s[-1:])), {"eps": eps})
        for s, eps in zip(_SHAPES, (1e-5, 1e-5, 1e-3, 1e-5, 0.1))
    ]


def _rms_norm_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((uniform(rng, s), uniform(rng, s[-1:])), {"eps": eps})
        for s, eps in zip(_SHAPES, (1e-6, 1e-6, 1e-3, 1e-6, 0.1))
    ]


layer_norm = Op(
    "layer_norm",
    shape=_norm_shape,
    dtype=_norm_dtype,
    params=lambda x, w, b, eps=1e-5: _eps_canon(x, w, b, eps=eps),
    decompose=_layer_norm,
    samples=_layer_norm_samples,
    torch=lambda t, x, w, b, eps: t.nn.functional.layer_norm(x, x.shape[-1:], w, b, eps=eps),
    exact=False,
    doc="(x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance).",
)

rms_norm = Op(
    "rms_norm",
    shape=_norm_shape,
    dtype=_norm_dtype,
    params=lambda x, w, eps=1e-6: _eps_canon(x, w, eps=eps),
    decompose=_rms_norm,
    samples=_rms_norm_samples,
    torch=lambda t, x, w, eps: t.nn.functional.rms_norm(x, x.shape[-1:], w, eps=eps),
    exact=False,
    doc="x * rsqrt(mean(x^2) + eps) * weight over the last axis (Llama's RMSNorm).",
)
