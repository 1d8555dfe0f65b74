"""The cpu backend's element-wise kernels (elementwise.c) against the op references: bit for bit for the
exactly rounded ops, within a stated number of ulps for the transcendentals; NumPy's own routines where
the kernels call them, every vector path, every thread count, broadcast operands, `out=` and the
fallbacks to the reference for other layouts and dtypes."""

from __future__ import annotations

import contextlib
import ctypes
import os

import numpy as np
import pytest
from nan_loops import NAN_BINARY, NAN_UNARY

import verigrad
from verigrad.backends import cpu
from verigrad.backends.cpu import elementwise, numpy_loops
from verigrad.backends.verification import compare
from verigrad.ops import REGISTRY

SMALL_CHUNK = 64  # the min chunk the `small_chunks` fixture (conftest.py) sets

HAS_CC = cpu.available()
needs_cc = pytest.mark.skipif(not HAS_CC, reason="the cpu backend could not be built here")
ALL_KERNELS = cpu.cpu.kernels() if HAS_CC else []
ELEMENTWISE = cpu.UNARY_EXACT + cpu.UNARY_LIBM + cpu.BINARY
KERNELS = [(op, d) for op, d in ALL_KERNELS if op in ELEMENTWISE and d in cpu.DTYPES]  # the float ones
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bound(op: str, dtype: str) -> int:
    """The ulps the kernel's registration states (0: exact)."""
    return cpu.cpu.exactness(op, dtype).ulps


def _ordered(a: np.ndarray) -> np.ndarray:
    """The float bits as integers ordered like the floats (so the difference counts ulps)."""
    ints = a.view(np.int32 if a.dtype == np.float32 else np.int64).astype(np.int64)
    magnitude = ints & (np.iinfo(np.int32 if a.dtype == np.float32 else np.int64).max)
    return np.where(ints < 0, -magnitude, magnitude)


