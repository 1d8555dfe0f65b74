"""GEMM, GEMV, dot and axpy of the cpu backend (verigrad.backends.cpu.matmul): the exact path bit for bit
against its definition (double sums in increasing k, rounded once), both paths within their error bounds
of the matmul reference, NaN and infinities where the reference has them, reference-BLAS alpha/beta
semantics, empty and size-1 dimensions, views, and the same bits for 1, 2 and 3 threads."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import verigrad
from verigrad.backends import blas, cpu
from verigrad.backends.cpu import matmul as cpu_matmul
from verigrad.ops import REGISTRY

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

DTYPES = [np.float32, np.float64]
PATHS = [False, True]  # exact=
REFERENCE = REGISTRY["matmul"].reference


@pytest.fixture(autouse=True)
def one_thread():
    verigrad.set_threads(1)
    yield
    verigrad.set_threads(1)


def rand(rng: np.random.Generator, shape: tuple[int, ...], dtype) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def bits(x: np.ndarray) -> bytes:
    return np.ascontiguousarray(x).tobytes()


def within_bound(actual: np.ndarray, a: np.ndarray, b: np.ndarray, exact: bool) -> None:
    """actual is the reference's NaN/infinity where the reference has one, else within error_bound."""
    with np.errstate(all="ignore"):
        expected = REFERENCE(a, b)
        bound = cpu_matmul.error_bound(a, b, exact)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected))
    np.testing.assert_array_equal(
        actual[~finite & ~np.isnan(expected)], expected[~finite & ~np.isnan(expected)]
    )
    err = np.abs(actual[finite].astype(np.float64) - expected[finite].astype(np.float64))
    assert (err <= np.broadcast_to(bound, expected.shape)[finite]).all(), float((err - bound[finite]).max())


