"""The cpu backend's reductions (sum, mean, max, min over any axes; argmax) and row kernels (softmax,
log_softmax, cross_entropy, layer_norm, rms_norm) against the references: the reference's bits where the
kernel states EXACT, within its stated bound otherwise; the same bits for 1, 2 and 3 threads."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
import verigrad.nn.functional as F
from verigrad.backends import cpu
from verigrad.backends._registry import Backend, tolerance, ulp
from verigrad.backends.cpu import rows as cpu_rows
from verigrad.backends.reference import _References
from verigrad.backends.reference import composite_reference as decomposition
from verigrad.registry import OPS

SMALL_CHUNK = 7  # the min chunk the `small_chunks` fixture (conftest.py) sets

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
DTYPES = sorted(cpu.DTYPES)


def _ordered(a: np.ndarray) -> np.ndarray:
    """The float bits as integers ordered like the floats (so the difference counts ulps)."""
    width = np.int32 if a.dtype == np.float32 else np.int64
    ints = a.view(width).astype(np.int64)
    return np.where(ints < 0, -(ints & np.iinfo(width).max), ints)


def assert_within(actual, expected, exactness) -> None:
    """`actual` is `expected` to the kernel's stated exactness: the same bits (a NaN matches any NaN),
    within `ulps`, or within rtol * |expected| + atol."""
    actual, expected = np.atleast_1d(np.asarray(actual)), np.atleast_1d(np.asarray(expected))
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    nan = np.isnan(expected) if expected.dtype.kind == "f" else np.zeros(expected.shape, bool)
    if expected.dtype.kind == "f":
        assert np.array_equal(np.isnan(actual), nan), "NaN where the reference has a number, or the reverse"
    if exactness.is_exact or expected.dtype.kind != "f":
        width = {1: np.uint8, 4: np.uint32, 8: np.uint64}[expected.itemsize]
        same = actual.view(width) == expected.view(width)
        assert (same | nan).all(), f"other bits than the reference at {np.argwhere(~(same | nan))[:5]}"
    elif exactness.ulps:
        diff = np.abs(_ordered(actual) - _ordered(expected))
        assert diff[~nan].max(initial=0) <= exactness.ulps
    else:
        finite = ~nan & np.isfinite(expected)
        assert np.array_equal(actual[~finite & ~nan], expected[~finite & ~nan])
        err = np.abs(actual[finite].astype(np.float64) - expected[finite])
        assert (err <= exactness.rtol * np.abs(expected[finite]) + exactness.atol).all(), err.max()


def _kernel(op: str, dtype: str):
    """The cpu kernel of `op` for inputs of `dtype` (argmax's is registered for its i64 result)."""
    return cpu.cpu.native(OPS[op], verigrad.i64 if op == "argmax" else getattr(verigrad, dtype))


def special_values(np_dtype) -> np.ndarray:
    fi = np.finfo(np_dtype)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 20.0, -20.0, fi.tiny, -fi.tiny]
    values += [fi.smallest_subnormal, fi.max, -fi.max, fi.eps, 88.5, -104.0, 709.5, -745.0, 1e5, 1e-30]
    with np.errstate(over="ignore"):
        return np.array(values, dtype=np_dtype)


def scaled(rng, shape, np_dtype) -> np.ndarray:
    """Values over many binades, so that the summation order shows in the rounding."""
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-40, 40, shape))).astype(np_dtype)


def _rows(np_dtype, rows: int, cols: int, seed: int) -> np.ndarray:
    """Rows mixing scales, cancelling spikes placed across NumPy's 8192-element cast buffer, and special
    values."""
    rng = np.random.default_rng(seed)
    x = scaled(rng, (rows, cols), np.float64)
    for r in range(0, rows, 3):
        x[r, rng.integers(0, cols, 2)] = [1e20, -1e20 * (1 + rng.uniform(-1e-6, 1e-6))]
    if cols > 8192:
        x[1, 8190:8194] = [3e18, 1e19, -1e19, -3e18]
    x = x.astype(np_dtype)
    if rows > 4:
        x[2, rng.integers(0, cols)] = np.nan
        x[3] = rng.choice(special_values(np_dtype), cols)
        x[4] = rng.choice(np.array([0.0, -0.0], np_dtype), cols)
    return x


