"""cross_entropy from logits [N, C] and integer class targets [N].

The decomposition is log_softmax and a one-hot mask built by comparing arange(C) with the targets
(no gather), so C may be symbolic. The VJP is the op `cross_entropy_grad(logits, target, g)`:
(softmax(logits) - onehot) times the incoming gradient, divided by N for the mean (one kernel for a
backend; its decomposition is the reference). A target outside [0, C) raises IndexError, eagerly and in
a compiled plan alike (the decomposition checks it with `check_index`, a backend's kernel itself).
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ...errors import DTypeError, ShapeError
from ...shapes import Spec, shape_text
from .._op import Op, Sample
from .._samples import uniform
from ..binary import eq, where
from ..checks import check_index
from ..creation import arange
from ..reduce import numel_of
from ._common import float_inputs
from .softmax import log_softmax, softmax

REDUCTIONS = ("mean", "sum", "none")


def _canon(logits: Spec, target: Spec, reduction: str = "mean") -> dict:
    if reduction not in REDUCTIONS:
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    return {"reduction": reduction}


def _shape(logits: tuple, target: tuple, reduction: str) -> tuple:
    if len(logits) != 2:
        raise ShapeError(
            f"logits must be [N, C] (a row of class scores per example), got {shape_text(logits)}"
        )
    if len(target) != 1:
        raise ShapeError(f"target must be [N] (one class index per example), got {shape_text(target)}")
    n, c = logits
    if n != target[0]:
        raise ShapeError(f"logits have N = {n} rows but target has {target[0]} entries")
    if c == 0:
        raise ShapeError("logits have no classes (C = 0)")
    if reduction == "mean" and n == 0:
        raise ShapeError("the mean loss over an empty batch (N = 0) is undefined; use reduction='sum'")
    return (n,) if reduction == "none" else ()


def _dtype(logits: DType, target: DType, reduction: str) -> DType:
    if target.kind != "i":
        raise DTypeError(
            f"target must hold integer class indices (i32 or i64), got {target.name}; "
            "class probabilities are not supported"
        )
    return float_inputs(logits, what="logits")


def _one_hot(target, classes):
    """[N, C] bool: row i is True at column target[i], each target checked to be in [0, C)."""
    target = check_index(target, size=classes, name="cross_entropy", what="target")
    return eq(arange(classes), target.reshape(target.shape[0], 1))


def _decompose(logits, target, reduction: str):
    hit = _one_hot(target, logits.shape[1])
    nll = -where(hit, log_softmax(logits, axis=1), 0.0).sum(axis=1)
    if reduction == "none":
        return nll
    return nll.mean() if reduction == "mean" else nll.sum()


def _grad(logits, target, g, reduction: str):
    grad = softmax(logits, axis=1) - _one_hot(target, logits.shape[1]).cast(logits.dtype)
    if reduction == "none":
        return grad * g.reshape(g.shape[0], 1)
    if reduction == "mean":
        g = g / numel_of(logits, axis=(0,))
    return grad * g


def _vjp(g, out, logits, target, reduction: str):
    return (cross_entropy_grad(logits, target, g, reduction=reduction), None)


def _grad_shape(logits: tuple, target: tuple, g: tuple, reduction: str) -> tuple:
    want = _shape(logits, target, reduction)
    if g != want:
        raise ShapeError(
            f"the gradient must be shaped like the loss, {shape_text(want)}; got {shape_text(g)}"
        )
    return logits


def _grad_dtype(logits: DType, target: DType, g: DType, reduction: str) -> DType:
    _dtype(logits, target, reduction)
    return float_inputs(logits, g, what="logits and gradient")


def _samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for n, c in [(4, 5), (1, 3), (3, 1), (6, 2)]:
        for reduction in REDUCTIONS:
            out.append(Sample((uniform(rng, (n, c)), rng.integers(0, c, (n,))), {"reduction": reduction}))
    out.append(Sample((uniform(rng, (0, 3)), np.zeros((0,), np.int64)), {"reduction": "sum"}))
    return out


cross_entropy = Op(
    "cross_entropy",
    shape=_shape,
    dtype=_dtype,
    params=_canon,
    decompose=_decompose,
    vjp=_vjp,
    samples=_samples,
    torch=lambda t, logits, target, reduction: t.nn.functional.cross_entropy(
        logits, target, reduction=reduction
    ),
    exact=False,
    doc="-log_softmax(logits)[i, target[i]], averaged (mean), summed (sum) or per example (none).",
)

cross_entropy_grad = Op(
    "cross_entropy_grad",
    shape=_grad_shape,
    dtype=_grad_dtype,
    params=lambda logits, target, g, reduction="mean": _canon(logits, target, reduction),
    decompose=_grad,
    samples=lambda rng: [
        Sample(
            (*s.args, uniform(rng, (s.args[0].shape[0],) if s.params["reduction"] == "none" else ())),
            s.params,
        )
        for s in _samples(rng)
    ],
    exact=False,
    doc="cross_entropy's gradient with respect to the logits, for the loss's gradient g.",
)
