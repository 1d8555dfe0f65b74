"""Linear systems written with the `solve` op: triangular solves (linalg.solve_triangular and the legacy
triangular_solve), solves and inverses from a Cholesky factor, and chains of products (multi_dot, mv,
addmv, addr, addbmm), batched as PyTorch's.

A triangular solve is `solve` of the triangle the call reads: the other entries get no gradient, as in
PyTorch. cholesky_solve and cholesky_inverse use the whole factor L as PyTorch's gradients do (A = L L^T).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ops.creation import eye, from_numpy, zeros
from ..ops.linalg import inv, solve
from ..ops.lu import lu_packed, lu_pivots, permutation_matrix
from ..ops.matmul import matmul
from ..ops.shaping import unsqueeze
from ..shapes import broadcast, shape_text
from ..tensor import Tensor, describe
from .joining import broadcast_to
from .matrices import outer, tril, triu
from .pointwise import in_dtype


def _matrices(name: str, arg: str, x: Tensor) -> None:
    if x.ndim < 2:
        raise ShapeError(f"{name}: {arg} must be a batch of matrices [..., m, n], got {describe(x)}")


def _square(name: str, arg: str, x: Tensor) -> None:
    _matrices(name, arg, x)
    if x.shape[-1] != x.shape[-2]:
        raise ShapeError(f"{name}: {arg} must be a batch of square matrices [..., n, n], got {describe(x)}")


def _same_batch(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """a and b broadcast to one batch shape (so that `solve` never reads b as a batch of vectors)."""
    batch = tuple(broadcast(tuple(a.shape[:-2]), tuple(b.shape[:-2])))
    if tuple(a.shape[:-2]) != batch:
        a = broadcast_to(a, (*batch, *a.shape[-2:]))
    if tuple(b.shape[:-2]) != batch:
        b = broadcast_to(b, (*batch, *b.shape[-2:]))
    return a, b


def _triangle(a: Tensor, upper: bool, unitriangular: bool) -> Tensor:
    """The triangle of a that a triangular solve reads (its diagonal taken as ones if unitriangular)."""
    if not unitriangular:
        return triu(a) if upper else tril(a)
    strict = triu(a, 1) if upper else tril(a, -1)
    return strict + eye(a.shape[-1], dtype=a.dtype)


def solve_triangular(
    A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False
) -> Tensor:
    """X with A X = B (or X A = B if not left) for each triangular A, reading its upper or lower triangle
    (and ones on its diagonal if unitriangular), as torch.linalg.solve_triangular."""
    _square("solve_triangular", "A", A)
    _matrices("solve_triangular", "B", B)
    n = A.shape[-1]
    if (B.shape[-2] if left else B.shape[-1]) != n:
        side = "B [..., n, k]" if left else "B [..., k, n]"
        raise ShapeError(
            f"solve_triangular: A {shape_text(A.shape)} needs {side} with n = {n}, got {describe(B)}"
        )
    a, b = _same_batch(_triangle(A, upper, unitriangular), B)
    return solve(a, b) if left else solve(a.mT, b.mT).mT


class TriangularSolveResult(NamedTuple):
    solution: Tensor
    cloned_coefficient: Tensor


def triangular_solve(
    b: Tensor, A: Tensor, upper: bool = True, transpose: bool = False, unitriangular: bool = False
) -> TriangularSolveResult:
    """(X, A) with op(A) X = b, op(A) being A or A^T (the legacy torch.triangular_solve; A is returned
    broadcast to the batch shape, as PyTorch's)."""
    _square("triangular_solve", "A", A)
    _matrices("triangular_solve", "b", b)
    a = A.mT if transpose else A
    x = solve_triangular(a, b, upper=upper != transpose, unitriangular=unitriangular)
    batch = tuple(broadcast(tuple(A.shape[:-2]), tuple(b.shape[:-2])))
    return TriangularSolveResult(x, broadcast_to(A, (*batch, *A.shape[-2:])).clone())


def _from_factor(name: str, L: Tensor, upper: bool) -> Tensor:
    """A = L L^T (U^T U if upper) from the whole factor: PyTorch's gradients treat every entry of it."""
    _square(name, "the factor", L)
    return L.mT @ L if upper else L @ L.mT


def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
    """X with A X = B, A = L L^T given its Cholesky factor L (U^T U if upper), as torch.cholesky_solve."""
    _matrices("cholesky_solve", "B", B)
    if B.shape[-2] != L.shape[-1]:
        raise ShapeError(f"cholesky_solve: B {shape_text(B.shape)} and the factor {describe(L)} differ in n")
    a, b = _same_batch(_from_factor("cholesky_solve", L, upper), B)
    return solve(a, b)


def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
    """A^-1 for A = L L^T given its Cholesky factor L (U^T U if upper), as torch.cholesky_inverse."""
    return inv(_from_factor("cholesky_inverse", L, upper))


def multi_dot(tensors: Any) -> Tensor:
    """The product of a chain of matrices, the first may be a row vector and the last a column vector
    (1-D), as torch.linalg.multi_dot."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise ValueError(f"multi_dot: expected at least 2 tensors, got {len(tensors)}")
    for i, t in enumerate(tensors):
        ends = i in (0, len(tensors) - 1)
        if t.ndim != 2 and not (ends and t.ndim == 1):
            raise ShapeError(
                f"multi_dot: tensor {i} must be 2-D (the first and last may be 1-D), got {describe(t)}"
            )
    first, last = tensors[0].ndim == 1, tensors[-1].ndim == 1
    chain = [unsqueeze(tensors[0], 0) if first else tensors[0], *tensors[1:-1]]
    chain.append(unsqueeze(tensors[-1], -1) if last else tensors[-1])
    result = chain[0]
    for t in chain[1:]:
        if result.shape[-1] != t.shape[0]:
            raise ShapeError(f"multi_dot: cannot multiply {describe(result)} by {describe(t)}")
        result = matmul(result, t)
    if first:
        result = result[0]
    return result[..., 0] if last else result


def _scaled(product: Tensor, x: Tensor, beta: Any, alpha: Any) -> Tensor:
    """beta x + alpha product; beta = 0 ignores x (its nan too), as PyTorch's; integer calls truncate
    float beta and alpha, bool calls read them as bools."""
    alpha, beta = in_dtype(alpha, product.dtype), in_dtype(beta, product.dtype)
    if product.dtype.name == "bool":
        scaled = product if alpha else product & False
        return scaled if not beta else scaled | x
    product = product if alpha == 1 else product * alpha
    if beta == 0:
        return broadcast_to(product, tuple(broadcast(tuple(x.shape), tuple(product.shape))))
    return (x if beta == 1 else x * beta) + product


def mv(A: Tensor, v: Tensor) -> Tensor:
    """The product of a matrix [n, m] and a vector [m] (torch.mv)."""
    if A.ndim != 2 or v.ndim != 1:
        raise ShapeError(f"mv multiplies a matrix by a vector, got {describe(A)} and {describe(v)}")
    return matmul(A, v)


def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """beta input + alpha (mat @ vec), as torch.addmv."""
    return _scaled(mv(mat, vec), input, beta, alpha)


def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """beta input + alpha outer(vec1, vec2), as torch.addr (logical or/and for bool tensors); a float beta
    or alpha with integer tensors is refused, as PyTorch's addr (its addmv and addmm truncate them)."""
    if not vec1.dtype.is_float and any(isinstance(v, float) for v in (beta, alpha)):
        raise DTypeError(
            f"addr: for integral input tensors, beta and alpha must not be floating point numbers (as "
            f"PyTorch), got beta={beta!r}, alpha={alpha!r}"
        )
    product = outer(vec1, vec2) if vec1.dtype.name != "bool" else unsqueeze(vec1, -1) & vec2
    return _scaled(product, input, beta, alpha)


def addbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:
    """beta input + alpha sum_b(batch1[b] @ batch2[b]), as torch.addbmm."""
    if batch1.ndim != 3 or batch2.ndim != 3:
        raise ShapeError(
            f"addbmm multiplies two batches [B, n, k], [B, k, m], got {describe(batch1)}, {describe(batch2)}"
        )
    product = matmul(batch1, batch2)
    return _scaled(product.sum(0).cast(product.dtype), input, beta, alpha)


# LU: the factorization's two ops, and what is written with them -----------------------------------


class LUFactorResult(NamedTuple):
    LU: Tensor
    pivots: Tensor


class LUFactorExResult(NamedTuple):
    LU: Tensor
    pivots: Tensor
    info: Tensor


class LUResult(NamedTuple):
    P: Tensor
    L: Tensor
    U: Tensor


def _pivoting(name: str, pivot: bool) -> None:
    if not pivot:
        raise NotImplementedError(
            f"{name}: LU without pivoting is not implemented on the CPU (as in PyTorch)"
        )


def lu_factor(A: Tensor, *, pivot: bool = True) -> LUFactorResult:
    """(LU, pivots) of A = P L U with partial pivoting, as torch.linalg.lu_factor (LAPACK's getrf)."""
    _pivoting("lu_factor", pivot)
    _matrices("lu_factor", "A", A)
    return LUFactorResult(lu_packed(A), lu_pivots(A))


def lu_factor_ex(A: Tensor, *, pivot: bool = True, check_errors: bool = False) -> LUFactorExResult:
    """(LU, pivots, info) as torch.linalg.lu_factor_ex: info is LAPACK's, the 1-based position of U's
    first zero diagonal entry (0 if none): eager only."""
    lu, pivots = lu_factor(A, pivot=pivot)
    k = min(A.shape[-2], A.shape[-1])
    zero = np.diagonal(lu.detach().numpy(), axis1=-2, axis2=-1)[..., :k] == 0
    info = np.where(zero.any(-1), zero.argmax(-1) + 1, 0).astype(np.int32)
    if check_errors and info.any():
        raise ValueError(f"lu_factor_ex: U has a zero diagonal entry (LAPACK info {int(info.max())})")
    return LUFactorExResult(lu, pivots, from_numpy(np.array(info)))  # (ascontiguousarray makes 0-d 1-d)


def lu_unpack(
    LU_data: Tensor, LU_pivots: Tensor, unpack_data: bool = True, unpack_pivots: bool = True
) -> LUResult:
    """(P, L, U) of a packed LU and its pivots, as torch.lu_unpack (the pivots read as values: eager);
    what is not unpacked is empty."""
    _matrices("lu_unpack", "LU_data", LU_data)
    m, n = LU_data.shape[-2], LU_data.shape[-1]
    k = min(m, n)
    empty = zeros((0,), dtype=LU_data.dtype)
    p = permutation_matrix(LU_pivots.numpy(), m, LU_data.dtype) if unpack_pivots else empty
    if not unpack_data:
        return LUResult(p, empty, empty)
    lower = tril(LU_data[..., :, :k], -1) + eye(m, k, dtype=LU_data.dtype)
    return LUResult(p, lower, triu(LU_data[..., :k, :]))


def lu(A: Tensor, *, pivot: bool = True) -> LUResult:
    """(P, L, U) with A = P L U, as torch.linalg.lu."""
    return lu_unpack(*lu_factor(A, pivot=pivot))


def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
    """X with A X = B (X A = B if not left; A^T in A's place with adjoint) for A = P L U given as
    lu_factor gives it, as torch.linalg.lu_solve: triangular solves with L and U and the permutation."""
    _square("lu_solve", "LU", LU)
    p, lower, upper = lu_unpack(LU, pivots)
    if not left:  # X A = B  <=>  A^T X^T = B^T
        return lu_solve(LU, pivots, B.mT, left=True, adjoint=not adjoint).mT
    if not adjoint:  # U^-1 L^-1 P^T B
        y = solve_triangular(lower, p.mT @ B, upper=False, unitriangular=True)
        return solve_triangular(upper, y, upper=True)
    y = solve_triangular(upper.mT, B, upper=False)  # A^T = U^T L^T P^T: P L^-T U^-T B
    return p @ solve_triangular(lower.mT, y, upper=True, unitriangular=True)


def legacy_lu(A: Tensor, pivot: bool = True, get_infos: bool = False) -> tuple:
    """torch.lu: (LU, pivots), and the infos with get_infos."""
    result = lu_factor_ex(A, pivot=pivot)
    return tuple(result) if get_infos else (result.LU, result.pivots)


def legacy_lu_solve(b: Tensor, LU_data: Tensor, LU_pivots: Tensor) -> Tensor:
    """torch.lu_solve: linalg.lu_solve(LU_data, LU_pivots, b)."""
    return lu_solve(LU_data, LU_pivots, b)