def _reduce(op: str, dtype: str, x: np.ndarray, axis, keepdim: bool = False):
    with np.errstate(all="ignore"):
        return _kernel(op, dtype)(x, axis, keepdim), OPS[op].reference(x, axis, keepdim)


REDUCE = ("sum", "mean", "max", "min")


# reductions ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", REDUCE)
@pytest.mark.parametrize("dtype", DTYPES)
def test_last_axis_reductions_give_the_reference_bits(op, dtype, small_chunks):
    """sum reproduces NumPy's pairwise order (and, for f32, its 8192-element cast buffer); max/min give
    NumPy's maximum/minimum's bits."""
    sizes = [(1, 1), (5, 7), (9, 8), (6, 129), (7, 1000), (3, 4097), (5, 8192), (6, 9000), (5, 20000)]
    for seed, (rows, cols) in enumerate(sizes):
        x = _rows(cpu.DTYPES[dtype], rows, cols, seed)
        for threads in (1, 3):
            verigrad.set_threads(threads)
            for keepdim in (False, True):
                assert_within(*_reduce(op, dtype, x, (1,), keepdim), cpu.cpu.exactness(op, dtype))
        y = np.broadcast_to(x, (2, 1, rows, cols)).copy()  # another rank, the same rows
        assert_within(*_reduce(op, dtype, y, (3,)), cpu.cpu.exactness(op, dtype))


def test_f32_sums_follow_numpys_buffer_size():
    """NumPy adds an f32 run's pairwise sums per cast buffer, in order: with 1e18 in the first buffer
    of 1024 elements and -1e18 in the second, the ones of the third survive; in one buffer they do not."""
    x = np.ones((2, 3000), np.float32)
    x[:, 0], x[:, 2000] = 1e18, -1e18
    w, b = np.ones((2, 3000), np.float32)
    whole = OPS["sum"].reference(x, (1,), False)
    old = np.setbufsize(1024)
    try:
        assert not np.array_equal(OPS["sum"].reference(x, (1,), False), whole)
        for op in ("sum", "mean"):
            assert_within(*_reduce(op, "f32", x, (1,)), cpu.cpu.exactness(op, "f32"))
        _check_row_op("layer_norm", "f32", x, w, b, eps=1e-6)
    finally:
        np.setbufsize(old)


def _axes_cases(rng, count: int):
    """Random shapes of rank 1 to 4 (sizes 1 and sizes past the pairwise and buffer limits) and random
    sets of axes."""
    cases = [((64, 16, 8, 8), (0, 2, 3)), ((300, 30), (0,)), ((3, 9000), (0, 1)), ((2, 3, 9000), (0, 2))]
    cases += [((10000, 3), (0,)), ((5, 4000, 3), (0, 1)), ((3, 2, 4096), (0, 2)), ((3, 130, 3), (0, 1, 2))]
    while len(cases) < count:
        shape = tuple(int(s) for s in rng.choice([1, 2, 3, 8, 9, 17, 130], rng.integers(1, 5)))
        if math.prod(shape) > 40000:
            continue
        k = rng.integers(1, len(shape) + 1)
        cases.append((shape, tuple(sorted(rng.choice(len(shape), k, replace=False).tolist()))))
    return cases


