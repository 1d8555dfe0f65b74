"""The "cpu" backend: its C kernels against the op references (bit for bit for the exactly rounded ops,
within a stated number of ulps for the transcendentals), the same bits for every thread count, the
fallbacks to the reference, the build cache, and a machine with no C compiler."""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from nan_loops import NAN_BINARY, NAN_UNARY

import verigrad
from verigrad.backends import cpu
from verigrad.backends.cpu import elementwise, fastcall, numpy_loops
from verigrad.backends.kernel_table import EXACT
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


def test_cpu_is_the_default_backend():
    assert verigrad.backends.available() == ["cpu", "reference"]
    code = "import verigrad; print(verigrad.get_backend().name)"  # a fresh process: no test fixture
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "cpu"


@needs_cc
def test_the_kernels_registered():
    ops = {op for op, _ in ALL_KERNELS}
    lib = cpu.cpu.library
    args = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int]

    def agrees(op: str) -> bool:  # the C library's routines give NumPy's f64 bits (they differ where
        return elementwise.same_as_reference(lib.fn(f"vg_{op}_f64", args), op, 1, lib)  # NumPy has its own)

    libm = list(cpu.UNARY_LIBM)
    families = cpu.BINARY + cpu.REDUCE + cpu.ROWS + cpu.MOVEMENT + cpu.COLUMNS + cpu.POOL + cpu.MATMUL
    families += cpu.QUANT + cpu.ATTENTION + cpu.CONVOLUTION + cpu.ROPE + cpu.CAST
    assert ops == set(cpu.UNARY_EXACT + tuple(libm) + families)
    assert {d for op, d in ALL_KERNELS if op not in (*cpu.MOVEMENT, "argmax")} == {"f32", "f64", "i64"}
    assert [(op, d) for op, d in ALL_KERNELS if op == "argmax"] == [("argmax", "i64")]  # its result's dtype
    assert {op for op, d in ALL_KERNELS if d == "i64"} == {"argmax", *cpu.INT64_BINARY}
    assert [(op, d) for op, d in ALL_KERNELS if op in cpu.MOVEMENT] == [("contiguous", "None")]  # every dtype
    for op, dtype in KERNELS:  # exact, or the bound for routines unlike NumPy's
        assert _bound(op, dtype) in (0, cpu.LIBM_ULPS[dtype]), (op, dtype)
        assert _bound(op, dtype) == cpu.ULP_BOUNDS.get((op, dtype), 0)
    for op in cpu.CANCELLING:  # a result that cancels: exact where the C library is NumPy's, else a tolerance
        for dtype in ("f32", "f64"):
            numpy = elementwise.NUMPY_ROUTINES[0]
            expected = EXACT if agrees(op) or numpy else elementwise.cancelling_tolerance(op, dtype)
            assert cpu.cpu.exactness(op, dtype) == expected, (op, dtype)
    for op, dtype in itertools.product(cpu.UNARY_LIBM, ("f32", "f64")):  # NumPy's routines: exact
        assert cpu.cpu.exactness(op, dtype).is_exact or not elementwise.NUMPY_ROUTINES[0], (op, dtype)


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
    """Each path of the f32 exp, sigmoid, tanh, silu and gelu_tanh kernels the machine has, in turn."""
    with cpu.cpu.on_path(request.param):
        assert cpu.vector_path() == request.param
        yield request.param


@needs_cc
@pytest.mark.parametrize("op", ["exp", "sigmoid", "tanh", "silu", "gelu_tanh"])
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
@pytest.mark.parametrize(("op", "routine"), [("exp", "exp"), ("sigmoid", "exp"), ("gelu_tanh", "expm1")])
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
        with numpy_routine(routine, NAN_UNARY):
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
@pytest.mark.parametrize("op", ["exp", "sigmoid", "tanh", "silu", "gelu_tanh"])
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


@needs_cc
def test_other_layouts_and_dtypes_fall_back_to_the_reference():
    relu = cpu.cpu.native(REGISTRY["relu"], verigrad.f32)
    add = cpu.cpu.native(REGISTRY["add"], verigrad.f32)
    x = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
    assert np.array_equal(relu(x[:, ::2]), np.maximum(x[:, ::2], 0))  # strided
    assert np.array_equal(relu(x.T), np.maximum(x.T, 0))  # Fortran order
    assert relu(np.arange(-3, 3)).dtype == np.float32  # ints: the reference computes in f32
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


