"""frexp, the matrix exponential and the LDL^T factorization (LAPACK's sytrf and sytrs), as PyTorch's.

- `frexp(x)`: (mantissa, exponent) with x = mantissa 2^exponent, |mantissa| in [1/2, 1) (0, inf and NaN
  give themselves and exponent 0), the exponent int32 for every float dtype, as PyTorch's; the mantissa's
  gradient is PyTorch's, g / 2^exponent.
- `matrix_exp(A)` of [..., n, n]: scaling and squaring of the Taylor series, in f64 rounded once. Its VJP
  is PyTorch's: the upper-right block of exp([[A^T, G], [0, A^T]]).
- `ldl_factor`: Bunch-Kaufman's diagonal pivoting of a symmetric matrix's lower triangle, step by step as
  LAPACK's unblocked dsytf2 (what dsytrf runs below its block size of 64): LD holds L below the diagonal
  and D's 1x1 and 2x2 blocks, the pivots are LAPACK's (1-based; a 2x2 block's two entries -p). Larger
  matrices are refused: dsytrf's blocked steps round differently and may choose other pivots.
  `ldl_solve` solves with them as dsytrs does. Neither has a gradient, as in PyTorch.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..dtypes import DType, i32
from ..errors import DTypeError, ShapeError
from ..shapes import broadcast, shape_text
from ..tensor import Tensor, describe
from ._op import Op, Sample, no_bf16, same_shape
from ._samples import UNARY_SHAPES
from .shaping import concat
from .unary import exp2

# frexp -----------------------------------------------------------------------------------------------


def _floating_only(name: str, d: DType) -> None:
    no_bf16(d)
    if not d.is_float:
        raise DTypeError(f"{name} only supports floating-point dtypes, got {d.name}")
    if d.name == "f16" and name.startswith("linalg.ldl"):
        raise DTypeError(f"{name} is not implemented for f16 (nor is PyTorch's); cast to float32")


def _same_float(name: str):
    def rule(x: DType, **_) -> DType:
        _floating_only(name, x)
        return x

    return rule


def _int32_of_float(name: str):
    def rule(x: DType, **_) -> DType:
        _floating_only(name, x)
        return i32

    return rule


def _frexp_samples(rng: np.random.Generator) -> list[Sample]:
    """Mantissas inside (0.55, 0.95) times powers of two from 2^-3 to 2^8, either sign: away from the
    jumps at the powers of two, where finite differences of the mantissa mean nothing."""

    def values(shape: tuple) -> np.ndarray:
        signs = rng.choice([-1.0, 1.0], shape)
        return np.asarray(signs * rng.uniform(0.55, 0.95, shape) * 2.0 ** rng.integers(-3, 9, shape))

    return [Sample((values(s),)) for s in UNARY_SHAPES]


frexp_exponent = Op(
    "frexp_exponent",
    shape=same_shape,
    dtype=_int32_of_float("frexp"),
    reference=lambda x: np.frexp(x)[1].astype(np.int32),
    differentiable=False,
    samples=_frexp_samples,
    torch=lambda t, x: t.frexp(x).exponent,
    doc="The exponent e of x = m 2^e with |m| in [1/2, 1) (0 for 0, inf and NaN), int32.",
)
frexp_mantissa = Op(
    "frexp_mantissa",
    shape=same_shape,
    dtype=_same_float("frexp"),
    reference=lambda x: np.frexp(x)[0],
    vjp=lambda g, out, x: (g / exp2(frexp_exponent(x).cast(g.dtype)),),
    samples=_frexp_samples,
    torch=lambda t, x: t.frexp(x).mantissa,
    doc="The mantissa m of x = m 2^e with |m| in [1/2, 1) (0, inf and NaN give themselves).",
)


class FrexpResult(NamedTuple):
    mantissa: Tensor
    exponent: Tensor


def frexp(input: Tensor) -> FrexpResult:
    """(mantissa, exponent) with input = mantissa * 2 ** exponent, as torch.frexp."""
    return FrexpResult(frexp_mantissa(input), frexp_exponent(input))


# matrix_exp ------------------------------------------------------------------------------------------


def _square_shape(a: tuple, name: str = "matrix_exp") -> tuple:
    if len(a) < 2 or a[-1] != a[-2]:
        raise ShapeError(f"linalg.{name} takes batches of square matrices [..., n, n], got {shape_text(a)}")
    return a


def _expm(a: np.ndarray) -> np.ndarray:
    """exp(A) of each matrix (f64): A / 2^s with its norm below 1/2, Taylor's series to 24 terms (the next
    below 1e-24 of the sum), squared s times."""
    out = np.empty_like(a)
    n = a.shape[-1]
    count = math.prod(a.shape[:-2])
    flat, target = a.reshape(count, n, n), out.reshape(count, n, n)
    if n == 1:  # exp itself, as PyTorch's (infinities included)
        return np.exp(a)
    for i, m in enumerate(flat):
        if not np.isfinite(m).all():
            target[i] = np.nan
            continue
        norm = np.abs(m).sum(axis=0).max() if n else 0.0
        s = max(0, math.ceil(math.log2(norm / 0.5))) if norm > 0.5 else 0
        scaled = m / 2.0**s
        term = np.eye(n)
        total = term.copy()
        for k in range(1, 25):
            term = term @ scaled / k
            total = total + term
        for _ in range(s):
            total = total @ total
        target[i] = total
    return out


def _matrix_exp_vjp(g, out, a):
    """PyTorch's: exp([[A^T, G], [0, A^T]])[:n, n:]."""
    n = a.shape[-1]
    at = a.mT
    top = concat([at, g], axis=-1)
    bottom = concat([at * 0.0, at], axis=-1)
    return (matrix_exp(concat([top, bottom], axis=-2))[..., :n, n:],)


