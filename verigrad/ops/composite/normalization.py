"""layer_norm and rms_norm over the last axis, written in primitives.

layer_norm: (x - mean) * rsqrt(var + eps) * weight + bias, with the biased variance.
rms_norm (Llama): x * rsqrt(mean(x^2) + eps) * weight.

Their VJPs: with xhat the normalized x and dxhat = g * weight, the input's gradient is the op
`layer_norm_grad(g, x, weight)`, rsqrt(var + eps) * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
(one kernel for a backend; its decomposition is the reference), and likewise `rms_norm_grad`, without
the mean(dxhat) term; weight's gradient is the sum of g * xhat over the other axes (the ops
`layer_norm_weight_grad` and `rms_norm_weight_grad`, one kernel each for a backend), bias's that of g.
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
    # any number, as PyTorch's: a negative eps is taken as it is (rsqrt of a negative variance is NaN)
    return {"eps": float(eps)}


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


def _centered(x, eps: float):
    """(x - mean, rsqrt(var + eps)) over the last axis."""
    xc = x - x.mean(axis=-1, keepdim=True)
    return xc, ((xc * xc).mean(axis=-1, keepdim=True) + eps).rsqrt()


def _scaled(x, eps: float):
    """(x, rsqrt(mean(x^2) + eps)) over the last axis."""
    return x, ((x * x).mean(axis=-1, keepdim=True) + eps).rsqrt()


def _layer_norm(x, weight, bias, eps: float):
    xc, rs = _centered(x, eps)
    return xc * rs * weight + bias


def _rms_norm(x, weight, eps: float):
    x, rs = _scaled(x, eps)
    return x * rs * weight


def _input_grad(g, x, weight, eps: float, center: bool):
    """x's gradient (see the module docstring); layer_norm's when `center`, else rms_norm's."""
    xc, rs = (_centered if center else _scaled)(x, eps)
    xhat, dxhat = xc * rs, g * weight
    dot = xhat * (dxhat * xhat).mean(axis=-1, keepdim=True)
    return rs * ((dxhat - dxhat.mean(axis=-1, keepdim=True) if center else dxhat) - dot)


def _weight_grad(g, x, eps: float, center: bool):
    """The sum of g * xhat over every axis but the last."""
    xc, rs = (_centered if center else _scaled)(x, eps)
    return (g * (xc * rs)).sum(axis=tuple(range(x.ndim - 1)))


def _layer_norm_vjp(g, out, x, weight, bias, eps: float):
    """Each gradient only where it is wanted (a frozen weight and bias want none)."""
    return (
        layer_norm_grad(g, x, weight, eps=eps) if x.requires_grad else None,
        layer_norm_weight_grad(g, x, eps=eps) if weight.requires_grad else None,
        g.sum(axis=tuple(range(x.ndim - 1))) if bias.requires_grad else None,
    )


def _rms_norm_vjp(g, out, x, weight, eps: float):
    return (
        rms_norm_grad(g, x, weight, eps=eps) if x.requires_grad else None,
        rms_norm_weight_grad(g, x, eps=eps) if weight.requires_grad else None,
    )


def _grad_shape(g: tuple, x: tuple, weight: tuple, eps: float) -> tuple:
    if g != x:
        raise ShapeError(f"the gradient must be shaped like x, {shape_text(x)}; got {shape_text(g)}")
    return _norm_shape(x, weight, eps=eps)


def _weight_grad_shape(g: tuple, x: tuple, eps: float) -> tuple:
    if g != x:
        raise ShapeError(f"the gradient must be shaped like x, {shape_text(x)}; got {shape_text(g)}")
    return _norm_shape(x, eps=eps)[-1:]


_SHAPES = [(3, 4), (2, 3, 5), (1, 6), (4, 1), (7,)]


def _layer_norm_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((uniform(rng, s), uniform(rng, s[-1:]), uniform(rng, s[-1:])), {"eps": eps})
        for s, eps in zip(_SHAPES, (1e-5, 1e-5, 1e-3, 1e-5, 0.1))
    ]


def _grad_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((uniform(rng, s), uniform(rng, s), uniform(rng, s[-1:])), {"eps": eps})
        for s, eps in zip(_SHAPES, (1e-5, 1e-5, 1e-3, 1e-5, 0.1))
    ]


def _weight_grad_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((uniform(rng, s), uniform(rng, s)), {"eps": eps})
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
    vjp=_layer_norm_vjp,
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
    vjp=_rms_norm_vjp,
    samples=_rms_norm_samples,
    torch=lambda t, x, w, eps: t.nn.functional.rms_norm(x, x.shape[-1:], w, eps=eps),
    exact=False,
    doc="x * rsqrt(mean(x^2) + eps) * weight over the last axis (Llama's RMSNorm).",
)

layer_norm_grad = Op(
    "layer_norm_grad",
    shape=_grad_shape,
    dtype=_norm_dtype,
    params=lambda g, x, w, eps=1e-5: _eps_canon(g, x, w, eps=eps),
    decompose=lambda g, x, weight, eps: _input_grad(g, x, weight, eps, center=True),
    samples=_grad_samples,
    exact=False,
    doc="layer_norm's gradient with respect to x, for the output's gradient g.",
)

rms_norm_grad = Op(
    "rms_norm_grad",
    shape=_grad_shape,
    dtype=_norm_dtype,
    params=lambda g, x, w, eps=1e-6: _eps_canon(g, x, w, eps=eps),
    decompose=lambda g, x, weight, eps: _input_grad(g, x, weight, eps, center=False),
    samples=_grad_samples,
    exact=False,
    doc="rms_norm's gradient with respect to x, for the output's gradient g.",
)

layer_norm_weight_grad = Op(
    "layer_norm_weight_grad",
    shape=_weight_grad_shape,
    dtype=_norm_dtype,
    params=lambda g, x, eps=1e-5: _eps_canon(g, x, eps=eps),
    decompose=lambda g, x, eps: _weight_grad(g, x, eps, center=True),
    samples=_weight_grad_samples,
    exact=False,
    doc="layer_norm's gradient with respect to its weight: the sum of g * xhat over every axis but the last.",
)

rms_norm_weight_grad = Op(
    "rms_norm_weight_grad",
    shape=_weight_grad_shape,
    dtype=_norm_dtype,
    params=lambda g, x, eps=1e-6: _eps_canon(g, x, eps=eps),
    decompose=lambda g, x, eps: _weight_grad(g, x, eps, center=False),
    samples=_weight_grad_samples,
    exact=False,
    doc="rms_norm's gradient with respect to its weight: the sum of g * xhat over every axis but the last.",
)
