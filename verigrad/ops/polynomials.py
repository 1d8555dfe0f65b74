"""The classical orthogonal polynomials of torch.special, P_n(x) of a tensor x and a degree n (a tensor or
a number, truncated to an integer; P_n = 0 for n < 0): Chebyshev T, U, V, W and their shifted forms
(on [0, 1]), Hermite H (physicists') and He (probabilists'), Laguerre L and Legendre P.

The references follow PyTorch's kernels step by step, in the result's dtype: the three-term recurrence,
the closed values at the ends of the interval, and for the Chebyshev polynomials of high degree inside
it the trigonometric form (cos(n acos x), ...). As in PyTorch, they have no gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..shapes import broadcast
from ._op import Op, Sample, float_dtype
from ._samples import uniform

Array = np.ndarray
# (x, y, n) -> where the closed form applies, its value
Case = Callable[[Array, Array, Array], tuple[Array, Array]]


def _evaluate(
    x: Array, n: Array, first: Callable[[Array], Array], step: Callable[[int, Array, Array, Array], Array]
) -> Array:
    """P_n(x) by P_0 = 1, P_1 = first(x), P_m = step(m, x, P_(m-1), P_(m-2)), each entry to its own n."""
    one = np.ones_like(x)
    result = np.where(n == 0, one, np.where(n == 1, first(x), np.zeros_like(x)))
    top = int(n.max(initial=1))
    previous, current = one, first(x)
    for m in range(2, top + 1):
        previous, current = current, step(m, x, current, previous)
        result = np.where(n == m, current, result)
    return result


def _polynomial(
    x: Array,
    n: Array,
    first: Callable[[Array], Array],
    step: Callable[[int, Array, Array, Array], Array],
    cases: list[Case],
) -> Array:
    """PyTorch's kernel: n < 0 gives 0, else the first of `cases` that applies, else the recurrence."""
    dtype = np.result_type(x, n)
    dtype = dtype if dtype.kind == "f" else np.dtype(np.float32)
    x = np.asarray(x).astype(dtype)
    degree = np.asarray(n).astype(dtype)
    with np.errstate(all="ignore"):
        degree = np.where(np.isfinite(degree), degree, -1).astype(np.int64)
        x, degree = np.broadcast_arrays(x, degree)
        applies = np.zeros(x.shape, dtype=bool)
        closed = np.zeros_like(x)
        for case in cases:
            where, value = case(x, np.asarray(degree, dtype), degree)
            new = where & ~applies
            closed = np.where(new, value, closed)
            applies |= new
        rest = ~applies & (degree >= 0)
        bounded = np.where(rest, degree, 0)
        out = np.where(applies, closed, _evaluate(x, bounded, first, step) if rest.any() else closed)
        return np.where(degree < 0, dtype.type(0), out).astype(dtype)


def _even(n: Array) -> Array:
    return n % 2 == 0


def _samples(rng: np.random.Generator) -> list[Sample]:
    """x across the ends of [-1, 1] (and [0, 1]) with degrees -1 to 12 (where the closed forms begin)."""
    ends = np.array([-1.0, 0.0, 0.5, 1.0, -0.3, 2.0])
    return [
        Sample((uniform(rng, (3, 5), -1.5, 1.5), rng.integers(-1, 13, (3, 5)).astype(np.float64))),
        Sample((ends.reshape(2, 3), np.array([[0.0], [9.0]]))),
        Sample((uniform(rng, (4,), -0.9, 0.9), 11.0)),
        Sample((uniform(rng, (2, 4), -2.0, 2.0), np.array(3.0))),
    ]


def _op(name: str, first, step, cases: list[Case], doc: str) -> Op:
    return Op(
        name,
        shape=broadcast,
        dtype=float_dtype,
        reference=lambda x, n: _polynomial(x, n, first, step, cases),
        differentiable=False,
        samples=_samples,
        torch=lambda t, x, n: getattr(t.special, name)(x, n),
        exact=False,
        doc=doc,
    )


def _chebyshev_step(m: int, x: Array, p1: Array, p2: Array) -> Array:
    return (x + x) * p1 - p2


def _inside(x: Array, n: Array, least: int) -> Array:
    return (n > least) & (np.abs(x) < 1)


chebyshev_polynomial_t = _op(
    "chebyshev_polynomial_t",
    lambda x: x,
    _chebyshev_step,
    [
        lambda x, n, k: (np.abs(x) == 1, np.where((x > 0) | _even(k), 1, -1).astype(x.dtype)),
        lambda x, n, k: (_inside(x, k, 6), np.cos(n * np.arccos(x))),
    ],
    "The Chebyshev polynomial of the first kind T_n(x).",
)


def _u_inside(x: Array, n: Array) -> Array:
    a = np.arccos(x)
    s = np.sin(a)
    return np.where(s != 0, np.sin((n + 1) * a) / s, (n + 1) * np.cos((n + 1) * a) / x)


chebyshev_polynomial_u = _op(
    "chebyshev_polynomial_u",
    lambda x: x + x,
    _chebyshev_step,
    [
        lambda x, n, k: (np.abs(x) == 1, np.where((x > 0) | _even(k), n + 1, -(n + 1))),
        lambda x, n, k: (_inside(x, k, 8), _u_inside(x, n)),
    ],
    "The Chebyshev polynomial of the second kind U_n(x).",
)


