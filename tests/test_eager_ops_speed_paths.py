"""The faster paths of the small eager ops give the bits of the paths they replaced: the f32 sums whose
pairwise leaves (or rows) are summed side by side (reduce.c), softmax and log_softmax rows taken a batch
at a time through one exp call with their max in vectors of sixteen (rows.c)."""

from __future__ import annotations

import numpy as np
import pytest
from test_cpu_reduce import _rows, assert_within

import verigrad
from verigrad.backends import cpu
from verigrad.backends.reference import composite_reference
from verigrad.ops import REGISTRY

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
F32 = np.dtype(np.float32)
SMALL_CHUNK = 3  # the min chunk the `small_chunks` fixture sets: several chunks of rows, each its own batches


def _kernel(op: str):
    return cpu.cpu.native(REGISTRY[op], verigrad.f32)


def _reduced(op: str, x: np.ndarray, axis: tuple) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        return _kernel(op)(x, axis, False), REGISTRY[op].reference(x, axis, False)


# rows of every length a leaf can have (8 to 128 elements, a multiple of 8 or not), batches of rows that are
# not a multiple of the eight summed side by side, more rows than one tile of outputs (256)
ROW_SHAPES = [(r, n) for r in (1, 7, 8, 9, 17, 300) for n in (8, 9, 15, 16, 63, 64, 65, 127, 128)]


@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("op", ["sum", "mean"])
def test_sums_of_short_rows_side_by_side_give_the_reference_bits(op, shape):
    x = _rows(F32, *shape, seed=shape[0] * 1000 + shape[1])
    assert_within(*_reduced(op, x, (1,)), cpu.cpu.exactness(op, "f32"))
    y = np.broadcast_to(x, (2, *shape)).copy()  # several kept axes, merged into one run of rows
    assert_within(*_reduced(op, y, (2,)), cpu.cpu.exactness(op, "f32"))


@pytest.mark.parametrize("n", [129, 136, 255, 1000, 1001, 4096, 8191, 8192, 8193, 20000, 70001])
def test_whole_sums_from_leaves_side_by_side_give_the_reference_bits(n):
    """A run's leaves (runs of 57 to 128 elements, of several lengths in one run) summed eight at a time
    and the pairwise tree formed from them; past 8192 elements NumPy's cast buffer cuts the run."""
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 30, n))).astype(F32)
    for op in ("sum", "mean"):
        assert_within(*_reduced(op, x, (0,)), cpu.cpu.exactness(op, "f32"))
        assert_within(*_reduced(op, x.reshape(1, n), (0, 1)), cpu.cpu.exactness(op, "f32"))


def test_sums_with_nan_and_signed_zeros_give_the_reference_bits():
    x = np.full((9, 64), -0.0, F32)
    x[3, 5] = np.nan
    x[4, :] = np.inf
    x[5, 7] = -np.inf
    assert_within(*_reduced("sum", x, (1,)), cpu.cpu.exactness("sum", "f32"))
    assert_within(*_reduced("sum", x, (0, 1)), cpu.cpu.exactness("sum", "f32"))