def _matrix_exp_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((rng.uniform(-1, 1, (3, 3)),)),
        Sample((rng.uniform(-3, 3, (2, 4, 4)),)),  # scaled and squared
        Sample((rng.uniform(-1, 1, (1, 1)),)),
        Sample((np.zeros((2, 0, 0)),)),
    ]


matrix_exp = Op(
    "matrix_exp",
    shape=_square_shape,
    dtype=_same_float("linalg.matrix_exp"),
    reference=lambda a: _expm(np.asarray(a, np.float64)).astype(a.dtype),
    vjp=_matrix_exp_vjp,
    samples=_matrix_exp_samples,
    torch=lambda t, a: t.linalg.matrix_exp(a),
    exact=False,
    doc="The matrix exponential sum_k A^k / k! of each square matrix.",
)


# LDL^T -----------------------------------------------------------------------------------------------
_ALPHA = (1 + math.sqrt(17)) / 8  # Bunch-Kaufman's growth bound
LDL_MAX = 64  # dsytrf's block size: below it LAPACK runs dsytf2, which the reference follows


def _idamax(v: np.ndarray) -> int:
    """BLAS's idamax: the first position of the largest |v_i|, a NaN never larger (unless it is first)."""
    a = np.abs(v)
    best = 0
    for i in range(1, a.size):
        if a[i] > a[best]:
            best = i
    return best