def max_ulps(actual: np.ndarray, expected: np.ndarray) -> int:
    """The largest difference in ulps; NaN equals NaN (whatever its sign), NaN against a number fails."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    nan_a, nan_e = np.isnan(actual), np.isnan(expected)
    assert np.array_equal(nan_a, nan_e), "NaN where the reference has a number, or the reverse"
    if actual.size == 0:
        return 0
    diff = np.abs(_ordered(actual) - _ordered(expected))
    diff[nan_a] = 0
    return int(diff.max())


def assert_matches(actual: np.ndarray, expected: np.ndarray, op: str, dtype: str) -> None:
    assert actual.shape == expected.shape
    actual, expected = np.atleast_1d(actual), np.atleast_1d(expected)
    stated = cpu.cpu.exactness(op, dtype)
    if not stated.is_exact and not stated.ulps:  # a tolerance: as the verification suite holds it
        verdict = compare(actual, expected, stated)
        assert not verdict.message, f"{op} {dtype}: {verdict.message}"
        return
    bound = _bound(op, dtype)
    ulps = max_ulps(actual, expected)
    assert ulps <= bound, f"{op} {dtype}: {ulps} ulps from the reference (bound {bound})"
    if bound == 0:  # exact: the very bits, but a NaN's sign is not compared
        width = np.uint32 if actual.dtype == np.float32 else np.uint64
        same = actual.view(width) == expected.view(width)
        assert (same | np.isnan(expected)).all(), f"{op} {dtype}: other bits than the reference"


def special_values(np_dtype: np.dtype) -> np.ndarray:
    fi = np.finfo(np_dtype)
    values = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1.0, -1.0, 0.5, -0.5, 2.0, 20.0, -20.0]
    values += [fi.tiny, -fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal, fi.tiny / 3, -fi.tiny / 7]
    values += [fi.max, -fi.max, fi.eps, 88.5, -88.5, -104.0, 709.5, -745.0, 1e5, -1e5, 3.14159, 1e-30]
    with np.errstate(over="ignore"):
        return np.array(values, dtype=np_dtype)


def inputs(np_dtype: np.dtype, n: int, seed: int = 0) -> np.ndarray:
    """Special values, then uniform values on several scales, then random bit patterns."""
    rng = np.random.default_rng(seed)
    parts = [special_values(np_dtype)]
    for scale in (1.0, 5.0, 30.0, 1e4):
        parts.append(rng.uniform(-scale, scale, n).astype(np_dtype))
    parts.append(rng.uniform(0, 1, n).astype(np_dtype))
    width = np.uint32 if np_dtype == np.float32 else np.uint64
    parts.append(rng.integers(0, np.iinfo(width).max, n, dtype=width, endpoint=True).view(np_dtype))
    return np.concatenate(parts)


def run(op: str, dtype: str, *arrays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        expected = np.asarray(REGISTRY[op].reference(*arrays))
        actual = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype))(*arrays)
    return actual, expected


def operands(op: str, dtype: str, n: int, seed: int = 0) -> list[np.ndarray]:
    np_dtype = cpu.DTYPES[dtype]
    if op in cpu.BINARY:
        s = special_values(np_dtype)
        rng = np.random.default_rng(seed + 1)
        a = np.concatenate([np.repeat(s, s.size), inputs(np_dtype, n, seed)])
        b = np.concatenate([np.tile(s, s.size), rng.permutation(inputs(np_dtype, n, seed + 2))])
        return [a, b]
    return [inputs(np_dtype, n, seed)]


@needs_cc
@pytest.mark.parametrize(("op", "dtype"), KERNELS)
def test_kernel_matches_the_reference(op, dtype, small_chunks):
    verigrad.set_threads(2)
    actual, expected = run(op, dtype, *operands(op, dtype, 20000))
    assert actual.dtype == expected.dtype
    assert_matches(actual, expected, op, dtype)
    np_dtype = cpu.DTYPES[dtype]
    for shape in [(0,), (2, 0), (), (1,), (1, 1), (3, 5)]:  # empty, size 1, small
        rng = np.random.default_rng(3)
        arrays = [rng.uniform(0.1, 2, shape).astype(np_dtype) for _ in operands(op, dtype, 1)]
        actual, expected = run(op, dtype, *arrays)
        assert actual.shape == shape
        assert_matches(actual, expected, op, dtype)


@pytest.fixture(params=cpu.vector_paths() if HAS_CC else ["scalar"])
def vector_path(request: pytest.FixtureRequest):
    """Each path of the f32 kernels of elementwise.VECTORIZED the machine has, in turn."""
    with cpu.cpu.on_path(request.param):
        assert cpu.vector_path() == request.param
        yield request.param


@needs_cc
@pytest.mark.parametrize("op", list(elementwise.VECTORIZED))
def test_f32_results_next_to_a_halfway_point_are_rounded_as_the_reference(op, vector_path):
    """Inputs whose f64 result lies within 32768 double ulps (elementwise.c's ROUND_SLACK) of a point halfway
    between two f32s: the vector paths' rounding test hands them to the scalar formula, so they get its
    bits, and the reference's where the kernel is registered (within the claim: exact where NumPy's f64
    routines are the C library's)."""
    x = np.arange(0x3E000000, 0x3E000000 + 2**21, dtype=np.uint32).view(np.float32)  # [0.125, 0.25)
    x = np.concatenate([x, -x, x * 64, -x * 256])
    with np.errstate(all="ignore"):
        low = REGISTRY[op].reference(x.astype(np.float64)).view(np.uint64) & np.uint64(0x1FFFFFFF)
    near = x[np.abs(low.astype(np.int64) - 0x10000000) <= 32768]
    assert near.size >= 100, near.size
    kernel = vector_kernel(op)
    actual = kernel(near)
    with cpu.cpu.on_path("scalar"):
        assert actual.tobytes() == kernel(near).tobytes()
    registered, expected = run(op, "f32", near)
    assert registered.tobytes() == actual.tobytes()
    assert_matches(actual, expected, op, "f32")
    assert cpu.cpu.exactness(op, "f32").is_exact or not cpu.cpu.exactness(op, "f64").is_exact


@contextlib.contextmanager
def numpy_routine(routine: str, loop):
    """elementwise.c calls `loop` (a `numpy_loops.LOOP`) in place of NumPy's `routine` inside the block."""
    lib = cpu.cpu.library
    try:
        elementwise.use_numpy_routine(lib, routine, loop)
        yield
    finally:
        elementwise.use_numpy_routine(lib, routine, *numpy_loops.find(getattr(np, routine)))


def test_numpys_loops_are_read_from_their_ufuncs_and_checked():
    """Each d->d (power's dd->d) loop called through its pointer gives its ufunc's bits; a ufunc of two
    outputs, or without an all-f64 loop, gives none."""
    probe = np.concatenate([np.linspace(-50, 50, 10001), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310]])
    found = numpy_loops.loops(probe)
    assert found is not None and len(found) == len(numpy_loops.ROUTINES)
    assert numpy_loops.find(np.divmod) is None and numpy_loops.find(np.isnan) is None
    x = np.random.default_rng(2).uniform(-3, 3, 1000)
    for ufunc in (np.arctan2, np.add):  # a two-operand loop that is no routine of elementwise.c
        loop = numpy_loops.find(ufunc)
        assert loop is not None and numpy_loops._agrees(ufunc, *loop, x)
        assert not numpy_loops._agrees(np.subtract if ufunc is np.add else np.add, *loop, x)


