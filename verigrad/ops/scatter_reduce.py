"""PyTorch's scatter_reduce: each src[..., j, ...] reduced into x at the position index[..., j, ...] names
along an axis, by "sum", "prod", "mean", "amax" or "amin", with x's own value among the reduced ones
(`include_self`) or not. An op with a NumPy reference (floats reduce in f64 and round once) and a VJP
written with ops: the gradient of amax/amin is shared evenly by the values equal to the result, and
prod's goes through zeros, as PyTorch's.
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np

from ..errors import DTypeError, ShapeError
from ..shapes import Spec, normalize_axis, shape_text
from ..tensor import Tensor
from ._op import Op, Sample, no_bf16
from ._samples import uniform
from .binary import eq, where
from .checks import checked
from .index import _positions, gather, gather_grad
from .movement import pad
from .shaping import getitem

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_UFUNCS = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}
_IDENTITY = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "amax": -np.inf, "amin": np.inf}


def spread(values: Tensor, index: Tensor, axis: int, shape: tuple) -> Tensor:
    """Zeros of `shape` with values[..., j, ...] (values cut to index's shape) added at index[..., j, ...]
    along `axis`."""
    if tuple(values.shape) != tuple(index.shape):
        values = getitem(values, tuple(slice(0, n) for n in index.shape))
    added = gather_grad(values, index, axis=axis, size=shape[axis])
    widths = tuple((0, n - m) for n, m in zip(shape, added.shape))
    return added if not builtins.any(w for _, w in widths) else pad(added, widths=widths, value=0.0)


def _canon(x: Spec, idx: Spec, src: Spec, axis: int, reduce: str, include_self: bool = True) -> dict:
    if reduce not in REDUCTIONS:
        raise ValueError(f"scatter_reduce: reduce must be one of {', '.join(REDUCTIONS)}, got {reduce!r}")
    axis = normalize_axis(axis, x.ndim)
    if (
        tuple(idx.shape) != tuple(src.shape)
        or idx.ndim != x.ndim
        or builtins.any(
            d != axis and isinstance(i, int) and isinstance(n, int) and i > n
            for d, (i, n) in enumerate(zip(idx.shape, x.shape))
        )
    ):
        raise ShapeError(
            f"scatter_reduce: the index {shape_text(idx.shape)} must be shaped as src "
            f"{shape_text(src.shape)}, of the input's rank and no larger than {shape_text(x.shape)} but "
            f"along dim {axis}"
        )
    return {"axis": axis, "reduce": reduce, "include_self": bool(include_self)}


def _dtype(x: Any, idx: Any, src: Any, **_: Any) -> Any:
    no_bf16(x)
    if idx.kind != "i" or src is not x:
        raise DTypeError(
            f"scatter_reduce takes an integer index and src of the input's dtype, got {idx.name}, {src.name}"
        )
    return x


def _touched(x: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    hit = np.zeros(x.shape, dtype=bool)
    hit[_positions(idx, axis)] = True
    return hit


def _reference(x: np.ndarray, idx: np.ndarray, src: np.ndarray, axis: int, reduce: str, include_self: bool):
    floats = x.dtype.kind == "f"
    acc = x.astype(np.float64 if floats else np.int64)
    hit, where_ = _touched(x, idx, axis), _positions(idx, axis)
    if not include_self:
        acc[hit] = (
            _IDENTITY[reduce]
            if floats or reduce in ("sum", "mean", "prod")
            else (np.iinfo(np.int64).min if reduce == "amax" else np.iinfo(np.int64).max)
        )
    _UFUNCS[reduce].at(acc, where_, src.astype(acc.dtype))
    if reduce == "mean":
        counts = np.full(x.shape, 1 if include_self else 0, dtype=np.int64)
        np.add.at(counts, where_, 1)
        counts = np.maximum(counts, 1)
        acc = acc / counts if floats else np.floor_divide(acc, counts)
    return acc.astype(x.dtype)


def _cut(t: Tensor, idx: Tensor) -> Tensor:
    """t cut to idx's shape (off the axis, an index may be smaller than the input)."""
    if tuple(t.shape) == tuple(idx.shape):
        return t
    return getitem(t, tuple(slice(0, n) for n in idx.shape))


def _cut_off_axis(t: Tensor, idx: Tensor, axis: int) -> Tensor:
    """t cut to idx's shape on every axis but `axis`, where idx's values index t's whole length."""
    keep = tuple(slice(None) if d == axis else slice(0, n) for d, n in enumerate(idx.shape))
    return t if all(k == slice(None) or k.stop == m for k, m in zip(keep, t.shape)) else getitem(t, keep)


def _vjp(g, out, x, idx, src, axis, reduce, include_self):
    hit = spread(idx * 0 + 1, idx, axis, tuple(x.shape)) > 0  # the positions some src reaches
    at = lambda t: gather(_cut_off_axis(t, idx, axis), idx, axis=axis)  # t's values where src went
    if reduce in ("sum", "mean"):
        counts = spread(src * 0 + 1, idx, axis, tuple(x.shape)) + (1 if include_self else 0)
        share = g / where(counts > 0, counts, 1) if reduce == "mean" else g
        gx = where(hit, share if include_self else 0, g)
        return gx, None, at(share)
    if reduce in ("amax", "amin"):
        # PyTorch's share counts x where it equals the result even without include_self (x then gets none)
        self_in, src_in = eq(x, out), eq(src, at(out))
        ties = self_in.cast(g.dtype) + spread(src_in.cast(g.dtype), idx, axis, tuple(x.shape))
        share = g / where(ties > 0, ties, 1)
        gx = where(self_in, share, 0)
        return (gx if include_self else where(hit, 0, gx)), None, where(src_in, at(share), 0)
    # prod: x's factor is the product of the srcs; a src's, the rest of the product without it
    from_src = OP(x * 0 + 1, idx, src, axis=axis, reduce="prod", include_self=True)
    gx = where(hit, g * from_src if include_self else 0, g)
    zero = eq(src, 0)
    zeros_at = at(spread(zero.cast(g.dtype), idx, axis, tuple(x.shape)))
    nonzero = at(OP(x * 0 + 1, idx, where(zero, 1, src), axis=axis, reduce="prod", include_self=True))
    others = where(
        zero, where(zeros_at == 1, nonzero, 0), where(zeros_at == 0, nonzero / where(zero, 1, src), 0)
    )
    own = at(g * x) if include_self else at(g)
    return gx, None, own * others


def _samples(rng: np.random.Generator) -> list[Sample]:
    """Random values (ties and zeros, where the gradient is shared or goes through a zero, are held to
    PyTorch's in the parity suite: finite differences do not apply there)."""
    idx = np.array([[0, 2, 2, 1], [1, 1, 0, 1]])
    out = []
    for reduce in REDUCTIONS:
        for include_self in (True, False):
            params = {"axis": 1, "reduce": reduce, "include_self": include_self}
            out.append(Sample((uniform(rng, (2, 3)), idx, uniform(rng, (2, 4))), params))
    return out


def _torch(t, x, idx, src, axis, reduce, include_self):
    return t.scatter_reduce(x, axis, idx, src, reduce, include_self=include_self)


OP = Op(
    "scatter_reduce",
    shape=lambda x, idx, src, **_: x,
    dtype=_dtype,
    params=_canon,
    positional=("axis", "reduce", "include_self"),
    reference=_reference,
    vjp=_vjp,
    samples=_samples,
    torch=_torch,
    exact=False,
    doc="x with each src[..., j, ...] reduced ('sum', 'prod', 'mean', 'amax', 'amin') into the position "
    "index[..., j, ...] names along `axis`; x's own value among them with include_self (PyTorch's).",
)


def scatter_reduce(
    x: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """PyTorch's scatter_reduce (src cut to the index's shape, as PyTorch reads it); a position outside
    [0, size) along `dim` raises IndexError, eagerly and compiled alike (`check_index`)."""
    if not isinstance(index, Tensor) or not isinstance(src, Tensor):
        raise TypeError("scatter_reduce takes an index tensor and a src tensor")
    if isinstance(x, Tensor) and x.ndim == 0 and index.ndim == 0 and src.ndim <= 1:
        # a 0-d x is one position, as in PyTorch: reduced as a vector of one
        normalize_axis(dim, 1)
        one = scatter_reduce(
            x.reshape(1), 0, index.reshape(1), src.reshape(-1), reduce, include_self=include_self
        )
        return one.reshape(())
    if isinstance(x, Tensor) and x.ndim and index.dtype.kind == "i":
        index = checked(index, x.shape[normalize_axis(dim, x.ndim)], "scatter_reduce")
    return OP(x, index, _cut(src, index), axis=dim, reduce=reduce, include_self=include_self)