def _sytf2(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(LD, 1-based pivots, info) of one matrix's lower triangle, as LAPACK's dsytf2 with uplo 'L'."""
    n = a.shape[0]
    a = np.tril(a).copy()
    ipiv = np.zeros(n, dtype=np.int32)
    info = 0
    k = 0
    while k < n:
        kstep = 1
        absakk = abs(a[k, k])
        if k < n - 1:
            imax = k + 1 + _idamax(a[k + 1 :, k])
            colmax = abs(a[imax, k])
        else:
            imax, colmax = k, 0.0
        if max(absakk, colmax) == 0 or math.isnan(absakk):
            info = info or k + 1
            kp = k
        else:
            if absakk >= _ALPHA * colmax:
                kp = k
            else:
                rowmax = abs(a[imax, k + _idamax(a[imax, k:imax])])
                if imax < n - 1:
                    below = abs(a[imax + 1 + _idamax(a[imax + 1 :, imax]), imax])
                    rowmax = max(rowmax, below)  # Fortran's MAX: the first unless the second is larger
                if absakk >= _ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif abs(a[imax, imax]) >= _ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:  # rows and columns kk and kp of the trailing lower triangle swap
                a[kp + 1 :, [kk, kp]] = a[kp + 1 :, [kp, kk]]
                column = a[kk + 1 : kp, kk].copy()
                a[kk + 1 : kp, kk] = a[kp, kk + 1 : kp]
                a[kp, kk + 1 : kp] = column
                a[kk, kk], a[kp, kp] = a[kp, kp], a[kk, kk]
                if kstep == 2:
                    a[k + 1, k], a[kp, k] = a[kp, k], a[k + 1, k]
            if kstep == 1:
                if k < n - 1:
                    d11 = 1.0 / a[k, k]
                    x = a[k + 1 :, k].copy()
                    a[k + 1 :, k + 1 :] -= np.tril(d11 * np.outer(x, x))
                    a[k + 1 :, k] *= d11
            elif k < n - 2:
                d21 = a[k + 1, k]
                d11 = a[k + 1, k + 1] / d21
                d22 = a[k, k] / d21
                t = 1.0 / (d11 * d22 - 1.0)
                d21 = t / d21
                wk = d21 * (d11 * a[k + 2 :, k] - a[k + 2 :, k + 1])
                wkp1 = d21 * (d22 * a[k + 2 :, k + 1] - a[k + 2 :, k])
                a[k + 2 :, k + 2 :] -= np.tril(
                    np.outer(a[k + 2 :, k], wk) + np.outer(a[k + 2 :, k + 1], wkp1)
                )
                a[k + 2 :, k], a[k + 2 :, k + 1] = wk, wkp1
        if kstep == 1:
            ipiv[k] = kp + 1
        else:
            ipiv[k] = ipiv[k + 1] = -(kp + 1)
        k += kstep
    return a, ipiv, info


def _factor(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(LD, pivots, info) of each matrix of a [..., n, n] (f64)."""
    n = a.shape[-1]
    flat = a.reshape(math.prod(a.shape[:-2]), n, n)
    ld, piv, info = (
        np.empty_like(flat),
        np.empty((flat.shape[0], n), np.int32),
        np.empty(flat.shape[0], np.int32),
    )
    for i, m in enumerate(flat):
        ld[i], piv[i], info[i] = _sytf2(m)
    return ld.reshape(a.shape), piv.reshape(a.shape[:-1]), info.reshape(a.shape[:-2])


def _ldl_shape(a: tuple) -> tuple:
    _square_shape(a, "ldl_factor")
    if a[-1] > LDL_MAX:
        raise NotImplementedError(
            f"linalg.ldl_factor: matrices larger than {LDL_MAX} x {LDL_MAX} are not supported (LAPACK's "
            "blocked dsytrf may choose other pivots than the unblocked steps verigrad runs); got "
            f"{shape_text(a)}"
        )
    return a


def _ldl_samples(rng: np.random.Generator) -> list[Sample]:
    return [
        Sample((rng.standard_normal((5, 5)),)),
        Sample((rng.standard_normal((2, 4, 4)),)),
        Sample((np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]]),)),  # 2x2 pivots
        Sample((np.zeros((0, 3, 3)),)),
    ]


