"""Matrix functions written with the ops: mm / bmm / outer / addmm, dot / vdot / inner / tensordot,
matrix_power, logdet / slogdet, cdist, diagonal / diag / trace, tril / triu and their index lists,
fill_diagonal_, kron and cross."""

from __future__ import annotations

import builtins
import math
from typing import Any, NamedTuple

import numpy as np

from ..devices import as_device
from ..dtypes import as_dtype, bool_, i32, i64
from ..errors import DTypeError, ShapeError
from ..ops.binary import eq, where
from ..ops.creation import arange, eye, from_numpy
from ..ops.data_in import check_number
from ..ops.index import take
from ..ops.linalg import det, inv
from ..ops.matmul import matmul
from ..ops.shaping import getitem, stack, unsqueeze
from ..shapes import normalize_axis, shape_text
from ..tensor import Tensor, describe
from .pointwise import in_dtype
from .statistics import norm


def _ranks(name: str, a: Tensor, b: Tensor, rank: int, what: str) -> None:
    if a.ndim != rank or b.ndim != rank:
        raise ShapeError(f"{name} multiplies {what}, got {describe(a)} and {describe(b)}")


def mm(a: Tensor, b: Tensor) -> Tensor:
    """The product of two matrices (PyTorch's mm: 2-D operands only; matmul broadcasts)."""
    _ranks("mm", a, b, 2, "two matrices")
    return a @ b


def bmm(a: Tensor, b: Tensor) -> Tensor:
    """Batched matrix products of [B, n, k] and [B, k, m] (PyTorch's bmm: 3-D operands only)."""
    _ranks("bmm", a, b, 3, "two batches of matrices [B, n, k] and [B, k, m]")
    return a @ b


def outer(a: Tensor, b: Tensor) -> Tensor:
    """a[i] * b[j] for two vectors."""
    _ranks("outer", a, b, 1, "two vectors")
    return unsqueeze(a, -1) * b


def addmm(x: Tensor, a: Tensor, b: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """beta x + alpha (a @ b) (PyTorch's addmm; baddbmm is the same on batches). For integer tensors
    beta and alpha are truncated to integers first, as PyTorch's."""
    product = matmul(a, b)
    alpha, beta = in_dtype(alpha, product.dtype), in_dtype(beta, product.dtype)
    product = product if alpha == 1 else product * alpha
    return product if beta == 0 else (x if beta == 1 else x * beta) + product


def dot(a: Tensor, b: Tensor) -> Tensor:
    """The inner product of two vectors of one length and dtype (PyTorch's dot)."""
    if a.ndim != 1 or b.ndim != 1:
        raise ShapeError(f"dot: 1D tensors expected, but got {describe(a)} and {describe(b)}")
    if a.shape[0] != b.shape[0]:
        raise ShapeError(f"dot: the vectors must have the same length, got {describe(a)} and {describe(b)}")
    if a.dtype is not b.dtype:
        raise DTypeError(
            f"dot: expected both vectors to have same dtype, but found {a.dtype.name} and {b.dtype.name}"
        )
    return matmul(a, b)


def vdot(a: Tensor, b: Tensor) -> Tensor:
    """dot with the first vector conjugated: dot itself for real tensors (PyTorch's vdot)."""
    return dot(a, b)


def inner(a: Tensor, b: Tensor) -> Tensor:
    """The sum of products over the last axes of a and b (a 0-d operand scales the other), PyTorch's
    inner: a [..., n] and b [..., n] give [a's leading axes, b's leading axes]."""
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    return tensordot(a, b, ([a.ndim - 1], [b.ndim - 1]))


def tensordot(a: Tensor, b: Tensor, dims: Any = 2) -> Tensor:
    """The sum of products over `dims` (PyTorch's tensordot): an int d (a's last d axes with b's first d),
    or a pair of axis lists (a's dims[0][k] with b's dims[1][k]), a contracted size 1 broadcast against the
    other's; the result's axes are a's others, then b's others."""
    if isinstance(dims, int):
        if dims < 0:
            raise ValueError(f"tensordot expects dims >= 0, but got dims={dims}")
        if dims > builtins.min(a.ndim, b.ndim):
            raise ShapeError(
                f"tensordot: dims={dims} is more than the rank of {describe(a)} or {describe(b)}"
            )
        left, right = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        left, right = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(left) != len(right):
            raise ShapeError(f"tensordot: both dimension lists should have the same length, got {dims}")
        left = [normalize_axis(d, a.ndim) for d in left]
        right = [normalize_axis(d, b.ndim) for d in right]
    for i, j in zip(left, right):  # PyTorch's: a size 1 against another is summed out of the other first
        if b.shape[j] == 1 and a.shape[i] != 1:
            a = a.sum(i, keepdim=True).cast(a.dtype)
        elif a.shape[i] == 1 and b.shape[j] != 1:
            b = b.sum(j, keepdim=True).cast(b.dtype)
        if a.shape[i] != b.shape[j]:
            raise ShapeError(
                f"tensordot: contracted dimensions need to match, but first has size {a.shape[i]} in dim {i} "
                f"and second has size {b.shape[j]} in dim {j}"
            )
    keep_a = [i for i in range(a.ndim) if i not in left]
    keep_b = [j for j in range(b.ndim) if j not in right]
    size = math.prod([a.shape[i] for i in left], start=1)
    lhs = a.permute((*keep_a, *left)).reshape(math.prod([a.shape[i] for i in keep_a], start=1), size)
    rhs = b.permute((*right, *keep_b)).reshape(size, math.prod([b.shape[j] for j in keep_b], start=1))
    return matmul(lhs, rhs).reshape(*[a.shape[i] for i in keep_a], *[b.shape[j] for j in keep_b])


def _square(name: str, a: Tensor) -> None:
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"{name}: A must be batches of square matrices, got {describe(a)}")