def _softmax_reference(op: str, x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        return composite_reference(REGISTRY[op])(x, axis=-1)


# rows shorter and longer than a 4096-element batch, and batches that do not divide the rows
SOFTMAX_SHAPES = [(1, 1), (3, 7), (64, 64), (65, 64), (70, 100), (3, 4095), (2, 4097), (2, 5000), (300, 16)]


@pytest.mark.parametrize("shape", SOFTMAX_SHAPES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_rows_in_batches_give_the_reference_bits_on_every_thread_count(op, shape, small_chunks):
    x = _rows(F32, *shape, seed=shape[0] + shape[1])
    expected = _softmax_reference(op, x)
    exactness = cpu.cpu.exactness(op, "f32")
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        assert_within(_kernel(op)(x, -1), expected, exactness)
        inplace = x.copy()
        assert _kernel(op)(inplace, -1, out=inplace) is inplace
        assert_within(inplace, expected, exactness)


def test_softmax_row_max_in_vectors_keeps_the_order_dependent_cases_exact():
    """The row max taken sixteen lanes at a time: NaN, infinities and a zero max (0 beside -0) go to
    the exact fold, as the four-lane pass sends them."""
    x = np.random.default_rng(3).standard_normal((8, 40)).astype(F32)
    x[0, 17] = np.nan
    x[1, 33] = np.inf
    x[2, 1] = -np.inf
    x[3] = -np.abs(x[3])
    x[3, [5, 20]] = [0.0, -0.0]
    x[4] = -np.abs(x[4])
    x[4, [20, 5]] = [0.0, -0.0]
    x[5] = np.float32(-1e30)
    x[6, 39] = 1e30  # the largest in the scalar tail
    for op in ("softmax", "log_softmax"):
        assert_within(_kernel(op)(x, -1), _softmax_reference(op, x), cpu.cpu.exactness(op, "f32"))


def test_eager_softmax_and_sums_match_the_reference_backend():
    """Through the eager calls (vg_eager's direct calls where built) as through the reference backend."""
    x = _rows(F32, 64, 64, seed=11)
    t = verigrad.tensor(x)
    with verigrad.no_grad():
        got = [verigrad.nn.functional.softmax(t, dim=-1), t.softmax(-1), t.sum(), t.sum(dim=1), t.mean()]
        with verigrad.backend("reference"):
            want = [verigrad.nn.functional.softmax(t, dim=-1), t.softmax(-1), t.sum(), t.sum(dim=1), t.mean()]
    for g, w in zip(got, want):
        assert_within(g.numpy(), w.numpy(), cpu.cpu.exactness("softmax", "f32"))


def _take_grad_cases(dtype) -> list[tuple[np.ndarray, np.ndarray, int, int]]:
    """(g, idx, axis, size): repeated indices (the sums whose order matters), negative ones, every axis,
    a 2-D index, none, signed zeros and NaNs, an embedding's gradient."""
    rng = np.random.default_rng(21)
    g3 = (rng.standard_normal((3, 40, 5)) * 1e3).astype(dtype)
    g3[0, :4, 0] = [-0.0, -0.0, np.nan, 1e30]
    return [
        (g3, rng.integers(0, 6, 40), 1, 6),
        (g3, rng.integers(-6, 6, 40), 1, 6),
        (g3.reshape(120, 5), rng.integers(0, 3, 120), 0, 3),
        (g3.reshape(3, 8, 5, 5), rng.integers(0, 4, (8, 5)), 1, 4),
        (g3.transpose(2, 0, 1).copy(), rng.integers(0, 9, 40), 2, 9),
        (g3[:, :0], np.zeros(0, np.int64), 1, 4),
        (rng.standard_normal((4, 32, 64)).astype(dtype), rng.integers(0, 256, (4, 32)), 0, 256),
        (g3.reshape(2, 60, 5).repeat(9, axis=2), rng.integers(0, 7, 60), 1, 7),  # 45 columns: 3 blocks
    ]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_take_grad_kernel_gives_np_add_at_bits(dtype, small_chunks):
    """take_grad in C (each element's additions in the order of idx) against its reference, np.add.at, bit
    for bit, on 1 to 3 threads (which split the columns); an index out of range raises the reference's
    error."""
    kernel = cpu.cpu.native(REGISTRY["take_grad"], verigrad.dtypes.from_numpy_dtype(np.dtype(dtype)))
    reference = REGISTRY["take_grad"].reference
    for g, idx, axis, size in _take_grad_cases(dtype):
        want = reference(g, idx, axis, size)
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            cpu.chunks_run()
            with cpu.static_schedule():  # chunk k on thread k
                got = kernel(g, idx, axis, size)
            assert got.shape == want.shape and got.tobytes() == want.tobytes(), (g.shape, axis, threads)
            if threads > 1 and np.prod(g.shape[axis + idx.ndim :]) > 16:  # several blocks of columns: split
                assert sum(c > 0 for c in cpu.chunks_run()) > 1, (g.shape, threads)
    verigrad.set_threads(1)
    g = np.ones((3, 2), dtype)
    for bad in (np.array([0, 3, 1]), np.array([0, -4, 1])):
        with pytest.raises(IndexError) as ours:
            kernel(g, bad, 0, 3)
        with pytest.raises(IndexError) as theirs:
            reference(g, bad, 0, 3)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError):  # g's axis not shaped as idx: the reference's error
        kernel(g, np.zeros(2, np.int64), 0, 3)


def test_embedding_gradient_runs_take_grad_in_c():
    """An embedding's backward in eager mode reaches the C kernel and gives the reference backend's bits."""
    rng = np.random.default_rng(22)
    w = rng.standard_normal((50, 8)).astype(np.float32)
    idx = rng.integers(0, 50, (4, 30))
    grads = []
    for backend in ("cpu", "reference"):
        with verigrad.backend(backend):
            weight = verigrad.tensor(w).requires_grad_(True)
            verigrad.nn.functional.embedding(verigrad.tensor(idx), weight).sum().backward()
            grads.append(weight.grad.numpy().tobytes())
    assert grads[0] == grads[1]
    assert cpu.cpu.kernel(REGISTRY["take_grad"], verigrad.f32) is not REGISTRY["take_grad"].reference
