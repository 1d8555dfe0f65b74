"""Linear algebra on matrices, batched over leading axes: `inv`, `det`, `solve`, `cholesky`, the
symmetric eigendecomposition (`eigvalsh`, `eigh_vectors`), the singular values and vectors (`svdvals`,
`svd_u`, `svd_vh`) and `qr_q` / `qr_r` (PyTorch's torch.linalg ones; a decomposition of several results
is one op per result). The references are NumPy's LAPACK routines; f16 and f32 are computed in f64 and
rounded once, as matmul's products are. A singular matrix gives what LAPACK gives: `inv` and `solve`
raise NumPy's LinAlgError, `det` is 0; `cholesky` of a matrix that is not positive-definite raises it.
The VJPs are PyTorch's (the ops on symmetric matrices give its symmetric gradient; svd with
full_matrices of a non-square matrix takes the gradient of its first min(m, n) singular vectors, as
PyTorch's: the others are any basis of the complement); where a gradient is not written here (qr of a
tall matrix with mode='complete'), the backward pass raises, never leaves a gradient out.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, from_numpy_dtype
from ..errors import ShapeError
from ..shapes import broadcast, shape_text
from ._op import Op, Sample, float_dtype, floating_only, unbroadcast
from .binary import where
from .creation import arange, eye, zeros_like
from .movement import concat


def _square(a: tuple, what: str) -> None:
    if len(a) < 2 or a[-1] != a[-2]:
        raise ShapeError(f"{what} takes square matrices [..., n, n], got {shape_text(a)}")


def _in_f64(fn, *arrays: np.ndarray) -> np.ndarray:
    """fn on the arrays widened to f64 where they are narrower floats, the result rounded back once."""
    out = float_dtype(*(from_numpy_dtype(a.dtype) for a in arrays))
    return np.asarray(fn(*(a.astype(np.float64) for a in arrays))).astype(out.np)


def _matrices(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Well-conditioned samples: uniform entries plus n on the diagonal."""
    n = shape[-1]
    return rng.uniform(-1, 1, shape) + n * np.eye(n)


def _inv_shape(a: tuple) -> tuple:
    _square(a, "inv")
    return a


def _det_shape(a: tuple) -> tuple:
    _square(a, "det")
    return a[:-2]


def _vector(a: tuple, b: tuple) -> bool:
    """Whether B is a (batch of) vector(s) for A, as PyTorch tells: B [..., n] shaped as A less its last
    axis; any other B is a (batch of) matrix [..., n, k]."""
    return len(b) == len(a) - 1 and all(x == y for x, y in zip(b, a[:-1]))


def _solve_shape(a: tuple, b: tuple) -> tuple:
    """A [..., n, n] and B [..., n, k] (batch axes broadcast), or B [..., n] (see `_vector`)."""
    _square(a, "solve")
    if _vector(a, b):
        return b
    if len(b) < 2 or b[-2] != a[-1]:
        raise ShapeError(
            f"solve: A {shape_text(a)} needs B [..., {a[-1]}, k] or {shape_text(a[:-1])}, got {shape_text(b)}"
        )
    return (*broadcast(a[:-2], b[:-2]), *b[-2:])


def _solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _vector(a.shape, b.shape):
        return np.linalg.solve(a, b[..., None])[..., 0]
    shape = (*np.broadcast_shapes(a.shape[:-2], b.shape[:-2]), *b.shape[-2:])
    return np.linalg.solve(np.broadcast_to(a, (*shape[:-2], *a.shape[-2:])), np.broadcast_to(b, shape))


def _square_dtype(*dtypes: DType, **_: object) -> DType:
    return floating_only(*dtypes)


inv = Op(
    "inv",
    shape=_inv_shape,
    dtype=_square_dtype,
    reference=lambda a: _in_f64(np.linalg.inv, a),
    # d(A^-1) = -A^-1 dA A^-1, so dA = -(A^-1)^T g (A^-1)^T
    vjp=lambda g, out, a: (-(out.mT @ g @ out.mT),),
    samples=lambda rng: [Sample((_matrices(rng, s),)) for s in [(1, 1), (3, 3), (2, 4, 4), (0, 2, 2)]],
    torch=lambda t, a: t.linalg.inv(a),
    exact=False,
    doc="The inverse of each square matrix [..., n, n] (LAPACK's; a singular one raises).",
)

