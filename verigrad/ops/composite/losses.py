"""cross_entropy from logits [N, C] and integer class targets [N], rows whose target is `ignore_index`
(None: none) left out (PyTorch's: a loss of 0, and "mean" divides by the count of the others).

The decomposition is log_softmax and a one-hot mask built by comparing arange(C) with the targets
(no gather), so C may be symbolic. The VJP is the op `cross_entropy_grad(logits, target, g)`:
(softmax(logits) - onehot) times the incoming gradient, divided by the count for the mean, 0 on the rows
left out (one kernel for a backend, the ignored class included, so that a compiled training step
replays whole; its decomposition is the reference). A target outside [0, C) raises IndexError, eagerly and in
a compiled plan alike (the decomposition checks it with `check_index`, a backend's kernel itself).
"""

from __future__ import annotations

import numpy as np

from ...dtypes import DType
from ...errors import DTypeError, ShapeError
from ...shapes import Spec, shape_text
from .._op import Op, Sample
from .._samples import uniform
from ..binary import eq, ne, where
from ..checks import check_index
from ..creation import arange
from ..reduce import numel_of
from ._common import float_inputs
from .softmax import log_softmax, softmax

REDUCTIONS = ("mean", "sum", "none")


def _canon(logits: Spec, target: Spec, reduction: str = "mean", ignore_index: int | None = None) -> dict:
    if reduction not in REDUCTIONS:
        raise ValueError(f"cross_entropy: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    if ignore_index is not None and (isinstance(ignore_index, bool) or not isinstance(ignore_index, int)):
        raise TypeError(f"cross_entropy: ignore_index must be an int or None, got {ignore_index!r}")
    return {"reduction": reduction, "ignore_index": ignore_index}


def _shape(logits: tuple, target: tuple, reduction: str, ignore_index: int | None = None) -> tuple:
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


def _dtype(logits: DType, target: DType, reduction: str, ignore_index: int | None = None) -> DType:
    if target.kind != "i":
        raise DTypeError(
            f"target must hold integer class indices (i32 or i64), got {target.name}; "
            "class probabilities are not supported"
        )
    return float_inputs(logits, what="logits")


def _one_hot(target, classes, ignore_index: int | None):
    """[N, C] bool: row i is True at column target[i], each target checked to be in [0, C) (an ignored
    one read as class 0)."""
    target = check_index(target, size=classes, name="cross_entropy", what="target", ignore=ignore_index)
    return eq(arange(classes), target.reshape(target.shape[0], 1))


def _kept(target, ignore_index: int):
    """[N] bool: the rows whose target is not the ignored class."""
    return ne(target, ignore_index)


def _decompose(logits, target, reduction: str, ignore_index: int | None = None):
    hit = _one_hot(target, logits.shape[1], ignore_index)
    nll = -where(hit, log_softmax(logits, axis=1), 0.0).sum(axis=1)
    if ignore_index is not None:
        nll = where(_kept(target, ignore_index), nll, 0.0)
    if reduction == "none":
        return nll
    if reduction == "sum":
        return nll.sum()
    if ignore_index is None:
        return nll.mean()
    return nll.sum() / _kept(target, ignore_index).sum().cast(logits.dtype)


def _grad(logits, target, g, reduction: str, ignore_index: int | None = None):
    grad = softmax(logits, axis=1) - _one_hot(target, logits.shape[1], ignore_index).cast(logits.dtype)
    if reduction == "none":
        grad = grad * g.reshape(g.shape[0], 1)
    else:
        if reduction == "mean" and ignore_index is None:
            g = g / numel_of(logits, axis=(0,))
        elif reduction == "mean":
            g = g / _kept(target, ignore_index).sum().cast(logits.dtype)
        grad = grad * g
    if ignore_index is None:
        return grad
    return where(_kept(target, ignore_index).reshape(target.shape[0], 1), grad, 0.0)


def _vjp(g, out, logits, target, reduction: str, ignore_index: int | None = None):
    return (cross_entropy_grad(logits, target, g, reduction=reduction, ignore_index=ignore_index), None)


def _grad_shape(
    logits: tuple, target: tuple, g: tuple, reduction: str, ignore_index: int | None = None
) -> tuple:
    want = _shape(logits, target, reduction)
    if g != want:
        raise ShapeError(
            f"the gradient must be shaped like the loss, {shape_text(want)}; got {shape_text(g)}"
        )
    return logits


def _grad_dtype(
    logits: DType, target: DType, g: DType, reduction: str, ignore_index: int | None = None
) -> DType:
    _dtype(logits, target, reduction)
    return float_inputs(logits, g, what="logits and gradient")


def _samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for n, c in [(4, 5), (1, 3), (3, 1), (6, 2)]:
        for reduction in REDUCTIONS:
            out.append(Sample((uniform(rng, (n, c)), rng.integers(0, c, (n,))), {"reduction": reduction}))
    out.append(Sample((uniform(rng, (0, 3)), np.zeros((0,), np.int64)), {"reduction": "sum"}))
    for reduction in REDUCTIONS:  # PyTorch's ignored rows: a class, and a value outside the classes
        out.append(
            Sample(
                (uniform(rng, (5, 4)), np.array([1, 3, 1, 0, 1])), {"reduction": reduction, "ignore_index": 1}
            )
        )
        out.append(
            Sample(
                (uniform(rng, (3, 4)), np.array([-100, 2, -100])),
                {"reduction": reduction, "ignore_index": -100},
            )
        )
    return out


cross_entropy = Op(
    "cross_entropy",
    shape=_shape,
    dtype=_dtype,
    params=_canon,
    decompose=_decompose,
    vjp=_vjp,
    samples=_samples,
    torch=lambda t, logits, target, reduction, ignore_index: t.nn.functional.cross_entropy(
        logits, target, reduction=reduction, ignore_index=-100 if ignore_index is None else ignore_index
    ),
    exact=False,
    doc="-log_softmax(logits)[i, target[i]], averaged (mean), summed (sum) or per example (none); rows "
    "whose target is ignore_index give 0 and count for nothing in the mean.",
)

cross_entropy_grad = Op(
    "cross_entropy_grad",
    shape=_grad_shape,
    dtype=_grad_dtype,
    params=lambda logits, target, g, reduction="mean", ignore_index=None: _canon(
        logits, target, reduction, ignore_index
    ),
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
