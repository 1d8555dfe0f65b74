"""aten's segment helpers written with the ops: `segment_reduce` (a reduction over consecutive runs of
an axis, the runs given by lengths or offsets) and `_chunk_cat` (each tensor cut in chunks along an axis,
padded with zeros, the chunks of all tensors laid side by side)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..dtypes import i64
from ..errors import ShapeError
from ..ops.creation import full, tensor, zeros
from ..ops.movement import concat
from ..shapes import normalize_axis
from ..tensor import Tensor, describe
from .indexing import index_select

REDUCTIONS = ("sum", "mean", "max", "min", "prod")


def _lengths(
    name: str, data: Tensor, axis: int, lengths: Tensor | None, offsets: Tensor | None, unsafe: bool
) -> np.ndarray:
    """The runs' lengths [*batch, runs], checked as PyTorch's: one of lengths or offsets, whose last axis
    is `axis` of data, non-negative, covering the axis (unless unsafe)."""
    if (lengths is None) == (offsets is None):
        raise ValueError(f"{name}: give exactly one of lengths= and offsets=")
    given = lengths if lengths is not None else offsets
    if given.ndim != axis + 1 or tuple(given.shape[:axis]) != tuple(data.shape[:axis]):
        raise ShapeError(
            f"{name}: expected axis {axis} to be the last axis of lengths/offsets, with the sizes of data "
            f"before it, got {describe(given)} for data {describe(data)}"
        )
    runs = given.numpy().astype(np.int64)
    if offsets is not None:
        runs = np.diff(runs, axis=-1)
    if not unsafe:
        if (runs < 0).any():
            raise ValueError(f"{name}: lengths must be non-negative, got {runs.tolist()}")
        if (runs.sum(-1) != int(data.shape[axis])).any():
            size = int(data.shape[axis])
            raise ShapeError(f"{name}: the lengths must sum to the {size} entries of axis {axis}")
    return runs


def segment_reduce(
    data: Tensor,
    reduce: str,
    *,
    lengths: Tensor | None = None,
    indices: Tensor | None = None,
    offsets: Tensor | None = None,
    axis: int = 0,
    unsafe: bool = False,
    initial: float | None = None,
) -> Tensor:
    """data reduced over consecutive runs along `axis` (PyTorch's segment_reduce; lengths or offsets
    [*data.shape[:axis], runs]): an empty run answers `initial`, else the reduction's identity (mean:
    NaN); `initial` takes part in every run's reduction. max and min share a run's gradient among its
    tied entries."""
    if reduce not in REDUCTIONS:
        raise ValueError(f"segment_reduce: reduce must be one of {', '.join(REDUCTIONS)}, got {reduce!r}")
    if indices is not None:
        raise NotImplementedError("segment_reduce: indices= is not supported (PyTorch's is not either)")
    axis = normalize_axis(axis, data.ndim)
    runs = _lengths("segment_reduce", data, axis, lengths, offsets, unsafe)
    batch, rest = tuple(int(n) for n in data.shape[:axis]), tuple(data.shape[axis + 1 :])
    size, count = int(data.shape[axis]), runs.shape[-1]
    runs = runs.reshape(-1, count)
    width = max(int(runs.max(initial=0)), 1)
    start = np.cumsum(runs, axis=-1) - runs
    j = np.arange(width)
    inside = j < runs[..., None]
    # row b's entries at b * (size + 1) + position, its padding at the row's last entry
    base = (np.arange(runs.shape[0]) * (size + 1))[:, None, None]
    positions = base + np.where(inside, start[..., None] + j, size)
    identity = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}[reduce]
    x = data.reshape(-1, size, *rest)
    padded = concat([x, full((x.shape[0], 1, *rest), identity, dtype=x.dtype)], axis=1)
    flat = padded.reshape(-1, *rest)
    rows = index_select(flat, 0, tensor(positions.reshape(-1), dtype=i64))
    rows = rows.reshape(*batch, count, width, *rest)
    if reduce in ("sum", "mean"):
        out = rows.sum(axis + 1)
    elif reduce == "prod":
        out = rows.prod(axis + 1)
    else:
        out = rows.amax(axis + 1) if reduce == "max" else rows.amin(axis + 1)
    if initial is not None:
        init = full((), initial, dtype=out.dtype)
        if reduce in ("sum", "mean"):
            out = out + init
        elif reduce == "prod":
            out = out * init
        else:
            keep = out >= init if reduce == "max" else out <= init
            out = out.where(keep, init)  # a tie keeps the run's entries (their gradient, as PyTorch's)
    if reduce == "mean":
        n = tensor(runs.reshape(*batch, count, *[1] * len(rest)), dtype=out.dtype)
        empty = full((), math.nan if initial is None else initial, dtype=out.dtype)
        out = (out / n.clamp(min=1)).where(n > 0, empty)
    return out


def _chunk_cat(tensors: Sequence[Tensor], dim: int, num_chunks: int) -> Tensor:
    """Each tensor cut in `num_chunks` chunks along `dim` (padded with zeros to a multiple), each chunk
    flattened past `dim`, and the tensors' chunks concatenated: [*lead, num_chunks, total] (aten's)."""
    if isinstance(tensors, Tensor) or not isinstance(tensors, Sequence) or not tensors:
        raise ValueError(f"_chunk_cat expects a non-empty sequence of tensors, got {describe(tensors)}")
    if not isinstance(num_chunks, int) or num_chunks < 1:
        raise ValueError(f"_chunk_cat: num_chunks must be a positive int, got {num_chunks!r}")
    first = tensors[0]
    if first.ndim == 0:
        raise ShapeError("_chunk_cat expects non-scalar input tensors")
    dim = normalize_axis(dim, first.ndim)
    lead = tuple(first.shape[:dim])
    pieces = []
    for t in tensors:
        if t.ndim <= dim or tuple(t.shape[:dim]) != lead:
            raise ShapeError(
                f"_chunk_cat: every tensor must share the sizes before dim {dim}, "
                f"got {describe(first)} and {describe(t)}"
            )
        if t.dtype is not first.dtype:
            raise ShapeError(f"_chunk_cat: the tensors must share a dtype, got {first.dtype} and {t.dtype}")
        size = int(t.shape[dim])
        chunk = -(-size // num_chunks)
        if chunk * num_chunks != size:
            tail = (*lead, chunk * num_chunks - size, *t.shape[dim + 1 :])
            t = concat([t, zeros(tail, dtype=t.dtype)], axis=dim)
        pieces.append(t.reshape(*lead, num_chunks, chunk * math.prod(int(n) for n in t.shape[dim + 1 :])))
    return concat(pieces, axis=-1)
