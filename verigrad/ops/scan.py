"""Running sums and products along one axis: cumsum, cumprod, logcumsumexp; and the running maximum and
minimum, cummax and cummin (the positions by an op of their own, the values gathered from them).

Rounding rule (as the sums' and products'): f16/f32 accumulate in f64 and each output is rounded once to
the input dtype; f64 accumulates in f64; integer and bool inputs give i64.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, i64
from ..errors import DTypeError
from ..shapes import Spec, normalize_axis
from ._op import Op, Sample, no_bf16
from ._samples import uniform
from .binary import eq, where
from .shaping import flip
from .unary import abs as abs_


def _canon(x: Spec, axis: int = 0, dim: int | None = None) -> dict:
    return {"axis": normalize_axis(dim if dim is not None else axis, x.ndim)}


def _running(np_fn, start: float):
    """The running `np_fn` as PyTorch's, whose accumulator starts at `start`: a sum's +0 turns a -0 into
    +0 (NumPy's starts at the first element and keeps it); a 0-d input is returned as it is."""

    def reference(x: np.ndarray, axis: int) -> np.ndarray:
        if x.ndim == 0:
            return x.astype(np.int64) if x.dtype.kind != "f" else x.copy()
        if x.dtype.kind != "f":
            return np_fn(x, axis=axis, dtype=np.int64)
        out = np_fn(x, axis=axis, dtype=np.float64).astype(x.dtype)
        return out + x.dtype.type(start) if start == 0.0 else out

    return reference


def _from_the_end(g, axis):
    """The running sum of g from the last position back to each one."""
    return flip(cumsum(flip(g, axis), axis=axis), axis)


def _vjp(g, out, x, axis):
    """Each input reaches every output from its position on: the running sum of g from the end."""
    if x.ndim == 0:
        return (g,)
    return (_from_the_end(g, axis),)


def _running_op(name: str, np_fn, start: float, vjp, samples, doc: str) -> Op:
    return Op(
        name,
        shape=lambda x, axis: x,
        dtype=lambda x, axis: (no_bf16(x), x if x.is_float else i64)[1],
        params=_canon,
        positional=("axis",),
        reference=_running(np_fn, start),
        vjp=vjp,
        samples=samples,
        torch=lambda t, x, axis: getattr(t, name)(x, dim=axis),
        exact=False,
        doc=doc,
    )


_SHAPES = [((5,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 0, 3), 2), ((), 0)]

cumsum = _running_op(
    "cumsum",
    np.cumsum,
    0.0,
    _vjp,
    lambda rng: [Sample((uniform(rng, s),), {"axis": a}) for s, a in _SHAPES],
    "Running sums along `axis`: out[..., i, ...] = x[..., 0, ...] + ... + x[..., i, ...].",
)


def _cumprod_vjp(g, out, x, axis):
    """d out_i / d x_k is the product of x_j, j <= i, but x_k (i >= k): out_i / x_k where x_k is not zero;
    at the first zero, the running product of x with that zero made one; at a later zero, 0 (its product
    holds the first). The second derivative is exact where a row holds one zero at most (as prod's)."""
    if x.ndim == 0:
        return (g,)
    zero = eq(x, 0)
    first = zero & eq(cumsum(zero, axis=axis), 1)
    without_first = cumprod(where(first, 1, x), axis=axis)
    others = _from_the_end(g * out, axis) / where(zero, 1, x)
    return (where(first, _from_the_end(g * without_first, axis), where(zero, 0, others)),)


def _cumprod_samples(rng: np.random.Generator) -> list[Sample]:
    zeros = uniform(rng, (3, 5))
    zeros[0, 2] = zeros[2, 0] = 0.0  # a zero inside a row and at its start
    return [Sample((uniform(rng, s),), {"axis": a}) for s, a in _SHAPES] + [Sample((zeros,), {"axis": 1})]


cumprod = _running_op(
    "cumprod",
    np.cumprod,
    1.0,
    _cumprod_vjp,
    _cumprod_samples,
    "Running products along `axis`: out[..., i, ...] = x[..., 0, ...] * ... * x[..., i, ...].",
)


def _running_extreme_reference(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """The index of the running maximum (minimum) along `axis`: a later equal value, and any NaN, takes
    over (PyTorch's); after a NaN only another NaN does."""
    moved = np.moveaxis(x, axis, 0)
    out = np.zeros(moved.shape, dtype=np.int64)
    if moved.shape[0] == 0:
        return np.moveaxis(out, 0, axis)
    best, at = moved[0].copy(), np.zeros(moved.shape[1:], dtype=np.int64)
    for i in range(moved.shape[0]):
        value = moved[i]
        with np.errstate(invalid="ignore"):
            takes = (value >= best if largest else value <= best) | np.isnan(value)
        if i:
            best, at = np.where(takes, value, best), np.where(takes, i, at)
        out[i] = at
    return np.moveaxis(out, 0, axis)


running_extreme_index = Op(
    "running_extreme_index",
    shape=lambda x, axis, largest: x,
    dtype=lambda x, axis, largest: (no_bf16(x), i64)[1],
    params=lambda x, axis, largest=True: {"axis": normalize_axis(axis, x.ndim), "largest": bool(largest)},
    reference=_running_extreme_reference,
    samples=lambda rng: (
        [
            Sample((np.array([[1.0, 3.0, 3.0, 2.0, np.nan, 7.0, np.nan]]),), {"axis": 1, "largest": largest})
            for largest in (True, False)
        ]
        + [Sample((uniform(rng, (3, 4)),), {"axis": 0, "largest": True})]
    ),
    torch=lambda t, x, axis, largest: (t.cummax if largest else t.cummin)(x, dim=axis).indices,
    differentiable=False,
    exact=True,
    doc="The index of the running maximum (or minimum) of x along `axis`; ties and NaN as PyTorch's "
    "cummax/cummin.",
)


# logcumsumexp -------------------------------------------------------------------------------------
def _logcumsumexp_dtype(x: DType, axis: int) -> DType:
    if not x.is_float or x.name == "bf16":
        raise DTypeError(f"logcumsumexp needs an f16, f32 or f64 tensor, got {x.name}; cast it first")
    return x


def _logcumsumexp_reference(x: np.ndarray, axis: int) -> np.ndarray:
    """log(cumsum(exp(x))) as running logaddexp in f64, rounded once (no overflow: -inf stays -inf); a
    -0 becomes +0, as PyTorch's running logaddexp from -inf makes it (a 0-d input is returned as it is)."""
    if x.ndim == 0:
        return x.copy()
    return np.logaddexp.accumulate(x.astype(np.float64), axis=axis).astype(x.dtype) + x.dtype.type(0.0)


def _reverse_logcumsumexp(v, axis: int):
    """log of the running sum of exp(v) from the last position back to each one."""
    return flip(logcumsumexp(flip(v, axis), axis=axis), axis)


def _logcumsumexp_vjp(g, out, x, axis):
    """d out_i / d x_k = exp(x_k - out_i) for i >= k, so x_k's gradient is exp(x_k) times the sum of
    g_i exp(-out_i) from k on: summed in log space, the positive and the negative part of g apart, as
    PyTorch's, so that no exp overflows (the log of a part's zeros is the dtype's lowest, not -inf, which
    -inf - -inf would make NaN)."""
    if x.ndim == 0:
        return (g,)
    lowest = float(np.finfo(g.dtype.np).min)

    def part(positive):
        log_g = where(positive, where(positive, abs_(g), 1.0).log(), lowest)
        return (x + _reverse_logcumsumexp(log_g - out, axis)).exp()

    return (part(g > 0) - part(g < 0),)


logcumsumexp = Op(
    "logcumsumexp",
    shape=lambda x, axis: x,
    dtype=_logcumsumexp_dtype,
    params=_canon,
    positional=("axis",),
    reference=_logcumsumexp_reference,
    vjp=_logcumsumexp_vjp,
    samples=lambda rng: (
        [Sample((uniform(rng, s),), {"axis": a}) for s, a in _SHAPES]
        + [Sample((np.array([[-3.0, 0.5, 80.0, -5.0], [1.0, -40.0, 2.0, 3.0]]),), {"axis": 1})]
    ),
    torch=lambda t, x, axis: t.logcumsumexp(x, dim=axis),
    exact=False,
    doc="log(cumsum(exp(x))) along `axis`, without overflow: out[i] = logaddexp(out[i - 1], x[i]).",
)
