"""The connectionist temporal classification loss per sample (`ctc_nll`) and its gradient (`ctc_nll_grad`),
with PyTorch's CPU kernels' arithmetic: the forward (alpha) and backward (beta) recursions in log space in
the input's dtype, each state's three predecessors combined as log(exp(a1 - m) + exp(a2 - m) + exp(a3 - m))
+ m + log_probs (m their maximum, 0 if all are -inf), the posterior per class log-accumulated over the
states in descending order, and the gradient -exp(posterior + nll - lp) * g: in f32 the rounding of 50
steps is PyTorch's, not an f64 one's. PyTorch's backward adds exp(lp) * g (it assumes log_softmax outputs);
`nn.functional.ctc_loss` adds that term, so that the op's gradient is the true one. The targets and lengths
are params (the caller reads them).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType
from ..errors import ShapeError
from ..shapes import Spec, shape_text
from ._op import Op, Sample
from .composite._common import float_inputs


def _canon(
    log_probs: Spec,
    *rest: Spec,
    targets: tuple = (),
    input_lengths: tuple = (),
    blank: int = 0,
    zero_infinity: bool = False,
) -> dict:
    targets = tuple(tuple(int(c) for c in row) for row in targets)
    input_lengths = tuple(int(n) for n in input_lengths)
    if log_probs.ndim != 3:
        raise ShapeError(f"ctc_nll takes log_probs [T, N, C], got {shape_text(log_probs.shape)}")
    steps, batch, classes = log_probs.shape
    if len(targets) != batch or len(input_lengths) != batch:
        raise ShapeError(
            f"ctc_nll needs {batch} targets and input lengths, got {len(targets)}, {len(input_lengths)}"
        )
    if isinstance(steps, int) and any(not 1 <= n <= steps for n in input_lengths):
        raise ValueError(f"ctc_nll: input lengths must be in [1, {steps}], got {list(input_lengths)}")
    if blank < 0 or (isinstance(classes, int) and blank >= classes):
        raise ValueError(f"ctc_nll: blank {blank} is not a class of [0, {classes})")
    for i, row in enumerate(targets):
        if any(c == blank or c < 0 or (isinstance(classes, int) and c >= classes) for c in row):
            raise ValueError(f"ctc_nll: target {i} has a blank or a class outside [0, {classes})")
    return {
        "targets": targets,
        "input_lengths": input_lengths,
        "blank": blank,
        "zero_infinity": bool(zero_infinity),
    }


def _states(row: tuple, blank: int) -> tuple[np.ndarray, np.ndarray]:
    """The extended target (blank, l1, blank, ..., blank) and where a state may skip from s - 2."""
    ext = np.full(2 * len(row) + 1, blank, dtype=np.int64)
    ext[1::2] = row
    skip = np.zeros(ext.shape, bool)
    skip[2:] = ext[2:] != ext[:-2]
    return ext, skip


def _log_add3(a1: np.ndarray, a2: np.ndarray, a3: np.ndarray) -> np.ndarray:
    """PyTorch's log(exp(a1 - m) + exp(a2 - m) + exp(a3 - m)) + m, in the operands' dtype."""
    m = np.maximum(np.maximum(a1, a2), a3)
    m = np.where(m == -np.inf, m.dtype.type(0), m)
    return np.log(np.exp(a1 - m) + np.exp(a2 - m) + np.exp(a3 - m)) + m


def _alpha(lp: np.ndarray, ext: np.ndarray, skip: np.ndarray, length: int) -> np.ndarray:
    """log alpha [length, S] of one sample, lp [T, C] its log_probs."""
    neg = lp.dtype.type(-np.inf)
    width = ext.size
    la = np.full((length, width), neg, lp.dtype)
    la[0, :2] = lp[0, ext[:2]]
    for t in range(1, length):
        prev = la[t - 1]
        shifted = np.concatenate([[neg], prev[:-1]])
        shifted2 = np.where(skip, np.concatenate([[neg, neg], prev[:-2]])[:width], neg)
        la[t] = _log_add3(prev, shifted, shifted2) + lp[t, ext]
    return la


def _nll_of(la: np.ndarray, n_labels: int) -> np.floating:
    last = la[-1]
    if n_labels == 0:
        return -last[0]
    l1, l2 = last[2 * n_labels], last[2 * n_labels - 1]
    m = max(l1, l2)
    m = last.dtype.type(0) if m == -np.inf else m
    return -(np.log(np.exp(l1 - m) + np.exp(l2 - m)) + m)


def _reference(
    log_probs: np.ndarray, targets: tuple, input_lengths: tuple, blank: int = 0, zero_infinity: bool = False
) -> np.ndarray:
    out = np.empty(log_probs.shape[1], log_probs.dtype)
    with np.errstate(all="ignore"):
        for b, (row, length) in enumerate(zip(targets, input_lengths)):
            ext, skip = _states(row, blank)
            out[b] = _nll_of(_alpha(log_probs[:, b], ext, skip, length), len(row))
    return out


def _grad_reference(
    log_probs: np.ndarray,
    nll: np.ndarray,
    g: np.ndarray,
    targets: tuple,
    input_lengths: tuple,
    blank: int,
    zero_infinity: bool,
) -> np.ndarray:
    grad = np.zeros_like(log_probs)
    with np.errstate(all="ignore"):
        for b, (row, length) in enumerate(zip(targets, input_lengths)):
            if zero_infinity and nll[b] == np.inf:
                continue
            grad[:length, b] = _sample_grad(log_probs[:length, b], nll[b], g[b], row, blank)
    return grad


def _sample_grad(lp: np.ndarray, nll: np.floating, gr: np.floating, row: tuple, blank: int) -> np.ndarray:
    """One sample's -exp(posterior + nll - lp) * gr over its steps, lp [length, C]."""
    ext, skip = _states(row, blank)
    length, width = lp.shape[0], ext.size
    la = _alpha(lp, ext, skip, length)
    neg = lp.dtype.type(-np.inf)
    lb = np.full((length, width), neg, lp.dtype)
    lb[-1, -2:] = lp[-1, ext[-2:]]  # the last blank and the last label (one state: the blank alone)
    ahead = np.zeros(width, bool)  # may go to s + 2: a label unlike the one two states on
    ahead[:-2] = ext[:-2] != ext[2:]
    for t in range(length - 2, -1, -1):
        nxt = lb[t + 1]
        shifted = np.concatenate([nxt[1:], [neg]])
        shifted2 = np.where(ahead, np.concatenate([nxt[2:], [neg, neg]])[:width], neg)
        lb[t] = _log_add3(nxt, shifted, shifted2) + lp[t, ext]
    both = la + lb  # [length, S]
    # the posterior of each class, log-added over its states in descending order (PyTorch's loop): a
    # state's rank among the later states of its class is its round; a round's states are distinct classes
    post = np.full(lp.shape, neg, lp.dtype)
    order = np.arange(width - 1, -1, -1)
    rank = np.array([np.count_nonzero(ext[s + 1 :] == ext[s]) for s in range(width)])
    for r in range(int(rank.max()) + 1):
        states = order[rank[order] == r]
        cls, ab = ext[states], both[:, states]
        cur = post[:, cls]
        m = np.maximum(cur, ab)
        added = np.log(np.exp(cur - m) + np.exp(ab - m)) + m
        post[:, cls] = np.where(cur == neg, ab, np.where(ab == neg, cur, added))
    return -np.exp(post + nll - lp) * gr


