"""softmax_grad: its reference's order of the f64 row sum, the cpu kernel's bits on every vector path and
thread count, and softmax's gradient (eager, traced, PyTorch's _softmax_backward_data) through it."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad.backends import cpu
from verigrad.ops import softmax_grad
from verigrad.ops.composite.softmax import LANES, lane_sum

SMALL_CHUNK = 3  # the min chunk the `small_chunks` fixture (conftest.py) sets: a few rows a thread

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")


def _kernel():
    return cpu.cpu.native(softmax_grad, verigrad.float32)


def _operands(rng: np.random.Generator, shape: tuple, axis: int = -1) -> tuple[np.ndarray, np.ndarray]:
    """An output gradient and a softmax output (f32), some rows nearly one-hot."""
    x = rng.standard_normal(shape) * rng.choice([1.0, 30.0], size=(*shape[:-1], 1))
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    out = (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32), out


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).view(np.int32).tobytes()


def test_lane_sum_is_sixteen_lanes_folded_in_halves():
    p = np.random.default_rng(0).standard_normal((3, 53)) * 10.0 ** np.arange(53) % 7
    for row in range(3):
        lanes = [0.0] * LANES
        for j, v in enumerate(p[row]):
            lanes[j % LANES] = lanes[j % LANES] + v
        for width in (8, 4, 2, 1):
            lanes = [lanes[k] + lanes[k + width] for k in range(width)]
        assert lane_sum(p)[row, 0] == lanes[0]


def test_reference_rounds_once_from_f64():
    rng = np.random.default_rng(1)
    g, out = _operands(rng, (4, 300))
    g64, o64 = g.astype(np.float64), out.astype(np.float64)
    exact = (o64 * (g64 - np.array([[float(np.sum(np.float128(r)))] for r in g64 * o64]))).astype(np.float32)
    got = softmax_grad.reference(g, out, axis=1)
    assert got.dtype == np.float32
    assert np.max(np.abs(got.astype(np.float64) - exact) / (np.abs(exact) + 1e-30)) < 2e-7


@pytest.mark.parametrize("path", cpu.vector_paths())
def test_kernel_gives_the_references_bits_on_each_path_and_thread_count(path, small_chunks):
    rng = np.random.default_rng(2)
    chosen = cpu.vector_path()
    try:
        cpu.vector_path(path)
        for n in [*range(1, 71), 1024]:
            g, out = _operands(rng, (7, n))
            if n > 2:  # NaN and infinities in a few rows, the others finite
                g[1, n // 2], out[2, 1], g[3, 0], out[4, n - 1] = np.nan, np.inf, -np.inf, np.nan
            with np.errstate(invalid="ignore"):
                want = _bits(softmax_grad.reference(g, out, axis=1))
            for threads in (1, 2, 3):
                verigrad.set_threads(threads)
                assert _bits(_kernel()(g, out, axis=1)) == want, (path, n, threads)
    finally:
        cpu.vector_path(chosen)


def test_views_and_other_axes_give_the_references_bits():
    rng = np.random.default_rng(3)
    g, out = _operands(rng, (6, 40))
    g3, out3 = _operands(rng, (3, 5, 33))
    k = _kernel()
    cases = [(g[:, 3:37], out[:, 3:37], 1), (g.T, out.T, 1), (g[::2], out[::2], 1), (g, out, 0)]
    cases += [(g3, out3, 1), (g3, out3, 0), (g3.transpose(2, 0, 1), out3.transpose(2, 0, 1), 0)]
    for gv, ov, axis in cases:
        got = k(gv, ov, axis=axis)
        assert got.shape == ov.shape and got.flags.c_contiguous
        assert _bits(got) == _bits(softmax_grad.reference(gv, ov, axis=axis)), (gv.shape, axis)
    empty = np.zeros((0, 5), np.float32)
    assert k(empty, empty, axis=1).shape == (0, 5)
    assert k(np.float32(2.0) * np.ones((), np.float32), np.ones((), np.float32), axis=0) == 0.0


def test_other_axes_and_views_run_in_c():
    """The fallback (the reference the kernel was built with) is not called for an f32 axis-0 call."""
    calls = []
    kernel = cpu.softmax_grad._kernel(
        cpu.cpu.library.fn("vg_softmax_grad_f32", cpu.softmax_grad._ARGS),
        cpu.cpu,
        cpu.cpu.library.ptr,
        lambda *a, **k: calls.append(1),
    )
    g, out = _operands(np.random.default_rng(7), (9, 20))
    assert _bits(kernel(g.T, out.T, axis=0)) == _bits(softmax_grad.reference(g.T, out.T, axis=0))
    assert _bits(kernel(g[:, ::2], out[:, ::2], axis=1)) == _bits(
        softmax_grad.reference(g[:, ::2], out[:, ::2], axis=1)
    )
    assert not calls


def test_compiled_softmax_over_a_middle_axis_replays_with_new_inputs():
    rng = np.random.default_rng(8)

    def grad_of(x, g):
        leaf = x.detach().requires_grad_()
        leaf.softmax(dim=1).backward(g)
        return leaf.grad

    compiled = verigrad.compile(grad_of)
    for _ in range(4):  # traced, planned, then replayed
        x = verigrad.tensor(rng.standard_normal((2, 37, 3)).astype(np.float32) * 9)
        g = verigrad.tensor(rng.standard_normal((2, 37, 3)).astype(np.float32))
        assert _bits(compiled(x, g).numpy()) == _bits(grad_of(x, g).numpy())


def test_softmax_gradient_is_softmax_grad_eager_traced_and_aten():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 70)).astype(np.float32) * 20
    g = rng.standard_normal((5, 70)).astype(np.float32)

    def grad(xs, gs):
        xs = xs.detach().requires_grad_(True)
        y = xs.softmax(dim=1)
        y.backward(gs)
        return xs.grad, y

    got, y = grad(verigrad.tensor(x), verigrad.tensor(g))
    want = softmax_grad.reference(g, y.numpy(), axis=1)
    assert _bits(got.numpy()) == _bits(want)
    traced, _ = verigrad.compile(grad)(verigrad.tensor(x), verigrad.tensor(g))
    assert _bits(traced.numpy()) == _bits(want)
    aten = verigrad._softmax_backward_data(verigrad.tensor(g), y, 1, verigrad.float32)
    assert _bits(aten.numpy()) == _bits(want)


def test_second_derivative_through_softmax_grad():
    """d/dx of sum(c * dsoftmax(x; g)) in f64 against finite differences."""
    rng = np.random.default_rng(5)
    x, g, c = (rng.standard_normal((2, 6)) for _ in range(3))

    def first(xv):
        xs = verigrad.tensor(xv).requires_grad_(True)
        (dx,) = verigrad.autograd.grad(xs.softmax(dim=1), xs, verigrad.tensor(g), create_graph=True)
        return xs, dx

    xs, dx = first(x)
    (second,) = verigrad.autograd.grad(dx, xs, verigrad.tensor(c))
    eps, numeric = 1e-6, np.zeros_like(x)
    for i in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[i] = eps
        plus, minus = first(x + d)[1].numpy(), first(x - d)[1].numpy()
        numeric[i] = np.sum(c * (plus - minus)) / (2 * eps)
    np.testing.assert_allclose(second.numpy(), numeric, rtol=1e-6, atol=1e-8)


def test_mismatched_operands_are_refused():
    a = verigrad.ones(2, 3)
    with pytest.raises(Exception, match="same shape"):
        softmax_grad(a, verigrad.ones(3, 2), axis=1)
    with pytest.raises(Exception, match="same dtype"):
        softmax_grad(a, verigrad.ones(2, 3, dtype=verigrad.float64), axis=1)