def matrix_power(a: Tensor, n: int) -> Tensor:
    """A^n for square A [..., k, k] by PyTorch's binary powering (the same products in the same order):
    n 0 is the identity, a negative n the inverse's power."""
    _square("matrix_power", a)
    if not isinstance(n, int):
        raise TypeError(f"matrix_power: n must be an int, got {n!r}")
    if n == 0:
        return (eye(a.shape[-1], dtype=a.dtype) + a * 0).cast(a.dtype)
    if n < 0:
        a, n = inv(a), -n
    if n <= 3:
        return a if n == 1 else (a @ a if n == 2 else (a @ a) @ a)
    z = result = None
    while n > 0:
        bit, n = n % 2, n // 2
        z = a if z is None else z @ z
        if bit:
            result = z if result is None else result @ z
    return result


class SignLogAbsDet(NamedTuple):
    """slogdet's result, as PyTorch's named tuple."""

    sign: Tensor
    logabsdet: Tensor


def slogdet(a: Tensor) -> SignLogAbsDet:
    """(sign(det A), log|det A|) of each square matrix (PyTorch's slogdet): log|det A|'s gradient is
    A^-T; the sign's is zero."""
    _square("slogdet", a)
    d = det(a)
    return SignLogAbsDet(d.sign(), d.abs().log())  # the sign keeps history (a zero gradient), as PyTorch


def logdet(a: Tensor) -> Tensor:
    """log(det A) of each square matrix: nan where det A < 0, -inf where it is 0 (PyTorch's logdet)."""
    _square("logdet", a)
    return det(a).log()


_CDIST_MODES = (
    "use_mm_for_euclid_dist_if_necessary",
    "use_mm_for_euclid_dist",
    "donot_use_mm_for_euclid_dist",
)


def cdist(a: Tensor, b: Tensor, p: float = 2.0, compute_mode: str = _CDIST_MODES[0]) -> Tensor:
    """The p-norm distances between the rows of a [..., P, M] and of b [..., R, M]: [..., P, R].
    `compute_mode` is PyTorch's (its matrix-product path for p = 2 rounds differently; verigrad always
    takes the differences, the exact path)."""
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    return norm(unsqueeze(a, -2) - unsqueeze(b, -3), p, dim=-1)


def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The elements x[..., i, i + offset] of the plane of axes dim1 and dim2 (moved to the end), as
    PyTorch's diagonal: every (cols + 1)-th element of the flattened plane, a view of x where the plane
    flattens without a copy (its rows contiguous, as in a C-contiguous x's last two axes), else a copy
    (sizes of that plane must be concrete)."""
    a, b = normalize_axis(dim1, x.ndim), normalize_axis(dim2, x.ndim)
    if a == b:
        raise ShapeError(f"diagonal needs two different axes, got {dim1} and {dim2}")
    rows, cols = x.shape[a], x.shape[b]
    if not isinstance(rows, int) or not isinstance(cols, int):
        raise ShapeError(f"diagonal needs the plane's sizes to be concrete, got {rows} x {cols}")
    rest = [i for i in range(x.ndim) if i not in (a, b)]
    plane = x.permute((*rest, a, b)).reshape((*[x.shape[i] for i in rest], rows * cols))
    first_row, first_col = (0, offset) if offset >= 0 else (-offset, 0)
    length = builtins.max(0, builtins.min(rows - first_row, cols - first_col))
    start = first_row * cols + first_col
    stop = start + (length - 1) * (cols + 1) + 1 if length else start
    return getitem(plane, (Ellipsis, slice(start, stop, cols + 1)))


def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """A vector's square matrix with it on the `diagonal`-th diagonal (zeros elsewhere); a matrix's
    diagonal."""
    if x.ndim == 2:
        return x.diagonal(diagonal)
    if x.ndim != 1 or not isinstance(x.shape[0], int):
        raise ShapeError(f"diag takes a vector (of a concrete length) or a matrix, got {describe(x)}")
    n = x.shape[0] + builtins.abs(diagonal)
    row, col = unsqueeze(arange(0, n), -1), unsqueeze(arange(0, n), 0)
    reads = (row if diagonal >= 0 else col).broadcast_to((n, n)).clamp(0, builtins.max(x.shape[0] - 1, 0))
    return where(eq(col - row, diagonal), take(x, reads, axis=0), 0).cast(x.dtype)


def trace(x: Tensor) -> Tensor:
    """The sum of a matrix's diagonal (PyTorch's trace)."""
    if x.ndim != 2:
        raise ShapeError(f"trace: expected a matrix, got {describe(x)}")
    if x.dtype is bool_:
        raise DTypeError("trace of a bool tensor is not supported (as PyTorch); cast it to a number dtype")
    return diagonal(x).sum()


def _triangle(x: Tensor, diagonal: int, lower: bool, name: str) -> Tensor:
    if x.ndim < 2:
        raise ShapeError(f"{name} needs a matrix (or a batch of them), got {shape_text(x.shape)}")
    rows, cols = unsqueeze(arange(0, x.shape[-2]), -1), arange(0, x.shape[-1])
    keep = (cols - rows <= diagonal) if lower else (cols - rows >= diagonal)
    return where(keep, x, False if x.dtype is bool_ else 0)


def tril(x: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two axes (j - i <= diagonal); the rest 0."""
    return _triangle(x, diagonal, True, "tril")