@pytest.mark.parametrize("dtype", DTYPES)
def test_reductions_over_any_axes_give_the_reference_bits(dtype):
    """Reduced axes that are not the last: NumPy adds whole slices element by element (in C order of
    the reduced axes); with the last axis reduced too, it adds the pairwise sums of the runs in order."""
    rng = np.random.default_rng(1)
    np_dtype = cpu.DTYPES[dtype]
    for i, (shape, axes) in enumerate(_axes_cases(rng, 120)):
        x = scaled(rng, shape, np_dtype)
        if i % 4 == 0:  # special values: NaN wins, 0 and -0
            x.reshape(-1)[rng.integers(0, x.size, 3)] = rng.choice(special_values(np_dtype), 3)
        if i % 7 == 0:
            x = rng.choice(np.array([0.0, -0.0], np_dtype), shape)
        for op in REDUCE:
            assert_within(*_reduce(op, dtype, x, axes, bool(i % 2)), cpu.cpu.exactness(op, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_kernels_called_with_negative_axes_give_the_reference_bits(dtype):
    """The ops normalise axes before a kernel runs; the kernels take negative ones too, and refuse an
    axis out of range as the reference does."""
    x = scaled(np.random.default_rng(3), (3, 4, 5), cpu.DTYPES[dtype])
    for op, axes in [("sum", (-1,)), ("max", (-2,)), ("mean", (0, -1)), ("min", (-3, -2, -1))]:
        for keepdim in (False, True):
            actual, expected = _reduce(op, dtype, x, axes, keepdim)
            assert actual.shape == expected.shape and actual.tobytes() == expected.tobytes(), (op, axes)
    for axis in (-1, -3):
        actual, expected = _reduce("argmax", dtype, x, axis, True)
        assert actual.shape == expected.shape and np.array_equal(actual, expected), axis
    for op, axes in [("sum", (3,)), ("argmax", -4)]:
        with pytest.raises(np.exceptions.AxisError):
            _kernel(op, dtype)(x, axes, False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_argmax_takes_the_first_largest_or_the_first_nan(dtype):
    np_dtype = cpu.DTYPES[dtype]
    argmax = _kernel("argmax", dtype)
    x = np.array([[0.0, -0.0, 0.0], [-0.0, 0.0, 3.0], [1.0, np.nan, np.nan], [np.nan, 5.0, 1.0]], np_dtype)
    assert argmax(x, 1, False).tolist() == [0, 2, 1, 0]
    assert argmax(x, 0, True).tolist() == [[3, 2, 2]]  # the first NaN of each column
    assert argmax(x, None, False).tolist() == 7 and argmax(x, None, True).shape == (1, 1)
    rng = np.random.default_rng(2)
    for shape, axes in _axes_cases(rng, 40):
        x = rng.integers(-3, 3, shape).astype(np_dtype)  # many ties
        if x.size > 4:
            x.reshape(-1)[rng.integers(0, x.size, 2)] = np.nan
        for axis in (None, axes[0]):
            for keepdim in (False, True):
                actual, expected = _reduce("argmax", dtype, x, axis, keepdim)
                assert actual.dtype == np.int64 and actual.shape == expected.shape
                assert np.array_equal(actual, expected), (shape, axis)


@pytest.mark.parametrize("op", (*REDUCE, "argmax"))
def test_every_thread_count_gives_the_same_bits_in_reductions(op, small_chunks):
    rng = np.random.default_rng(3)
    cases = [((64, 16, 8, 8), (0, 2, 3)), ((300, 40), (0,)), ((7, 9000), (1,)), ((5, 6, 7), (0, 2))]
    for shape, axes in cases:
        x = scaled(rng, shape, np.float32)
        axis = axes[0] if op == "argmax" else axes
        results = []
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            results.append(_reduce(op, "f32", x, axis)[0].tobytes())
        assert results[0] == results[1] == results[2]
    assert cpu.pool_size() >= 2


@pytest.fixture
def chunk_3():
    yield
    cpu.set_min_chunk(None)
    verigrad.set_threads(1)


def _assert_reference_bits(op: str, dtype: str, x: np.ndarray, axes: tuple) -> None:
    """The kernel gives the reference's bits, NaN signs and zero signs included, for 1, 2 and 3 threads
    at the default chunk and at a chunk of 3."""
    with np.errstate(all="ignore"):
        expected = OPS[op].reference(x, axes, False).tobytes()
    for chunk in (None, 3):
        cpu.set_min_chunk(chunk)
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            actual = _reduce(op, dtype, x, axes)[0]
            assert actual.tobytes() == expected, (op, dtype, x.shape, axes, chunk, threads, actual)


@pytest.mark.parametrize("op", ("max", "min"))
@pytest.mark.parametrize("dtype", DTYPES)
def test_max_and_min_keep_the_zero_numpy_keeps(op, dtype, chunk_3):
    """Which of 0 and -0 NumPy keeps depends on its SIMD path (an inner run of exactly one vector is
    reduced across lanes, a shorter one element after element): no C order gives it everywhere."""
    np_dtype = cpu.DTYPES[dtype]
    rng = np.random.default_rng(4)
    sign = 1 if op == "min" else -1  # max of -x is -min of x: the same ties
    reported = sign * np.array([[1.0, -0.0, -0.0, 0.0], [-0.0, -0.0, 1.0, 1.0]], np_dtype)
    cases = [((2, 600, 4), (0, 2)), ((2, 500, 8), (0, 2)), ((2, 3, 4), (0, 2)), ((2, 5, 8), (0, 2))]
    cases += [((6, 4), (0,))]
    cases += [((2, 3, 4), (0, 1)), ((3, 40), (1,)), ((600, 4), (0,)), ((4, 600), (1,))]
    for shape, axes in cases:
        x = rng.choice(np.array([0.0, -0.0, 1.0, -1.0], np_dtype), shape)
        if shape == (2, 3, 4):
            x[:, 1, :] = reported
        _assert_reference_bits(op, dtype, x, axes)
        _assert_reference_bits(op, dtype, np.zeros(shape, np_dtype), axes)  # +0 only: no tie to break
        _assert_reference_bits(op, dtype, -np.abs(x) if op == "max" else np.abs(x), axes)


@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_results_carry_the_reference_sign(dtype, chunk_3):
    """+NaN and -NaN in one output: the sum's sign depends on the order of the additions' operands, which
    compilers swap; NumPy's max/min give a fresh +NaN where its SIMD loop meets a NaN."""
    np_dtype = cpu.DTYPES[dtype]
    x = np.ones((600, 4), np_dtype)
    x[5, 2], x[400, 2] = np.nan, -np.nan
    for op in ("sum", "mean", "max", "min"):
        _assert_reference_bits(op, dtype, x, (0,))
        _assert_reference_bits(op, dtype, np.ascontiguousarray(x.T), (1,))
        _assert_reference_bits(op, dtype, x.reshape(2, 300, 4), (0, 2))
        _assert_reference_bits(op, dtype, np.full((3, 50), -np.nan, np_dtype), (1,))


def test_views_scalars_and_empty_arrays_run_the_reference():
    x = np.random.default_rng(0).standard_normal((4, 5, 6)).astype(np.float32)
    for op in REDUCE:
        for args in [(x[:, :, ::2], (2,)), (x.T, (0, 2)), (x[:, :1], (1,)), (x, ())]:
            actual, expected = _reduce(op, "f32", *args)
            assert actual.tobytes() == np.asarray(expected).tobytes()
        actual, expected = _reduce(op, "f32", np.float32(3).reshape(()), ())
        assert np.asarray(actual).tobytes() == np.asarray(expected).tobytes()
    assert _reduce("sum", "f64", np.zeros((3, 0)), (1,))[0].shape == (3,)
    assert _reduce("sum", "f64", np.zeros((0, 3)), (1,))[0].shape == (0,)
    with pytest.raises(ValueError):
        _reduce("max", "f64", np.zeros((3, 0)), (1,))
    assert _kernel("sum", "f32")(x.astype(np.float64), (1,), False).dtype == np.float64  # another dtype


# row kernels ---------------------------------------------------------------------------------------
def _row_inputs(np_dtype, seed: int) -> list[np.ndarray]:
    """Rows of logits on several scales, past the pairwise (128) and buffer (8192) limits, with special
    values (NaN, inf, -inf, huge) in some rows."""
    rng = np.random.default_rng(seed)
    shapes = [(1, 1), (4, 5), (64, 10), (3, 129), (5, 1000), (2, 9000), (3, 2, 17)]
    out = [(rng.standard_normal(s) * scale).astype(np_dtype) for s in shapes for scale in (1, 30)]
    special = rng.standard_normal((6, 12)).astype(np_dtype)
    special[0, 3], special[1, 5], special[2, 0], special[3] = np.nan, np.inf, -np.inf, -np.inf
    special[4, :2] = np.finfo(np_dtype).max
    out.append(special)
    return out


def _check_row_op(op: str, dtype: str, *args, **params) -> None:
    expected = decomposition(OPS[op])(*args, **params)
    actual = _kernel(op, dtype)(*args, **params)
    assert_within(actual, expected, cpu.cpu.exactness(op, dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_reduces_its_row_losses_as_numpy_does(dtype):
    """The mean and the sum of the per-row losses (summed in C) have the bits of NumPy's sum of them in
    double (pairwise, in cast-buffer blocks for f32), rounded once; a NaN loss gives NumPy's own NaN."""
    np_dtype = cpu.DTYPES[dtype]
    rng = np.random.default_rng(8)
    kernel = _kernel("cross_entropy", dtype)
    for rows in (1, 7, 64, 300, 9000):  # under 8, a pairwise block, several, several cast buffers
        x = rng.standard_normal((rows, 5)).astype(np_dtype) * 4
        target = rng.integers(0, 5, rows)
        losses = kernel(x, target, "none")
        total = np.add.reduce(losses, (0,), np.float64)
        assert kernel(x, target, "sum").tobytes() == total.astype(np_dtype).tobytes()
        assert kernel(x, target, "mean").tobytes() == (total / rows).astype(np_dtype).tobytes()
    x[3, 0] = np.nan
    mean = kernel(x, target, "mean")
    assert (
        np.isnan(mean)
        and mean.tobytes() == OPS["mean"].reference(kernel(x, target, "none"), (0,), False).tobytes()
    )


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_kernels_match_their_decompositions(dtype):
    np_dtype = cpu.DTYPES[dtype]
    rng = np.random.default_rng(4)
    for x in _row_inputs(np_dtype, 5):
        n = x.shape[-1]
        for op in ("softmax", "log_softmax"):
            _check_row_op(op, dtype, x, axis=x.ndim - 1)
        if x.ndim == 2:
            target = rng.integers(-1, n + 1, x.shape[0])  # some outside [0, n): a loss of 0
            for reduction in ("none", "mean", "sum"):
                _check_row_op("cross_entropy", dtype, x, target.astype(np.int32), reduction=reduction)
                g = np.ones((), np_dtype) if reduction != "none" else rng.uniform(-3, 3, x.shape[0])
                _check_row_op("cross_entropy_grad", dtype, x, target, g.astype(np_dtype), reduction=reduction)
        w, b = rng.standard_normal((2, n)).astype(np_dtype)
        g = rng.standard_normal(x.shape).astype(np_dtype)
        for eps in (1e-5, 0.1):
            _check_row_op("layer_norm", dtype, x, w, b, eps=eps)
            _check_row_op("rms_norm", dtype, x, w, eps=eps)
            _check_row_op("layer_norm_grad", dtype, g, x, w, eps=eps)
            _check_row_op("rms_norm_grad", dtype, g, x, w, eps=eps)


def test_row_kernels_state_their_exactness():
    """Exact where the exp and log kernels they call are, else the derived bounds."""
    libm_exact = all(cpu.cpu.exactness(op, d).is_exact for op in ("exp", "log") for d in DTYPES)
    for dtype in DTYPES:
        for op in cpu.ROWS:
            assert cpu.cpu.exactness(op, dtype).is_exact == (libm_exact or op not in cpu_rows.CALLS_EXP)
    for op in REDUCE:
        assert cpu.cpu.exactness(op, "f32").is_exact
    assert cpu.cpu.exactness("argmax", "i64").is_exact and _kernel("argmax", "f32") is not None
    inexact = Backend("inexact")  # a machine where exp is 4 ulps from NumPy's
    inexact.register("exp", np.exp, "f32", ulp(4))
    inexact.register("log", np.log, "f32")
    eps = float(np.finfo(np.float32).eps)
    assert cpu_rows.exactness("softmax", "f32", inexact) == ulp(9)
    assert cpu_rows.exactness("log_softmax", "f32", inexact) == tolerance(8 * eps, 8 * eps)
    assert cpu_rows.exactness("cross_entropy_grad", "f32", inexact) == tolerance(32 * eps, 32 * eps)
    assert cpu_rows.exactness("layer_norm_grad", "f32", inexact).is_exact


def test_row_kernels_hand_computed():
    softmax, log_softmax = _kernel("softmax", "f64"), _kernel("log_softmax", "f64")
    x = np.array([[1000.0, 1000.0], [0.0, math.log(3.0)]])
    assert np.allclose(softmax(x, 1), [[0.5, 0.5], [0.25, 0.75]], rtol=1e-15)
    assert np.allclose(log_softmax(x, 1), np.log([[0.5, 0.5], [0.25, 0.75]]), rtol=1e-15)
    loss = _kernel("cross_entropy", "f64")(x, np.array([0, 1]), "none")
    assert np.allclose(loss, [math.log(2), math.log(4 / 3)], rtol=1e-15)
    ln = _kernel("layer_norm", "f64")(np.array([[1.0, 3.0]]), np.array([2.0, 1.0]), np.array([0.0, 1.0]), 0.0)
    assert ln.tolist() == [[-2.0, 2.0]]
    rms = _kernel("rms_norm", "f64")(np.array([[3.0, 4.0]]), np.array([1.0, 2.0]), 0.0)
    assert np.allclose(rms, [[3 / math.sqrt(12.5), 8 / math.sqrt(12.5)]], rtol=1e-15)


@pytest.mark.parametrize("op", cpu.ROWS)
def test_every_thread_count_gives_the_same_bits_in_rows(op, small_chunks):
    rng = np.random.default_rng(6)
    x, g = rng.standard_normal((2, 50, 37)).astype(np.float32) * 10
    w = rng.standard_normal(37).astype(np.float32)
    args = {
        "softmax": (x, 1),
        "log_softmax": (x, 1),
        "cross_entropy": (x, rng.integers(0, 37, 50), "none"),
        "layer_norm": (x, *rng.standard_normal((2, 37)).astype(np.float32), 1e-5),
        "cross_entropy_grad": (x, rng.integers(0, 37, 50), g[:, 0], "none"),
        "rms_norm": (x, w, 1e-6),
        "layer_norm_grad": (g, x, w, 1e-5),
        "rms_norm_grad": (g, x, w, 1e-6),
    }[op]
    results = []
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        results.append(_kernel(op, "f32")(*args).tobytes())
    assert results[0] == results[1] == results[2]


def test_softmax_in_place():
    x = np.random.default_rng(7).standard_normal((6, 300))
    for op in ("softmax", "log_softmax"):
        expected = _kernel(op, "f64")(x, 1)
        y = x.copy()
        assert _kernel(op, "f64")(y, 1, out=y) is y and y.tobytes() == expected.tobytes()
        y = x.copy()  # along another axis: the decomposition, written into out
        assert _kernel(op, "f64")(y, 0, out=y) is y
        assert y.tobytes() == decomposition(OPS[op])(x, axis=0).tobytes()


def test_other_axes_views_and_mixed_dtypes_run_the_decomposition():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((4, 6, 5)).astype(np.float32)
    for op in ("softmax", "log_softmax"):
        for args in [(x, 1), (x, 0), (x.transpose(0, 2, 1), 2), (x[:, ::2], 2), (x[:, :0], 2)]:
            expected = decomposition(OPS[op])(args[0], axis=args[1])
            assert_within(_kernel(op, "f32")(*args), expected, cpu.cpu.exactness(op, "f32"))
    w64, b = rng.standard_normal(5), rng.standard_normal(5).astype(np.float32)
    mixed = _kernel("layer_norm", "f64")(x, w64, b, 1e-5)
    assert mixed.tobytes() == decomposition(OPS["layer_norm"])(x, w64, b, eps=1e-5).tobytes()
    assert mixed.dtype == np.float64
    empty = _kernel("cross_entropy", "f32")(np.zeros((0, 3), np.float32), np.zeros(0, np.int64), "sum")
    assert np.asarray(empty).tolist() == 0.0


def test_eager_training_ops_on_cpu_use_the_kernels_and_match_the_reference():
    """cross_entropy forward and backward (cross_entropy_grad), layer_norm and rms_norm forward and
    backward (their *_grad kernels and the weight and bias sums), op by op on the cpu backend."""
    rng = np.random.default_rng(9)
    logits, target = rng.standard_normal((32, 10)).astype(np.float32), rng.integers(0, 10, 32)
    w, b = rng.standard_normal((2, 10)).astype(np.float32)
    results = {}
    for name in ("reference", "cpu"):
        with verigrad.backend(name):
            z = verigrad.from_numpy(logits).requires_grad_(True)
            loss = F.cross_entropy(z, verigrad.from_numpy(target))
            loss.backward()
            x, weight, bias = (verigrad.from_numpy(a).requires_grad_(True) for a in (logits, w, b))
            (F.layer_norm(x, weight, bias) * 3 + F.rms_norm(x, weight)).sum().backward()
            results[name] = [
                loss.numpy(),
                z.grad.numpy(),
                x.grad.numpy(),
                weight.grad.numpy(),
                bias.grad.numpy(),
                verigrad.from_numpy(logits).argmax(1).numpy(),
            ]
    # what each result's accuracy rests on; x.grad adds two exact gradients, weight.grad two exact sums
    ops = ("cross_entropy", "cross_entropy_grad", "layer_norm_grad", "sum", "sum", "argmax")
    for (actual, expected), op in zip(zip(*results.values()), ops):
        assert_within(actual, expected, cpu.cpu.exactness(op, "f32"))


def test_the_row_kernels_take_the_c_path(monkeypatch):
    """No row kernel runs its decomposition for C-contiguous operands of its dtype (the fallback would
    pass every comparison above)."""

    def refuse(*args, **kwargs):
        raise AssertionError("the decomposition ran")

    monkeypatch.setattr(_References, "apply", refuse)
    rng = np.random.default_rng(10)
    x, g = rng.standard_normal((2, 4, 6))
    w, t = rng.standard_normal(6), rng.integers(0, 6, 4)
    for op, args in [
        ("softmax", (x, 1)),
        ("log_softmax", (x, 1)),
        ("cross_entropy", (x, t, "mean")),
        ("cross_entropy_grad", (x, t, np.float64(1.0).reshape(()), "mean")),
        ("layer_norm", (x, w, w, 1e-5)),
        ("rms_norm", (x, w, 1e-5)),
        ("layer_norm_grad", (g, x, w, 1e-5)),
        ("rms_norm_grad", (g, x, w, 1e-5)),
    ]:
        _kernel(op, "f64")(*args)
    with pytest.raises(AssertionError, match="decomposition"):
        _kernel("softmax", "f64")(x, 0)