det = Op(
    "det",
    shape=_det_shape,
    dtype=_square_dtype,
    reference=lambda a: _in_f64(np.linalg.det, a),
    # d det(A) = det(A) tr(A^-1 dA), so dA = g det(A) (A^-1)^T
    vjp=lambda g, out, a: ((g * out).unsqueeze(-1).unsqueeze(-1) * inv(a).mT,),
    samples=lambda rng: [Sample((_matrices(rng, s),)) for s in [(1, 1), (3, 3), (2, 4, 4), (0, 2, 2)]],
    torch=lambda t, a: t.linalg.det(a),
    exact=False,
    doc="The determinant of each square matrix [..., n, n] -> [...] (LAPACK's LU).",
)


def _solve_vjp(g, out, a, b):
    """x = A^-1 B: dB = A^-T g (a solve with A^T), dA = -dB x^T (summed over broadcast batch axes)."""
    gb = solve(a.mT, g)
    ga = -(gb.unsqueeze(-1) * out.unsqueeze(-2)) if _vector(a.shape, b.shape) else -(gb @ out.mT)
    return (
        unbroadcast(ga, a.shape) if a.requires_grad else None,
        unbroadcast(gb, b.shape) if b.requires_grad else None,
    )


solve = Op(
    "solve",
    shape=_solve_shape,
    dtype=_square_dtype,
    reference=lambda a, b: _in_f64(_solve, a, b),
    vjp=_solve_vjp,
    samples=lambda rng: [
        Sample((_matrices(rng, sa), rng.uniform(-2, 2, sb)))
        for sa, sb in [
            ((3, 3), (3,)),
            ((3, 3), (3, 2)),
            ((2, 4, 4), (2, 4, 1)),
            ((2, 4, 4), (2, 4)),
            ((2, 3, 3), (3, 5)),
            ((3, 3), (2, 3, 2)),
        ]
    ],
    torch=lambda t, a, b: t.linalg.solve(a, b),
    exact=False,
    doc="x with A x = B for square A [..., n, n] and B [..., n, k] (batch axes broadcast), or B [..., n]"
    " shaped as A less its last axis (vectors).",
)


def _matrix(a: tuple, what: str) -> None:
    if len(a) < 2:
        raise ShapeError(f"{what} takes matrices [..., m, n], got {shape_text(a)}")


def _tril(x, offset: int = 0):
    """The lower triangle of the last two axes (written with the ops, for the VJPs)."""
    rows, cols = arange(0, x.shape[-2]).unsqueeze(-1), arange(0, x.shape[-1])
    return where(cols - rows <= offset, x, 0.0).cast(x.dtype)


def _cholesky_vjp(g, out, a):
    """PyTorch's: gA = L^-H Phi L^-1 with Phi = (tril(L^H gL) + tril(L^H gL, -1)^H) / 2 (symmetric)."""
    phi = _tril(out.mT @ g)
    phi = (phi + _tril(phi, -1).mT) * 0.5
    left = solve(out.mT, phi)  # L^-H Phi
    return (solve(out.mT, left.mT).mT,)  # (L^-H Phi) L^-1