def _python(code: str, **env: str | None) -> subprocess.CompletedProcess:
    """`code` run by a fresh Python with `env` besides the environment (None: without the variable)."""
    full = {k: v for k, v in {**os.environ, "PYTHONPATH": ROOT, **env}.items() if v is not None}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full, cwd=ROOT
    )


INFO = """
import json
from verigrad.backends import cpu
print(json.dumps(cpu.build_info()))
"""


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A cache folder a fresh process built the library into (once for the module), and its build_info;
    a test that changes the folder changes a copy."""
    folder = tmp_path_factory.mktemp("cache")
    done = _python(INFO, VERIGRAD_CACHE=str(folder))
    assert done.returncode == 0, done.stderr
    return folder, json.loads(done.stdout)


@needs_cc
def test_the_library_is_built_once_per_cache_folder(built_cache):
    folder, info = built_cache
    assert info["available"] and not info["cached"] and info["build_seconds"] > 0
    assert os.path.dirname(info["path"]) == str(folder) and os.path.exists(info["path"])
    assert "-ffp-contract=off" in info["flags"] and not info["native"]
    libraries = sorted(p.name for p in folder.glob("*.so"))
    calls = [p for p in libraries if p.startswith("vg_call-")]
    assert libraries == sorted([os.path.basename(info["path"]), *calls])
    records = sorted(p.name for p in folder.glob("*.json"))  # one for each library; no temporary left
    assert [r.split("-")[0] for r in records] == [p.split("-")[0] for p in libraries]
    assert len(list(folder.iterdir())) == len(libraries) + len(records)
    ctypes_asked = os.environ.get("VERIGRAD_CTYPES", "") not in ("", "0")
    assert (info["calls"] == "vg_call") == bool(calls) == (fastcall.supported() and not ctypes_asked)
    second = json.loads(_python(INFO, VERIGRAD_CACHE=str(folder)).stdout)
    assert second["cached"] and second["path"] == info["path"] and second["build_seconds"] == 0
    assert cpu.build_info()["available"]


@needs_cc
def test_a_cached_library_that_does_not_load_is_built_anew(built_cache, tmp_path):
    """A cut or damaged library (the backend's, and vg_call's, which fastcall.py loads itself) is built
    again in its place by the next process, which runs on it."""
    folder, first = built_cache
    cache = shutil.copytree(folder, tmp_path / "cache")
    for library in cache.glob("*.so"):
        library.write_bytes(b"not a library\n")
    done = _python(INFO, VERIGRAD_CACHE=str(cache))
    assert done.returncode == 0 and "unavailable" not in done.stderr, done.stderr
    info = json.loads(done.stdout)
    assert info["available"] and not info["cached"] and info["path"] == str(cache / Path(first["path"]).name)
    assert info["calls"] == first["calls"]
    second = json.loads(_python(INFO, VERIGRAD_CACHE=str(cache)).stdout)
    assert second["available"] and second["cached"] and second["calls"] == first["calls"]


@needs_cc
@pytest.mark.parametrize("env", [{"PATH": "/nonexistent", "CC": None}, {"CC": "/nonexistent/cc"}])
def test_without_a_compiler_a_warm_cache_still_serves(built_cache, tmp_path, env):
    folder, first = built_cache
    cache = shutil.copytree(folder, tmp_path / "cache")
    done = _python(INFO, VERIGRAD_CACHE=str(cache), **env)
    assert done.returncode == 0 and "unavailable" not in done.stderr, done.stderr
    info = json.loads(done.stdout)
    assert info["available"] and info["cached"] and info["path"] == str(cache / Path(first["path"]).name)
    assert all(info[key] == first[key] for key in ("compiler", "version", "calls"))
    assert info["compiler_missing"].startswith(("no C compiler found", "the C compiler CC='/nonexistent/cc'"))


PROBE = "int probe(void) { return %d; }\n"


@needs_cc
def test_without_a_compiler_a_record_serves_only_its_sources_flags_and_compiler(tmp_path, monkeypatch):
    from verigrad.backends.cpu import build

    monkeypatch.setenv("VERIGRAD_CACHE", str(tmp_path))
    _, built = build.build("probe", PROBE % 1)
    monkeypatch.setenv("CC", "/nonexistent/cc")
    lib, info = build.build("probe", PROBE % 1)
    assert lib.probe() == 1 and info["cached"] and info["path"] == built["path"] and info["compiler_missing"]
    missing = r"^the C compiler CC='/nonexistent/cc' was not found$"
    with pytest.raises(build.BuildError, match=missing):
        build.build("probe", PROBE % 2)  # other sources: none built
    monkeypatch.setenv("VERIGRAD_NATIVE", "1")
    with pytest.raises(build.BuildError, match=missing):
        build.build("probe", PROBE % 1)  # other flags
    monkeypatch.delenv("VERIGRAD_NATIVE")
    record = tmp_path / build.record_name(build.flags(), "probe", PROBE % 1)
    record.write_text(json.dumps({**json.loads(record.read_text()), "version": "another"}))
    with pytest.raises(build.BuildError, match=missing):
        build.build("probe", PROBE % 1)  # a record that does not name what its compiler built


@needs_cc
def test_a_damaged_library_is_one_error_without_a_compiler_and_replaced_with_one(tmp_path, monkeypatch):
    from verigrad.backends.cpu import build

    monkeypatch.setenv("VERIGRAD_CACHE", str(tmp_path))
    cc = build.find_compiler()
    version = build.compiler_version(cc)
    path = tmp_path / build.library_name(cc, version, build.flags(), "probe", PROBE % 3)
    path.write_bytes(b"\x7fELF, cut short")
    build._remember(tmp_path / build.record_name(build.flags(), "probe", PROBE % 3), path.name, cc, version)

    def no_compiler() -> list[str]:
        raise build.BuildError("no C compiler found")

    monkeypatch.setattr(build, "find_compiler", no_compiler)
    with pytest.raises(build.BuildError, match=r"^cannot load .*; it cannot be built anew: no C compiler"):
        build.build("probe", PROBE % 3)
    monkeypatch.setattr(build, "find_compiler", lambda: cc)
    lib, info = build.build("probe", PROBE % 3)
    assert lib.probe() == 3 and not info["cached"] and info["path"] == str(path)
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json", ".so"]  # no temporary left


def test_without_a_compiler_one_line_says_so_and_training_runs_on_the_reference(tmp_path):
    code = """
    import numpy as np, verigrad
    from verigrad import nn
    from verigrad.backends import cpu
    from verigrad.optim import Adam

    def steps(name):
        verigrad.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
        opt = Adam(model.parameters(), lr=1e-2)
        x = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)
        y = np.arange(16) % 3
        with verigrad.backend(name):
            for _ in range(3):
                loss = nn.CrossEntropyLoss()(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
        return [p.numpy() for p in model.parameters()]

    same = all(np.array_equal(a, b) for a, b in zip(steps("cpu"), steps("reference")))
    print(same, cpu.available(), cpu.build_info()["available"], cpu.cpu.report()["native"])
    """
    done = _python(code, CC="/nonexistent/cc", VERIGRAD_CACHE=str(tmp_path))  # no library built before
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False", "[]"]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "cpu backend unavailable" in lines[0] and "CC=" in lines[0]


@needs_cc
def test_digits_training_on_cpu_gives_the_reference_weights(monkeypatch):
    """With the exact kernels the weights are the reference's, bit for bit; with every kernel they do not
    depend on the threads."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    try:
        from test_train import eager_steps
    finally:
        sys.path.pop(0)
    try:
        reference = eager_steps(1, steps=2)
        exact = {k: kernel for k, (kernel, exactness) in cpu.cpu.registered().items() if exactness.is_exact}
        with monkeypatch.context() as m:
            m.setattr(cpu.cpu, "_kernels", exact)
            with verigrad.backend("cpu"):
                on_cpu = eager_steps(1, steps=2)
        with verigrad.backend("cpu"):
            all_one, all_two = eager_steps(1, steps=2), eager_steps(2, steps=2)
    finally:
        verigrad.set_threads(1)
    for name in reference:
        assert on_cpu[name].tobytes() == reference[name].tobytes(), name
        assert all_one[name].tobytes() == all_two[name].tobytes(), name
        np.testing.assert_allclose(all_one[name], reference[name], rtol=1e-4, atol=1e-5)


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


COPY_DTYPES = [np.float32, np.float64, np.int64, np.int32, np.bool_, np.float16, np.int8, np.uint16]


def _copy_source(np_dtype: type, shape: tuple, seed: int) -> np.ndarray:
    """Random bit patterns (NaN payloads and all) for floats, random values for the rest."""
    rng = np.random.default_rng(seed)
    if np.dtype(np_dtype) == np.bool_:
        return rng.random(shape) < 0.5
    nbytes = int(np.prod(shape)) * np.dtype(np_dtype).itemsize
    return np.frombuffer(rng.bytes(nbytes), dtype=np_dtype).reshape(shape).copy()


def _views(x: np.ndarray) -> list[np.ndarray]:
    """Non-contiguous views of a rank-4 array, ranks 1 to 4."""
    return [
        x.transpose(3, 2, 1, 0),
        x.transpose(0, 2, 1, 3),
        x[:, ::2, 1::3, ::-1],
        x[::-1, :, ::-2],
        x[1, :, ::-1].T,
        x[..., 0],
        x[:, 0, :, 1],
        x[0, 0, ::-1, 2],
        x[0, 1, 1, ::2],
        x[0, 0, 0, ::-3],
        x[:1, :, :1, ::-1],
        x[:, :0, ::2],  # size 0
        x[:, 2:3, ::-1, :1],  # size-1 dims
        np.broadcast_to(x[:, :1], (3, 4, 5, 6)),  # zero strides
        np.broadcast_to(x[0, 0, 0, ::-2], (2, 3, 4, 3)),
        np.broadcast_to(x[0, 0, 0, 0], (5, 7)),
        np.broadcast_to(x[:, 0, 0, 0][:, None, None, None], (3, 2, 1, 4)),
    ]


@needs_cc
@pytest.mark.parametrize("np_dtype", COPY_DTYPES, ids=lambda t: np.dtype(t).name)
def test_contiguous_copies_any_view_with_the_reference_bits(np_dtype, small_chunks):
    kernel = cpu.cpu.native(REGISTRY["contiguous"], verigrad.f32)
    reference = REGISTRY["contiguous"].reference
    cpu.set_min_chunk(3)
    x = _copy_source(np_dtype, (3, 4, 5, 6), seed=np.dtype(np_dtype).itemsize)
    views = _views(x)
    assert any(v.size == 0 for v in views) and any(0 in v.strides for v in views)
    assert any(s < 0 for v in views for s in v.strides) and {v.ndim for v in views} == {1, 2, 3, 4}
    for view in views:
        assert not view.flags.c_contiguous or view.size == 0  # NumPy calls every empty array contiguous
        expected = reference(view)
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            actual = kernel(view)
            assert actual.flags.c_contiguous and actual.shape == expected.shape
            assert actual.dtype == expected.dtype
            assert actual.tobytes() == expected.tobytes(), (view.shape, view.strides, threads)
            if expected is view:  # the empty views
                assert actual is view
            else:
                assert actual.flags.owndata and actual.flags.writeable and not np.shares_memory(actual, x)


@needs_cc
def test_contiguous_returns_a_contiguous_input_itself(small_chunks):
    kernel = cpu.cpu.native(REGISTRY["contiguous"], verigrad.i64)
    reference = REGISTRY["contiguous"].reference
    x = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    for a in [x, x[1], x[:, :1].reshape(2, 4)[:1], np.array(2, np.float32), np.zeros((0, 3)), x[0, 0, 1:2]]:
        assert a.flags.c_contiguous
        assert kernel(a) is a and reference(a) is a
    zero_d = x[1, 2, 3]  # a scalar, not an array: the reference's answer
    assert _bits(kernel(zero_d)) == _bits(reference(zero_d))
    view0 = x[1, 2, 3:4].reshape(())
    assert kernel(view0) is view0 and view0.ndim == 0


@needs_cc
def test_contiguous_large_views_split_over_threads():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((300, 257)).astype(np.float32)
    try:
        for view in [x.T, x[::-1, ::3], np.broadcast_to(x[:, :1], (300, 257)).T]:
            results = []
            for threads in (1, 2, 3):
                verigrad.set_threads(threads)
                results.append(cpu.cpu.native(REGISTRY["contiguous"], verigrad.f32)(view))
            for r in results:
                assert r.tobytes() == np.ascontiguousarray(view).tobytes()
        with verigrad.backend("cpu"):
            out = verigrad.from_numpy(x).permute((1, 0)).contiguous().numpy()
        assert out.tobytes() == np.ascontiguousarray(x.T).tobytes()
    finally:
        verigrad.set_threads(1)


@needs_cc
def test_contiguous_falls_back_for_other_ranks_item_sizes_and_types(small_chunks):
    kernel = cpu.cpu.native(REGISTRY["contiguous"], verigrad.f32)
    verigrad.set_threads(2)
    deep = np.arange(2 * 3 * 2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2, 3, 2).transpose(4, 3, 2, 1, 0)
    wide = (np.arange(12) + 1j * np.arange(12)).reshape(3, 4).T  # item size 16
    objects = np.array([[1, "a"], [None, 2.5]], dtype=object).T  # item size 8, but references
    triples = np.zeros((4, 5), dtype="V3")[:, ::2]  # item size 3
    for view in (deep, wide, objects, triples):
        actual = kernel(view)
        assert actual.flags.c_contiguous and actual.shape == view.shape and actual.dtype == view.dtype
        assert np.array_equal(actual, view) if view.dtype != "V3" else actual.tobytes() == _bits(view)
    unaligned = np.frombuffer(bytearray(8 * 12 + 1), dtype=np.float64, offset=1, count=12)
    unaligned = unaligned.reshape(3, 4).T  # unaligned and strided: bytes are copied as they are
    assert not unaligned.flags.aligned
    assert kernel(unaligned).tobytes() == np.ascontiguousarray(unaligned).tobytes()
    assert kernel([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]  # not an ndarray: the reference


def test_a_failing_compiler_is_one_error_and_leaves_nothing_in_the_cache(tmp_path, monkeypatch):
    from verigrad.backends.cpu import build

    fake = tmp_path / "bin" / "cc"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'fake.c:1: error: broken' >&2\nexit 1\n")
    fake.chmod(0o755)
    cache = tmp_path / "cache"
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setenv("VERIGRAD_CACHE", str(cache))
    with pytest.raises(build.BuildError, match=r"the C build failed .*fake\.c:1: error: broken"):
        build.build()
    assert list(cache.iterdir()) == []  # no library, no object files, no temporary


def test_the_build_starts_the_next_compilation_when_any_finishes(tmp_path):
    """Two at once: a quick job frees its slot for the second long one while the first still runs, and a
    job that writes far more than a pipe holds does not block."""
    from verigrad.backends.cpu import build

    noisy = ["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' w >&2"]
    start = time.perf_counter()
    build._run_parallel([["sleep", "0.6"], noisy, ["sleep", "0.6"]], str(tmp_path), ["cc"], workers=2)
    assert time.perf_counter() - start < 1.0  # in order, the second sleep waited for the first: 1.2 s
    with pytest.raises(build.BuildError, match=r"the C build failed \(cc\): broken"):
        build._run_parallel([["sh", "-c", "echo broken >&2; exit 1"]], str(tmp_path), ["cc"], workers=2)


needs_two_cpus = pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="thread placement is tested on Linux with two usable CPUs or more",
)

PINNED = """
import json, os
import numpy as np
import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY

verigrad.set_threads(2)
cpu.set_min_chunk(1)
cpu.cpu.native(REGISTRY["relu"], verigrad.f32)(np.ones(64, np.float32))  # starts the pool's worker
tasks = sorted(int(t) for t in os.listdir("/proc/self/task"))
print(json.dumps([sorted(os.sched_getaffinity(t)) for t in tasks]))
"""


@needs_cc
def test_rapid_tiny_dispatches_with_late_workers_give_every_chunk_once():
    """Thousands of multi-threaded calls of a few microseconds each, with thread counts changing between
    them: the caller and the workers claim chunks from one counter, and a worker that wakes after its
    job is finished must not run a chunk of it (its arguments are gone) nor one of the next job."""
    add, relu = cpu.cpu.native(REGISTRY["add"], verigrad.f64), cpu.cpu.native(REGISTRY["relu"], verigrad.f64)
    total = cpu.cpu.native(REGISTRY["sum"], verigrad.f64)
    rng = np.random.default_rng(11)
    a, b, rows = rng.standard_normal(64), rng.standard_normal(64), rng.standard_normal((8, 64))
    cpu.set_min_chunk(1)
    try:  # kernels whose jobs differ in layout, one after another: a stale job would be read wrongly
        for k in range(9000):
            verigrad.set_threads(1 + k % 3)
            n = 2 + k % 63
            kind = k % 3
            if kind == 0:
                out, expected = add(a[:n], b[:n]), a[:n] + b[:n]
            elif kind == 1:
                out, expected = add(rows[:, :n], b[:n]), rows[:, :n] + b[:n]
            else:
                out, expected = relu(a[:n]), np.maximum(a[:n], 0.0)
            assert out.tobytes() == expected.tobytes(), (k, n)
            if k % 7 == 0:
                assert total(rows[:, :n], axis=(1,), keepdim=False).shape == (8,)
    finally:
        cpu.set_min_chunk(None)
        verigrad.set_threads(1)


@needs_cc
@needs_two_cpus
@pytest.mark.parametrize("flag", ["1", "0"])
def test_pool_workers_are_pinned_only_when_asked(flag):
    done = _python(PINNED, VERIGRAD_PIN_THREADS=flag)
    assert done.returncode == 0, done.stderr
    allowed = sorted(os.sched_getaffinity(0))
    pinned = [a for a in json.loads(done.stdout) if a != allowed]
    assert pinned == ([[allowed[1]]] if flag == "1" else [])  # worker 1 on the second usable CPU


WOKEN = """
import json, os, threading, time
import numpy as np
import verigrad
from verigrad.backends import cpu
from verigrad.ops import REGISTRY


def asleep():  # until the pool's worker has stopped spinning and sleeps (at most 10 s)
    me = str(threading.get_native_id())
    for _ in range(1000):
        others = [t for t in os.listdir("/proc/self/task") if t != me]
        states = [open(f"/proc/self/task/{t}/stat").read().rsplit(")", 1)[1].split()[0] for t in others]
        if others and all(state == "S" for state in states):
            return
        time.sleep(0.01)


verigrad.set_threads(2)
cpu.set_min_chunk(1)
relu = cpu.cpu.native(REGISTRY["relu"], verigrad.f32)
x = np.ones(64, np.float32)
relu(x)  # starts the pool's worker
asleep()
before = relu(x).tobytes()
asleep()
assert relu(x).tobytes() == before  # woken again: the same bits
tasks = sorted(int(t) for t in os.listdir("/proc/self/task"))
print(json.dumps([sorted(os.sched_getaffinity(t)) for t in tasks]))
"""


@needs_cc
@needs_two_cpus
@pytest.mark.parametrize("flag", ["1", "0"])
def test_a_worker_woken_after_a_pause_runs_off_the_callers_cpu(flag):
    """A sleeping worker is woken onto the process's CPUs but the caller's (Linux would queue it behind
    the caller, which keeps computing); a pinned worker keeps its CPU."""
    done = _python(WOKEN, VERIGRAD_PIN_THREADS=flag)
    assert done.returncode == 0, done.stderr
    allowed = sorted(os.sched_getaffinity(0))
    masks = [a for a in json.loads(done.stdout) if a != allowed]
    if flag == "1":
        assert masks == [[allowed[1]]]
    else:
        assert len(masks) == 1 and len(masks[0]) == len(allowed) - 1 and set(masks[0]) < set(allowed)


THREADS = "import verigrad; print(verigrad.get_backend().threads, verigrad.backends.reference.threads)"


@pytest.mark.parametrize("value", ["3", "1", None])
def test_verigrad_threads_sets_the_starting_thread_count(value):
    """VERIGRAD_THREADS, else the CPUs the process may use (at most 8), for every backend."""
    env = {k: v for k, v in os.environ.items() if k != "VERIGRAD_THREADS"}
    env |= {"PYTHONPATH": ROOT} if value is None else {"PYTHONPATH": ROOT, "VERIGRAD_THREADS": value}
    done = subprocess.run([sys.executable, "-c", THREADS], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    expected = int(value) if value else min(len(os.sched_getaffinity(0)), 8)
    assert done.stdout.split() == [str(expected)] * 2


def test_a_bad_verigrad_threads_is_refused_by_name():
    done = _python(THREADS, VERIGRAD_THREADS="two")
    assert done.returncode != 0
    assert "VERIGRAD_THREADS must be a whole number of at least 1, got 'two'" in done.stderr


CHUNK = "from verigrad.backends import cpu; print(cpu.min_chunk())"


def test_verigrad_min_chunk_sets_the_starting_chunk():
    done = _python(CHUNK, VERIGRAD_MIN_CHUNK="300")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["300"]


@pytest.mark.parametrize("text", ["0", "4k", "-2", "²"])
def test_a_bad_verigrad_min_chunk_is_refused_by_name(text):
    done = _python(CHUNK, VERIGRAD_MIN_CHUNK=text)
    assert done.returncode != 0
    assert f"VERIGRAD_MIN_CHUNK must be a whole number of at least 1, got '{text}'" in done.stderr


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("2", TypeError, "threads must be a whole number, got str '2'"),
        (2.0, TypeError, "threads must be a whole number, got float 2.0"),
        (True, TypeError, "threads must be a whole number, got bool True"),
        (0, ValueError, "threads must be at least 1, got 0"),
    ],
)
def test_set_threads_refuses_what_is_not_a_count(value, error, message):
    before = verigrad.get_backend().threads
    with pytest.raises(error, match=re.escape(message)):
        verigrad.set_threads(value)
    assert verigrad.get_backend().threads == before


