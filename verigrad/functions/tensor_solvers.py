"""linalg.tensorinv and linalg.tensorsolve written with reshape, inv and solve (PyTorch's: the tensor
read as the square matrix of its leading and trailing axes)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..errors import ShapeError
from ..ops.linalg import inv, solve
from ..tensor import Tensor, describe
from .rearrange import movedim


def tensorinv(A: Tensor, ind: int = 2) -> Tensor:
    """The tensor X with tensordot(A, X, ind) the identity: [*A.shape[ind:], *A.shape[:ind]]."""
    if ind <= 0:
        raise ValueError(f"linalg.tensorinv: expected a strictly positive integer for ind, got {ind}")
    front, back = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    rows, cols = math.prod(int(n) for n in front), math.prod(int(n) for n in back)
    if rows != cols:
        raise ShapeError(
            f"linalg.tensorinv: expected the product of the first {ind} dimensions of {describe(A)} to equal "
            f"the product of the rest, got {rows} and {cols}"
        )
    return inv(A.reshape(rows, cols)).reshape(*back, *front)


def tensorsolve(A: Tensor, B: Tensor, dims: Sequence[int] | None = None) -> Tensor:
    """X with tensordot(A, X, X.ndim) == B; `dims` names A's axes moved to the end first."""
    if dims is not None:
        A = movedim(A, tuple(dims), tuple(range(A.ndim - len(dims), A.ndim)))
    rows = B.numel()
    result = tuple(A.shape[B.ndim :])
    cols = math.prod(int(n) for n in result)
    if A.numel() != rows * cols or rows != cols:
        raise ShapeError(
            f"linalg.tensorsolve: expected the product of A's leading dimensions to be the size of B "
            f"{describe(B)} and to equal the product of the rest, got {describe(A)}"
        )
    return solve(A.reshape(rows, cols), B.reshape(rows)).reshape(result)