@needs_cc
@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_pow_runs_numpys_power_a_block_at_a_time_but_for_squares_and_square_roots(dtype, small_chunks):
    """Where NumPy's loops were handed over, pow (operands of one shape, and broadcast ones) runs every
    element through NumPy's power loop (a NaN stand-in here) on 3 threads, but where the exponent is 2 or
    0.5 (but for a = -inf): a * a and sqrt(a), by value, as the reference has it; with the real loop back,
    the reference's bits, whichever operand is broadcast."""
    if not elementwise.NUMPY_ROUTINES[0]:
        pytest.skip("NumPy's f64 loops were not found here: the C library's routines alone")
    verigrad.set_threads(3)
    rng = np.random.default_rng(9)
    np_dtype = cpu.DTYPES[dtype]
    a = np.concatenate([rng.uniform(0, 4, 997), [-0.0, -np.inf, np.inf, np.nan, 0.0, -2.0]]).astype(np_dtype)
    b = rng.choice([2.0, 0.5, 3.0, -1.5, 0.7], a.size).astype(np_dtype)
    kernel = cpu.cpu.native(REGISTRY["pow"], getattr(verigrad, dtype))
    cases = [(a, b), (a.reshape(1, -1), b[:7, None]), (a, np_dtype.type(2.0)), (a, np_dtype.type(0.5))]
    cases += [(a[::-2], b[::-2]), (np_dtype.type(1.5), b)]
    for x, y in cases:
        shape = np.broadcast_shapes(np.shape(x), np.shape(y))
        special = np.broadcast_to((y == 2.0) | ((y == 0.5) & (x != -np.inf)), shape)
        with numpy_routine("power", NAN_BINARY):
            got = kernel(np.asarray(x), np.asarray(y))
        with np.errstate(all="ignore"):
            expected = REGISTRY["pow"].reference(np.asarray(x), np.asarray(y))
        assert np.isnan(got[~special]).all() and got[special].tobytes() == expected[special].tobytes()
        assert kernel(np.asarray(x), np.asarray(y)).tobytes() == expected.tobytes()


def test_pows_reference_does_not_depend_on_the_layout():
    """NumPy squares a broadcast scalar exponent of 2 and takes sqrt for 0.5, and leaves its own routine
    on long strides: the reference gives x * x and sqrt(x) (with power's values at -0 and -inf) for those
    exponents wherever they are, and the same bits for every layout of its operands."""
    pow_ = REGISTRY["pow"].reference
    x = np.concatenate([np.random.default_rng(4).uniform(0, 9, 5000), [-0.0, -np.inf, 4.0]])
    with np.errstate(invalid="ignore"):
        root = np.where(x == -np.inf, np.inf, np.sqrt(x) + 0.0)  # power's +0 at -0 and +inf at -inf
        for e, expect in ((2.0, x * x), (0.5, root)):
            for exponent in (np.float64(e), np.full(x.size, e), np.full((3, 1), e)):
                got = pow_(x, exponent)
                assert got.tobytes() == np.broadcast_to(expect, got.shape).tobytes()
        other = np.full(x.size, 1.7)
        wide = np.zeros((x.size, 600))
        wide[:, 7] = x  # a column of a wide matrix: 4800-byte strides, beyond NumPy's gathers
        assert (
            pow_(wide[:, 7], other).tobytes()
            == pow_(x, other).tobytes()
            == pow_(x, np.float64(1.7)).tobytes()
        )
        x32 = x.astype(np.float32)
        root32 = np.where(x32 == -np.inf, np.inf, np.sqrt(x32) + np.float32(0.0))
        assert pow_(x32, np.float32(0.5)).tobytes() == root32.tobytes()


