"""as_strided, as_strided_copy and as_strided_scatter written with take and scatter. A tensor's storage is
its elements in row-major order; a view's (a slice, a transpose, a reshape of another tensor) is its top
base's, as PyTorch's: as_strided of a view reads there, at positions counted from the base's start (the
view's own start by default), and its gradient reaches the view's elements among them.
as_strided_scatter, whose result is a new tensor in PyTorch (a clone of the input), reads the input's own
elements: it refuses a non-contiguous view, or an explicit storage_offset on a view."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .. import versions
from ..dtypes import i64
from ..errors import ShapeError
from ..ops.binary import where
from ..ops.creation import tensor
from ..tensor import Tensor, describe
from .indexing import scatter
from .joining import take


def _check_own_storage(name: str, x: Tensor, offset: int | None) -> None:
    """Refuse what would read outside x's own elements in PyTorch: a non-contiguous view (a transpose, a
    slice with gaps), whose strides PyTorch applies to its base's storage, and an explicit storage_offset
    on a view that starts inside its base (PyTorch counts it from the base's start)."""
    array = x.payload
    if not array.flags["C_CONTIGUOUS"]:
        raise NotImplementedError(
            f"{name} of a non-contiguous view ({describe(x)}): PyTorch applies the strides to the base "
            "tensor's storage; call .contiguous() first, or as_strided the base"
        )
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    if offset is not None and array.__array_interface__["data"][0] != root.__array_interface__["data"][0]:
        raise NotImplementedError(
            f"{name} with storage_offset={offset} of a view that starts inside its base ({describe(x)}): "
            "PyTorch counts the offset from the base's storage; leave storage_offset out (it is then the "
            "view's own start) or as_strided the base"
        )


def _checked_args(
    name: str, size: Sequence[int], stride: Sequence[int], offset: int | None
) -> tuple[tuple[int, ...], tuple[int, ...], int | None]:
    size, stride = tuple(int(n) for n in size), tuple(int(s) for s in stride)
    offset = None if offset is None else int(offset)
    if len(size) != len(stride):
        raise ShapeError(f"{name}: size {size} and stride {stride} must have the same length")
    if any(s < 0 for s in stride) or any(n < 0 for n in size) or (offset or 0) < 0:
        raise ShapeError(
            f"{name}: negative sizes, strides or storage offsets are not supported, got "
            f"size {size}, stride {stride}, storage_offset {offset}"
        )
    return size, stride, offset


def _grid(name: str, size: tuple, stride: tuple, offset: int, elements: int, what: str) -> np.ndarray:
    """offset + sum(i_k * stride_k) for each entry of [*size], checked against `elements` positions."""
    positions = np.full(size, offset, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(size, stride, strict=True)):
        positions += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(size) - axis - 1))
    if positions.size and int(positions.max()) >= elements:
        raise ShapeError(
            f"{name}: size {size}, stride {stride} and storage_offset {offset} reach element "
            f"{int(positions.max())}, out of bounds for {what} ({elements} elements)"
        )
    return positions


def _positions(
    name: str, x: Tensor, size: Sequence[int], stride: Sequence[int], offset: int | None
) -> np.ndarray:
    """The position among x's own row-major elements of each entry of the strided view [*size]."""
    _check_own_storage(name, x, offset)
    size, stride, offset = _checked_args(name, size, stride, offset)
    return _grid(name, size, stride, offset or 0, x.numel(), describe(x))


def _made_from(x: Tensor) -> Tensor | None:
    """The tensor x was made a view of by a view op (recorded on x, or on its autograd node), or None."""
    recipe, node = getattr(x, "_view", None), x._node
    if recipe is not None and recipe[1] is not None:
        inputs = recipe[1]
    elif node is not None and not getattr(node.op, "written", False):
        inputs = node.inputs
    else:
        return None
    if type(x.payload) is not np.ndarray:
        return None
    owner = versions.root(x.payload)
    for t in inputs:
        if isinstance(t, Tensor) and type(t.payload) is np.ndarray and versions.root(t.payload) is owner:
            return t
    return None


def _storage(x: Tensor) -> tuple[np.ndarray, np.ndarray] | None:
    """(the storage of view x: its top base's elements, flat; the storage position of each element of x),
    or None where x is no view, or its top base's elements are not its memory in row-major order."""
    base = x
    while (up := _made_from(base)) is not None:
        base = up
    array = base.payload
    if base is x or not array.flags["C_CONTIGUOUS"] or array.dtype != x.payload.dtype:
        return None
    view, item = x.payload, array.itemsize
    start = view.__array_interface__["data"][0] - array.__array_interface__["data"][0]
    where_ = np.full(view.shape, start, dtype=np.int64)
    for axis, (n, step) in enumerate(zip(view.shape, view.strides)):
        where_ += (np.arange(n, dtype=np.int64) * step).reshape((n,) + (1,) * (view.ndim - axis - 1))
    if start % item or np.any(where_ % item) or np.any(where_ < 0) or np.any(where_ >= array.nbytes):
        return None
    return array.reshape(-1), where_ // item


def _from_storage(x: Tensor, size: Sequence[int], stride: Sequence[int], offset: int | None) -> Tensor | None:
    """as_strided of view x over its base's storage (None where x is no view): the entries inside x are
    taken from x (its gradient), the others are the storage's values."""
    found = _storage(x)
    if found is None:
        return None
    flat, placed = found
    size, stride, offset = _checked_args("as_strided", size, stride, offset)
    start = int(placed.min()) if placed.size else 0  # the view's storage_offset (its strides are >= 0)
    positions = _grid(
        "as_strided", size, stride, start if offset is None else offset, flat.size, "the view's storage"
    )
    inverse = np.full(flat.size, -1, dtype=np.int64)
    inverse[placed.reshape(-1)] = np.arange(placed.size, dtype=np.int64)
    index = inverse[positions]
    inside = index >= 0
    if inside.all():
        return take(x, tensor(index, dtype=i64))
    outside = tensor(flat[positions].copy(), dtype=x.dtype)
    if not placed.size:
        return outside
    return where(tensor(inside), take(x, tensor(np.maximum(index, 0), dtype=i64)), outside)


def as_strided(
    input: Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> Tensor:
    """The entries of input's storage at storage_offset + sum(i_k * stride_k) (PyTorch's as_strided, as a
    copy: writing to it does not write to input); a view's storage is its base's, its default offset its
    own start there."""
    viewed = _from_storage(input, size, stride, storage_offset)
    if viewed is not None:
        return viewed
    positions = _positions("as_strided", input, size, stride, storage_offset)
    return take(input, tensor(positions, dtype=i64))


as_strided_copy = as_strided


def as_strided_scatter(
    input: Tensor, src: Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> Tensor:
    """input with the entries of its strided view (as as_strided's) replaced by src [*size]."""
    positions = _positions("as_strided_scatter", input, size, stride, storage_offset)
    if tuple(src.shape) != positions.shape:
        raise ShapeError(
            f"as_strided_scatter: src must have the view's size {positions.shape}, got {describe(src)}"
        )
    flat = scatter(input.reshape(-1), 0, tensor(positions.reshape(-1), dtype=i64), src.reshape(-1))
    return flat.reshape(input.shape)
