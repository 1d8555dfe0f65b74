"""verigrad.linalg by hand: values against NumPy's definitions, gradients against finite differences
in f64, shapes checked before any work (for symbolic sizes too), singular matrices, compiled steps."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad import linalg

RNG = np.random.default_rng(0)


def _matrix(*shape: int) -> np.ndarray:
    return RNG.uniform(-1, 1, shape) + shape[-1] * np.eye(shape[-1])


def test_values_by_their_definitions() -> None:
    a = _matrix(2, 3, 3)
    inv = linalg.inv(verigrad.tensor(a)).numpy()
    np.testing.assert_allclose(a @ inv, np.broadcast_to(np.eye(3), a.shape), atol=1e-14)
    np.testing.assert_allclose(
        linalg.det(verigrad.tensor(a)).numpy(), [np.prod(np.linalg.eigvals(m)).real for m in a]
    )
    b = RNG.standard_normal((3, 2))
    x = linalg.solve(verigrad.tensor(a), verigrad.tensor(b)).numpy()  # b broadcast over A's batch
    np.testing.assert_allclose(a @ x, np.broadcast_to(b, (2, 3, 2)), atol=1e-14)
    v = RNG.standard_normal((2, 3))  # shaped as A less its last axis: a batch of vectors
    y = linalg.solve(verigrad.tensor(a), verigrad.tensor(v)).numpy()
    np.testing.assert_allclose(np.einsum("bij,bj->bi", a, y), v, atol=1e-14)
    f32 = linalg.inv(verigrad.tensor(a.astype(np.float32)))
    assert f32.dtype.name == "f32"  # computed in f64, rounded once
    np.testing.assert_array_equal(
        f32.numpy(), np.linalg.inv(a.astype(np.float32).astype(np.float64)).astype(np.float32)
    )
    assert verigrad.tensor(a).inverse().shape == (2, 3, 3) and verigrad.det(verigrad.tensor(a)).shape == (2,)


@pytest.mark.parametrize("fn", ["inv", "det", "solve", "solve_vector"])
def test_gradients_match_finite_differences(fn: str) -> None:
    a0, b0 = _matrix(3, 3), RNG.standard_normal((3, 2) if fn == "solve" else (3,))
    weights = RNG.standard_normal(
        3 if fn == "solve_vector" else (3, 2) if fn == "solve" else (3, 3) if fn == "inv" else ()
    )

    def value(a: np.ndarray, b: np.ndarray) -> float:
        out = {"inv": lambda: np.linalg.inv(a), "det": lambda: np.linalg.det(a)}.get(
            fn, lambda: np.linalg.solve(a, b)
        )()
        return float(np.sum(out * weights))

    a, b = verigrad.tensor(a0, requires_grad=True), verigrad.tensor(b0, requires_grad=True)
    out = {"inv": lambda: linalg.inv(a), "det": lambda: linalg.det(a)}.get(fn, lambda: linalg.solve(a, b))()
    (out * verigrad.tensor(weights)).sum().backward()
    for t, x0 in [(a, a0)] + ([(b, b0)] if fn.startswith("solve") else []):
        numeric = np.zeros_like(x0)
        for i in np.ndindex(x0.shape):
            step = np.zeros_like(x0)
            step[i] = 1e-6
            plus = value(a0 + step, b0) if t is a else value(a0, b0 + step)
            minus = value(a0 - step, b0) if t is a else value(a0, b0 - step)
            numeric[i] = (plus - minus) / 2e-6
        np.testing.assert_allclose(t.grad.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_shapes_are_checked_before_any_work_and_singular_matrices_raise() -> None:
    with pytest.raises(
        verigrad.ShapeError, match=r"inv takes square matrices \[\.\.\., n, n\], got \[2, 3\]"
    ):
        linalg.inv(verigrad.zeros(2, 3))
    with pytest.raises(
        verigrad.ShapeError, match=r"solve: A \[3, 3\] needs B \[\.\.\., 3, k\] or \[3\], got \[2\]"
    ):
        linalg.solve(verigrad.eye(3), verigrad.zeros(2))
    n, b = verigrad.dims("n b")
    assert verigrad.check(linalg.det, verigrad.spec([b, n, n])) == verigrad.spec([b])
    assert verigrad.check(linalg.solve, verigrad.spec([b, n, n]), verigrad.spec([n, 4])) == verigrad.spec(
        [b, n, 4]
    )
    with pytest.raises(verigrad.ShapeError, match="square matrices"):
        verigrad.check(linalg.inv, verigrad.spec([n, b]))
    singular = verigrad.tensor([[1.0, 2.0], [2.0, 4.0]])
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        linalg.inv(singular)
    assert linalg.det(singular).item() == 0.0


def test_a_compiled_least_squares_step_gives_the_eager_result() -> None:
    """Fitting w by gradient steps through a solve, compiled and eagerly: the same bits."""
    a = verigrad.tensor(_matrix(4, 4))
    target = verigrad.tensor(RNG.standard_normal(4))
    results = []
    for compiled in (False, True):
        w = verigrad.tensor(np.ones(4), requires_grad=True)
        opt = verigrad.optim.SGD([w], lr=0.1)

        def step(a, target):
            loss = ((linalg.solve(a, w) - target) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        run = verigrad.compile(step) if compiled else step
        losses = [run(a, target).item() for _ in range(5)]
        results.append((losses, w.numpy().copy()))
    assert results[0][0] == results[1][0] and results[0][0][-1] < results[0][0][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
