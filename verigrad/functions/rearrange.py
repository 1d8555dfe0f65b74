"""Tensors cut, tiled, rolled and re-axed by position, as PyTorch's: split / chunk, repeat,
repeat_interleave, roll, narrow, unbind, movedim, unflatten, broadcast_tensors, meshgrid, rot90, diff,
and Tensor.unfold's sliding windows."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import modes, versions
from ..dtypes import bool_
from ..errors import ShapeError
from ..ops.creation import arange, from_numpy
from ..ops.index import take
from ..ops.movement import concat, permute
from ..ops.shaping import flip, getitem, unsqueeze
from ..shapes import broadcast, normalize_axis, plain_int, shape_text
from ..tensor import Tensor, describe
from .statistics import pick


def concrete_size(x: Tensor, axis: int, name: str) -> int:
    size = x.shape[axis]
    if not isinstance(size, int):
        reason = f"{name} needs a concrete size along axis {axis}, got {size}"
        raise ShapeError(reason).locate(name, (describe(x),))
    return size


def split(x: Tensor, split_size_or_sections: int | Sequence[int], axis: int = 0, *, dim: int | None = None):
    """Views of consecutive pieces along `axis`: of `split_size` each (the last may be shorter), or of
    the given sizes, which must add up to the axis' size."""
    axis = normalize_axis(pick(axis, dim), x.ndim)
    size = concrete_size(x, axis, "split")
    split_size_or_sections = plain_int(split_size_or_sections)
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0:
            raise ValueError(f"split needs a positive size, got {step}")
        sizes = [min(step, size - start) for start in range(0, size, step)] or [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if builtins.min(sizes, default=0) < 0 or builtins.sum(sizes) != size:
            raise ValueError(f"split sizes {sizes} must be non-negative and add up to {size}")
    lead = (slice(None),) * axis
    pieces, start = [], 0
    for n in sizes:
        pieces.append(getitem(x, (*lead, slice(start, start + n))))
        start += n
    return versions.multi_output(
        tuple(pieces), "Split" if isinstance(split_size_or_sections, int) else "SplitWithSizes"
    )


def chunk(x: Tensor, chunks: int, axis: int = 0, *, dim: int | None = None):
    """`chunks` views along `axis` (fewer when the size does not allow so many), each of
    ceil(size / chunks) elements but the last, as PyTorch's chunk."""
    chunks = plain_int(chunks)
    if not isinstance(chunks, int) or chunks <= 0:
        raise ValueError(f"chunk needs a positive number of chunks, got {chunks}")
    axis = normalize_axis(pick(axis, dim), x.ndim)
    size = concrete_size(x, axis, "chunk")
    return split(x, builtins.max(1, -(-size // chunks)), axis)


def repeat(x: Tensor, *sizes: Any) -> Tensor:
    """PyTorch's repeat: x tiled sizes[i] times along axis i (leading sizes add new axes)."""
    if len(sizes) == 1 and isinstance(sizes[0], list | tuple):
        sizes = tuple(sizes[0])
    if len(sizes) < x.ndim:
        raise ShapeError(
            f"repeat needs a count for each of the {x.ndim} axes of {shape_text(x.shape)}, got {len(sizes)}"
        )
    shape = (1,) * (len(sizes) - x.ndim) + tuple(x.shape)
    spread = x.reshape(tuple(d for s in shape for d in (1, s)))  # a unit axis before each axis
    tiled = spread.broadcast_to(tuple(d for r, s in zip(sizes, shape) for d in (r, s)))
    out = tiled.reshape(tuple(r * s for r, s in zip(sizes, shape)))
    if all(r == 1 or s == 1 for r, s in zip(sizes, shape)):
        out = out.clone()  # the reshape was a view of x (PyTorch's repeat always copies)
    return out


def repeat_interleave(
    x: Tensor,
    repeats: int,
    axis: int | None = None,
    *,
    dim: int | None = None,
    output_size: int | None = None,
) -> Tensor:
    """Each element repeated `repeats` times in place along `axis` ([a, b] -> [a, a, b, b]); with no
    axis, of the flattened tensor. A tensor of counts, one per element (or one for all), repeats each
    its own number of times (eager only: the size depends on the counts). `output_size`, when given, must
    be the result's length along the axis (PyTorch's hint, checked)."""
    out = _repeated(x, repeats, pick(axis, dim))
    if output_size is not None:
        along = normalize_axis(pick(axis, dim), x.ndim) if pick(axis, dim) is not None else 0
        if out.shape[along] != output_size:
            length = out.shape[along]
            raise ValueError(
                f"repeat_interleave: output_size {output_size!r} is not the result's length {length}"
            )
    return out


def _repeated(x: Tensor, repeats: Any, axis: int | None) -> Tensor:
    """repeat_interleave's result."""
    if isinstance(repeats, Tensor) and repeats.numel() != 1:
        return _repeat_each(x, repeats, axis)
    if isinstance(repeats, Tensor):
        repeats = int(repeats.item())
    repeats = plain_int(repeats)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 0:
        raise ValueError(f"repeat_interleave takes a whole number of repeats >= 0, got {repeats!r}")
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = normalize_axis(axis, x.ndim)
    spread = unsqueeze(x, axis + 1)
    shape = (*x.shape[: axis + 1], repeats, *x.shape[axis + 1 :])
    merged = (*x.shape[:axis], x.shape[axis] * repeats, *x.shape[axis + 1 :])
    return spread.broadcast_to(shape).reshape(merged)


def _repeat_each(x: Tensor, repeats: Tensor, axis: int | None) -> Tensor:
    """x's entries along `axis` each repeated its own count of times: a take of the repeated positions."""
    modes.eager_only("repeat_interleave with a tensor of counts")
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = normalize_axis(axis, x.ndim)
    counts = repeats.numpy()
    if repeats.dtype.kind != "i" or counts.ndim != 1 or len(counts) != x.shape[axis] or (counts < 0).any():
        raise ValueError(
            f"repeat_interleave: the counts must be {x.shape[axis]} whole numbers >= 0 (one per entry along "
            f"dim {axis}), got {describe(repeats)}"
        )
    positions = np.repeat(np.arange(len(counts)), counts).astype(np.int64)
    return take(x, from_numpy(positions), axis=axis)


def roll(x: Tensor, shifts: Any, dims: Any = None) -> Tensor:
    """x shifted cyclically by `shifts` along `dims` (the flattened x without dims), as PyTorch's."""
    if dims is None:
        return roll(x.reshape(-1), shifts, 0).reshape(x.shape)
    pairs = list(zip(shifts, dims)) if isinstance(shifts, Sequence) else [(shifts, dims)]
    for shift, dim in pairs:
        axis = normalize_axis(dim, x.ndim)
        size = x.shape[axis]
        if not isinstance(size, int):
            raise ShapeError(f"roll needs a concrete size along dim {dim}, got {size}")
        cut = size - shift % size if size else 0
        if cut not in (0, size):
            head = (slice(None),) * axis
            x = concat([getitem(x, (*head, slice(cut, None))), getitem(x, (*head, slice(0, cut)))], axis=axis)
    return x


def narrow(x: Tensor, dim: int, start: int, length: int) -> Tensor:
    """x[..., start:start + length, ...] along `dim` (a negative start counts from the end), as a view;
    a piece that does not fit is refused, as PyTorch's."""
    axis = normalize_axis(dim, x.ndim)
    size, start, length = x.shape[axis], int(start), int(length)
    if not isinstance(size, int):  # a symbol: the slice as given
        return getitem(x, (*(slice(None),) * axis, slice(start, start + length)))
    if not -size <= start <= size:
        raise IndexError(f"narrow: start {start} is out of range for a dimension of size {size}")
    start = start % size if start < 0 else start
    if length < 0 or start + length > size:
        raise ValueError(f"narrow: start {start} + length {length} does not fit a dimension of size {size}")
    return getitem(x, (*(slice(None),) * axis, slice(start, start + length)))


def select(x: Tensor, dim: int, index: int) -> Tensor:
    """x[..., index, ...] along `dim`, that axis removed (a negative index counts from the end), as a view:
    PyTorch's select."""
    axis = normalize_axis(dim, x.ndim)
    size = x.shape[axis]
    if isinstance(size, int) and not -size <= int(index) < size:
        raise IndexError(
            f"select(): index {index} out of range for tensor of size {list(x.shape)} at dimension {axis}"
        )
    return getitem(x, (*(slice(None),) * axis, int(index)))


def unbind(x: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices of x along `dim`, that axis removed."""
    axis = normalize_axis(dim, x.ndim)
    if not isinstance(x.shape[axis], int):
        raise ShapeError(f"unbind needs a concrete size along dim {dim}, got {x.shape[axis]}")
    pieces = tuple(getitem(x, (*(slice(None),) * axis, i)) for i in range(x.shape[axis]))
    return versions.multi_output(pieces, "Unbind")


def movedim(x: Tensor, source: int | Sequence[int], destination: int | Sequence[int]) -> Tensor:
    """x with its dimensions `source` moved to the places `destination`, the others in their order."""
    source, destination = plain_int(source), plain_int(destination)
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise ValueError(f"movedim: {len(src)} source dimensions but {len(dst)} destinations")
    src, dst = [normalize_axis(a, x.ndim) for a in src], [normalize_axis(a, x.ndim) for a in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError(f"movedim: repeated dimensions in {source} or {destination}")
    rest = iter(a for a in range(x.ndim) if a not in src)
    placed = dict(zip(dst, src))
    return x.permute(*(placed[i] if i in placed else next(rest) for i in range(x.ndim)))


def unflatten(x: Tensor, dim: int, sizes: Sequence[Any]) -> Tensor:
    """x with dimension `dim` split into `sizes` (one of them may be -1)."""
    axis = normalize_axis(dim, x.ndim)
    return x.reshape(*x.shape[:axis], *sizes, *x.shape[axis + 1 :])


def broadcast_tensors(*tensors: Any) -> tuple[Tensor, ...]:
    """The tensors broadcast to their common shape (a number is refused, as PyTorch's TypeError)."""
    for k, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"broadcast_tensors: expected Tensor as element {k}, but got {type(t).__name__}")
    shape = broadcast(*(t.shape for t in tensors))
    return tuple(t if tuple(t.shape) == tuple(shape) else t.broadcast_to(shape) for t in tensors)


def meshgrid(*tensors: Tensor, indexing: str = "ij") -> tuple[Tensor, ...]:
    """Coordinate grids of 1-D (or 0-d, one-element) tensors: "ij" (PyTorch's default) gives shape
    (len0, len1, ...), "xy" swaps the first two."""
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    if builtins.any(t.ndim > 1 for t in tensors):
        raise ShapeError(f"meshgrid takes 0-d or 1-d tensors, got {', '.join(describe(t) for t in tensors)}")
    if len({t.dtype for t in tensors}) > 1:
        raise TypeError(f"meshgrid needs tensors of one dtype, got {', '.join(describe(t) for t in tensors)}")
    tensors = tuple(t.reshape(-1) for t in tensors)
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) > 1:
        order[0], order[1] = 1, 0
    shape = tuple(tensors[k].shape[0] for k in order)
    grids = []
    for k, t in enumerate(tensors):
        axis = order.index(k)
        grids.append(t.reshape(tuple(-1 if i == axis else 1 for i in range(len(shape)))).broadcast_to(shape))
    return tuple(grids)


def rot90(x: Tensor, k: int = 1, dims: Sequence[int] = (0, 1)) -> Tensor:
    """x rotated by 90 degrees k times in the plane of `dims`, from the first axis towards the second."""
    if len(dims) != 2:
        raise ValueError(f"rot90 takes two dims, got {tuple(dims)}")
    d0, d1 = (normalize_axis(d, x.ndim) for d in dims)
    if d0 == d1:
        raise ValueError(f"rot90 needs two different dims, got {tuple(dims)}")
    k %= 4
    if k == 0:
        return x
    if k == 2:
        return flip(flip(x, d0), d1)
    if k == 1:
        return flip(x, d1).transpose(d0, d1)
    return flip(x.transpose(d0, d1), d1)


def diff(
    x: Tensor, n: int = 1, dim: int = -1, prepend: Tensor | None = None, append: Tensor | None = None
) -> Tensor:
    """The n-th forward difference along `dim`, out[i] = x[i + 1] - x[i] applied n times, after
    `prepend` and `append` are joined to x along it; for bool tensors x[i + 1] != x[i]. As PyTorch's, n = 0
    is a copy of x alone (prepend and append unused)."""
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"diff takes a whole number n >= 0, got {n!r}")
    axis = normalize_axis(dim, x.ndim)
    if n == 0:
        return x.cast(x.dtype)
    parts = [t for t in (prepend, x, append) if t is not None]
    if len(parts) > 1:
        x = concat(parts, axis=axis)
    head = (slice(None),) * axis
    for _ in range(n):
        after, before = getitem(x, (*head, slice(1, None))), getitem(x, (*head, slice(None, -1)))
        x = after != before if x.dtype is bool_ else after - before
    return x


def unfold(x: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Every window of `size` along `dimension`, `step` apart, as PyTorch's Tensor.unfold: that axis
    becomes the windows' count and a last axis of `size` holds each window (a take of the windows'
    positions, so overlapping windows add up their gradients)."""
    if x.ndim == 0:  # PyTorch's: a 0-d tensor as a vector of one, its windows' axis dropped
        normalize_axis(dimension, 0)
        return unfold(x.reshape(1), 0, size, step).reshape(size)
    axis = normalize_axis(dimension, x.ndim)
    length = concrete_size(x, axis, "unfold")
    if not isinstance(step, int) or step <= 0:
        raise ValueError(f"unfold: step is {step} but must be > 0")
    if not isinstance(size, int) or not 0 <= size <= length:
        raise ValueError(f"unfold: the size along dimension {axis} is {length} but the window size is {size}")
    count = (length - size) // step + 1
    starts = (arange(0, count) * step).reshape(count, 1)
    windows = take(x, starts + arange(0, size).reshape(1, size), axis=axis)  # [..., count, size, ...]
    rest = range(axis + 2, windows.ndim)
    return permute(windows, axes=(*range(axis + 1), *rest, axis + 1))
