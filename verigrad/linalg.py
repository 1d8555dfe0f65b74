"""`verigrad.linalg`, as torch.linalg: inverses, determinants and solutions of square systems, the
decompositions (cholesky, eigh, svd, qr) and what is written with them (pinv, norms), batched over
leading axes and differentiable (the ops of verigrad/ops/linalg.py and the functions of
verigrad/functions/matrices.py).

The decompositions of symmetric matrices read one triangle, as PyTorch's: `_symmetric_from` writes the
matrix the op sees, with the read triangle's values and, as in PyTorch, a gradient that is symmetric.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from . import functions, ops
from .autograd import is_grad_enabled
from .errors import DTypeError, ShapeError
from .functions import cross as _cross
from .functions import matrix_power, slogdet
from .functions.complex_refusals import eig, eigvals
from .functions.solvers import lu, lu_factor, lu_factor_ex, lu_solve, multi_dot, solve_triangular
from .ops import det, inv, matmul, solve
from .ops._op import floating_only
from .shapes import normalize_axis
from .tensor import Tensor, describe

__all__ = [
    "cholesky",
    "cholesky_ex",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "inv_ex",
    "lstsq",
    "lu",
    "lu_factor",
    "lu_factor_ex",
    "lu_solve",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "multi_dot",
    "norm",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "solve_ex",
    "solve_triangular",
    "svd",
    "svdvals",
    "vander",
    "vecdot",
    "vector_norm",
]


def _symmetric_from(a: Tensor, upper: bool) -> Tensor:
    """The symmetric matrix of a's lower (or upper) triangle; the gradient reaches a's entries as given
    (PyTorch's: the op's symmetric gradient lands on both triangles)."""
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ShapeError(f"expected batches of square matrices [..., n, n], got {describe(a)}")
    rows, cols = ops.unsqueeze(ops.arange(0, a.shape[-2]), -1), ops.arange(0, a.shape[-1])
    read = (cols >= rows) if upper else (cols <= rows)
    mirrored = a.mT.detach() + (a - a.detach())  # the other triangle's values, a's own gradient
    return ops.where(read, a, mirrored)


def _uplo(name: str, uplo: str) -> bool:
    if uplo not in ("L", "U"):
        raise ValueError(f"{name}: UPLO must be 'L' or 'U', got {uplo!r}")
    return uplo == "U"


def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
    """L (lower triangular, L L^T = A) of each symmetric positive-definite A, reading its lower
    triangle; with `upper`, U = L^T reading the upper triangle (PyTorch's)."""
    floating_only(A.dtype, what="linalg.cholesky")
    lower = ops.cholesky(_symmetric_from(A, upper))
    return lower.mT if upper else lower


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
    """(eigenvalues ascending, eigenvectors as columns) of each symmetric A, reading the UPLO triangle."""
    floating_only(A.dtype, what="linalg.eigh")
    sym = _symmetric_from(A, _uplo("eigh", UPLO))
    return EighResult(ops.eigvalsh(sym), ops.eigh_vectors(sym))


def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
    """The eigenvalues, ascending, of each symmetric A, reading the UPLO triangle."""
    floating_only(A.dtype, what="linalg.eigvalsh")
    return ops.eigvalsh(_symmetric_from(A, _uplo("eigvalsh", UPLO)))


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


def svd(A: Tensor, full_matrices: bool = True, *, driver: str | None = None) -> SVDResult:
    """(U, S, Vh) with A = U diag(S) Vh, S descending; U [..., m, m] and Vh [..., n, n] with
    full_matrices, else [..., m, k] and [..., k, n] (k = min(m, n)). Singular vectors are unique up to
    sign; a wide A's may take other signs than PyTorch's (the products agree)."""
    if driver is not None:
        raise ValueError("svd: driver is for CUDA inputs in PyTorch; leave it None")
    u = ops.svd_u(A, full_matrices=full_matrices)
    return SVDResult(u, ops.svdvals(A), ops.svd_vh(A, full_matrices=full_matrices))


def svdvals(A: Tensor, *, driver: str | None = None) -> Tensor:
    """The singular values, descending, of each A [..., m, n]."""
    if driver is not None:
        raise ValueError("svdvals: driver is for CUDA inputs in PyTorch; leave it None")
    return ops.svdvals(A)


class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


def qr(A: Tensor, mode: str = "reduced") -> QRResult:
    """(Q, R) with A = Q R (Householder): mode "reduced", "complete", or "r" (R alone; Q empty)."""
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
    if mode == "r":
        return QRResult(ops.zeros((0,), dtype=A.dtype), ops.qr_r(A, mode="reduced"))
    return QRResult(ops.qr_q(A, mode=mode), ops.qr_r(A, mode=mode))


def pinv(
    A: Tensor, *, atol: float | None = None, rtol: float | None = None, hermitian: bool = False
) -> Tensor:
    """The Moore-Penrose pseudo-inverse by the SVD, as PyTorch's: singular values at most
    max(atol, rtol * the largest) are dropped (rtol max(m, n) * eps when neither is given). hermitian:
    A is symmetric, by its eigendecomposition reading the lower triangle only (as PyTorch's)."""
    floating_only(A.dtype, what="linalg.pinv")
    if A.ndim < 2:
        raise ShapeError(f"linalg.pinv: A must be a matrix or a batch of them, got {describe(A)}")
    if hermitian and A.requires_grad and is_grad_enabled():
        # PyTorch's gradient is the general pseudo-inverse's at the symmetric matrix the lower triangle
        # makes (not its triangle's alone): that matrix, with A's full gradient
        lower = functions.tril(A)
        symmetric = A + (lower + functions.tril(A, -1).mT - A).detach()
        return pinv(symmetric, atol=atol, rtol=rtol)
    if rtol is None:  # PyTorch's default: eps max(m, n) where atol is not positive, else 0
        default = max(A.shape[-2], A.shape[-1]) * _eps(A)
        if isinstance(atol, Tensor):
            rtol = ops.where(atol > 0, 0.0, default).cast(A.dtype)
        else:
            rtol = 0.0 if atol is not None and atol > 0 else default
    if not hermitian:
        return ops.pinv(A, 0.0 if atol is None else atol, rtol)
    # the eigendecomposition of the lower triangle: |eigenvalues| are the singular values
    w, v = eigh(A)
    tol = w.abs().max(-1, keepdim=True).values * _per_matrix(rtol)
    if atol is not None:
        tol = ops.maximum(tol, _per_matrix(atol))
    kept = w.abs() > tol
    inverse = ops.where(kept, 1.0 / ops.where(kept, w, 1.0), 0.0).cast(w.dtype)
    return (v * ops.unsqueeze(inverse, -2)) @ v.mT


def _per_matrix(tol: Any) -> Any:
    """A tolerance given per matrix of the batch, as a column beside its values (a number as it is)."""
    return ops.unsqueeze(tol, -1) if isinstance(tol, Tensor) else tol


class LstsqResult(NamedTuple):
    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor


LSTSQ_DRIVERS = (None, "gels", "gelsy", "gelsd", "gelss")


def lstsq(A: Tensor, B: Tensor, rcond: float | None = None, *, driver: str | None = None) -> LstsqResult:
    """The least-squares (minimum-norm) solution X of A X = B, with PyTorch's CPU drivers' results:
    "gelsy" (the default) the rank of each A (singular values above rcond times the largest; rcond eps *
    max(m, n) by default); "gelsd" and "gelss" that rank and the singular values; "gels" neither (it
    assumes full rank: for a rank-deficient A, LAPACK's QR gives no meaningful answer, verigrad the
    minimum-norm one). residuals, the squared residual norms of each column of B, where A is tall (m > n)
    and, but for "gels", every A of the batch has full rank; else empty. B [..., m, k], or [..., m]."""
    if driver not in LSTSQ_DRIVERS:
        raise RuntimeError(
            f"torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss), "
            f"got {driver!r}"
        )
    floating_only(A.dtype, B.dtype, what="linalg.lstsq")
    if A.ndim < 2:
        raise ShapeError(f"lstsq: A must be a matrix or a batch of them, got {describe(A)}")
    vector = B.ndim == A.ndim - 1
    if (B.shape[-1] if vector else B.shape[-2]) != A.shape[-2]:
        raise ShapeError(f"lstsq: A {describe(A)} and B {describe(B)} need the same number of rows")
    m, n = A.shape[-2], A.shape[-1]
    cutoff = max(m, n) * _eps(A) if rcond is None else rcond
    s = ops.svdvals(A.detach())
    rank = (s > s[..., :1] * cutoff).cast("i64").sum(-1)
    solution = pinv(A, rtol=cutoff)
    solution = (solution @ B.unsqueeze(-1))[..., 0] if vector else solution @ B
    # PyTorch's residuals, even empty, are differentiable; its singular values are not
    residuals = solution.reshape(-1)[:0]
    if m > n and driver not in (None, "gelsy"):
        if driver == "gels" or not isinstance(rank.payload, np.ndarray):
            full = driver == "gels" or _refuse_traced_rank(driver)
        else:
            full = bool((rank.numpy() == n).all())
        if full:
            residuals = _residuals(A, solution, B, vector)
    if driver == "gels":
        rank = ops.zeros((0,), dtype="i64")
    values = s if driver in ("gelsd", "gelss") else ops.zeros((0,), dtype=A.dtype)
    return LstsqResult(solution, residuals, rank, values)


def _residuals(A: Tensor, X: Tensor, B: Tensor, vector: bool) -> Tensor:
    """The squared norms of the columns of A X - B, with PyTorch's gradient: X is the least-squares
    solution, where the derivative through X vanishes, so only A's and B's own terms count
    (2 (A X - B) X^T and -2 (A X - B); differentiating through X instead loses f32 digits)."""
    X = X.detach()
    r = (A @ X.unsqueeze(-1))[..., 0] - B if vector else A @ X - B
    return (r * r).sum(-1 if vector else -2)


def _refuse_traced_rank(driver: str) -> bool:
    raise NotImplementedError(
        f"lstsq(driver={driver!r}) of a tall A in a trace: whether its residuals are returned depends on "
        "the values (every A of full rank); use driver='gelsy' or run it eagerly"
    )


def _eps(a: Tensor) -> float:
    return float(np.finfo(a.dtype.np).eps)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along `dim` (operands broadcast)."""
    return _cross(input, other, dim)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of the vectors along `dim` (operands broadcast); floats only, of one dtype (as
    PyTorch's)."""
    floating_only(x.dtype, y.dtype, what="linalg.vecdot")
    if x.dtype is not y.dtype:
        raise DTypeError(
            f"linalg.vecdot: x and y must have the same dtype, got {x.dtype.name} and {y.dtype.name}"
        )
    return (x * y).sum(dim)


def _dims(dim: Any) -> tuple[int, ...] | None:
    return (dim,) if isinstance(dim, int) else (None if dim is None else tuple(dim))


def vector_norm(
    x: Tensor, ord: float = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Tensor:
    """The `ord`-norm of the vectors along `dim` (all elements as one vector when None): 2, 1, inf,
    -inf, 0 (the count of non-zeros) or any other p, (sum |x|^p)^(1/p)."""
    if isinstance(ord, str):
        raise ValueError(f"linalg.vector_norm: ord must be a number, got {ord!r} (see matrix_norm)")
    if dtype is not None:
        x = x.cast(dtype)
    return functions.norm(x, float(ord), dim=_dims(dim), keepdim=keepdim)


_MATRIX_ORDS = ("fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


def matrix_norm(
    A: Tensor, ord: Any = "fro", dim: tuple[int, int] = (-2, -1), keepdim: bool = False, *, dtype: Any = None
) -> Tensor:
    """The `ord` norm of the matrices in the axes `dim`: "fro", "nuc" (the sum of singular values),
    inf / -inf (the largest / smallest row sum of |a|), 1 / -1 (column sums), 2 / -2 (the largest /
    smallest singular value)."""
    if ord not in _MATRIX_ORDS:
        raise ValueError(f"linalg.matrix_norm: ord must be one of {_MATRIX_ORDS}, got {ord!r}")
    if A.ndim < 2:
        raise ShapeError(
            f"linalg.matrix_norm: the input tensor A must have at least 2 dimensions, got {describe(A)}"
        )
    if dtype is not None:
        A = A.cast(dtype)
    d0, d1 = (normalize_axis(d, A.ndim) for d in dim)
    if d0 == d1:
        raise ValueError(f"linalg.matrix_norm: dims must be different, got {dim}")
    if ord == "fro":
        return functions.norm(A, 2.0, dim=(d0, d1), keepdim=keepdim)
    if ord in ("nuc", 2, -2):
        s = ops.svdvals(A.movedim((d0, d1), (-2, -1)))
        out = s.sum(-1) if ord == "nuc" else (s.amax(-1) if ord == 2 else s.amin(-1))
        if keepdim:
            for d in sorted((d0, d1)):
                out = ops.unsqueeze(out, d)
        return out
    if abs(ord) == math.inf:
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    sums = ops.abs(A).sum(d0, keepdim=keepdim)
    return sums.amax(d1, keepdim=keepdim) if ord > 0 else sums.amin(d1, keepdim=keepdim)


def norm(A: Tensor, ord: Any = None, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
    """PyTorch's linalg.norm: a matrix norm when `ord` is a string or `dim` names two axes (or, with an
    ord and no dim, A is a matrix), a vector norm otherwise (ord None: 2, or "fro" for a matrix)."""
    dims = _dims(dim)
    if ord is None:
        return vector_norm(A, 2, dims, keepdim, dtype=dtype)
    if dims is None:
        if A.ndim not in (1, 2):
            raise ValueError(f"linalg.norm: an ord needs a 1-D or 2-D input or dim, got {describe(A)}")
        dims = tuple(range(A.ndim))
    if isinstance(ord, str) or len(dims) == 2:
        return matrix_norm(A, ord, dims, keepdim, dtype=dtype)
    return vector_norm(A, ord, dims, keepdim, dtype=dtype)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The `offset` diagonal of the matrices in the axes dim1, dim2 (torch.linalg.diagonal)."""
    return functions.diagonal(A, offset, dim1, dim2)


def _info(A: Tensor) -> Tensor:
    """LAPACK's info of each matrix of a successful call: zeros [...] (int32)."""
    return ops.zeros(tuple(A.shape[:-2]), dtype="i32")


class CholeskyExResult(NamedTuple):
    L: Tensor
    info: Tensor


def cholesky_ex(A: Tensor, *, upper: bool = False, check_errors: bool = False) -> CholeskyExResult:
    """(cholesky(A), info) as torch.linalg.cholesky_ex; a matrix that is not positive-definite raises
    (verigrad does not return LAPACK's partial factor)."""
    return CholeskyExResult(cholesky(A, upper=upper), _info(A))


class InvExResult(NamedTuple):
    inverse: Tensor
    info: Tensor


def inv_ex(A: Tensor, *, check_errors: bool = False) -> InvExResult:
    """(inv(A), info) as torch.linalg.inv_ex."""
    return InvExResult(inv(A), _info(A))


class SolveExResult(NamedTuple):
    result: Tensor
    info: Tensor


def solve_ex(A: Tensor, B: Tensor, *, left: bool = True, check_errors: bool = False) -> SolveExResult:
    """(X, info) with A X = B (X A = B if not left), as torch.linalg.solve_ex."""
    if left:
        x = solve(A, B)
    else:
        vector = B.ndim == A.ndim - 1
        x = solve(A.mT, B) if vector else solve(A.mT, B.mT).mT
    return SolveExResult(x, _info(A))


def matrix_rank(
    A: Tensor,
    *,
    atol: float | Tensor | None = None,
    rtol: float | Tensor | None = None,
    hermitian: bool = False,
) -> Tensor:
    """The number of singular values (|eigenvalues| if hermitian, reading the lower triangle) above
    max(atol, rtol * the largest); rtol max(m, n) * eps when neither is given, else 0 (int64), as
    torch.linalg.matrix_rank."""
    if A.ndim < 2:
        raise ShapeError(f"linalg.matrix_rank: A must be a batch of matrices [..., m, n], got {describe(A)}")
    A = A.detach()
    s = eigvalsh(A).abs() if hermitian else ops.svdvals(A)
    if rtol is None:
        rtol = 0.0 if atol is not None else max(A.shape[-2], A.shape[-1]) * _eps(A)
    largest = s.amax(-1, keepdim=True) if s.shape[-1] else ops.zeros((*s.shape[:-1], 1), dtype=s.dtype)
    rtol = rtol.unsqueeze(-1) if isinstance(rtol, Tensor) else rtol
    tol = largest * rtol
    if atol is not None:
        tol = ops.maximum(tol, atol.unsqueeze(-1) if isinstance(atol, Tensor) else atol)
    return (s > tol).cast("i64").sum(-1)


def vander(x: Tensor, *, N: int | None = None) -> Tensor:
    """[..., n, N]: the powers x^0, ..., x^(N-1) of each entry (N = n by default; a 0-d x is one entry),
    as torch.linalg.vander: by cumulative products, as PyTorch's (the same gradient at 0), integers in
    int64."""
    if x.dtype.name == "bool":
        raise DTypeError("linalg.vander supports floating point and integer tensors, got bool")
    if x.ndim == 0:
        x = ops.unsqueeze(x, 0)
    n = x.shape[-1] if N is None else N
    if n <= 1:
        raise ValueError(f"linalg.vander: N must be greater than 1, got {n}")
    dtype = x.dtype if x.dtype.is_float else "i64"
    ones = ops.ones((*x.shape, 1), dtype=dtype)
    powers = ops.unsqueeze(x, -1).expand(*x.shape, n - 1).cumprod(-1)
    return ops.concat([ones, powers.cast(dtype)], axis=-1)


# PyTorch's older spellings in the torch namespace (torch.svd, torch.qr, torch.cholesky, torch.pinverse)


class LegacySVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    V: Tensor


def legacy_svd(input: Tensor, some: bool = True, compute_uv: bool = True) -> LegacySVDResult:
    """torch.svd: (U, S, V) with input = U diag(S) V^T (V, not Vh); without compute_uv, U and V are zero
    matrices [..., m, m] and [..., n, n], as PyTorch's."""
    if not compute_uv:
        m, n, batch = input.shape[-2], input.shape[-1], tuple(input.shape[:-2])
        zeros_u = ops.zeros((*batch, m, m), dtype=input.dtype)
        return LegacySVDResult(zeros_u, svdvals(input), ops.zeros((*batch, n, n), dtype=input.dtype))
    u, s, vh = svd(input, full_matrices=not some)
    return LegacySVDResult(u, s, vh.mT)


def legacy_qr(input: Tensor, some: bool = True) -> QRResult:
    """torch.qr: linalg.qr in mode "reduced" (some) or "complete"."""
    return qr(input, "reduced" if some else "complete")


def legacy_cholesky(input: Tensor, upper: bool = False) -> Tensor:
    """torch.cholesky: linalg.cholesky."""
    return cholesky(input, upper=upper)


def pinverse(input: Tensor, rcond: float = 1e-15) -> Tensor:
    """torch.pinverse: linalg.pinv with rtol = rcond."""
    return pinv(input, rtol=rcond)


from .functions.householder import householder_product as householder_product  # noqa: E402

__all__.append("householder_product")

from .functions.tensor_solvers import tensorinv as tensorinv  # noqa: E402
from .functions.tensor_solvers import tensorsolve as tensorsolve  # noqa: E402

__all__ += ["tensorinv", "tensorsolve"]


from .ops.linalg_extra import (  # noqa: E402
    ldl_factor,
    ldl_factor_ex,
    ldl_solve,
    matrix_exp,
)

_COND_ORDS = (None, "fro", "nuc", math.inf, -math.inf, 1, -1, 2, -2)


def cond(A: Tensor, p: Any = None) -> Tensor:
    """The condition number of each matrix in the `p` norm, as torch.linalg.cond: for p None, 2 or -2 the
    ratio of the largest and smallest singular values (any m x n); for "nuc" sum(s) sum(1 / s); for "fro",
    inf, -inf, 1 and -1 norm(A) norm(A^-1) of square matrices, inf where A is singular (an exact zero
    pivot of its LU factorization)."""
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.cond: A must be a Tensor, got {type(A).__name__}")
    if p not in _COND_ORDS or isinstance(p, bool):
        raise ValueError(f"linalg.cond: p must be one of {_COND_ORDS}, got {p!r}")
    if A.ndim < 2:
        raise ShapeError(f"linalg.cond: A must have at least 2 dimensions, got {describe(A)}")
    if not A.dtype.is_float or A.dtype.name == "f16":  # PyTorch's has no f16 either
        raise DTypeError(f"linalg.cond: A must be a float32 or float64 tensor, got {A.dtype.name}")
    if p in (None, 2, -2, "nuc") and (p != "nuc" or A.shape[-1] == A.shape[-2]):
        s = ops.svdvals(A)
        if p == "nuc":  # PyTorch's: from the singular values, NaN for a zero matrix, no inf
            return s.sum(-1) * (1.0 / s).sum(-1)
        big, small = s.amax(-1), s.amin(-1)
        return big / small if p != -2 else small / big
    if A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"linalg.cond: p={p!r} takes batches of square matrices, got {describe(A)}")
    singular = ops.from_numpy(lu_factor_ex(A.detach()).info.numpy() > 0)
    eye = ops.eye(A.shape[-1], dtype=A.dtype)
    safe = ops.where(ops.unsqueeze(ops.unsqueeze(singular, -1), -1), eye, A)  # no inverse of a singular A
    value = matrix_norm(safe, p) * matrix_norm(inv(safe), p)
    return ops.where(singular, math.inf, value)


__all__ += ["cond", "ldl_factor", "ldl_factor_ex", "ldl_solve", "matrix_exp"]


# torch.svd_lowrank and torch.pca_lowrank (top-level in PyTorch, written here with qr and svd) -----------
def _approximate_basis(A: Tensor, q: int, niter: int, M: Tensor | None) -> Tensor:
    """An orthonormal basis [..., m, q] of A - M's range, from a Gaussian sketch sharpened by `niter`
    power iterations (Halko et al.'s algorithm 4.4, as PyTorch's get_approximate_basis)."""

    def times(B: Tensor, R: Tensor, adjoint: bool = False) -> Tensor:
        X = (B.mT if adjoint else B) @ R
        return X if M is None else X - (M.mT if adjoint else M) @ R

    Q = qr(times(A, ops.randn(A.shape[-1], q, dtype=A.dtype))).Q
    for _ in range(niter):
        Q = qr(times(A, Q, adjoint=True)).Q
        Q = qr(times(A, Q)).Q
    return Q


def _lowrank_input(name: str, A: Tensor) -> Tensor:
    if not isinstance(A, Tensor) or A.ndim < 2:
        raise ShapeError(f"{name} takes a matrix or a batch of them, got {describe(A)}")
    return A if A.dtype.is_float else A.cast("f32")  # PyTorch's floating dtype of an integer input


def svd_lowrank(
    A: Tensor, q: int | None = 6, niter: int | None = 2, M: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """(U [..., m, q], S [..., q], V [..., n, q]) with A - M close to U diag(S) V^T: the randomized SVD
    (Halko et al.'s algorithm 5.1, as PyTorch's; its draws are verigrad's). Exact, up to signs, where
    A - M has rank at most q."""
    A = _lowrank_input("svd_lowrank", A)
    q, niter = 6 if q is None else q, 2 if niter is None else niter
    m, n = A.shape[-2], A.shape[-1]
    if not isinstance(q, int) or not 0 <= q <= min(m, n):
        raise ValueError(f"svd_lowrank: q must be an int in [0, min(m, n) = {min(m, n)}], got {q!r}")
    if M is not None:
        M = M.broadcast_to(tuple(A.shape))
    wide = m < n
    if wide:  # the algorithm of a tall matrix, of the transpose
        A, M = A.mT, None if M is None else M.mT
    Q = _approximate_basis(A, q, niter, M)
    B = Q.mT @ A if M is None else Q.mT @ A - Q.mT @ M
    U, S, Vh = svd(B, full_matrices=False)
    U, V = Q @ U, Vh.mT
    return (V, S, U) if wide else (U, S, V)


def pca_lowrank(
    A: Tensor, q: int | None = None, center: bool = True, niter: int = 2
) -> tuple[Tensor, Tensor, Tensor]:
    """svd_lowrank of A with each column's mean taken away first (center), q = min(6, m, n) by default:
    the principal directions are V's columns (PyTorch's pca_lowrank)."""
    A = _lowrank_input("pca_lowrank", A)
    m, n = A.shape[-2], A.shape[-1]
    if q is None:
        q = min(6, m, n)
    elif not isinstance(q, int) or not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return svd_lowrank(A, q, niter=niter)
    return svd_lowrank(A - A.mean(dim=(-2,), keepdim=True), q, niter=niter)