def _v_inside(x: Array, n: Array, k: Array) -> Array:
    a = np.arccos(x)
    return np.where(
        np.sin(a / 2) != 1, np.cos((n + 0.5) * a) / np.cos(a / 2), np.where(_even(k), n + n + 1, -(n + n + 1))
    )


chebyshev_polynomial_v = _op(
    "chebyshev_polynomial_v",
    lambda x: x + x - 1,
    _chebyshev_step,
    [
        lambda x, n, k: (np.abs(x) == 1, np.where(x > 0, 1, np.where(_even(k), n + n + 1, -(n + n + 1)))),
        lambda x, n, k: (_inside(x, k, 8), _v_inside(x, n, k)),
    ],
    "The Chebyshev polynomial of the third kind V_n(x).",
)


def _w_inside(x: Array, n: Array, k: Array) -> Array:
    a = np.arccos(x)
    ends = np.where(x > 0, n + n + 1, np.where(_even(k), 1, -1))
    return np.where(np.cos(a / 2) != 1, np.sin((n + 0.5) * a) / np.sin(a / 2), ends)


chebyshev_polynomial_w = _op(
    "chebyshev_polynomial_w",
    lambda x: x + x + 1,
    _chebyshev_step,
    [
        lambda x, n, k: (np.abs(x) == 1, np.where(x > 0, n + n + 1, np.where(_even(k), 1, -1))),
        lambda x, n, k: (_inside(x, k, 8), _w_inside(x, n, k)),
    ],
    "The Chebyshev polynomial of the fourth kind W_n(x).",
)


def _shifted_step(m: int, x: Array, p1: Array, p2: Array) -> Array:
    y = x + x - 1
    return (y + y) * p1 - p2


shifted_chebyshev_polynomial_t = _op(
    "shifted_chebyshev_polynomial_t",
    lambda x: x + x - 1,
    _shifted_step,
    [
        lambda x, n, k: (x == 1, np.ones_like(x)),
        lambda x, n, k: (x == 0, np.where(_even(k), 1, -1).astype(x.dtype)),
        lambda x, n, k: (_inside(x + x - 1, k, 6), np.cos(n * np.arccos(x + x - 1))),
    ],
    "The shifted Chebyshev polynomial of the first kind T*_n(x) = T_n(2x - 1).",
)
shifted_chebyshev_polynomial_u = _op(
    "shifted_chebyshev_polynomial_u",
    lambda x: x + x - 1 + (x + x - 1),
    _shifted_step,
    [
        lambda x, n, k: (x == 1, n + 1),
        lambda x, n, k: (x == 0, np.where(_even(k), n + 1, -(n + 1))),
        lambda x, n, k: (_inside(x + x - 1, k, 6), _u_inside(x + x - 1, n)),
    ],
    "The shifted Chebyshev polynomial of the second kind U*_n(x) = U_n(2x - 1).",
)
shifted_chebyshev_polynomial_v = _op(
    "shifted_chebyshev_polynomial_v",
    lambda x: x + x - 1 + (x + x - 1) - 1,
    _shifted_step,
    [
        lambda x, n, k: (x == 1, np.ones_like(x)),
        lambda x, n, k: (x == 0, np.where(_even(k), n + n + 1, -(n + n + 1))),
        lambda x, n, k: (_inside(x + x - 1, k, 6), _v_inside(x + x - 1, n, k)),
    ],
    "The shifted Chebyshev polynomial of the third kind V*_n(x) = V_n(2x - 1).",
)
shifted_chebyshev_polynomial_w = _op(
    "shifted_chebyshev_polynomial_w",
    lambda x: x + x - 1 + (x + x - 1) + 1,
    _shifted_step,
    [
        lambda x, n, k: (x == 1, n + n + 1),
        lambda x, n, k: (x == 0, np.where(_even(k), 1, -1).astype(x.dtype)),
        lambda x, n, k: (_inside(x + x - 1, k, 4), _w_inside(x + x - 1, n, k)),
    ],
    "The shifted Chebyshev polynomial of the fourth kind W*_n(x) = W_n(2x - 1).",
)
hermite_polynomial_h = _op(
    "hermite_polynomial_h",
    lambda x: x + x,
    lambda m, x, p1, p2: (x + x) * p1 - x.dtype.type(2 * (m - 1)) * p2,
    [],
    "The physicists' Hermite polynomial H_n(x).",
)
hermite_polynomial_he = _op(
    "hermite_polynomial_he",
    lambda x: x,
    lambda m, x, p1, p2: x * p1 - x.dtype.type(m - 1) * p2,
    [],
    "The probabilists' Hermite polynomial He_n(x).",
)
laguerre_polynomial_l = _op(
    "laguerre_polynomial_l",
    lambda x: 1 - x,
    lambda m, x, p1, p2: (
        ((x.dtype.type(2 * (m - 1)) + (1 - x)) * p1 - x.dtype.type(m - 1) * p2) / x.dtype.type(m)
    ),
    [lambda x, n, k: (np.abs(x) == 0, np.ones_like(x))],
    "The Laguerre polynomial L_n(x).",
)
legendre_polynomial_p = _op(
    "legendre_polynomial_p",
    lambda x: x,
    lambda m, x, p1, p2: (x.dtype.type(2 * m - 1) * x * p1 - x.dtype.type(m - 1) * p2) / x.dtype.type(m),
    [
        lambda x, n, k: (
            np.abs(x) == 1,
            np.where((x > 0) | (k == 0) | _even(k), 1, -1).astype(x.dtype),
        )
    ],
    "The Legendre polynomial P_n(x).",
)