@needs_cc
@pytest.mark.parametrize(
    ("op", "routine"), [("exp", "exp"), ("sigmoid", "exp"), ("gelu_tanh", "expm1"), ("gelu_deriv", "exp")]
)
def test_f32_vector_paths_send_the_elements_in_doubt_to_numpys_routine(op, routine, vector_path):
    """A vector path's f32 results whose rounding its own polynomials leave in doubt go to NumPy's routine
    (here a stand-in that gives NaN): every element whose reference double lies within 2^14 ulps of a
    point halfway between two f32s (the path's error is at most 3300 ulps, its test's slack 32768), and
    a few in ten thousand others; every other element has the reference's bits. The scalar path runs the
    routine for every element."""
    if not elementwise.NUMPY_ROUTINES[0]:
        pytest.skip("NumPy's f64 loops were not found here: the C library's routines alone")
    x = np.arange(0x3E000000, 0x3E000000 + 2**22, dtype=np.uint32).view(np.float32)  # [0.125, 0.5)
    x = np.concatenate([x, -x])
    with np.errstate(all="ignore"):
        reference = REGISTRY[op].reference(x.astype(np.float64))
    offset = (reference.view(np.uint64) & np.uint64(0x1FFFFFFF)).astype(np.int64) - 0x10000000
    near = np.abs(offset) < 2**14
    assert near.sum() > 100
    kernel = cpu.cpu.native(REGISTRY[op], verigrad.f32)
    with numpy_routine(routine, NAN_UNARY):
        actual = kernel(x)
    sent = np.isnan(actual)
    if vector_path == "scalar":
        assert sent.all()
    else:
        assert sent[near].all() and sent.sum() < x.size // 1000, sent.sum()
    assert actual[~sent].tobytes() == reference[~sent].astype(np.float32).tobytes()
    assert kernel(x).tobytes() == REGISTRY[op].reference(x).tobytes()  # NumPy's routine back: the reference


@needs_cc
@pytest.mark.parametrize(("op", "routine"), [("exp", "exp"), ("tanh", "expm1"), ("gelu_deriv", "exp")])
def test_f64_kernels_run_numpys_routine_a_block_at_a_time(op, routine, small_chunks):
    """Where NumPy's loops were handed over, every element of an f64 kernel (and of an f32 one whose
    formula cancels) goes through NumPy's routine (here a stand-in that gives NaN, so every result is NaN),
    over blocks, chunks and threads; with the real loop back, the reference's bits."""
    if not elementwise.NUMPY_ROUTINES[0]:
        pytest.skip("NumPy's f64 loops were not found here: the C library's routines alone")
    verigrad.set_threads(3)
    x = np.random.default_rng(18).normal(0, 4, 1000)
    for dtype in ("f64",) + (("f32",) if op in cpu.CANCELLING else ()):
        kernel, xs = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype)), x.astype(cpu.DTYPES[dtype])
        with numpy_routine(routine, NAN_UNARY), cpu.cpu.on_path("scalar"):  # f32: no vector path
            assert np.isnan(kernel(xs)).all()
        assert kernel(xs).tobytes() == REGISTRY[op].reference(xs).tobytes()