def _shape(log_probs: tuple, **_) -> tuple:
    return (log_probs[1],)


def _dtype(log_probs: DType, **_) -> DType:
    return float_inputs(log_probs, what="log_probs")


def _grad_shape(log_probs: tuple, nll: tuple, g: tuple, **_) -> tuple:
    if tuple(nll) != (log_probs[1],) or tuple(g) != (log_probs[1],):
        raise ShapeError(
            f"ctc_nll_grad: nll and g must be [{log_probs[1]}], got {shape_text(nll)}, {shape_text(g)}"
        )
    return log_probs


def _vjp(g, out, log_probs, **params):
    return (ctc_nll_grad(log_probs, out, g, **params),)


def _refused(*_, **__):
    raise NotImplementedError("the derivative of ctc_loss's gradient is not implemented, as in PyTorch")


def _samples(rng: np.random.Generator, impossible: bool = False) -> list[Sample]:
    """Log-softmax inputs; with `impossible`, also targets too long for their inputs (an infinite loss,
    whose finite differences would be NaN: the gradient op's samples only)."""

    def lp(t: int, n: int, c: int) -> np.ndarray:
        x = rng.standard_normal((t, n, c))
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    out = [
        Sample((lp(6, 2, 4),), {"targets": ((1, 2, 2), (3,)), "input_lengths": (6, 4)}),
        Sample((lp(5, 3, 3),), {"targets": ((1, 1), (), (2, 1, 2)), "input_lengths": (5, 3, 5), "blank": 0}),
        Sample((lp(4, 2, 5),), {"targets": ((0, 3), (4, 4)), "input_lengths": (4, 4), "blank": 2}),
        Sample((lp(3, 1, 3),), {"targets": ((1, 1),), "input_lengths": (3,), "zero_infinity": True}),
    ]
    if impossible:
        for zero_infinity in (False, True):
            params = {"targets": ((1, 1), (2,)), "input_lengths": (2, 2), "zero_infinity": zero_infinity}
            out.append(Sample((lp(2, 2, 3),), params))
    return out


ctc_nll = Op(
    "ctc_nll",
    shape=_shape,
    dtype=_dtype,
    params=_canon,
    reference=_reference,
    vjp=_vjp,
    samples=_samples,
    exact=False,
    doc="-log p(target | log_probs) per sample, by PyTorch's log-space alpha recursion (inf: no alignment); "
    "zero_infinity only makes the gradient of an infinite sample 0 (PyTorch's).",
)

ctc_nll_grad = Op(
    "ctc_nll_grad",
    shape=_grad_shape,
    dtype=lambda log_probs, nll, g, **_: float_inputs(log_probs, nll, g, what="log_probs, nll and g"),
    params=_canon,
    reference=_grad_reference,
    vjp=_refused,
    samples=lambda rng: [
        Sample(
            (s.args[0], _reference(s.args[0], **s.params), rng.uniform(-1, 1, s.args[0].shape[1])), s.params
        )
        for s in _samples(rng, impossible=True)
    ],
    exact=False,
    doc="ctc_nll's gradient for the loss's gradient g: -posterior * g per sample over its input length, "
    "0 after it (and, with zero_infinity, for an infinite sample; NaN without), in PyTorch's arithmetic.",
)
# PyTorch records the gradient but cannot differentiate it: a second derivative of ctc_loss is refused
ctc_nll_grad.no_derivative = "the derivative of ctc_loss's gradient is not implemented, as in PyTorch"
ctc_nll.first_order_only = "its gradient, ctc_nll_grad, has no derivative (as PyTorch's ctc_loss)"
