"""Tensors stacked, split, tiled and re-axed as PyTorch's NumPy-style helpers: hstack / vstack / dstack,
column_stack, tensor_split and its h/v/d forms, tile, atleast_nd, block_diag, cartesian_prod,
combinations, fliplr / flipud, ravel, broadcast_to, swapaxes, msort, and `take` of the flattened tensor."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from ..dtypes import i64
from ..errors import DTypeError
from ..ops.binary import result_type
from ..ops.checks import checked
from ..ops.creation import tensor, zeros
from ..ops.index import take as _take_along
from ..ops.movement import concat
from ..ops.shaping import flip, getitem, transpose
from ..shapes import normalize_axis, plain_int
from ..tensor import Tensor, describe
from .rearrange import concrete_size, meshgrid, movedim, repeat
from .statistics import pick


def _tensors(name: str, tensors: Sequence[Tensor]) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not isinstance(tensors, Sequence) or not tensors:
        raise TypeError(f"{name} takes a non-empty sequence of tensors, got {describe(tensors)}")
    return list(tensors)


def atleast_1d(*tensors: Any) -> Any:
    """Each tensor with at least one axis (a 0-d one becomes [1]); one tensor in, one out."""
    return _atleast(tensors, 1)


def atleast_2d(*tensors: Any) -> Any:
    """Each tensor with at least two axes: [n] becomes [1, n]."""
    return _atleast(tensors, 2)


def atleast_3d(*tensors: Any) -> Any:
    """Each tensor with at least three axes: [n] becomes [1, n, 1] and [m, n] becomes [m, n, 1]."""
    return _atleast(tensors, 3)


def _atleast(tensors: tuple, ndim: int) -> Any:
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    items = list(tensors[0]) if len(tensors) == 1 and not single else list(tensors)
    out = tuple(_raise_ndim(t, ndim) for t in items)
    return out[0] if single else out


def _raise_ndim(x: Tensor, ndim: int) -> Tensor:
    if x.ndim >= ndim:
        return x
    if ndim == 3 and x.ndim == 2:
        return x.unsqueeze(-1)
    if ndim == 3 and x.ndim == 1:
        return x.reshape(1, x.shape[0], 1)
    return x.reshape((1,) * (ndim - x.ndim) + tuple(x.shape))


def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenated along axis 1, or along axis 0 for 1-d tensors (NumPy's hstack)."""
    items = atleast_1d(*_tensors("hstack", tensors))
    return concat(items, 0 if items[0].ndim == 1 else 1)