def _nans_among_values(np_dtype: np.dtype, size: int, seed: int) -> np.ndarray:
    """Normal values of standard deviation 3, a third of them NaNs of random payloads and signs."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 3, size).astype(np_dtype)
    uint = np.uint64 if np_dtype == np.float64 else np.uint32
    bits = x.view(uint)
    exponent = np.array(np.inf, np_dtype).view(uint)
    payload = rng.integers(1, np.iinfo(uint).max, size, dtype=uint) & ~(
        exponent | (uint(1) << uint(bits.itemsize * 8 - 1))
    )
    sign = rng.integers(0, 2, size, dtype=uint) << uint(bits.itemsize * 8 - 1)
    picks = rng.random(size) < 0.33
    bits[picks] = (exponent | payload | sign)[picks]
    assert np.isnan(x[picks]).all()
    return x


@needs_cc
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op", sorted(set(elementwise.ROUTINE_OF) - {"pow"}))
def test_routine_kernels_give_the_same_nans_wherever_a_block_starts(op, dtype, small_chunks):
    """NaNs of random payloads and signs among values: no element's bits, a NaN's included, depend on
    where a chunk or a block of NumPy's routine starts (the formulas' rests run as vectorized loops:
    vg_math.h's rests select an input's NaN where a product or sum would meet two), on 1, 2 and 3
    threads."""
    x = _nans_among_values(cpu.DTYPES[dtype], 3000, 11)
    kernel = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype))
    verigrad.set_threads(1)
    whole = kernel(x)
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        for start in (0, 1, 3, 5, 8, 13):
            assert kernel(x[start:]).tobytes() == whole[start:].tobytes(), (threads, start)


@needs_cc
@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("op", ["add", "mul"])
def test_two_nans_meeting_in_add_or_mul_give_the_first_ones_bits_wherever_a_block_starts(
    op, dtype, small_chunks
):
    """NaNs of random payloads and signs in both operands: x86 returns the first operand's NaN, but the
    compiler put either operand first, differently in the vector body and the scalar prologue, so a NaN
    met by a NaN depended on where its thread's block started (3 threads of 2552 elements gave another
    NaN than 1 thread). Now always the first operand's (NumPy's contiguous loops give it too)."""
    a = _nans_among_values(cpu.DTYPES[dtype], 3000, 21)
    b = _nans_among_values(cpu.DTYPES[dtype], 3000, 22)
    kernel = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype))
    both = np.isnan(a) & np.isnan(b)
    assert both.sum() > 100
    verigrad.set_threads(1)
    whole = kernel(a, b)
    quiet = a.view(np.uint64 if dtype == "f64" else np.uint32) | np.array(np.nan, a.dtype).view(
        np.uint64 if dtype == "f64" else np.uint32
    )
    assert (whole.view(quiet.dtype)[both] == quiet[both]).all()
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        for start in (0, 1, 3, 5, 8, 13):
            assert kernel(a[start:], b[start:]).tobytes() == whole[start:].tobytes(), (threads, start)


def vector_kernel(op: str):
    """elementwise.c's f32 kernel of `op`, called as vg_<op>_f32(x, out, n, min_chunk, threads)."""
    cpu.cpu.load()
    fn = getattr(cpu.cpu.library.cdll, f"vg_{op}_f32")
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]

    def kernel(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        out = np.empty_like(x) if out is None else out
        fn(x.ctypes.data, out.ctypes.data, x.size, 16384, 1)
        return out

    return kernel


@needs_cc
@pytest.mark.parametrize("op", list(elementwise.VECTORIZED))
def test_every_vector_path_gives_the_same_bits_at_every_length_and_in_place(op):
    """Each block length's tail (AVX2 takes 8 elements a block, AVX-512 32), the special values and
    inputs whose rounding is sent to the scalar formula spread over blocks, and a result written over its
    input: the bits of the scalar formula, and of the reference where the kernel is registered exact."""
    kernel = vector_kernel(op)
    rng = np.random.default_rng(5)
    x = np.concatenate([special_values(np.float32), rng.normal(0, 8, 3000)]).astype(np.float32)
    x = x[rng.permutation(x.size)]
    results = {}
    for path in cpu.vector_paths():
        with cpu.cpu.on_path(path):
            results[path] = [kernel(x[:n]).tobytes() for n in (*range(0, 70), x.size)]
            inplace = x.copy()
            kernel(inplace, inplace)
            assert inplace.tobytes() == results[path][-1]
    assert all(r == results["scalar"] for r in results.values())
    if (op, "f32") in cpu.cpu.registered() and cpu.cpu.exactness(op, "f32").is_exact:
        with np.errstate(all="ignore"):
            assert results["scalar"][-1] == REGISTRY[op].reference(x).tobytes()


def test_vector_paths_are_chosen_by_name_and_capped_at_the_machine():
    paths = cpu.vector_paths()
    assert paths[-1] == "scalar" and cpu.vector_path() == paths[0]
    with cpu.cpu.on_path("scalar"):
        assert cpu.vector_path() == "scalar" and not cpu.vectorized()
    assert cpu.vector_path() == paths[0]
    if HAS_CC:
        assert cpu.vector_path("avx512") == paths[0]  # the fastest the machine has, at most AVX-512
    with pytest.raises(ValueError, match="unknown vector path 'sse'"):
        cpu.vector_path("sse")


@needs_cc
@pytest.mark.parametrize(("op", "dtype"), KERNELS)
def test_every_thread_count_gives_the_same_bits(op, dtype, small_chunks):
    arrays = [a[:5000] for a in operands(op, dtype, 1000, seed=7)]
    results = []
    for threads in (1, 2, 3, 1):
        verigrad.set_threads(threads)
        results.append(run(op, dtype, *arrays)[0])
    for r in results[1:]:
        assert r.tobytes() == results[0].tobytes()
    assert cpu.pool_size() >= 2  # the pool did start threads


I64_EXTREMES = np.array([0, 1, -1, 2, -2, 3, 2**31, -(2**31), 2**62, 2**63 - 1, -(2**63)], np.int64)


@needs_cc
def test_cast_between_f32_and_f64_gives_astypes_bits(small_chunks):
    """f64 to f32 rounds as NumPy's astype: ties to even, overflow to infinity, f32 subnormals, NaNs of
    either sign; f32 to f64 is exact; on 1, 2 and 3 threads, 0-d arrays too. Other dtypes and strided
    arrays take the reference."""
    rng = np.random.default_rng(6)
    tie = 1.0 + 2.0**-24  # halfway between 1 and the next f32: rounds to 1
    specials = [tie, -tie, 1.0 + 3 * 2.0**-24, 3.4028235677973366e38, 3.4028236e38, 1e-45, 7e-46, 1e-40]
    specials += [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 5e-324, 1e300, -1e300]
    random = rng.standard_normal(5033) * 10.0 ** rng.integers(-45, 39, 5033)
    wide = np.concatenate([specials, random])  # 5050 values
    to_f32, to_f64 = (
        cpu.cpu.native(REGISTRY["cast"], verigrad.f32),
        cpu.cpu.native(REGISTRY["cast"], verigrad.f64),
    )
    with np.errstate(all="ignore"):
        narrow = wide.astype(np.float32)
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        for x in (wide, wide[:1].reshape(()), wide.reshape(50, -1)):
            with np.errstate(all="ignore"):
                expected = x.astype(np.float32)
            got = to_f32(x, verigrad.f32)
            assert got.dtype == np.float32 and got.shape == x.shape
            assert got.tobytes() == expected.tobytes()
        assert to_f64(narrow, verigrad.f64).tobytes() == narrow.astype(np.float64).tobytes()
    with np.errstate(all="ignore"):
        strided, halves = wide[::3], wide.astype(np.float16)
        assert to_f32(strided, verigrad.f32).tobytes() == strided.astype(np.float32).tobytes()
    assert to_f64(halves, verigrad.f64).tobytes() == halves.astype(np.float64).tobytes()


@needs_cc
@pytest.mark.parametrize("op", cpu.INT64_BINARY)
def test_i64_kernels_give_numpys_values_overflow_wrapping_around(op, small_chunks):
    """The i64 kernels against NumPy's wrapping arithmetic: every pair of extremes, random values, and
    operands that broadcast (a row, a column, a 0-d step count), on 1, 2 and 3 threads."""
    kernel, reference = cpu.cpu.native(REGISTRY[op], verigrad.i64), REGISTRY[op].reference
    rng = np.random.default_rng(5)
    wide = rng.integers(-(2**63), 2**63 - 1, 3000, dtype=np.int64, endpoint=True)
    a = np.concatenate([np.repeat(I64_EXTREMES, I64_EXTREMES.size), wide, wide[::-1] >> 33])
    b = np.concatenate([np.tile(I64_EXTREMES, I64_EXTREMES.size), wide[::-1], wide >> 31])
    grid = wide[:600].reshape(20, 30)
    pairs = [(a, b), (grid, grid[:1]), (grid[:, :1], grid), (np.array(41, np.int64), np.array(1, np.int64))]
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        for x, y in pairs:
            with np.errstate(all="ignore"):
                expected = reference(x, y)
            actual = kernel(x, y)
            assert actual.dtype == np.int64 and actual.shape == expected.shape
            assert np.array_equal(actual, expected), (op, x.shape, y.shape)
    verigrad.set_threads(1)
    top, bottom = 2**63 - 1, -(2**63)
    hand = {  # by hand, modulo 2^64
        "add": [(top, 1, bottom), (bottom, -1, top)],
        "sub": [(bottom, 1, top), (top, -1, bottom)],
        "mul": [(2**62, 2, bottom), (top, top, 1), (bottom, -1, bottom)],
        "maximum": [(bottom, top, top), (-1, 0, 0)],
        "minimum": [(bottom, top, bottom), (-1, 0, -1)],
    }
    for x, y, expected in hand[op]:
        assert kernel(np.array([x], np.int64), np.array([y], np.int64)).tolist() == [expected], (op, x, y)


@needs_cc
def test_large_arrays_use_the_default_chunk_and_threads():
    verigrad.set_threads(3)
    try:
        x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
        y = np.random.default_rng(1).standard_normal(100_000).astype(np.float32)
        with verigrad.backend("cpu"):
            out = (verigrad.from_numpy(x) * verigrad.from_numpy(y)).relu().numpy()
        assert out.tobytes() == np.maximum(x * y, 0).tobytes()
    finally:
        verigrad.set_threads(1)


def strided_views(x: np.ndarray) -> list[np.ndarray]:
    """Views of x (at least 4096 elements) that are not C-contiguous: a batch's gate (the first half of
    each row of a fused gate-up product, [B, 1, 2n] sliced), a transpose, negative and long steps, rank 4."""
    x = x[:4096]
    return [
        x.reshape(8, 1, 512)[..., :256],
        x.reshape(64, 64).T,
        x[::-3],
        x.reshape(4, 4, 16, 16)[:, ::2, :, 1::2],
    ]


UNARY_KERNELS = [(op, d) for op, d in KERNELS if op not in cpu.BINARY]


@needs_cc
@pytest.mark.parametrize(("op", "dtype"), UNARY_KERNELS)
def test_unary_kernels_run_strided_views_in_c_with_the_contiguous_bits(op, dtype, small_chunks):
    """A strided view runs the C kernel (vg_copy into the result, then the kernel in place), not the
    reference: the bits of the kernel on a contiguous copy (so within the stated bound of the reference on
    that copy), on 1, 2 and 3 threads, into `out=` too."""
    kernel = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype))
    (x,) = operands(op, dtype, 4000, seed=5)
    for view in strided_views(x):
        assert not view.flags.c_contiguous
        expected = kernel(np.ascontiguousarray(view))
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            cpu.chunks_run()
            actual = kernel(view)
            assert sum(cpu.chunks_run()) >= 2, f"{op} {dtype}: the strided view did not run in C"
            assert actual.flags.c_contiguous and actual.tobytes() == expected.tobytes()
            out = np.empty(view.shape, view.dtype)
            assert kernel(view, out=out) is out and out.tobytes() == expected.tobytes()
        with np.errstate(all="ignore"):  # (NumPy's f64 exp on a strided view may differ from its
            contiguous = np.asarray(REGISTRY[op].reference(np.ascontiguousarray(view)))  # contiguous loop)
        assert_matches(actual, contiguous, op, dtype)
    verigrad.set_threads(1)


