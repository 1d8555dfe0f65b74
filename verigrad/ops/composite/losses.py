"""cross_entropy from logits [N, C] and integer class targets [N], rows whose target is `ignore_index`
(None: none) left out (PyTorch's: a loss of 0, and "mean" divides by the count of the others).

The decomposition is log_softmax and a one-hot mask built by comparing arange(C) with the targets
(no gather), so C may be symbolic. The VJP is the op `cross_entropy_grad(logits, target, g)`:
(softmax(logits) - onehot) times the incoming gradient, divided by the count for the mean, 0 on the rows
left out (one kernel for a backend, the ignored class included, so that a compiled training step
replays whole; its decomposition is the reference). A target outside [0, C) raises IndexError, eagerly and in
a compiled plan alike (the decomposition checks it with `check_index`, a backend's kernel itself).
`cross_entropy_step` computes the gradient and the rows' losses at once and `cross_entropy_total` reduces
those losses: what a compiled step holding both runs (ir/passes/loss_step.py).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ...dtypes import DType
from ...errors import DTypeError, ShapeError
from ...shapes import Spec, shape_text
from .._op import Op, Sample
from .._samples import uniform
from ..binary import eq, maximum, ne, where
from ..checks import check_index
from ..creation import arange
from ..movement import concat
from ..reduce import numel_of
from ..unary import log1p
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


def _row_losses(logits, target, ignore_index: int | None = None):
    """[N]: each row's -log_softmax(logits)[i, target[i]], 0 on the rows left out."""
    hit = _one_hot(target, logits.shape[1], ignore_index)
    nll = -where(hit, log_softmax(logits, axis=1), 0.0).sum(axis=1)
    if ignore_index is not None:
        nll = where(_kept(target, ignore_index), nll, 0.0)
    return nll


def _reduce_losses(nll, target, reduction: str, ignore_index: int | None = None):
    """The rows' losses `nll` [N] reduced as cross_entropy reduces them."""
    if reduction == "none":
        return nll
    if reduction == "sum":
        return nll.sum()
    if ignore_index is None:
        return nll.mean()
    return nll.sum() / _kept(target, ignore_index).sum().cast(nll.dtype)


def _decompose(logits, target, reduction: str, ignore_index: int | None = None):
    return _reduce_losses(_row_losses(logits, target, ignore_index), target, reduction, ignore_index)


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


# A node's gradient computed by its forward for an incoming gradient of 1 (nn.functional's eager loss
# step, nn/functional/loss_step.py): a function of the incoming gradient giving it, or None where it does
# not stand for cross_entropy_grad's; taken once (a second pass through a retained graph runs the op)
KEPT: weakref.WeakKeyDictionary[Any, Callable[[Any], Any]] = weakref.WeakKeyDictionary()
KEPT_LOCK = threading.Lock()


def _vjp(g, out, logits, target, reduction: str, ignore_index: int | None = None):
    node = getattr(out, "_node", None) if KEPT else None
    if node is not None:
        with KEPT_LOCK:
            kept = KEPT.pop(node, None)
        grad = None if kept is None else kept(g)
        if grad is not None:
            return (grad, None)
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


# cross_entropy and its gradient in one op, for a program that holds both on the same logits with a
# gradient known before the loss (a compiled training step: ir/passes/loss_step.py): a row's exps
# computed once give its loss and its gradient. Reductions "mean" and "sum" (whose gradient is a scalar).
STEP_REDUCTIONS = ("mean", "sum")


def _step_canon(
    logits: Spec, target: Spec, g: Spec, reduction: str = "mean", ignore_index: int | None = None
) -> dict:
    if reduction not in STEP_REDUCTIONS:
        raise ValueError(f"cross_entropy_step: reduction must be 'mean' or 'sum', got {reduction!r}")
    return _canon(logits, target, reduction, ignore_index)


def _step_shape(
    logits: tuple, target: tuple, g: tuple, reduction: str, ignore_index: int | None = None
) -> tuple:
    n, c = _grad_shape(logits, target, g, reduction)
    return (n * c + n,)