def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenated along axis 0 after making each at least 2-d ([n] rows become [1, n])."""
    return concat(atleast_2d(*_tensors("vstack", tensors)), 0)


row_stack = vstack


def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """Concatenated along axis 2 after making each at least 3-d."""
    return concat(atleast_3d(*_tensors("dstack", tensors)), 2)


def column_stack(tensors: Sequence[Tensor]) -> Tensor:
    """1-d and 0-d tensors as columns ([n] -> [n, 1]), then concatenated along axis 1."""
    items = [t.reshape(-1, 1) if t.ndim <= 1 else t for t in _tensors("column_stack", tensors)]
    return concat(items, 1)


def tensor_split(x: Tensor, indices_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Views along `dim`: into n nearly equal parts (the first size % n one longer) for an int, or cut
    at the given indices for a sequence (NumPy's array_split)."""
    given = indices_or_sections
    if any(isinstance(i, bool) for i in (given if isinstance(given, list | tuple) else [given])):
        raise TypeError(f"tensor_split: expected an int or int indices, got {given!r}")  # as PyTorch
    axis = normalize_axis(dim, x.ndim)
    size = concrete_size(x, axis, "tensor_split")
    if isinstance(indices_or_sections, Tensor):
        if indices_or_sections.dtype is not i64:  # PyTorch's: "to have dtype of long"
            raise DTypeError(
                f"tensor_split: expected i64 indices or sections, got {describe(indices_or_sections)}"
            )
        indices_or_sections = indices_or_sections.tolist()
    indices_or_sections = plain_int(indices_or_sections)
    lead = (slice(None),) * axis
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        if n <= 0:
            raise ValueError(f"tensor_split needs a positive number of sections, got {n}")
        bounds = [0]
        for k in range(n):
            bounds.append(bounds[-1] + size // n + (1 if k < size % n else 0))
    else:
        bounds = [0, *(int(i) for i in indices_or_sections), size]
    return tuple(getitem(x, (*lead, slice(a, max(a, b)))) for a, b in itertools.pairwise(bounds))


def _named_split(name: str, x: Tensor, sections: Any, axis: int, least: int) -> tuple[Tensor, ...]:
    if x.ndim < least:
        raise ValueError(f"{name} needs a tensor of at least {least} dims, got {describe(x)}")
    if isinstance(sections, int) and concrete_size(x, axis, name) % sections:
        raise ValueError(f"{name}: size {x.shape[axis]} along dim {axis} is not divisible by {sections}")
    return tensor_split(x, sections, axis)


def hsplit(x: Tensor, sections: Any) -> tuple[Tensor, ...]:
    """tensor_split along axis 1 (axis 0 for 1-d); an int must divide the size."""
    return _named_split("hsplit", x, sections, 0 if x.ndim == 1 else 1, 1)


def vsplit(x: Tensor, sections: Any) -> tuple[Tensor, ...]:
    """tensor_split along axis 0 of a tensor of at least 2 dims."""
    return _named_split("vsplit", x, sections, 0, 2)


def dsplit(x: Tensor, sections: Any) -> tuple[Tensor, ...]:
    """tensor_split along axis 2 of a tensor of at least 3 dims."""
    return _named_split("dsplit", x, sections, 2, 3)


def tile(x: Tensor, dims: Sequence[int]) -> Tensor:
    """x repeated dims[i] times along each axis; fewer dims than axes are padded with ones in front."""
    dims = tuple(dims)
    return repeat(x, (1,) * (x.ndim - len(dims)) + dims)


def ravel(x: Tensor) -> Tensor:
    """The elements as one axis (a view where the memory allows)."""
    return x.reshape(-1)


def broadcast_to(x: Tensor, size: Sequence[int]) -> Tensor:
    """x broadcast to `size` (-1 keeps a size), a read-only view."""
    return x.expand(*size)


def swapaxes(x: Tensor, axis0: int, axis1: int) -> Tensor:
    """Two axes exchanged (PyTorch's transpose under NumPy's name)."""
    return transpose(x, axis0, axis1)


swapdims = swapaxes
moveaxis = movedim


def fliplr(x: Tensor) -> Tensor:
    """Reversed along axis 1 (left and right)."""
    if x.ndim < 2:
        raise ValueError(f"fliplr needs a tensor of at least 2 dims, got {describe(x)}")
    return flip(x, (1,))


def flipud(x: Tensor) -> Tensor:
    """Reversed along axis 0 (up and down)."""
    if x.ndim < 1:
        raise ValueError(f"flipud needs a tensor of at least 1 dim, got {describe(x)}")
    return flip(x, (0,))


def msort(x: Tensor) -> Tensor:
    """Sorted along axis 0, ascending."""
    return x.sort(0)[0]


def block_diag(*tensors: Tensor) -> Tensor:
    """The tensors (0-d, 1-d as a row, or 2-d) on the diagonal of a zero matrix, in order."""
    blocks = [t.reshape(1, -1) if t.ndim < 2 else t for t in tensors]
    if any(b.ndim != 2 for b in blocks):
        raise ValueError("block_diag takes tensors of at most 2 dims")
    if not blocks:
        return zeros(1, 0)
    dtype = result_type(*tensors)  # PyTorch's: a 0-d block beside larger ones is a weak operand
    widths = [concrete_size(b, 1, "block_diag") for b in blocks]
    total, rows, start = sum(widths), [], 0
    for b, w in zip(blocks, widths):
        left, right = zeros(b.shape[0], start, dtype=dtype), zeros(b.shape[0], total - start - w, dtype=dtype)
        rows.append(concat([left, b.to(dtype) if b.dtype != dtype else b, right], 1))
        start += w
    return concat(rows, 0)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every combination of one element from each 1-d tensor, as rows (one tensor: itself)."""
    if any(t.ndim != 1 for t in tensors):
        raise ValueError("cartesian_prod takes 1-d tensors")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    return concat([g.reshape(-1, 1) for g in grids], 1)


def combinations(x: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The r-length combinations of a 1-d tensor's elements as rows, as itertools orders them."""
    if x.ndim != 1:
        raise ValueError(f"combinations takes a 1-d tensor, got {describe(x)}")
    n = concrete_size(x, 0, "combinations")
    pick_from = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(pick_from(range(n), r))
    if not r:  # PyTorch's: an empty vector without history
        return zeros(0, dtype=x.dtype)
    return _take_along(x, tensor(rows, dtype=i64).reshape(len(rows), r), axis=0)  # none: in the graph too


def take(x: Tensor, index: Tensor, *, axis: int | None = None, dim: int | None = None) -> Tensor:
    """PyTorch's take: elements of the FLATTENED x at `index` (any shape; the result has its shape).
    With `axis=` it takes along that axis instead (NumPy's take with an axis). A position outside
    [-size, size) raises IndexError, eagerly and compiled alike (a negative one counts from the end)."""
    axis = pick(axis, dim)
    if not isinstance(index, Tensor):
        index = tensor(index)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = normalize_axis(axis, x.ndim)
    if index.dtype.kind == "i":
        index = checked(index, x.shape[axis], f"dimension {axis}", what="item")
    return _take_along(x, index, axis=axis)


__all__ = [
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "block_diag",
    "broadcast_to",
    "cartesian_prod",
    "column_stack",
    "combinations",
    "dsplit",
    "dstack",
    "fliplr",
    "flipud",
    "hsplit",
    "hstack",
    "moveaxis",
    "msort",
    "ravel",
    "row_stack",
    "swapaxes",
    "swapdims",
    "take",
    "tensor_split",
    "tile",
    "vsplit",
    "vstack",
]
