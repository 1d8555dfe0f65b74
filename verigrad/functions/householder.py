"""Products of Householder reflectors written with the ops: linalg.householder_product (the first n
columns of Q = H_0 H_1 ... H_{k-1}, H_i = I - tau_i v_i v_i^T, v_i the i-th column of A below the diagonal
with a 1 on it, as LAPACK's orgqr) and ormqr (Q or Q^T times a matrix, from either side, as LAPACK's
ormqr), whose gradients are the ops', and geqrf, which makes the reflectors."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import DTypeError, ShapeError
from ..ops._op import floating_only
from ..ops.creation import eye, from_numpy
from ..ops.matmul import matmul
from ..tensor import Tensor, describe
from .matrices import tril


def _q(name: str, a: Tensor, tau: Tensor) -> Tensor:
    """Q [*, m, m] of the reflectors held in a [*, m, n] and tau [*, k]."""
    if a.ndim < 2 or tau.ndim != a.ndim - 1 or tuple(tau.shape[:-1]) != tuple(a.shape[:-2]):
        raise ShapeError(
            f"{name}: expected input [*, m, n] and tau [*, k] of the same batch, "
            f"got {describe(a)}, {describe(tau)}"
        )
    m, n, k = int(a.shape[-2]), int(a.shape[-1]), int(tau.shape[-1])
    if k > (n if name == "linalg.householder_product" else m):
        raise ShapeError(f"{name}: tau has {k} reflectors, more than the input {describe(a)} holds")
    floating_only(a.dtype, tau.dtype, what=name)
    if a.dtype is not tau.dtype:
        raise ShapeError(f"{name}: input and tau must share a dtype, got {a.dtype} and {tau.dtype}")
    ident = eye(m, dtype=a.dtype)
    v = tril(a[..., :, :k], -1) + eye(m, k, dtype=a.dtype)  # [*, m, k]
    q = ident.expand(*a.shape[:-2], m, m)
    for i in range(k):
        vi = v[..., :, i : i + 1]
        q = q - matmul(matmul(q, vi), vi.transpose(-1, -2)) * tau[..., i : i + 1].unsqueeze(-1)
    return q


def householder_product(input: Tensor, tau: Tensor) -> Tensor:
    """The first n columns of the product of the Householder reflectors of input [*, m, n], tau [*, k]
    (PyTorch's linalg.householder_product; n <= m, k <= n)."""
    if input.ndim >= 2 and int(input.shape[-1]) > int(input.shape[-2]):
        raise ShapeError(
            "linalg.householder_product: input must have at least as many rows as columns, "
            f"got {describe(input)}"
        )
    return _q("linalg.householder_product", input, tau)[..., :, : int(input.shape[-1])]


def ormqr(input: Tensor, tau: Tensor, other: Tensor, left: bool = True, transpose: bool = False) -> Tensor:
    """op(Q) @ other (left) or other @ op(Q), Q the product of the reflectors of input [*, mn, k] and tau,
    op(Q) = Q^T where transpose (PyTorch's ormqr)."""
    q = _q("ormqr", input, tau)
    size = int(other.shape[-2 if left else -1]) if other.ndim >= 2 else -1
    if size != int(q.shape[-1]):
        side = "rows" if left else "columns"
        raise ShapeError(
            f"ormqr: other {describe(other)} must have {int(q.shape[-1])} {side}, as input {describe(input)}"
        )
    if transpose:
        q = q.transpose(-1, -2)
    return matmul(q, other) if left else matmul(other, q)


class GeqrfResult(NamedTuple):
    a: Tensor
    tau: Tensor


def geqrf(input: Tensor) -> GeqrfResult:
    """LAPACK's geqrf of input [*, m, n] (PyTorch's torch.geqrf): R on and above the diagonal, the
    Householder vectors below it, and their tau [*, min(m, n)]; read from the values (eager only), and,
    as PyTorch's, without a gradient."""
    if input.ndim < 2:
        raise ShapeError(f"geqrf: input must have at least 2 dimensions, got {describe(input)}")
    if not input.dtype.is_float:
        raise DTypeError(f"geqrf: input must be a floating tensor, got {input.dtype.name}")
    h, tau = np.linalg.qr(input.numpy(), mode="raw")  # LAPACK's geqrf, in input's precision
    return GeqrfResult(from_numpy(np.ascontiguousarray(np.swapaxes(h, -1, -2))), from_numpy(tau.copy()))