def test_set_threads_and_min_chunk_take_numpy_integers():
    before, chunk = verigrad.get_backend().threads, cpu.min_chunk()
    try:
        verigrad.set_threads(np.int64(3))
        cpu.set_min_chunk(np.int32(7))
        assert verigrad.get_backend().threads == 3 and type(verigrad.get_backend().threads) is int
        assert cpu.min_chunk() == 7 and type(cpu.min_chunk()) is int
        with pytest.raises(ValueError, match="min_chunk must be at least 1, got -5"):
            cpu.set_min_chunk(-5)
        with pytest.raises(TypeError, match=re.escape("min_chunk must be a whole number, got float 1.5")):
            cpu.set_min_chunk(1.5)
        assert cpu.min_chunk() == 7
    finally:
        verigrad.set_threads(before)
        cpu.set_min_chunk(chunk)


def test_the_environment_is_read_at_every_call(monkeypatch):
    """Without set_threads / set_min_chunk, VERIGRAD_THREADS and VERIGRAD_MIN_CHUNK are read at every
    call (and NumPy's BLAS follows the thread count); a call's setting wins until None gives it back."""
    before, chunk = verigrad.backends.threads.THREAD_COUNT.explicit, cpu.MIN_CHUNK.explicit
    try:
        verigrad.set_threads(None)
        cpu.set_min_chunk(None)
        for value in ("3", "1", "5"):
            monkeypatch.setenv("VERIGRAD_THREADS", value)
            monkeypatch.setenv("VERIGRAD_MIN_CHUNK", value + "00")
            assert (
                verigrad.get_threads() == cpu.cpu.threads == verigrad.backends.reference.threads == int(value)
            )
            assert cpu.min_chunk() == int(value) * 100
            assert verigrad.backends.blas_threads() in (None, int(value))
        monkeypatch.setenv("VERIGRAD_THREADS", "three")
        with pytest.raises(
            ValueError, match="VERIGRAD_THREADS must be a whole number of at least 1, got 'three'"
        ):
            verigrad.get_threads()
        verigrad.set_threads(2)
        cpu.set_min_chunk(7)
        assert (verigrad.get_threads(), cpu.min_chunk()) == (2, 7)  # the call's setting wins
        monkeypatch.delenv("VERIGRAD_THREADS")
        monkeypatch.delenv("VERIGRAD_MIN_CHUNK")
        verigrad.set_threads(None)
        cpu.set_min_chunk(None)
        assert verigrad.get_threads() == min(len(os.sched_getaffinity(0)), 8)
        assert cpu.min_chunk() == 16384
    finally:
        verigrad.set_threads(before)
        cpu.set_min_chunk(chunk)


