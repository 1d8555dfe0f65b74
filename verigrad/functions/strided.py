"""as_strided, as_strided_copy and as_strided_scatter written with take and scatter: the tensor's
elements in row-major order serve as its storage; a view that does not start its memory in that order
(a slice, a transpose), where PyTorch would read its base's storage, is refused."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dtypes import i64
from ..errors import ShapeError
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


def _positions(
    name: str, x: Tensor, size: Sequence[int], stride: Sequence[int], offset: int | None
) -> np.ndarray:
    """The storage position of each entry of the strided view [*size], checked against x's elements."""
    _check_own_storage(name, x, offset)
    size, stride, offset = tuple(int(n) for n in size), tuple(int(s) for s in stride), int(offset or 0)
    if len(size) != len(stride):
        raise ShapeError(f"{name}: size {size} and stride {stride} must have the same length")
    if any(s < 0 for s in stride) or any(n < 0 for n in size) or offset < 0:
        raise ShapeError(
            f"{name}: negative sizes, strides or storage offsets are not supported, got "
            f"size {size}, stride {stride}, storage_offset {offset}"
        )
    positions = np.full(size, offset, dtype=np.int64)
    for axis, (n, s) in enumerate(zip(size, stride, strict=True)):
        positions += (np.arange(n, dtype=np.int64) * s).reshape((n,) + (1,) * (len(size) - axis - 1))
    if positions.size and int(positions.max()) >= x.numel():
        raise ShapeError(
            f"{name}: size {size}, stride {stride} and storage_offset {offset} reach element "
            f"{int(positions.max())}, out of bounds for {describe(x)} ({x.numel()} elements)"
        )
    return positions


def as_strided(
    input: Tensor, size: Sequence[int], stride: Sequence[int], storage_offset: int | None = None
) -> Tensor:
    """The entries of input's row-major elements at storage_offset + sum(i_k * stride_k) (PyTorch's
    as_strided, as a copy: writing to it does not write to input)."""
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
