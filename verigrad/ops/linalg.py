"""Linear algebra on square matrices, batched over leading axes: `inv`, `det` and `solve` (PyTorch's
torch.linalg ones). The references are NumPy's LAPACK routines; f16 and f32 are computed in f64 and
rounded once, as matmul's products are. A singular matrix gives what LAPACK gives: `inv` and `solve`
raise NumPy's LinAlgError, `det` is 0.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import DType, from_numpy_dtype
from ..errors import ShapeError
from ..shapes import broadcast, shape_text
from ._op import Op, Sample, float_dtype, unbroadcast


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
    return float_dtype(*dtypes)


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