def fast_on_every_thread_count(va: np.ndarray, vb: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """The fast path's product of the views va, vb (of a, b) is within the bound, with the same bits, on
    1, 2 and 3 threads."""
    results = set()
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        out = cpu_matmul.matmul(va, vb, exact=False)
        within_bound(out, a, b, False)
        results.add(bits(out))
    assert len(results) == 1, (a.shape, b.shape)


@pytest.fixture
def packed_off():
    """matmul_packed.c's GEMM off, for the tests of the kernels it would take the products from."""
    lib = cpu_matmul._state["lib"]
    lib.packed_products(0)
    yield
    lib.packed_products(1)


# shapes covering partial micro-tiles (6 x 8), several work units (48 x 64), k past one block (256)
SHAPES = [(1, 1, 1), (5, 7, 3), (13, 300, 9), (50, 9, 70), (97, 260, 130), (6, 600, 8)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_exact_path_is_the_increasing_k_double_sum(dtype, shape):
    m, k, n = shape
    rng = np.random.default_rng(m * 1000 + k)
    a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
    out = cpu_matmul.gemm(a, b, exact=True)
    assert bits(out) == bits(cpu_matmul.reference_exact(a, b))
    if dtype == np.float32:  # double sums of exact products, rounded once: the reference's bits here
        assert bits(out) == bits(REFERENCE(a, b))


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_portable_micro_kernel_gives_the_vectorized_bits(dtype):
    rng = np.random.default_rng(13)
    a, b = rand(rng, (50, 300), dtype), rand(rng, (300, 70), dtype)
    vectorized = cpu_matmul.gemm(a, b, exact=True)
    cpu_matmul._lib().portable_only(1)
    try:
        assert bits(cpu_matmul.gemm(a, b, exact=True)) == bits(vectorized)
    finally:
        cpu_matmul._lib().portable_only(0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exact", PATHS)
def test_both_paths_are_within_their_bound_of_the_reference(dtype, exact):
    rng = np.random.default_rng(1)
    for m, k, n in [*SHAPES, (32, 3136, 16), (300, 64, 200)]:
        a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
        within_bound(cpu_matmul.gemm(a, b, exact=exact), a, b, exact)
        uniform = rng.uniform(0, 1, (m, k)).astype(dtype), rng.uniform(0, 1, (k, n)).astype(dtype)
        within_bound(cpu_matmul.gemm(*uniform, exact=exact), *uniform, exact)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exact", PATHS)
def test_nan_and_infinities_where_the_reference_has_them(dtype, exact):
    rng = np.random.default_rng(2)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-40, 3.0], dtype)
    a = rand(rng, (20, 30), dtype)
    b = rand(rng, (30, 40), dtype)
    a.reshape(-1)[rng.choice(a.size, 25, replace=False)] = rng.choice(specials, 25)
    b.reshape(-1)[rng.choice(b.size, 25, replace=False)] = rng.choice(specials, 25)
    within_bound(cpu_matmul.gemm(a, b, exact=exact), a, b, exact)
    # only special values: inf * 0, inf - inf, signed zeros
    a, b = rng.choice(specials, (9, 7)), rng.choice(specials, (7, 11))
    within_bound(cpu_matmul.gemm(a, b, exact=exact), a, b, exact)
    # a short k: the fast path checks the operands rather than c (m k + k n < m n)
    a, b = rand(rng, (70, 3), dtype), rand(rng, (3, 90), dtype)
    for value in (np.nan, np.inf):
        a[5, 1] = value
        within_bound(cpu_matmul.gemm(a, b, exact=exact), a, b, exact)


@pytest.mark.parametrize("exact", PATHS)
def test_f32_partial_sums_that_overflow_give_the_reference(exact):
    """3e38 + 3e38 - 3e38 is inf in f32 and 3e38 in double: the fast path must not return inf."""
    small = np.array([[3e38, 3e38, -3e38], [1.0, 2.0, 3.0]], np.float32), np.ones((3, 2), np.float32)
    wide = np.tile(small[0], (40, 1)), np.tile(small[1], (1, 50))
    for a, b in [small, wide]:  # c scanned; the operands checked (m k + k n < m n)
        before = cpu.cpu.reruns()
        out = cpu_matmul.gemm(a, b, exact=exact)
        assert bits(out) == bits(REFERENCE(a, b))
        assert np.isfinite(out).all()
        # the fast path's infinity, computed again, is counted (the verification's check needs it)
        assert cpu.cpu.reruns() == before + (0 if exact else 1)
        before = cpu.cpu.reruns()
        cpu_matmul.gemm(a / 4e37, b, exact=exact)  # nothing overflows: nothing computed again
        assert cpu.cpu.reruns() == before


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exact", PATHS)
def test_beta_zero_does_not_read_c(dtype, exact):
    rng = np.random.default_rng(3)
    a, b = rand(rng, (30, 20), dtype), rand(rng, (20, 10), dtype)
    c = np.full((30, 10), np.nan, dtype)
    out = cpu_matmul.gemm(a, b, c, beta=0.0, exact=exact)
    assert out is c and not np.isnan(c).any()
    assert bits(c) == bits(cpu_matmul.gemm(a, b, exact=exact))
    y = np.full(30, np.nan, dtype)
    cpu_matmul.gemv(a, b[:, 0], y, exact=exact)
    assert not np.isnan(y).any()
    within_bound(y, a, b[:, 0], exact)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exact", PATHS)
def test_alpha_zero_does_not_read_a_and_b(dtype, exact):
    rng = np.random.default_rng(4)
    a, b = np.full((8, 5), np.nan, dtype), np.full((5, 6), np.inf, dtype)
    c = rand(rng, (8, 6), dtype)
    expected = (c.astype(np.float64) * 0.5).astype(dtype)
    assert bits(cpu_matmul.gemm(a, b, c, alpha=0.0, beta=0.5, exact=exact)) == bits(expected)
    assert bits(cpu_matmul.gemm(a, b, c, alpha=0.0, beta=0.0, exact=exact)) == bits(np.zeros((8, 6), dtype))
    y = rand(rng, (8,), dtype)
    assert bits(cpu_matmul.gemv(a, b[:, 0], y.copy(), alpha=0.0, beta=1.0, exact=exact)) == bits(y)
    x = np.full(8, np.nan, dtype)
    assert bits(cpu_matmul.axpy(0.0, x, y.copy(), exact=exact)) == bits(y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exact", PATHS)
def test_batched_and_strided_products_keep_the_alpha_beta_rules(dtype, exact):
    """Batches that broadcast, a transposed a and a c that is a strided view into a NaN-filled buffer:
    beta == 0 reads no element of c (nor of the buffer around it), alpha == 0 lets no NaN or infinity of a
    and b through, and the rest of the buffer is untouched."""
    rng = np.random.default_rng(6)
    a = rand(rng, (3, 1, 40, 24), dtype).swapaxes(-1, -2)  # [3, 1, 24, 40], k along a's rows
    b = rand(rng, (2, 40, 17), dtype)
    expected = cpu_matmul.gemm(np.ascontiguousarray(a), b, exact=exact)
    buffer = np.full((3, 2, 24, 2 * 17), np.nan, dtype)
    c = buffer[..., ::2]
    assert cpu_matmul.gemm(a, b, c, beta=0.0, exact=exact) is c
    within_bound(c, a, b, exact)
    if exact:
        assert bits(c) == bits(expected)
    assert np.isnan(buffer[..., 1::2]).all()  # the elements between c's were neither read nor written
    poisoned_a = np.where(rng.random(a.shape) < 0.1, np.nan, a).astype(dtype)
    poisoned_b = np.where(rng.random(b.shape) < 0.1, np.inf, b).astype(dtype)
    before = c.copy()
    scaled = (before.astype(np.float64) * -2.0).astype(dtype)
    assert bits(cpu_matmul.gemm(poisoned_a, poisoned_b, c, alpha=0.0, beta=-2.0, exact=exact)) == bits(scaled)


@pytest.mark.parametrize("dtype", DTYPES)
def test_exact_alpha_beta_round_once(dtype):
    rng = np.random.default_rng(5)
    a, b, c = rand(rng, (13, 300), dtype), rand(rng, (300, 11), dtype), rand(rng, (13, 11), dtype)
    acc = np.zeros((13, 11))
    for k in range(300):
        acc = acc + a[:, k : k + 1].astype(np.float64) * b[k : k + 1, :].astype(np.float64)
    expected = (2.5 * acc + -0.75 * c.astype(np.float64)).astype(dtype)
    assert bits(cpu_matmul.gemm(a, b, c.copy(), alpha=2.5, beta=-0.75, exact=True)) == bits(expected)
    fast = cpu_matmul.gemm(a, b, c.copy(), alpha=2.5, beta=-0.75, exact=False)
    np.testing.assert_allclose(fast, expected, rtol=0, atol=1e-4 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exact", PATHS)
def test_empty_and_size_one_dimensions(dtype, exact):
    rng = np.random.default_rng(6)
    for sa, sb in [((0, 3), (3, 2)), ((2, 0), (0, 3)), ((3, 2), (2, 0)), ((1, 1), (1, 1)), ((1, 5), (5, 1))]:
        a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
        out = cpu_matmul.matmul(a, b, exact=exact)
        assert out.shape == REFERENCE(a, b).shape
        within_bound(out, a, b, exact)
    for sa, sb in [((2, 0, 3), (3, 4)), ((0, 2, 3), (1, 3, 4)), ((3, 1, 4), (1, 4, 1))]:
        a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
        within_bound(cpu_matmul.matmul(a, b, exact=exact), a, b, exact)
    c = np.full((4, 3), np.nan, dtype)  # k = 0: c = beta c, zeros for beta = 0
    assert bits(cpu_matmul.gemm(np.ones((4, 0), dtype), np.ones((0, 3), dtype), c, exact=exact)) == bits(
        np.zeros((4, 3), dtype)
    )


def views(x: np.ndarray) -> dict[str, np.ndarray]:
    """x as the same values in other layouts: transposed storage, offset and strided, reversed,
    unaligned."""
    big = np.zeros((x.shape[0] * 2 + 1, x.shape[1] * 3 + 2), x.dtype)
    strided = big[1::2, 2::3][: x.shape[0], : x.shape[1]]
    strided[...] = x
    raw = np.zeros(x.nbytes + 1, np.uint8)[1:].view(x.dtype).reshape(x.shape)
    raw[...] = x
    return {
        "contiguous": x,
        "transposed": np.asfortranarray(x),
        "strided": strided,
        "reversed": np.ascontiguousarray(x[::-1, ::-1])[::-1, ::-1],
        "unaligned": raw,
    }


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exact", PATHS)
def test_views(dtype, exact):
    """Every layout is taken (BLAS gets transposed and offset views as they are): the exact path gives
    the contiguous operands' bits, the fast path stays within its bound (OpenBLAS's packing, and so its
    bits, differ with the transposition)."""
    rng = np.random.default_rng(7)
    a, b = rand(rng, (37, 29), dtype), rand(rng, (29, 23), dtype)
    expected = bits(cpu_matmul.gemm(a, b, exact=exact))
    for na, va in views(a).items():
        for nb, vb in views(b).items():
            assert np.array_equal(va, a) and np.array_equal(vb, b)
            out = cpu_matmul.gemm(va, vb, exact=exact)
            if exact:
                assert bits(out) == expected, (na, nb)
            else:
                within_bound(out, a, b, exact)
    c = np.zeros((37, 46), dtype)[:, ::2]  # a strided c receives the same bits
    assert bits(cpu_matmul.gemm(a, b, c, exact=exact)) == expected


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exact", PATHS)
def test_batches_broadcast_as_in_numpy(dtype, exact):
    rng = np.random.default_rng(8)
    cases = [((3, 5, 4), (4, 6)), ((2, 1, 5, 4), (3, 4, 6)), ((5, 4), (2, 4, 3)), ((4,), (2, 4, 3))]
    for sa, sb in [*cases, ((2, 7, 300), (2, 300, 9))]:  # the last: k in two blocks, per item
        a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
        out = cpu_matmul.matmul(a, b, exact=exact)
        within_bound(out, a, b, exact)
        if exact and a.ndim > 1:
            assert bits(out) == bits(cpu_matmul.reference_exact(a, b))
        if a.ndim == 1:
            continue
        batch = out.shape[:-2]
        wide_a, wide_b = (
            np.broadcast_to(a, (*batch, *a.shape[-2:])),
            np.broadcast_to(b, (*batch, *b.shape[-2:])),
        )
        for i in np.ndindex(batch):  # each item is that item's own product
            item = cpu_matmul.matmul(
                np.ascontiguousarray(wide_a[i]), np.ascontiguousarray(wide_b[i]), exact=exact
            )
            assert bits(out[i]) == bits(item)
    x = rand(rng, (3, 4, 5), dtype)  # a transposed batch: b = x^T per item, no copy needed
    within_bound(cpu_matmul.matmul(x, x.mT, exact=exact), x, np.ascontiguousarray(x.mT), exact)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exact", PATHS)
def test_vectors_gemv_dot_axpy(dtype, exact):
    rng = np.random.default_rng(9)
    a, x, v = rand(rng, (300, 200), dtype), rand(rng, (200,), dtype), rand(rng, (300,), dtype)
    for lhs, rhs in [(a, x), (v, a), (x, x), (a.T, v), (a[::2, ::3], x[::3])]:
        within_bound(cpu_matmul.matmul(lhs, rhs, exact=exact), lhs, rhs, exact)
    if exact:
        exact_gemv = cpu_matmul.reference_exact(a, x[:, None])[:, 0]
        assert bits(cpu_matmul.gemv(a, x, exact=True)) == bits(exact_gemv)
        total = 0.0
        for p, q in zip(x.astype(np.float64), x[::-1].astype(np.float64)):
            total = total + p * q
        assert cpu_matmul.dot(x, x[::-1], exact=True) == np.array(total, dtype)
        y = v.copy()
        cpu_matmul.axpy(-1.5, v[::-1], y, exact=True)
        assert bits(y) == bits((-1.5 * v[::-1].astype(np.float64) + v.astype(np.float64)).astype(dtype))
    else:
        y = v.copy()
        cpu_matmul.axpy(-1.5, v[::-1], y, exact=False)
        exact_sum = -1.5 * v[::-1].astype(np.float64) + v
        bound = np.finfo(dtype).eps * (np.abs(1.5 * v[::-1]) + np.abs(v))  # two roundings at most
        assert (np.abs(y - exact_sum) <= bound).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("exact", PATHS)
def test_every_thread_count_gives_the_same_bits(dtype, exact):
    rng = np.random.default_rng(10)
    cases = [((300, 70), (70, 200)), ((6, 64, 50), (50, 40)), ((4, 600), (600, 300)), ((900, 100), (100,))]
    cases += [((1, 700), (700, 900)), ((900, 700), (700, 1)), ((16, 9000), (9000, 9))]  # GEMV tiles; k split
    for sa, sb in cases:
        a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
        results = []
        for threads in (1, 2, 3, 1):
            verigrad.set_threads(threads)
            results.append(bits(cpu_matmul.matmul(a, b, exact=exact)))
            assert blas.blas_threads() in (None, threads)  # the fast path gives OpenBLAS its count back
        assert len(set(results)) == 1, (sa, sb)
    assert cpu.pool_size() >= 2


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("small_kernel_work", [0, blas.SMALL_KERNEL_WORK])
@pytest.mark.usefixtures("packed_off")
def test_tiles_for_small_kernels_keep_the_bound_and_the_bits(dtype, small_kernel_work):
    """OpenBLAS's AVX-512 cores read a and b in place for products of at most 100^3 multiply-adds, and the
    fast path then cuts c into tiles of that size. Forced on or off (whatever this machine's OpenBLAS
    has), every layout and a batch stay within the bound and give the same bits for 1, 2 and 3 threads."""
    rng = np.random.default_rng(16)
    lib = cpu_matmul._state["lib"]
    try:
        lib.blas_small_kernels(small_kernel_work)
        for sa, sb in [((3000, 144), (144, 32)), ((1100, 40), (40, 128)), ((3, 200, 100), (100, 60))]:
            a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
            layouts = [(a, b), (np.asfortranarray(a), b), (a, np.asfortranarray(b))]
            layouts.append((np.asfortranarray(a), np.asfortranarray(b)))
            for va, vb in layouts if a.ndim == 2 else [(a, b)]:
                fast_on_every_thread_count(va, vb, a, b)
    finally:
        lib.blas_small_kernels(blas.small_kernel_work())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transposed_wide", [False, True])
@pytest.mark.usefixtures("packed_off")
def test_wide_products_computed_transposed_keep_the_bound_and_the_bits(dtype, transposed_wide):
    """On OpenBLAS's AVX-512 cores an f32 c = a b^T with fewer rows than columns and k >= 128 is computed as
    c^T = b a^T and transposed back. Forced on or off (whatever this machine's OpenBLAS has): every layout
    of a, a batch, a c with a longer row stride, a NaN, alpha and beta stay within the bound (or the reference
    BLAS semantics) with the same bits on 1, 2 and 3 threads."""
    rng = np.random.default_rng(17)
    lib = cpu_matmul._state["lib"]
    try:
        lib.blas_transposed_wide(int(transposed_wide))
        lib.dot_products(0)  # they would take most of these products
        # k >= 128: matmul_blas.c transposes no product of a shorter k
        cases = [((64, 784), (256, 784)), ((32, 130), (64, 130)), ((3, 33, 140), (3, 90, 140))]
        cases += [((33, 140), (3, 90, 140)), ((3, 33, 140), (90, 140))]  # a or b broadcast over the batch
        cases += [((32, 64), (256, 64))]  # k < 128: not transposed
        for sa, sb in [*cases, ((8, 50), (800, 50)), ((300, 20), (310, 20))]:  # few rows; not transposed
            a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
            bt = np.swapaxes(b, -1, -2)  # the transposed b
            layouts = [a] if a.ndim > 2 else [a, np.asfortranarray(a)]
            for va in layouts:
                fast_on_every_thread_count(va, bt, a, np.ascontiguousarray(bt))
        a, b = rand(rng, (32, 130), dtype), rand(rng, (64, 130), dtype)
        wide = np.zeros((32, 74), dtype)
        cpu_matmul.gemm(a, b.T, wide[:, 5:69], alpha=-2.0, exact=False)
        within_bound(wide[:, 5:69], -2.0 * a, np.ascontiguousarray(b.T), False)
        assert not wide[:, :5].any() and not wide[:, 69:].any()  # nothing written past c
        c = rand(rng, (32, 64), dtype)
        expected = a.astype(np.float64) @ b.T.astype(np.float64) + 0.5 * c
        out = cpu_matmul.gemm(a, b.T, c.copy(), beta=0.5, exact=False)  # c read: computed directly
        assert np.allclose(out, expected, rtol=1e-4, atol=1e-4)
        a[3, 7] = np.nan  # row 3 of c is NaN, as the reference's
        within_bound(cpu_matmul.matmul(a, b.T, exact=False), a, np.ascontiguousarray(b.T), False)
    finally:
        lib.blas_transposed_wide(int(blas.transposes_wide()))
        lib.dot_products(1)


def transposed(b: np.ndarray, offset: int = 0) -> np.ndarray:
    """b's values as the transpose of a view (rows along k) whose rows are `offset` elements longer, starting
    `offset` elements in: an F-contiguous b for 0, a slice of a wider matrix else."""
    store = np.zeros((b.shape[1], b.shape[0] + offset), b.dtype)
    store[:, offset:] = b.T
    return store[:, offset:].T


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("small_kernel_work", [0, blas.SMALL_KERNEL_WORK])
@pytest.mark.usefixtures("packed_off")
def test_a_small_product_with_b_transposed_gives_the_plain_b_bits(dtype, small_kernel_work):
    """Where OpenBLAS's small-matrix kernels take a product (one tile, at least 32 rows), a transposed b (an
    F-contiguous one, or a slice of a wider matrix) is copied plain first: c = a b^T then has the bits of the
    product with b given plain, on 1, 2 and 3 threads, and alpha, beta and a strided c keep their
    semantics. Forced off (no small kernels) the bound and thread invariance still hold."""
    rng = np.random.default_rng(18)
    lib = cpu_matmul._state["lib"]
    try:
        lib.blas_small_kernels(small_kernel_work)
        # 8 x 8 blocks and partial edges in n and k; k = 1; one tile of 100^3; two tiles of 64 rows
        for m, k, n in [(64, 64, 64), (33, 37, 53), (40, 7, 9), (32, 1, 5), (100, 100, 100), (128, 64, 64)]:
            a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
            plain = bits(cpu_matmul.matmul(a, b, exact=False))
            for offset in (0, 3):
                bt = transposed(b, offset)
                assert bt.strides[0] == bt.itemsize and np.array_equal(bt, b)
                fast_on_every_thread_count(a, bt, a, b)
                if small_kernel_work:
                    assert bits(cpu_matmul.matmul(a, bt, exact=False)) == plain, (m, k, n, offset)
        a, b = rand(rng, (48, 40), dtype), rand(rng, (40, 24), dtype)
        wide = np.full((48, 30), 7.0, dtype)
        cpu_matmul.gemm(a, transposed(b, 5), wide[:, 3:27], alpha=-2.0, exact=False)
        within_bound(wide[:, 3:27], -2.0 * a, b, False)
        assert (wide[:, :3] == 7).all() and (wide[:, 27:] == 7).all()  # nothing written past c
        c = rand(rng, (48, 24), dtype)
        expected = cpu_matmul.gemm(a, b, c.copy(), beta=0.5, exact=False)
        out = cpu_matmul.gemm(a, transposed(b), c.copy(), beta=0.5, exact=False)
        assert bits(out) == bits(expected) if small_kernel_work else np.allclose(out, expected, 1e-5, 1e-5)
        b[3, 7] = np.nan  # column 7 of c is NaN, as the reference's
        within_bound(cpu_matmul.matmul(a, transposed(b), exact=False), a, b, False)
    finally:
        lib.blas_small_kernels(blas.small_kernel_work())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", ["NN", "NT", "TN", "TT", "batched NT", "sliced"])
def test_every_layout_against_the_reference(dtype, layout):
    """A backward's products (g @ W^T, x^T @ g) and the other layouts: the exact path has the reference
    order's bits, the fast path is within the bound with the same bits on 1, 2 and 3 threads."""
    rng = np.random.default_rng(19)
    a, b = rand(rng, (3, 64, 48) if layout == "batched NT" else (64, 48), dtype), rand(rng, (48, 40), dtype)
    va = np.asfortranarray(a) if layout in ("TN", "TT") else a
    vb = transposed(b) if layout in ("NT", "TT") else b
    if layout == "batched NT":
        b = rand(rng, (3, 48, 40), dtype)
        vb = np.swapaxes(np.ascontiguousarray(np.swapaxes(b, -1, -2)), -1, -2)
    if layout == "sliced":
        wide = np.zeros((48, 45), dtype)  # b: a slice of a wider matrix (a longer row stride)
        wide[:, 5:] = b
        va, vb = views(a)["strided"], wide[:, 5:]
    assert np.array_equal(va, a) and np.array_equal(vb, b)
    assert bits(cpu_matmul.matmul(va, vb, exact=True)) == bits(cpu_matmul.reference_exact(a, b))
    fast_on_every_thread_count(va, vb, a, b)


def test_the_registered_matmul_kernel_follows_the_setting():
    rng = np.random.default_rng(11)
    a, b = rand(rng, (40, 300), np.float32), rand(rng, (300, 30), np.float32)
    kernel = cpu.cpu.native(REGISTRY["matmul"], verigrad.f32)
    assert cpu.cpu.exactness("matmul", "f32") == cpu_matmul.EXACTNESS[("f32", cpu_matmul.exact_default())]
    with cpu_matmul.exact_mode():
        assert cpu.cpu.exactness("matmul", "f32") == cpu_matmul.EXACTNESS[("f32", True)]
        assert bits(kernel(a, b)) == bits(cpu_matmul.reference_exact(a, b))
    with cpu_matmul.exact_mode(False):
        assert cpu.cpu.exactness("matmul", "f64") == cpu_matmul.EXACTNESS[("f64", False)]
        assert bits(kernel(a, b)) == bits(cpu_matmul.matmul(a, b, exact=False))
    ints = np.arange(6).reshape(2, 3)
    assert np.array_equal(kernel(ints, ints.T), REFERENCE(ints, ints.T))  # other dtypes: the reference
    assert kernel(a, b.astype(np.float64)).dtype == np.float64
    x = verigrad.from_numpy(a)
    with verigrad.backend("cpu"):
        assert bits((x @ verigrad.from_numpy(b)).numpy()) == bits(kernel(a, b))


def test_the_stated_tolerances_hold_for_their_range():
    """EXACTNESS's rtol/atol cover the error bounds for |a|, |b| <= UNIT and k <= K_STATED."""
    rng = np.random.default_rng(12)
    for (name, dtype), (m, n) in itertools.product(cpu.DTYPES.items(), [(16, 16), (1, 300), (300, 1)]):
        a = rng.uniform(-cpu_matmul.UNIT, cpu_matmul.UNIT, (m, cpu_matmul.K_STATED)).astype(dtype)
        b = rng.uniform(-cpu_matmul.UNIT, cpu_matmul.UNIT, (cpu_matmul.K_STATED, n)).astype(dtype)
        ref = np.abs(REFERENCE(a, b).astype(np.float64))
        for exact in PATHS:
            claim = cpu_matmul.EXACTNESS[(name, exact)]
            err = np.abs(cpu_matmul.gemm(a, b, exact=exact).astype(np.float64) - REFERENCE(a, b))
            assert (err <= claim.rtol * ref + claim.atol).all()
            if not exact:  # OpenBLAS's error stays below half the margin the claim takes
                s = cpu_matmul.abs_product(a, b)
                u = cpu_matmul.unit_roundoff(dtype)
                assert (err <= cpu_matmul.FAST_MARGIN / 2 * u * s + u * ref).all()


def test_bad_operands_are_refused_before_any_work():
    a, b = np.ones((3, 4), np.float32), np.ones((5, 2), np.float32)
    with pytest.raises(ValueError, match="inner sizes 4 and 5"):
        cpu_matmul.gemm(a, b)
    with pytest.raises(TypeError, match="one dtype"):
        cpu_matmul.gemm(a, np.ones((4, 2)))
    with pytest.raises(ValueError, match="do not broadcast"):
        cpu_matmul.gemm(np.ones((2, 3, 4), np.float32), np.ones((3, 4, 2), np.float32))
    c = np.ones((3, 3), np.float32)
    with pytest.raises(ValueError, match="c has shape"):
        cpu_matmul.gemm(a, np.ones((4, 2), np.float32), c)
    square = np.ones((3, 3), np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        cpu_matmul.gemm(square, square, square)
    with pytest.raises(ValueError, match="two vectors"):
        cpu_matmul.dot(np.ones(3, np.float32), np.ones(4, np.float32))


def test_the_cblas_functions_are_found():
    assert cpu_matmul.fast_available()
    fn, int64 = blas.cblas("sgemm")
    assert callable(fn) and isinstance(int64, bool)
    assert blas.cblas("no_such_function") is None


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_row_or_column_products_take_every_layout(dtype):
    """A c of one row or one column is computed by GEMV tiles: every layout of the matrix and the vector
    (transposed, offset, strided), alpha and beta, and c not read when beta == 0."""
    rng = np.random.default_rng(14)
    for m, k, n in [(1, 300, 700), (700, 300, 1), (1, 1, 5), (5, 1, 1), (1, 7, 1)]:
        a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
        for va, vb in itertools.product(views(a).values(), views(b).values()):
            within_bound(cpu_matmul.matmul(va, vb, exact=False), a, b, False)
        c = rand(rng, (m, n), dtype)
        out = cpu_matmul.gemm(a.T.copy().T, b, c.copy(), alpha=-2.0, beta=0.5, exact=False)
        expected = -2.0 * REFERENCE(a, b).astype(np.float64) + 0.5 * c
        bound = 2 * cpu_matmul.error_bound(a, b, False) + np.finfo(dtype).eps * np.abs(expected)
        assert (np.abs(out - expected) <= bound).all()
        nan = np.full((m, n), np.nan, dtype)
        assert not np.isnan(cpu_matmul.gemm(a, b, nan, exact=False)).any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_gemv_whose_matrix_has_rows_along_k_is_split_along_k(dtype):
    """A row c = a b with b stored along n (x @ W for W of in x out), and the column c = a b with a stored
    along m (transposed): blocks of whole rows of the matrix, one GEMV each, summed in block order in
    double. Within the bound, the same bits on 1, 2 and 3 threads, alpha and beta applied once, c not read
    when beta == 0, and an f32 overflow of a block's sum computed again on the exact path."""
    rng = np.random.default_rng(16)
    row = rand(rng, (1, 768), dtype), rand(rng, (768, 2304), dtype)
    column = rand(rng, (2304, 768), dtype), rand(rng, (768, 1), dtype)
    for a, b in [row, column]:
        va = np.asfortranarray(a) if b.shape[1] == 1 else a  # the column's a: stored along m
        fast_on_every_thread_count(va, b, a, b)
        c = rand(rng, (a.shape[0], b.shape[1]), dtype)
        out = cpu_matmul.gemm(va, b, c.copy(), alpha=-1.5, beta=0.25, exact=False)
        expected = -1.5 * REFERENCE(a, b).astype(np.float64) + 0.25 * c
        assert (np.abs(out - expected) <= 2 * cpu_matmul.error_bound(a, b, False) + np.finfo(dtype).eps).all()
        nan = np.full(c.shape, np.nan, dtype)
        assert cpu_matmul.gemm(va, b, nan, exact=False) is nan and not np.isnan(nan).any()
    a = np.ones((1, 768), np.float32)
    a[:, :384], a[:, 384:] = 2e36, -2e36  # each block's f32 sum overflows; the double sum does not
    b = np.ones((768, 2304), np.float32)
    before = cpu.cpu.reruns()
    out = cpu_matmul.matmul(a, b, exact=False)
    assert bits(out) == bits(REFERENCE(a, b)) and np.isfinite(out).all()
    assert cpu.cpu.reruns() == before + 1


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.usefixtures("packed_off")
def test_a_long_k_with_a_small_c_is_summed_in_fixed_blocks(dtype):
    """c of one tile and k >= 4096: blocks of k, one BLAS call each, summed in block order in double;
    within the bound, the same bits for 1, 2 and 3 threads, alpha and beta applied once, and an f32
    overflow of a block's sum computed again on the exact path."""
    rng = np.random.default_rng(15)
    for m, k, n in [(16, 9000, 9), (1, 5000, 3), (7, 4096, 1), (30, 70000, 20)]:
        a, b = rand(rng, (m, k), dtype), rand(rng, (k, n), dtype)
        for va, vb in [(a, b), (np.asfortranarray(a), np.asfortranarray(b))]:
            fast_on_every_thread_count(va, vb, a, b)
        c = rand(rng, (m, n), dtype)
        out = cpu_matmul.gemm(a, b, c.copy(), alpha=3.0, beta=-1.0, exact=False)
        expected = 3.0 * REFERENCE(a, b).astype(np.float64) - c
        assert (np.abs(out - expected) <= 3 * cpu_matmul.error_bound(a, b, False) + np.finfo(dtype).eps).all()
    a = np.ones((2, 8192), np.float32)
    a[:, : 8192 // 2] = 3e35  # the first blocks' f32 sums overflow; the double sum does not
    a[:, 8192 // 2 :] = -3e35
    b = np.ones((8192, 2), np.float32)
    out = cpu_matmul.matmul(a, b, exact=False)
    assert bits(out) == bits(REFERENCE(a, b)) and np.isfinite(out).all()


@pytest.mark.parametrize("exact", PATHS)
def test_a_layouts_plan_is_reused_with_other_data(exact):
    """matmul prepares each layout once: later calls with other arrays of that layout (and a copy that
    is not aligned to its element) give their own products."""
    rng = np.random.default_rng(16)
    products = set()
    for _ in range(3):
        a, b = rand(rng, (37, 300), np.float32), rand(rng, (300, 23), np.float32)
        out = cpu_matmul.matmul(a, b, exact=exact)
        within_bound(out, a, b, exact)
        products.add(bits(out))
    assert len(products) == 3
    unaligned = views(a)["unaligned"]
    assert unaligned.strides == a.strides and not unaligned.flags.aligned
    assert bits(cpu_matmul.matmul(unaligned, b, exact=exact)) == bits(out)


@pytest.mark.parametrize("exact", PATHS)
def test_a_layout_blas_cannot_take_is_copied_without_the_general_path(exact, monkeypatch):
    """A broadcast operand (sum()'s gradient: zero strides) is copied row-major on every call, and after
    the first call the plan copies it itself: the same bits as the first call and as the product of the
    copies, without `_gemm_into`'s second preparation; an unaligned b of that layout still goes there."""
    rng = np.random.default_rng(20)
    cpu_matmul._plans.clear()
    calls = []
    general = cpu_matmul._gemm_into
    monkeypatch.setattr(cpu_matmul, "_gemm_into", lambda *args: calls.append(1) or general(*args))
    for side in ("a", "b", "both"):
        for step in range(3):
            x, y = rand(rng, (1, 1), np.float32), rand(rng, (40, 40), np.float32)
            flat = np.broadcast_to(x, (40, 40))
            a, b = {"a": (flat, y), "b": (y, flat), "both": (flat, np.broadcast_to(-x, (40, 40)))}[side]
            calls.clear()
            out = cpu_matmul.matmul(a, b, exact=exact)
            assert len(calls) == (1 if step == 0 and not exact else 0), (side, step)  # exact: any layout
            expected = cpu_matmul.matmul(np.ascontiguousarray(a), np.ascontiguousarray(b), exact=exact)
            assert bits(out) == bits(expected), (side, step)
    unaligned = views(y)["unaligned"]
    assert unaligned.strides == y.strides and not unaligned.flags.aligned
    calls.clear()
    assert bits(cpu_matmul.matmul(np.broadcast_to(x, (40, 40)), unaligned, exact=exact)) == bits(
        cpu_matmul.matmul(np.broadcast_to(x, (40, 40)), y, exact=exact)
    )
    assert calls == [1]


PACKAGE_CHILD = """
import numpy as np
import verigrad
from verigrad.backends import verification
from verigrad.backends import cpu
from verigrad.backends.cpu import matmul as cpu_matmul

info = cpu.build_info()["blas"]
assert info["source"] == "scipy-openblas32" and "scipy_openblas32" in info["path"], info
assert cpu_matmul.fast_available()
rng = np.random.default_rng(0)
a, b = rng.standard_normal((300, 200)).astype(np.float32), rng.standard_normal((200, 70)).astype(np.float32)
results = []
for threads in (1, 2, 3):
    verigrad.set_threads(threads)
    results.append(cpu_matmul.gemm(a, b, exact=False).tobytes())
assert len(set(results)) == 1, "the thread count changed the bits"
report = verification.verify(cpu.cpu, ["matmul"])
assert report.ok and len(report.results) == 4, [(r.name, r.dtype, r.message) for r in report.results]
print("ok")
"""


def test_the_fast_path_runs_on_the_scipy_openblas32_package():
    """The OpenBLAS of the scipy-openblas32 package (for a NumPy without one; chosen here with
    VERIGRAD_BLAS): 32-bit integers, the same bits on every thread count, every matmul case verified."""
    pytest.importorskip("scipy_openblas32")
    env = {**os.environ, "VERIGRAD_BLAS": "scipy-openblas32"}
    child = subprocess.run([sys.executable, "-c", PACKAGE_CHILD], env=env, capture_output=True, text=True)
    assert child.returncode == 0 and child.stdout.strip() == "ok", child.stderr[-2000:]


def test_an_unknown_blas_source_is_named_and_the_default_used():
    """As every VERIGRAD_ variable: a bad value is one warning line naming it and what is allowed, and the
    default is used (the BLAS only moves speed: matmul's bits do not depend on it)."""
    env = {**os.environ, "VERIGRAD_BLAS": "mkl"}
    code = "from verigrad.backends import blas; print(blas.source()[0])"
    child = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert child.returncode == 0, child.stderr
    assert "VERIGRAD_BLAS='mkl' is ignored: it must be one of numpy, scipy-openblas32" in child.stderr
    assert child.stdout.split()[-1] == "numpy"


@pytest.mark.parametrize("exact", PATHS)
def test_a_batch_times_a_matrix_is_one_product_of_its_rows(exact):
    """x @ W.T with x [B, T, K] (a Linear): one product of the B*T rows (the same bits as the 2-D
    product, on every thread count), where each batch item's product packed W again; a batch whose rows
    are not one evenly strided run (its axes swapped) keeps the batched product."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 24, 16)).astype(np.float32)
    w = rng.standard_normal((40, 16)).astype(np.float32)
    plan = cpu_matmul._matmul_plan(x, w.T, exact)
    assert not isinstance(plan, cpu_matmul._Product)  # folded
    want = cpu_matmul.matmul(x.reshape(-1, 16), w.T, exact=exact).reshape(4, 24, 40)
    for threads in (1, 2, 3):
        verigrad.set_threads(threads)
        got = cpu_matmul.matmul(x, w.T, exact=exact)
        assert got.shape == (4, 24, 40)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    swapped = x.transpose(1, 0, 2)
    assert isinstance(cpu_matmul._matmul_plan(swapped, w.T, exact), cpu_matmul._Product)
    bound = 1e-5 * (np.abs(swapped) @ np.abs(w.T)) + 1e-30
    assert np.all(np.abs(cpu_matmul.matmul(swapped, w.T, exact=exact) - REFERENCE(swapped, w.T)) <= bound)


def blas_tile(f32: bool, m: int, n: int, k: int, ta: int = 111, tb: int = 111) -> tuple[int, int]:
    """The fast path's tile of c (rows, columns) for a product of one batch item (111: plain, 112:
    transposed), as matmul_blas.c's rules choose it."""
    out = np.zeros(2, np.int64)
    cpu_matmul._state["lib"].blas_tile(int(f32), 1, m, n, k, ta, tb, out.ctypes.data)
    return int(out[0]), int(out[1])


def test_the_gpt_steps_f32_products_take_fewer_tiles():
    """The GPT step's products (1024 rows, k or n at most 512) go to OpenBLAS as tiles of whole rows, b
    packed once a call; a c at least twice as wide as high (the tied head's x @ W^T, 1024x128 by
    4096x128) as tiles of whole columns, each call packing its part of b: eight of 512, not 64 tiles of
    256x256; f64, a short c, and both k and n long keep the other tiles. Its weight gradients (a
    transposed, k long, c small) take two tiles, not four."""
    assert blas_tile(True, 1024, 4096, 128, 111, 112) == (1024, 512)
    assert blas_tile(True, 2048, 8192, 320, 111, 112) == (2048, 1024)
    assert blas_tile(True, 1024, 2047, 128, 111, 112) == (256, 2047)  # not twice as wide: rows
    assert blas_tile(True, 1024, 384, 128, 111, 112) == (256, 384)
    assert blas_tile(True, 1024, 128, 384) == (256, 128)  # not the small kernels' 16 rows
    assert blas_tile(True, 4096, 128, 1024, 112, 111) == (512, 128)  # at most 8 tiles
    assert blas_tile(True, 1100, 700, 128, 111, 112) == (288, 700)  # 4 tiles, the last of 236 rows
    assert blas_tile(False, 1024, 4096, 128, 111, 112) == (256, 256)
    assert blas_tile(True, 1000, 4096, 128, 111, 112) == (256, 256)
    assert blas_tile(True, 1024, 3072, 768, 111, 112) == (256, 256)
    # a weight's gradient g^T x (a transposed, k long, c small): two tiles, not four
    assert blas_tile(True, 384, 128, 1024, 112, 111) == (192, 128)
    assert blas_tile(True, 128, 128, 1024, 112, 111) == (64, 128)
    assert blas_tile(False, 384, 128, 1024, 112, 111) == (96, 128)
    assert blas_tile(True, 384, 128, 1024, 111, 111) == (96, 128)


@pytest.mark.parametrize("fewer_tiles", [False, True])
@pytest.mark.usefixtures("packed_off")
def test_products_in_fewer_tiles_keep_the_bound_and_the_bits(fewer_tiles):
    """On or off, f32 products that the whole-row tiles take (plain, b transposed, a transposed, partial
    tiles of rows, a batch, k or n long) and a weight gradient's two tiles (a transposed, k long) stay
    within the bound with the same bits on 1, 2 and 3 threads."""
    rng = np.random.default_rng(20)
    lib = cpu_matmul._state["lib"]
    try:
        lib.fewer_tiles(int(fewer_tiles))
        cases = [((1100, 130), (130, 700)), ((1040, 300), (300, 130)), ((2, 1024, 60), (2, 60, 90))]
        cases += [((1030, 600), (600, 100)), ((200, 1100), (1100, 150)), ((1030, 70), (70, 2300))]
        for sa, sb in cases:
            a, b = rand(rng, sa, np.float32), rand(rng, sb, np.float32)
            fast_on_every_thread_count(a, b, a, b)
            if a.ndim == 2:
                bt = np.ascontiguousarray(b.T).T  # b transposed (an nn.Linear's W^T)
                fast_on_every_thread_count(a, bt, a, b)
                at = np.ascontiguousarray(a.T).T  # a transposed (a weight's gradient g^T x)
                fast_on_every_thread_count(at, b, a, b)
    finally:
        lib.fewer_tiles(1)