ldl_ld = Op(
    "ldl_ld",
    shape=_ldl_shape,
    dtype=_same_float("linalg.ldl_factor"),
    reference=lambda a: _factor(np.asarray(a, np.float64))[0].astype(a.dtype),
    differentiable=False,
    samples=_ldl_samples,
    torch=lambda t, a: t.linalg.ldl_factor(a)[0],
    exact=False,
    doc="L (below the diagonal) and D (its 1x1 and 2x2 blocks) of the LDL^T factorization, as sytrf's.",
)
ldl_pivots = Op(
    "ldl_pivots",
    shape=lambda a: _ldl_shape(a)[:-1],
    dtype=_int32_of_float("linalg.ldl_factor"),
    reference=lambda a: _factor(np.asarray(a, np.float64))[1],
    differentiable=False,
    samples=_ldl_samples,
    torch=lambda t, a: t.linalg.ldl_factor(a)[1],
    doc="LAPACK's 1-based pivots of the LDL^T factorization (a 2x2 block's two entries -p), int32.",
)
ldl_info = Op(
    "ldl_info",
    shape=lambda a: _ldl_shape(a)[:-2],
    dtype=_int32_of_float("linalg.ldl_factor"),
    reference=lambda a: _factor(np.asarray(a, np.float64))[2],
    differentiable=False,
    samples=_ldl_samples,
    torch=lambda t, a: t.linalg.ldl_factor_ex(a)[2],
    doc="LAPACK's info of the LDL^T factorization: the 1-based step of D's first zero block, 0 if none.",
)


def _sytrs(ld: np.ndarray, ipiv: np.ndarray, b: np.ndarray) -> np.ndarray:
    """X with A X = B for A = L D L^T given as sytrf gives it (lower), as LAPACK's dsytrs."""
    n = ld.shape[0]
    b = b.copy()
    k = 0
    while k < n:  # L D Y = B
        if ipiv[k] > 0:
            kp = ipiv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            b[k + 1 :] -= np.outer(ld[k + 1 :, k], b[k])
            b[k] /= ld[k, k]
            k += 1
        else:
            kp = -ipiv[k] - 1
            b[[k + 1, kp]] = b[[kp, k + 1]]
            b[k + 2 :] -= np.outer(ld[k + 2 :, k], b[k]) + np.outer(ld[k + 2 :, k + 1], b[k + 1])
            akm1k = ld[k + 1, k]
            akm1, ak = ld[k, k] / akm1k, ld[k + 1, k + 1] / akm1k
            denom = akm1 * ak - 1.0
            bkm1, bk = b[k] / akm1k, b[k + 1] / akm1k
            b[k], b[k + 1] = (ak * bkm1 - bk) / denom, (akm1 * bk - bkm1) / denom
            k += 2
    k = n - 1
    while k >= 0:  # L^T X = Y
        if ipiv[k] > 0:
            b[k] -= ld[k + 1 :, k] @ b[k + 1 :]
            kp = ipiv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 1
        else:
            b[k] -= ld[k + 1 :, k] @ b[k + 1 :]
            b[k - 1] -= ld[k + 1 :, k - 1] @ b[k + 1 :]
            kp = -ipiv[k] - 1
            b[[k, kp]] = b[[kp, k]]
            k -= 2
    return b


def _solve_shape(ld: tuple, piv: tuple, b: tuple) -> tuple:
    _square_shape(ld, "ldl_solve")
    if len(b) < 2 or b[-2] != ld[-1]:
        raise ShapeError(
            f"linalg.ldl_solve: B must be [..., {ld[-1]}, k] for LD {shape_text(ld)}, got {shape_text(b)}"
        )
    if tuple(piv) != tuple(ld[:-1]):
        raise ShapeError(
            f"linalg.ldl_solve: pivots must be {shape_text(ld[:-1])} for LD, got {shape_text(piv)}"
        )
    batch = broadcast(tuple(ld[:-2]), tuple(b[:-2]))
    return (*batch, *b[-2:])


def _solve_dtype(ld: DType, piv: DType, b: DType) -> DType:
    _floating_only("linalg.ldl_solve", ld)
    if piv is not i32:
        raise DTypeError(f"linalg.ldl_solve: pivots must be int32, got {piv.name}")
    if b is not ld:
        raise DTypeError(f"linalg.ldl_solve: LD and B must have the same dtype, got {ld.name} and {b.name}")
    return ld


