"""The LU factorization with partial pivoting, as LAPACK's getrf and PyTorch's linalg.lu_factor: for A
[..., m, n], `lu_packed` is L (unit lower triangular, its diagonal not stored) and U packed in one
[..., m, n] matrix, and `lu_pivots` the rows swapped at each step ([..., min(m, n)], int32, 1-based: row
i was swapped with row pivots[i]), with A = P L U. The reference runs getrf's steps (the first largest
|entry| of each column as its pivot) in f64, rounded once; the VJP is PyTorch's (linalg_lu_backward,
square, wide and tall), and reads A's values to rebuild P: it runs eagerly, not in a trace. The pivots
have no gradient.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import i32
from ..errors import ShapeError
from ..shapes import shape_text
from ._op import Op, Sample, floating_only
from .binary import where
from .creation import arange, eye, from_numpy, zeros
from .linalg import _in_f64, solve
from .shaping import concat, unsqueeze


def _getrf(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the packed LU, the 1-based pivots) of each matrix of a [..., m, n] (f64)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    lu = a.reshape(-1, m, n).copy()
    pivots = np.zeros((lu.shape[0], k), dtype=np.int32)
    batch = np.arange(lu.shape[0])
    for j in range(k):
        p = np.argmax(np.abs(lu[:, j:, j]), axis=1) + j if m > j else np.full(len(batch), j)
        pivots[:, j] = p + 1
        row_j, row_p = lu[batch, j].copy(), lu[batch, p].copy()
        lu[batch, j], lu[batch, p] = row_p, row_j
        pivot = lu[:, j, j]
        with np.errstate(all="ignore"):
            scaled = lu[:, j + 1 :, j] / pivot[:, None]
        lu[:, j + 1 :, j] = np.where((pivot != 0)[:, None], scaled, lu[:, j + 1 :, j])
        lu[:, j + 1 :, j + 1 :] -= lu[:, j + 1 :, j, None] * lu[:, j, None, j + 1 :]
    return lu.reshape(a.shape), pivots.reshape(*a.shape[:-2], k)


def _shape(a: tuple) -> tuple:
    if len(a) < 2:
        raise ShapeError(f"lu_factor takes matrices [..., m, n], got {shape_text(a)}")
    return a


def _pivots_shape(a: tuple) -> tuple:
    return (*_shape(a)[:-2], min(a[-2], a[-1]))


def _pivots_dtype(a):
    floating_only(a)  # the factorization's rule: integers, bool and bf16 refused
    return i32


def _triangle(x, lower: bool, k: int = 0):
    rows, cols = unsqueeze(arange(0, x.shape[-2]), -1), arange(0, x.shape[-1])
    keep = (cols - rows <= k) if lower else (cols - rows >= k)
    return where(keep, x, zeros((), dtype=x.dtype))


def _unpacked(lu, pivots_np: np.ndarray):
    """(P as a matrix, L [..., m, k], U [..., k, n]) of a packed LU and its pivots (read as values)."""
    m, n = lu.shape[-2], lu.shape[-1]
    k = min(m, n)
    lower = _triangle(lu[..., :, :k], True, -1) + eye(m, k, dtype=lu.dtype)
    upper = _triangle(lu[..., :k, :], False)
    return permutation_matrix(pivots_np, m, lu.dtype), lower, upper


def permutation_matrix(pivots: np.ndarray, m: int, dtype):
    """P [..., m, m] of LAPACK's row swaps: A = P L U."""
    flat = pivots.reshape(int(np.prod(pivots.shape[:-1])), pivots.shape[-1])  # explicit: a batch may be empty
    perms = np.tile(np.arange(m), (flat.shape[0], 1))
    for b in range(flat.shape[0]):
        for i, p in enumerate(flat[b]):
            perms[b, [i, p - 1]] = perms[b, [p - 1, i]]
    p = np.zeros((flat.shape[0], m, m))
    for b in range(flat.shape[0]):
        p[b, perms[b], np.arange(m)] = 1.0
    return from_numpy(p.reshape(*pivots.shape[:-1], m, m)).cast(dtype)


def _lu_vjp(g, out, a):
    """PyTorch's lu_factor_ex_backward: linalg_lu_backward of L_grad = g[..., :, :k], U_grad =
    g[..., :k, :] at A = P L U."""
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    p, lower, upper = _unpacked(out, _pivots_of(a))
    gl, gu = g[..., :, :k], g[..., :k, :]
    if m == n:
        inner = _triangle(lower.mT @ gl, True, -1) + _triangle(gu @ upper.mT, False)
        ga = solve(lower.mT, solve(upper, inner.mT).mT)  # L^-H inner U^-H
        return (p @ ga,)
    if m < n:  # wide: U = [U1 U2]
        u1 = upper[..., :, :k]
        inner = lower.mT @ gl - _triangle(gu, False) @ upper.mT
        ga = solve(u1, _triangle(inner, True, -1).mT).mT  # (.) U1^-H
        ga = concat([ga + _triangle(gu[..., :, :k], False), gu[..., :, k:]], axis=-1)
        return (p @ solve(lower.mT, ga),)
    l1 = lower[..., :k, :]  # tall: L = [L1; L2]
    inner = gu @ upper.mT - lower.mT @ _triangle(gl, True, -1)
    ga = solve(l1.mT, _triangle(inner, False))
    ga = concat([ga + _triangle(gl[..., :k, :], True, -1), gl[..., k:, :]], axis=-2)
    return (p @ solve(upper, ga.mT).mT,)


def _pivots_of(a) -> np.ndarray:
    return _getrf(np.asarray(a.detach().numpy(), dtype=np.float64))[1]


def _samples(rng: np.random.Generator) -> list[Sample]:
    def well(*shape):
        return rng.uniform(-1, 1, shape) + 3 * np.eye(*shape[-2:])

    return [Sample((well(3, 3),)), Sample((well(2, 4, 4),)), Sample((well(3, 5),)), Sample((well(2, 5, 3),))]


def _torch_lu(t, a):
    return t.linalg.lu_factor(a)[0]


lu_packed = Op(
    "lu_packed",
    shape=_shape,
    dtype=lambda a: floating_only(a),
    reference=lambda a: _in_f64(lambda x: _getrf(x)[0], a),
    vjp=_lu_vjp,
    samples=_samples,
    torch=_torch_lu,
    exact=False,
    doc="L and U of A = P L U (partial pivoting, LAPACK's getrf) packed in one [..., m, n] matrix.",
)
lu_pivots = Op(
    "lu_pivots",
    shape=_pivots_shape,
    dtype=_pivots_dtype,
    reference=lambda a: _getrf(np.asarray(a, dtype=np.float64))[1],
    differentiable=False,
    samples=_samples,
    torch=lambda t, a: t.linalg.lu_factor(a)[1],
    doc="The 1-based rows LAPACK's getrf swapped at each step of A's LU factorization (int32).",
)