@needs_cc
def test_a_unary_kernel_writing_over_its_strided_operand_reads_it_first():
    """`out=` overlapping a strided operand (its own base) gets the result of the operand as it was."""
    silu = cpu.cpu.native(REGISTRY["silu"], verigrad.f32)
    base = np.linspace(-4, 4, 64, dtype=np.float32).reshape(8, 8)
    expected = silu(np.ascontiguousarray(base.T))
    assert silu(base.T, out=base) is base and base.tobytes() == expected.tobytes()


@needs_cc
def test_other_layouts_and_dtypes_fall_back_to_the_reference():
    relu = cpu.cpu.native(REGISTRY["relu"], verigrad.f32)
    add = cpu.cpu.native(REGISTRY["add"], verigrad.f32)
    x = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(relu(x[:, ::2]), np.maximum(x[:, ::2], 0))  # strided (in C)
    assert np.array_equal(relu(x.T), np.maximum(x.T, 0))  # Fortran order (in C)
    five = np.zeros((2, 2, 2, 2, 4), np.float32)[..., ::2]  # rank 5: the reference
    assert relu(five).shape == (2, 2, 2, 2, 2)
    ints = relu(np.arange(-3, 3))  # ints: the reference keeps them ints, as PyTorch's relu
    assert ints.dtype == np.int64 and np.array_equal(ints, [0, 0, 0, 0, 1, 2])
    assert np.array_equal(add(x, x[:1]), x + x[:1])  # broadcast
    assert np.array_equal(add(x, np.float32(2)), x + 2)
    mixed = add(x, x.astype(np.float64))
    assert mixed.dtype == np.float64 and np.array_equal(mixed, x.astype(np.float64) * 2)
    unaligned = np.frombuffer(bytearray(4 * 12 + 1), dtype=np.float32, offset=1, count=12)
    assert np.array_equal(relu(unaligned), np.maximum(unaligned, 0))


