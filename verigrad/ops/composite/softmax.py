"""softmax and log_softmax along one axis, max-subtracted so large logits do not overflow.

Both are written in primitives (max, sub, exp, sum, div, log) and carry their own VJPs, so eager
autograd records one node each: softmax's is the `softmax_grad` op (f64 operands keep the formula in
ops), log_softmax's is g - exp(out) * sum(g).

`softmax_grad(g, out, axis)` is out * (g - sum(g * out)) computed in f64 and rounded once to the operands'
dtype: in f32 the subtraction cancels where a row is nearly one-hot (g large, sum(g * out) close to it),
and the rounding of an f32 sum would be all that is left of the difference (products of two f32s are
exact in f64). Its reference fixes the sum's order, so that a C kernel can give its bits at vector speed:
element j of a row goes to lane j mod 16 (each lane summed in row order from +0), and the lanes fold
pairwise, k + k+8, then k + k+4, k + k+2, k + k+1 (`lane_sum`).
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType, f64
from ...errors import DTypeError, ShapeError
from ...shapes import Spec, normalize_axis, shape_text
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
    """out * (g - sum(g * out)): the `softmax_grad` op, rounded once from f64; f64 in ops."""
    if out.dtype == f64:
        return (out * (g - (g * out).sum(axis=axis, keepdim=True)),)
    return (softmax_grad(g, out, axis=axis),)


LANES = 16  # the f64 partial sums of softmax_grad's row sum: two AVX-512 vectors, four AVX2 ones


def lane_sum(p: np.ndarray) -> np.ndarray:
    """The sum over the last axis of f64 `p`, kept: element j added to lane j mod LANES in order (each
    lane from +0), the lanes folded k + k+8, k + k+4, k + k+2, k + k+1."""
    n = p.shape[-1]
    lanes = np.zeros((*p.shape[:-1], LANES), np.float64)
    whole = n - n % LANES
    for j in range(0, whole, LANES):
        lanes += p[..., j : j + LANES]
    lanes[..., : n - whole] += p[..., whole:]
    width = LANES // 2
    while width:
        lanes = lanes[..., :width] + lanes[..., width : 2 * width]
        width //= 2
    return lanes


def _grad_reference(g: np.ndarray, out: np.ndarray, axis: int) -> np.ndarray:
    dtype = out.dtype
    if out.ndim == 0:
        return _grad_reference(g.reshape(1), out.reshape(1), 0).reshape(())
    g64 = np.moveaxis(g.astype(np.float64), axis, -1)
    out64 = np.moveaxis(out.astype(np.float64), axis, -1)
    result = (out64 * (g64 - lane_sum(g64 * out64))).astype(dtype)
    return np.moveaxis(result, -1, axis)


def _grad_canon(g: Spec, out: Spec, axis: int = -1, dim: int | None = None) -> dict:
    return _canon(out, axis, dim)


def _grad_shape(g: tuple, out: tuple, axis: int) -> tuple:
    if tuple(g) != tuple(out):
        raise ShapeError(
            f"grad_output and output must have the same shape, got {shape_text(g)} and {shape_text(out)}"
        )
    return out


def _grad_dtype(g: DType, out: DType, axis: int) -> DType:
    if g != out:
        raise DTypeError(f"grad_output and output must have the same dtype, got {g.name} and {out.name}")
    return float_inputs(g, out, what="grad_output and output")


def _grad_vjp(c, r, g, out, axis: int) -> tuple:
    """r = out (g - s), s = sum(g out): dg = out (c - sum(c out)), softmax_grad(c, out) itself;
    dout = c (g - s) - g sum(c out)."""
    s = (g * out).sum(axis=axis, keepdim=True)
    return softmax_grad(c, out, axis=axis), c * (g - s) - g * (c * out).sum(axis=axis, keepdim=True)


def _grad_samples(rng: np.random.Generator) -> list[Sample]:
    """Output gradients with softmax's outputs (the reference's, in f64), rows longer than a lane block
    among them, and nearly one-hot rows, where the f32 formula cancels."""
    out = []
    cases = [((3, 4), -1), ((2, 3, 4), 1), ((5,), 0), ((4, 1), -1), ((0, 3), 1), ((2, 3), 0), ((), 0)]
    cases += [((3, 37), -1), ((2, 19, 3), 1)]
    for shape, axis in cases:
        y = _softmax_numpy(uniform(rng, shape), axis)
        out.append(Sample((uniform(rng, shape), y), {"axis": axis}))
    peaked = _softmax_numpy(np.array([[12.0, -3.0, 0.5, -1.0] * 5, [1.0, 2.0, 3.0, 4.0] * 5]), -1)
    g = np.array([[40.0, 0.25, -0.5, 1.0] * 5, [1.0, -2.0, 0.5, 3.0] * 5])
    out.append(Sample((g, peaked), {"axis": -1}))
    return out


def _softmax_numpy(x: np.ndarray, axis: int) -> np.ndarray:
    if x.ndim == 0:
        return np.ones_like(x)
    if x.shape[axis] == 0:
        return x.copy()
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


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

softmax_grad = Op(
    "softmax_grad",
    shape=_grad_shape,
    dtype=_grad_dtype,
    params=_grad_canon,
    positional=("axis",),
    reference=_grad_reference,
    vjp=_grad_vjp,
    samples=_grad_samples,
    torch=lambda t, g, out, axis: t._softmax_backward_data(g, out, axis, g.dtype),
    exact=False,
    doc="softmax's input gradient from its output: out * (g - sum(g * out)) along `axis`, computed in "
    "f64 (the sum's order fixed: `lane_sum`) and rounded once to the operands' dtype.",
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