def triu(x: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two axes (j - i >= diagonal); the rest 0."""
    return _triangle(x, diagonal, False, "triu")


def _triangle_indices(name: str, positions: Any, dtype: Any, device: Any) -> Tensor:
    """tril_indices'/triu_indices' [2, n] positions in `dtype` (i64 by default; i32 or i64, as PyTorch's)."""
    as_device(device, name)
    kind = i64 if dtype is None else as_dtype(dtype)
    if kind not in (i32, i64):
        raise DTypeError(f"{name}: dtype must be int32 or int64 (as PyTorch's), got {kind.name}")
    return from_numpy(np.stack(positions).astype(kind.np))


def tril_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None, layout: Any = None
) -> Tensor:
    """The [2, n] positions of the lower triangle of a row x col matrix (PyTorch's order)."""
    return _triangle_indices("tril_indices", np.tril_indices(row, offset, col), dtype, device)


def triu_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None, layout: Any = None
) -> Tensor:
    """The [2, n] positions of the upper triangle of a row x col matrix (PyTorch's order)."""
    return _triangle_indices("triu_indices", np.triu_indices(row, offset, col), dtype, device)


def fill_diagonal_(x: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """x's main diagonal set to `fill_value`, in place (PyTorch's): a matrix, or a tensor whose sides
    are all equal; with `wrap`, a tall matrix's diagonal starts again after each (columns + 1) rows."""
    shape = tuple(x.shape)
    if x.ndim < 2 or not builtins.all(isinstance(n, int) for n in shape):
        raise ShapeError(
            f"fill_diagonal_ needs a tensor of rank 2 or more with known sides, got {describe(x)}"
        )
    if x.ndim > 2 and len(set(shape)) != 1:
        raise ShapeError(f"fill_diagonal_ needs all sides equal above rank 2, got {shape_text(shape)}")
    if x.ndim == 2 and wrap and shape[0] > shape[1]:
        mask = np.arange(shape[0] * shape[1]).reshape(shape) % (shape[1] + 1) == 0
    else:
        grid = np.indices(shape)
        mask = np.all(grid == grid[0], axis=0)
    check_number(fill_value, x.dtype, "fill_diagonal_")
    return x.assign(where(from_numpy(mask), fill_value, x))


def kron(a: Tensor, b: Tensor) -> Tensor:
    """The Kronecker product: block (i, j, ...) is a[i, j, ...] * b (the shorter operand's shape padded
    with leading ones)."""
    rank = max(a.ndim, b.ndim)
    a = a.reshape(*([1] * (rank - a.ndim)), *a.shape)
    b = b.reshape(*([1] * (rank - b.ndim)), *b.shape)
    spread_a = a.reshape(*(d for s in a.shape for d in (s, 1)))
    spread_b = b.reshape(*(d for s in b.shape for d in (1, s)))
    return (spread_a * spread_b).reshape(*(sa * sb for sa, sb in zip(a.shape, b.shape)))


def cross(a: Tensor, b: Tensor, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along `dim` (operands broadcast), as torch.linalg.cross."""
    if a.ndim != b.ndim:
        raise ShapeError(
            f"linalg.cross: inputs must have the same number of dimensions, got {describe(a)} "
            f"and {describe(b)}"
        )
    axis = normalize_axis(dim, max(a.ndim, b.ndim))
    for t in (a, b):
        if t.ndim == max(a.ndim, b.ndim) and t.shape[axis] != 3:
            raise ValueError(f"cross needs 3 components along dim {dim}, got a shape {tuple(t.shape)}")

    def part(t: Tensor, i: int) -> Any:
        at = axis - (max(a.ndim, b.ndim) - t.ndim)
        return getitem(t, (*(slice(None),) * at, i))

    a0, a1, a2 = (part(a, i) for i in range(3))
    b0, b1, b2 = (part(b, i) for i in range(3))
    return stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=axis)