@needs_cc
def test_eager_ops_on_the_cpu_backend_match_the_reference():
    x = verigrad.from_numpy(np.linspace(-3, 3, 101, dtype=np.float32))
    results = {}
    for name in ("reference", "cpu"):
        with verigrad.backend(name):
            results[name] = ((x * 2 - 1) / 3).relu().neg().abs().sqrt().numpy()
    assert results["cpu"].tobytes() == results["reference"].tobytes()


BROADCASTS = [((4, 3), (3,)), ((4, 1), (1, 3)), ((2, 3), ()), ((2, 1, 4), (3, 1)), ((3,), (4, 3))]
BROADCASTS += [((2, 3, 1, 5), (3, 4, 1)), ((1,), (7, 1)), ((0, 3), (3,)), ((3, 1), (0,))]


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@needs_cc
@pytest.mark.parametrize("op", cpu.BINARY)
@pytest.mark.parametrize("dtype", sorted(cpu.DTYPES))
def test_broadcast_binary_kernels_give_the_reference_bits(op, dtype, small_chunks):
    np_dtype = cpu.DTYPES[dtype]
    kernel = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype))
    rng = np.random.default_rng(11)
    shapes = list(BROADCASTS)
    for _ in range(30):  # random broadcastable shapes of rank <= 4
        out = rng.integers(1, 9, rng.integers(0, 5))
        pick = [tuple(int(d) if rng.random() < 0.6 else 1 for d in out[rng.integers(0, out.size + 1) :])]
        shapes.append((tuple(int(d) for d in out), pick[0]) if rng.random() < 0.5 else (pick[0], tuple(out)))
    pool = inputs(np_dtype, 200, seed=5)  # special values, several scales, random bits
    for sa, sb in shapes:
        a = rng.choice(pool, sa).astype(np_dtype)
        b = rng.choice(pool, sb).astype(np_dtype)
        with np.errstate(all="ignore"):
            expected = REGISTRY[op].reference(a, b)
            results = []
            for threads in (1, 2, 3):
                verigrad.set_threads(threads)
                results.append(kernel(a, b))
        for actual in results:
            assert actual.shape == expected.shape and actual.dtype == expected.dtype, (sa, sb)
            assert_matches(actual, expected, op, dtype)
            assert _bits(actual) == _bits(results[0]), (op, dtype, sa, sb)


