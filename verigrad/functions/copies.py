"""PyTorch's copying variants of its views (`unfold_copy`, `diagonal_copy`, ... : the view's values in a
new tensor), its `*_scatter` functions (a copy of input with a view of it replaced by src: the inverse of
select / slice / diagonal), `diag_embed` and `diagflat`, written with the views and `index_put`."""

from __future__ import annotations

import builtins
from typing import Any

from ..errors import ShapeError
from ..ops.binary import where
from ..ops.creation import arange, zeros
from ..ops.shaping import unsqueeze
from ..shapes import normalize_axis
from ..tensor import Tensor, describe
from .indexing import index_put
from .matrices import diag, diagonal
from .rearrange import movedim, narrow, split, unbind, unfold


def _copied(result: Any) -> Any:
    if isinstance(result, tuple | list):
        return type(result)(r.clone() for r in result)
    return result.clone()


def unfold_copy(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
    return _copied(unfold(input, dimension, size, step))


def diagonal_copy(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    return _copied(diagonal(input, offset, dim1, dim2))


def expand_copy(input: Tensor, size: Any, *, implicit: bool = False) -> Tensor:
    return _copied(input.expand(*size))


def unsqueeze_copy(input: Tensor, dim: int) -> Tensor:
    return _copied(input.unsqueeze(dim))


def squeeze_copy(input: Tensor, dim: Any = None) -> Tensor:
    return _copied(input.squeeze() if dim is None else input.squeeze(dim))


def transpose_copy(input: Tensor, dim0: int, dim1: int) -> Tensor:
    return _copied(input.transpose(dim0, dim1))


def t_copy(input: Tensor) -> Tensor:
    return _copied(input.t())


def permute_copy(input: Tensor, dims: Any) -> Tensor:
    return _copied(input.permute(*dims))


def view_copy(input: Tensor, size: Any) -> Tensor:
    return _copied(input.view(size))


def alias_copy(input: Tensor) -> Tensor:
    return input.clone()


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    return _copied(narrow(input, dim, start, length))


def unbind_copy(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    return _copied(unbind(input, dim))


def split_with_sizes(input: Tensor, split_sizes: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """input split along `dim` into pieces of the given sizes (which must add up to its size)."""
    sizes = list(split_sizes)
    if builtins.sum(sizes) != input.shape[normalize_axis(dim, input.ndim)]:
        raise ShapeError(f"split_with_sizes: sizes {sizes} do not add up to axis {dim} of {describe(input)}")
    return tuple(split(input, sizes, dim))


def split_with_sizes_copy(input: Tensor, split_sizes: Any, dim: int = 0) -> tuple[Tensor, ...]:
    return _copied(split_with_sizes(input, split_sizes, dim))


for _fn in (
    unfold_copy,
    diagonal_copy,
    expand_copy,
    unsqueeze_copy,
    squeeze_copy,
    transpose_copy,
    t_copy,
    permute_copy,
    view_copy,
    alias_copy,
    narrow_copy,
    unbind_copy,
    split_with_sizes_copy,
):
    _fn.__doc__ = f"torch.{_fn.__name__}: {_fn.__name__.removesuffix('_copy')}'s values in a new tensor."


def _scatter_along(name: str, input: Tensor, src: Tensor, axis: int, positions: Tensor) -> Tensor:
    """input with input[positions] along `axis` replaced by src (src's axis `axis` holding them)."""
    want = (*input.shape[:axis], positions.shape[0], *input.shape[axis + 1 :])
    if tuple(src.shape) != want:
        raise ShapeError(f"{name}: src must have shape {want}, got {describe(src)}")
    moved = index_put(movedim(input, axis, 0), (positions,), movedim(src, axis, 0).cast(input.dtype))
    return movedim(moved, 0, axis)


def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """input with input.select(dim, index) replaced by src (torch.select_scatter)."""
    axis = normalize_axis(dim, input.ndim)
    size = input.shape[axis]
    if not -size <= index < size:
        raise IndexError(f"select_scatter: index {index} is out of range for axis {dim} of size {size}")
    return _scatter_along(
        "select_scatter", input, unsqueeze(src, axis), axis, arange(index % size, index % size + 1)
    )


def slice_scatter(
    input: Tensor, src: Tensor, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1
) -> Tensor:
    """input with input[start:end:step] along `dim` replaced by src (torch.slice_scatter)."""
    if step < 1:
        raise ValueError(f"slice_scatter: step must be positive, got {step}")
    axis = normalize_axis(dim, input.ndim)
    lo, hi, _ = slice(start, end, step).indices(input.shape[axis])
    return _scatter_along("slice_scatter", input, src, axis, arange(lo, builtins.max(lo, hi), step))


def diagonal_scatter(input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """input with its `offset` diagonal in the axes dim1, dim2 replaced by src (torch.diagonal_scatter)."""
    a1, a2 = normalize_axis(dim1, input.ndim), normalize_axis(dim2, input.ndim)
    want = tuple(diagonal(input.detach(), offset, a1, a2).shape)
    if tuple(src.shape) != want:
        raise ShapeError(f"diagonal_scatter: src must have shape {want}, got {describe(src)}")
    k = want[-1]
    rows = arange(builtins.max(-offset, 0), builtins.max(-offset, 0) + k)
    cols = arange(builtins.max(offset, 0), builtins.max(offset, 0) + k)
    moved = movedim(input, (a1, a2), (0, 1))
    moved = index_put(moved, (rows, cols), movedim(src, -1, 0).cast(input.dtype))
    return movedim(moved, (0, 1), (a1, a2))


def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Matrices in the axes dim1, dim2 of the result whose `offset` diagonal holds input's last axis,
    zero elsewhere (torch.diag_embed)."""
    if input.ndim < 1:
        raise ShapeError(f"diag_embed: input must have at least one dimension, got {describe(input)}")
    ndim = input.ndim + 1
    a1, a2 = normalize_axis(dim1, ndim), normalize_axis(dim2, ndim)
    if a1 == a2:
        raise ValueError(f"diag_embed: dim1 and dim2 must differ, got {dim1} and {dim2}")
    k = input.shape[-1]
    n = k + abs(offset)
    padded = input.pad([(0, 0)] * (input.ndim - 1) + [(0, abs(offset))], value=0)
    # entry (i, j) of the diagonal reads padded[i] (offset >= 0) or padded[j] (offset < 0)
    values = unsqueeze(padded, -1 if offset >= 0 else -2)
    rows, cols = unsqueeze(arange(0, n), -1), arange(0, n)
    on = (cols - rows) == offset
    out = where(on, values, zeros((), dtype=input.dtype))
    return movedim(out, (-2, -1), (a1, a2))


def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """The matrix whose `offset` diagonal holds input's entries, flattened (torch.diagflat)."""
    return diag(input.reshape(-1), offset)