def _spd(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Symmetric positive-definite samples with well separated eigenvalues."""
    m = rng.uniform(-1, 1, shape)
    n = shape[-1]
    return m @ np.swapaxes(m, -1, -2) + np.diag(np.arange(1.0, n + 1) * 2)


cholesky = Op(
    "cholesky",
    shape=lambda a: (_square(a, "cholesky"), a)[1],
    dtype=_square_dtype,
    reference=lambda a: _in_f64(lambda x: np.linalg.cholesky(_symmetric(x)), a),
    vjp=_cholesky_vjp,
    samples=lambda rng: [Sample((_spd(rng, s),)) for s in [(1, 1), (3, 3), (2, 4, 4)]],
    torch=lambda t, a: t.linalg.cholesky(a),
    exact=False,
    doc="The lower-triangular L with L L^T = A for each symmetric positive-definite A [..., n, n] "
    "(LAPACK's; of (A + A^T) / 2).",
)


def _symmetric(a: np.ndarray) -> np.ndarray:
    """(A + A^T) / 2: A itself when A is symmetric. The ops on symmetric matrices are functions of it, so
    that their gradient is PyTorch's symmetric one (verigrad.linalg reads the lower triangle first)."""
    return (a + np.swapaxes(a, -1, -2)) / 2


def _eigh(a: np.ndarray, part: int) -> np.ndarray:
    return np.linalg.eigh(_symmetric(a))[part]


def _eigvalsh_vjp(g, out, a):
    v = eigh_vectors(a)
    return ((v * g.unsqueeze(-2)) @ v.mT,)  # V diag(g) V^T


def _eigh_vectors_vjp(g, out, a):
    """PyTorch's: V (skew(V^T gV) / E) V^T, E[i, j] = L[j] - L[i] (1 on the diagonal, where skew is 0)."""
    values = eigvalsh(a)
    vg = out.mT @ g
    skew = (vg - vg.mT) * 0.5
    gaps = values.unsqueeze(-2) - values.unsqueeze(-1) + eye(values.shape[-1], dtype=values.dtype)
    return (out @ (skew / gaps) @ out.mT,)


eigvalsh = Op(
    "eigvalsh",
    shape=lambda a: (_square(a, "eigvalsh"), a[:-1])[1],
    dtype=_square_dtype,
    reference=lambda a: _in_f64(lambda x: _eigh(x, 0), a),
    vjp=_eigvalsh_vjp,
    samples=lambda rng: [Sample((_spd(rng, s),)) for s in [(1, 1), (3, 3), (2, 4, 4)]],
    torch=lambda t, a: t.linalg.eigvalsh(a),
    exact=False,
    doc="The eigenvalues, ascending, of each symmetric A [..., n, n] -> [..., n] (of (A + A^T) / 2).",
)

eigh_vectors = Op(
    "eigh_vectors",
    shape=lambda a: (_square(a, "eigh"), a)[1],
    dtype=_square_dtype,
    reference=lambda a: _in_f64(lambda x: _eigh(x, 1), a),
    vjp=_eigh_vectors_vjp,
    samples=lambda rng: [Sample((_spd(rng, s),)) for s in [(1, 1), (3, 3), (2, 4, 4)]],
    exact=False,
    doc="The eigenvectors (columns, LAPACK's signs) of each symmetric A [..., n, n], in the order of "
    "eigvalsh (of (A + A^T) / 2).",
)


def _general(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    """Samples with well separated singular values."""
    return rng.uniform(-1, 1, shape) + np.eye(*shape[-2:]) * np.arange(1.0, min(shape[-2:]) + 1).max() * 2


def _svd_samples(rng: np.random.Generator) -> list[Sample]:
    """Square and tall matrices (a wide one's singular vectors may take other signs than PyTorch's;
    full_matrices of a non-square matrix has extra vectors that finite differences cannot follow)."""
    cases = [((3, 3), True), ((3, 3), False), ((2, 4, 3), False), ((1, 1), True)]
    return [Sample((_general(rng, s),), {"full_matrices": f}) for s, f in cases]


def _qr_samples(rng: np.random.Generator) -> list[Sample]:
    """Square, tall and wide matrices (a tall one's complete Q has no gradient)."""
    cases = [
        ((3, 3), "reduced"),
        ((3, 3), "complete"),
        ((2, 4, 3), "reduced"),
        ((1, 1), "reduced"),
        ((3, 5), "reduced"),
        ((2, 2, 4), "complete"),
    ]
    return [Sample((_general(rng, s),), {"mode": m}) for s, m in cases]


def _svdvals_shape(a: tuple) -> tuple:
    _matrix(a, "svdvals")
    return (*a[:-2], min(a[-2], a[-1]))


def _svd_u_shape(a: tuple, full_matrices: bool) -> tuple:
    _matrix(a, "svd")
    return (*a[:-1], a[-2] if full_matrices else min(a[-2], a[-1]))


def _svd_vh_shape(a: tuple, full_matrices: bool) -> tuple:
    _matrix(a, "svd")
    return (*a[:-2], a[-1] if full_matrices else min(a[-2], a[-1]), a[-1])


def _svdvals_vjp(g, out, a):
    u, vh = svd_u(a, full_matrices=False), svd_vh(a, full_matrices=False)
    return ((u * g.unsqueeze(-2)) @ vh,)  # U diag(g) V^H


def _svd_parts(a):
    """(U, S, V) of the reduced SVD, and the gaps E[i, j] = S[j]^2 - S[i]^2 (1 on the diagonal)."""
    u, vh, sv = svd_u(a, full_matrices=False), svd_vh(a, full_matrices=False), svdvals(a)
    sq = sv * sv
    gaps = sq.unsqueeze(-2) - sq.unsqueeze(-1) + eye(sv.shape[-1], dtype=sv.dtype)
    return u, sv, vh.mT, gaps


def _narrowed(g, a, full_matrices: bool, axis: int):
    """g of the first k = min(m, n) singular vectors along `axis` (PyTorch's svd backward with
    full_matrices: the other vectors span the complement in no unique way, their gradient is dropped)."""
    k = min(a.shape[-2], a.shape[-1])
    if not full_matrices or g.shape[axis] == k:
        return g
    return g[..., :k] if axis == -1 else g[..., :k, :]


def _svd_u_vjp(g, out, a, full_matrices: bool):
    """PyTorch's svd_backward for gU alone: U (skew(U^T gU) S / E) V^T, plus (gU - U U^T gU) S^-1 V^T
    for a tall A."""
    g = _narrowed(g, a, full_matrices, -1)
    u, sv, v, gaps = _svd_parts(a)
    ug = u.mT @ g
    inner = (ug - ug.mT) * sv.unsqueeze(-2) / gaps
    ga = u @ inner @ v.mT
    if a.shape[-2] > a.shape[-1]:
        ga = ga + ((g - u @ ug) / sv.unsqueeze(-2)) @ v.mT
    return (ga,)


def _svd_vh_vjp(g, out, a, full_matrices: bool):
    """PyTorch's svd_backward for gVh alone: U (S skew(V^T gV) / E) V^T, plus U S^-1 (gV - V V^T gV)^T
    for a wide A."""
    g = _narrowed(g, a, full_matrices, -2)
    u, sv, v, gaps = _svd_parts(a)
    gv = g.mT
    vg = v.mT @ gv
    inner = sv.unsqueeze(-1) * (vg - vg.mT) / gaps
    ga = u @ inner @ v.mT
    if a.shape[-2] < a.shape[-1]:
        ga = ga + (u / sv.unsqueeze(-2)) @ (gv - v @ vg).mT
    return (ga,)


def _flag(a, full_matrices: bool = True) -> dict:
    return {"full_matrices": bool(full_matrices)}


svdvals = Op(
    "svdvals",
    shape=_svdvals_shape,
    dtype=_square_dtype,
    reference=lambda a: _in_f64(lambda x: np.linalg.svd(x, compute_uv=False), a),
    vjp=_svdvals_vjp,
    samples=lambda rng: [Sample((_general(rng, s),)) for s in [(1, 1), (3, 3), (2, 4, 3), (3, 5)]],
    torch=lambda t, a: t.linalg.svdvals(a),
    exact=False,
    doc="The singular values, descending, of each A [..., m, n] -> [..., min(m, n)].",
)

svd_u = Op(
    "svd_u",
    shape=_svd_u_shape,
    dtype=_square_dtype,
    params=_flag,
    reference=lambda a, full_matrices: _in_f64(lambda x: np.linalg.svd(x, full_matrices)[0], a),
    vjp=_svd_u_vjp,
    samples=_svd_samples,
    exact=False,
    doc="The left singular vectors U of A [..., m, n] (LAPACK's signs): [..., m, m], or [..., m, k] "
    "without full_matrices (k = min(m, n)).",
)

svd_vh = Op(
    "svd_vh",
    shape=_svd_vh_shape,
    dtype=_square_dtype,
    params=_flag,
    reference=lambda a, full_matrices: _in_f64(lambda x: np.linalg.svd(x, full_matrices)[2], a),
    vjp=_svd_vh_vjp,
    samples=_svd_samples,
    exact=False,
    doc="The right singular vectors V^H of A [..., m, n] (LAPACK's signs): [..., n, n], or [..., k, n] "
    "without full_matrices (k = min(m, n)).",
)


def _pinv_shape(a: tuple, atol: tuple, rtol: tuple) -> tuple:
    _matrix(a, "pinv")
    for name, t in (("atol", atol), ("rtol", rtol)):
        if len(t) > len(a) - 2 or broadcast(a[:-2], t) != tuple(a[:-2]):
            raise ShapeError(
                f"pinv: {name} {shape_text(t)} must broadcast to the batch shape {shape_text(a[:-2])} of A"
            )
    return (*a[:-2], a[-1], a[-2])


def _pinv(a: np.ndarray, atol: np.ndarray, rtol: np.ndarray) -> np.ndarray:
    """V diag(1/S) U^H over the singular values S above max(atol, rtol * S[0]) (the others count 0)."""
    if a.size == 0:
        return np.zeros((*a.shape[:-2], a.shape[-1], a.shape[-2]), a.dtype)
    if not np.isfinite(a).all():  # as PyTorch's; LAPACK's SVD of non-finite values may not even return
        raise np.linalg.LinAlgError("pinv: the SVD cannot converge: the input matrix has non-finite values")
    u, sv, vh = np.linalg.svd(a, full_matrices=False)
    kept = sv > np.maximum(atol[..., None], rtol[..., None] * sv[..., :1])
    inverse = np.where(kept, 1.0 / np.where(kept, sv, 1.0), 0.0)
    return (vh.swapaxes(-1, -2) * inverse[..., None, :]) @ u.swapaxes(-1, -2)


def _pinv_vjp(g, out, a, atol, rtol):
    """PyTorch's pinv_backward, term by term in its order (it holds at a rank-deficient A too, where
    the SVD's gradient is not defined): with P = pinv(A) and K = g^T P (m <= n) or P g^T (m > n).
    The tolerances' is 0: the result is piecewise constant in them."""
    ph, gh = out.mT, g.mT
    if a.shape[-2] <= a.shape[-1]:
        k = gh @ out
        kph = k @ ph
        ga = -(out @ k).mT + kph - (a @ out) @ kph + (ph @ out) @ (gh - k @ a)
        return (ga, zeros_like(atol), zeros_like(rtol))
    k = out @ gh
    phk = ph @ k
    ga = -(k @ out).mT + (gh - a @ k) @ out @ ph + phk - phk @ out @ a
    return (ga, zeros_like(atol), zeros_like(rtol))


def _pinv_samples(rng: np.random.Generator) -> list[Sample]:
    shapes = [(3, 3), (2, 4, 3), (3, 5), (1, 1), (0, 2, 3)]
    return [Sample((_general(rng, s), np.array(0.0), np.array(1e-6))) for s in shapes] + [
        Sample((_general(rng, (2, 3, 2)), np.array([0.0, 0.5]), np.array(1e-6)))
    ]


pinv = Op(
    "pinv",
    shape=_pinv_shape,
    dtype=lambda a, atol, rtol: floating_only(a),
    reference=lambda a, atol, rtol: _in_f64(
        lambda x: _pinv(x, np.asarray(atol, np.float64), np.asarray(rtol, np.float64)), a
    ),
    vjp=_pinv_vjp,
    samples=_pinv_samples,
    # PyTorch refuses tolerances that require grad: held to their derivative, 0, beside its pinv
    torch=lambda t, a, atol, rtol: (
        t.linalg.pinv(a, atol=atol.detach(), rtol=rtol.detach()) + 0 * (atol + rtol)[..., None, None]
    ),
    exact=False,
    doc="The Moore-Penrose pseudo-inverse of A [..., m, n] -> [..., n, m] by the SVD: singular values at "
    "most max(atol, rtol * the largest) count as 0 (atol, rtol broadcast to A's batch shape).",
)


def _qr_mode(a, mode: str = "reduced") -> dict:
    if mode not in ("reduced", "complete"):
        raise ShapeError(f"qr: mode must be 'reduced' or 'complete', got {mode!r}")
    return {"mode": mode}


def _qr_q_shape(a: tuple, mode: str) -> tuple:
    _matrix(a, "qr")
    return (*a[:-1], a[-2] if mode == "complete" else min(a[-2], a[-1]))


def _qr_r_shape(a: tuple, mode: str) -> tuple:
    _matrix(a, "qr")
    return (*a[:-2], a[-2] if mode == "complete" else min(a[-2], a[-1]), a[-1])


def _qr_square_vjp(gq, gr, q, r):
    """PyTorch's linalg_qr_backward for A = QR with m >= n (R square): with M = R gR^T - gQ^T Q,
    gA = (gQ + Q copyltu(M)) R^-T, copyltu(M) the symmetric matrix of M's lower triangle."""
    mm = -(gq.mT @ q) if gq is not None else None
    if gr is not None:
        mm = r @ gr.mT if mm is None else mm + r @ gr.mT
    low = _tril(mm, -1)
    sym = _tril(mm) + low.mT
    b = q @ sym if gq is None else gq + q @ sym
    return solve(r, b.mT).mT  # b R^-T


def _qr_vjp(gq, gr, a, mode: str):
    """PyTorch's linalg_qr_backward. A wide A [..., m, n] (m < n; either mode) is [X | Y] with X square,
    R = [U | V] and Y = Q V: V's cotangent gives Y's, gY = Q gV, and adds Y gV^T to Q's, whose sum with
    U's goes through X = QU as a square QR. mode='complete' of a tall A is not differentiable (the last
    columns of Q are any basis of the complement), as in PyTorch."""
    m, n = a.shape[-2], a.shape[-1]
    if mode == "complete" and m > n:
        raise NotImplementedError(
            "the gradient through qr with mode='complete' is not defined for A [..., m, n] with m > n (the "
            f"last m - n columns of Q are not unique), as in PyTorch; got {shape_text(a.shape)}"
        )
    q, r = qr_q(a, mode="reduced"), qr_r(a, mode="reduced")
    if m >= n:
        return (_qr_square_vjp(gq, gr, q, r),)
    gv = gr[..., m:] if gr is not None else None
    if gv is not None:
        y = a[..., m:]
        gq = y @ gv.mT if gq is None else gq + y @ gv.mT
    gx = _qr_square_vjp(gq, gr[..., :m] if gr is not None else None, q, r[..., :m])
    gy = q @ gv if gv is not None else zeros_like(a[..., m:])
    return (concat(gx, gy, axis=-1),)


qr_q = Op(
    "qr_q",
    shape=_qr_q_shape,
    dtype=_square_dtype,
    params=_qr_mode,
    reference=lambda a, mode: _in_f64(lambda x: np.linalg.qr(x, mode)[0], a),
    vjp=lambda g, out, a, mode: _qr_vjp(g, None, a, mode),
    samples=_qr_samples,
    torch=lambda t, a, mode: t.linalg.qr(a, mode)[0],
    exact=False,
    doc="Q of A = QR (Householder, LAPACK's signs) for A [..., m, n]: [..., m, k] reduced, [..., m, m] "
    "complete.",
)

qr_r = Op(
    "qr_r",
    shape=_qr_r_shape,
    dtype=_square_dtype,
    params=_qr_mode,
    reference=lambda a, mode: _in_f64(lambda x: np.linalg.qr(x, mode)[1], a),
    vjp=lambda g, out, a, mode: _qr_vjp(None, g, a, mode),
    samples=_qr_samples,
    torch=lambda t, a, mode: t.linalg.qr(a, mode)[1],
    exact=False,
    doc="R of A = QR (upper triangular, LAPACK's signs) for A [..., m, n]: [..., k, n] reduced, "
    "[..., m, n] complete.",
)