@needs_cc
@pytest.mark.parametrize("dtype", sorted(cpu.DTYPES))
def test_element_wise_kernels_write_into_out_with_the_same_bits(dtype, small_chunks):
    """`out=`: the result written into a given array (one of the operands, where it is the result's
    shape: a replayed plan's in-place step), the same bits as a new array; an `out` the C loop cannot
    write as it is (strided) gets the result copied in."""
    np_dtype = cpu.DTYPES[dtype]
    rng = np.random.default_rng(12)
    pool = inputs(np_dtype, 200, seed=6)
    with np.errstate(all="ignore"):
        for op in ("add", "mul", "maximum", "exp", "relu", "neg"):
            kernel = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype))
            binary = op in cpu.BINARY
            for shape_a, shape_b in (((5, 7), (5, 7)), ((5, 7), (7,)), ((), ()), ((3000,), (3000,))):
                a = rng.choice(pool, shape_a).astype(np_dtype)
                b = rng.choice(pool, shape_b).astype(np_dtype)
                args = (a, b) if binary else (a,)
                expected = kernel(*args)
                into_a = a.copy()
                got = kernel(into_a, b, out=into_a) if binary else kernel(into_a, out=into_a)
                assert got is into_a and _bits(got) == _bits(expected), (op, shape_a, shape_b)
                strided = np.zeros((*expected.shape, 2), np_dtype)[..., 0]
                assert kernel(*args, out=strided) is strided and _bits(strided) == _bits(expected)


@needs_cc
@pytest.mark.parametrize("dtype", sorted(cpu.DTYPES))
def test_element_wise_loops_split_at_the_outputs_cache_line_give_the_same_bits(dtype, small_chunks):
    """The loops start their vector stores at a 64-byte boundary of the output (vg_aligned_from): an
    output and inputs at every element offset in a line, with chunk edges anywhere (2 and 3 threads,
    the fixture's small chunks), give the reference's bits."""
    np_dtype = cpu.DTYPES[dtype]
    pool = inputs(np_dtype, 300, seed=8)
    lanes = 64 // np.dtype(np_dtype).itemsize
    for op in ("add", "relu"):
        kernel, reference = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype)), REGISTRY[op].reference
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            for shift in range(lanes):
                a, b = pool[shift : shift + 250], pool[::-1][shift : shift + 250]
                out = np.empty(300, np_dtype)[lanes - 1 - shift :][:250]
                args = (a, b) if op == "add" else (a,)
                with np.errstate(all="ignore"):
                    assert _bits(kernel(*args, out=out)) == _bits(np.asarray(reference(*args))), (op, shift)


def test_broadcast_kernels_take_strided_views_and_every_special_pair(small_chunks):
    verigrad.set_threads(3)
    for dtype, np_dtype in cpu.DTYPES.items():
        s = special_values(np_dtype)
        for op in cpu.BINARY:
            kernel = cpu.cpu.native(REGISTRY[op], getattr(verigrad, dtype))
            with np.errstate(all="ignore"):
                assert_matches(kernel(s[:, None], s), REGISTRY[op].reference(s[:, None], s), op, dtype)
                x = np.arange(60, dtype=np_dtype).reshape(3, 4, 5) - 30
                for a, b in [
                    (x.T, x[0, 0, :3]),
                    (x[:, ::2, ::-1], x[:1, :2, 1:2]),
                    (x.transpose(1, 0, 2), x[:, 0]),
                ]:
                    assert_matches(kernel(a, b), REGISTRY[op].reference(a, b), op, dtype)
    add = cpu.cpu.native(REGISTRY["add"], verigrad.f32)
    deep = np.ones((1, 2, 1, 2, 1), np.float32)
    assert np.array_equal(add(deep, deep[0]), deep * 2)  # rank 5: the reference
    with pytest.raises(ValueError):
        add(np.ones(3, np.float32), np.ones(4, np.float32))  # the reference's error