def _solve(ld: np.ndarray, piv: np.ndarray, b: np.ndarray) -> np.ndarray:
    batch = np.broadcast_shapes(ld.shape[:-2], b.shape[:-2])
    n, k = b.shape[-2:]
    count = math.prod(batch)
    lds = np.broadcast_to(np.asarray(ld, np.float64), (*batch, n, n)).reshape(count, n, n)
    pivs = np.broadcast_to(piv, (*batch, n)).reshape(count, n)
    bs = np.broadcast_to(np.asarray(b, np.float64), (*batch, n, k)).reshape(count, n, k)
    out = np.empty(bs.shape)
    for i in range(bs.shape[0]):
        out[i] = _sytrs(lds[i], pivs[i], bs[i])
    return out.reshape(*batch, n, k).astype(ld.dtype)


def _solve_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for a, bshape in [((5, 5), (5, 2)), ((2, 4, 4), (2, 4, 3)), ((3, 3), (2, 3, 1)), ((0, 0), (0, 5))]:
        m = rng.standard_normal(a)
        if a == (3, 3):
            m = np.array([[0.0, 1.0, 2.0], [1.0, 0.0, 3.0], [2.0, 3.0, 0.0]])
        ld, piv, _ = _factor(m)
        out.append(Sample((ld, piv, rng.standard_normal(bshape))))
    return out


ldl_solve_op = Op(
    "ldl_solve",
    shape=_solve_shape,
    dtype=_solve_dtype,
    reference=_solve,
    differentiable=False,
    samples=_solve_samples,
    torch=lambda t, ld, piv, b: t.linalg.ldl_solve(ld, piv, b),
    exact=False,
    doc="X with A X = B for A's LDL^T factorization as ldl_factor gives it (LAPACK's sytrs).",
)


class LDLFactorResult(NamedTuple):
    LD: Tensor
    pivots: Tensor


class LDLFactorExResult(NamedTuple):
    LD: Tensor
    pivots: Tensor
    info: Tensor


def _matrix(name: str, A: Tensor) -> None:
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.{name}: A must be a Tensor, got {type(A).__name__}")
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ShapeError(f"linalg.{name}: A must be batches of square matrices, got {describe(A)}")


def ldl_factor_ex(A: Tensor, *, hermitian: bool = False, check_errors: bool = False) -> LDLFactorExResult:
    """(LD, pivots, info) of the LDL^T factorization of each symmetric A (its lower triangle read), as
    torch.linalg.ldl_factor_ex (LAPACK's sytrf; `hermitian` is the same for real matrices)."""
    _matrix("ldl_factor_ex", A)
    info = ldl_info(A)
    if check_errors and info.numpy().any():
        raise ValueError(f"linalg.ldl_factor_ex: D is singular (LAPACK info {int(info.numpy().max())})")
    return LDLFactorExResult(ldl_ld(A), ldl_pivots(A), info)


def ldl_factor(A: Tensor, *, hermitian: bool = False) -> LDLFactorResult:
    """(LD, pivots) as torch.linalg.ldl_factor; a singular D raises."""
    _matrix("ldl_factor", A)
    info = ldl_info(A).numpy()
    if info.any():
        raise ValueError(
            f"linalg.ldl_factor: the factorization's D is singular at step {int(info.max())} (LAPACK info)"
        )
    return LDLFactorResult(ldl_ld(A), ldl_pivots(A))


def ldl_solve(LD: Tensor, pivots: Tensor, B: Tensor, *, hermitian: bool = False) -> Tensor:
    """X with A X = B for A's factorization as ldl_factor gives it, as torch.linalg.ldl_solve (LAPACK's
    sytrs; `hermitian` is the same for real matrices)."""
    return ldl_solve_op(LD, pivots, B)
