"""The cpu backend's reductions (reduce.c: sum, mean, max, min over any axes; argmax) against the
references: the reference's bits where the kernel states EXACT, within its stated bound otherwise; the
same bits for 1, 2 and 3 threads; the zero and the NaN sign NumPy keeps; views, scalars and empty arrays
on the reference."""

from __future__ import annotations

import math

import numpy as np
import pytest

import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

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
    return cpu.cpu.native(REGISTRY[op], verigrad.i64 if op == "argmax" else getattr(verigrad, dtype))


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
        return _kernel(op, dtype)(x, axis, keepdim), REGISTRY[op].reference(x, axis, keepdim)


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
        expected = REGISTRY[op].reference(x, axes, False).tobytes()
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