def _step(logits, target, g, reduction: str, ignore_index: int | None = None):
    n, c = logits.shape
    grad = _grad(logits, target, g, reduction, ignore_index).reshape(n * c)
    return concat(grad, _row_losses(logits, target, ignore_index), axis=0)


def _step_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((*s.args, uniform(rng, ())), s.params)
        for s in _samples(rng)
        if s.params["reduction"] in STEP_REDUCTIONS
    ]


cross_entropy_step = Op(
    "cross_entropy_step",
    shape=_step_shape,
    dtype=_grad_dtype,
    params=_step_canon,
    decompose=_step,
    samples=_step_samples,
    exact=False,
    differentiable=False,
    doc="[N*C + N]: cross_entropy_grad(logits, target, g) flattened, then the rows' losses (0 on the rows "
    "left out), which cross_entropy_total reduces to cross_entropy's loss.",
)


def _total_shape(nll: tuple, target: tuple, reduction: str, ignore_index: int | None = None) -> tuple:
    if len(nll) != 1 or tuple(target) != tuple(nll):
        raise ShapeError(
            f"the rows' losses [N] and targets [N] disagree: {shape_text(nll)}, {shape_text(target)}"
        )
    if reduction == "mean" and nll[0] == 0:
        raise ShapeError("the mean loss over an empty batch (N = 0) is undefined; use reduction='sum'")
    return (nll[0],) if reduction == "none" else ()


cross_entropy_total = Op(
    "cross_entropy_total",
    shape=_total_shape,
    dtype=lambda nll, target, reduction, ignore_index=None: _dtype(nll, target, reduction),
    params=lambda nll, target, reduction="mean", ignore_index=None: _canon(
        nll, target, reduction, ignore_index
    ),
    decompose=_reduce_losses,
    samples=lambda rng: [
        Sample((uniform(rng, (s.args[0].shape[0],)), s.args[1]), s.params)
        for s in _samples(rng)
        if s.args[0].shape[0] or s.params["reduction"] != "mean"
    ],
    exact=False,
    differentiable=False,
    doc="The rows' losses of cross_entropy_step reduced as cross_entropy reduces them.",
)


# binary_cross_entropy, element by element ---------------------------------------------------------------
def _bce_shape(input: tuple, target: tuple) -> tuple:
    if tuple(input) != tuple(target):
        raise ShapeError(
            f"binary_cross_entropy: target must be shaped as the input {shape_text(input)}, "
            f"got {shape_text(target)}"
        )
    return input


def _bce_logs(input):
    """PyTorch's bounded logs: max(log(input), -100) and max(log1p(-input), -100)."""
    return maximum(input.log(), -100.0), maximum(log1p(-input), -100.0)


def _bce_decompose(input, target):
    log_p, log_q = _bce_logs(input)
    return (target - 1) * log_q - target * log_p


_BCE_EPSILON = float(np.float32(1e-12))  # PyTorch's bound, a float also in f64: 1e-12 rounded to f32


def _bce_vjp(g, out, input, target):
    """PyTorch's gradients: g (input - target) / max((1 - input) input, 1e-12) for the input (finite at 0
    and 1, where the logs' own derivatives are infinite), -g logit(input) for the target."""
    minus_logit = -(input / (1 - input)).log()  # unbounded, as PyTorch's (infinite at 0 and 1)
    return g * (input - target) / maximum((1 - input) * input, _BCE_EPSILON), g * minus_logit


def _bce_samples(rng: np.random.Generator) -> list[Sample]:
    shapes = [(5,), (3, 4), (2, 1, 3)]
    return [Sample((uniform(rng, s, 0.05, 0.95), uniform(rng, s, 0.0, 1.0))) for s in shapes]


binary_cross_entropy = Op(
    "binary_cross_entropy",
    shape=_bce_shape,
    dtype=lambda input, target: float_inputs(input, target, what="input and target"),
    decompose=_bce_decompose,
    vjp=_bce_vjp,
    samples=_bce_samples,
    torch=lambda t, input, target: t.nn.functional.binary_cross_entropy(input, target, reduction="none"),
    exact=False,
    doc="-(target log(input) + (1 - target) log(1 - input)) element by element, each log bounded below "
    "by -100 as PyTorch's, with PyTorch's gradients (finite where the input is 0 or 1).",
)