EVERY_CALL = """
import os
import numpy as np
import verigrad
from verigrad.backends import cpu
x = np.random.default_rng(0).standard_normal(200_000).astype(np.float32)
one = verigrad.tensor(x).sigmoid().numpy()
assert cpu.pool_size() == 0, cpu.pool_size()
os.environ["VERIGRAD_THREADS"] = "3"
three = verigrad.tensor(x).sigmoid().numpy()
assert cpu.pool_size() == 2, cpu.pool_size()  # the next call ran on three threads
assert one.tobytes() == three.tobytes()
print("ok")
"""


@needs_cc
def test_a_kernel_runs_on_the_threads_verigrad_threads_says_when_it_is_called():
    done = _python(EVERY_CALL, VERIGRAD_THREADS="1", VERIGRAD_MIN_CHUNK="1000")
    assert done.returncode == 0 and done.stdout.split() == ["ok"], done.stderr


NEVER_WARN = [
    ("cpu", op)
    for op in sorted(
        {o for (o, _), (k, _) in cpu.cpu.registered().items() if getattr(k, "never_warns", False)}
    )
    if HAS_CC
] + [("reference", name) for name, op in REGISTRY.items() if getattr(op.reference, "never_warns", False)]


@pytest.mark.parametrize(("backend", "name"), NEVER_WARN)
def test_a_kernel_marked_never_warns_lets_numpy_warn_on_none_of_the_verification_cases(backend, name) -> None:
    """Eager calls skip NumPy's error state for kernels marked never_warns (the cpu backend's elementwise,
    reduction, matmul, copy and row kernels; the references that only move data): on every case of the
    verification suite (special values, views that take the reference's path) none may warn."""
    from verigrad.backends import verification
    from verigrad.backends.active import lookup
    from verigrad.backends.reference import composite_reference
    from verigrad.dtypes import as_dtype

    assert {n for b, n in NEVER_WARN if b == "reference"} >= {"reshape", "permute", "slice"}
    if HAS_CC:
        assert {n for b, n in NEVER_WARN if b == "cpu"} >= {"add", "exp", "sum", "matmul", "softmax"}
    op, kernels = REGISTRY[name], lookup(backend)
    cases = list(
        verification.cases_for(
            op, lambda d: backend == "reference" or kernels.native(op, as_dtype(d)) is not None
        )
    )
    assert cases
    reference = op.reference or composite_reference(op)
    for case in cases:
        try:
            with np.errstate(all="ignore"):
                reference(*case.arrays, **case.params)
        except ValueError:  # an argmax over nothing: the kernel raises as the reference does
            continue
        kernel = kernels.kernel(op, case.out.dtype)
        assert getattr(kernel, "never_warns", False)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            kernel(*case.arrays, **case.params)


def test_the_kernel_an_op_runs_follows_registrations_and_replaced_references(monkeypatch) -> None:
    """Backends remember which kernel runs an op on a dtype; registering a kernel, replacing the table
    or the op's reference is seen by the next call."""
    from verigrad.backends.active import lookup

    backend, x = lookup("reference"), verigrad.tensor(np.array([1.0, -2.0], np.float32))
    with verigrad.backend("reference"):
        assert (-x).numpy().tolist() == [-1.0, 2.0]
        monkeypatch.setattr(backend, "_kernels", dict(backend._kernels))  # restored after the test
        backend.register("neg", lambda a: np.full_like(a, 7.0), "f32")
        assert (-x).numpy().tolist() == [7.0, 7.0]
        monkeypatch.setattr(REGISTRY["abs"], "reference", lambda a: np.full_like(a, 5.0))
        assert x.abs().numpy().tolist() == [5.0, 5.0]
