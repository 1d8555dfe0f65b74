"""The fast path's own f32 kernels on AVX-512 (matmul_avx512.c's dot and outer products, matmul_packed.c's
packed GEMM): within the bound of the matmul reference with the same bits on 1, 2 and 3 threads, and the
packed GEMM's elements bit for bit one f32 FMA chain in increasing k."""

from __future__ import annotations

import numpy as np
import pytest
from test_cpu_matmul import bits, fast_on_every_thread_count, packed_off, rand, within_bound

import verigrad
from verigrad.backends import cpu
from verigrad.backends.cpu import matmul as cpu_matmul

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
__all__ = ["packed_off"]  # a fixture the tests below use


@pytest.fixture(autouse=True)
def one_thread():
    verigrad.set_threads(1)
    yield
    verigrad.set_threads(1)


def products_with_alpha_beta_and_nan(rng, m: int, k: int, n: int, b_transposed: bool) -> None:
    """The fast path's c = alpha a b into a c with a longer row stride (nothing written past it), c = a b
    + beta c for beta 1 and 0.5, and a NaN and an infinity in a and b: within the bound, or the
    reference BLAS semantics."""
    a = rand(rng, (m, k), np.float32)
    b = rand(rng, (n, k), np.float32).T if b_transposed else rand(rng, (k, n), np.float32)
    wide = np.zeros((m, n + 14), np.float32)
    cpu_matmul.gemm(a, b, wide[:, 5 : n + 5], alpha=-2.0, exact=False)
    within_bound(wide[:, 5 : n + 5], -2.0 * a, np.ascontiguousarray(b), False)
    assert not wide[:, :5].any() and not wide[:, n + 5 :].any()
    c = rand(rng, (m, n), np.float32)
    for beta in (1.0, 0.5):
        expected = a.astype(np.float64) @ b.astype(np.float64) + beta * c
        out = cpu_matmul.gemm(a, b, c.copy(), beta=beta, exact=False)
        assert np.allclose(out, expected, rtol=1e-4, atol=1e-4)
    a[m - 1, 7] = np.nan  # the last row of c is NaN, as the reference's
    b[9, n - 1] = np.inf  # and the last column infinite or NaN
    within_bound(cpu_matmul.matmul(a, b, exact=False), a, np.ascontiguousarray(b), False)


@pytest.mark.parametrize("dot_products", [False, True])
@pytest.mark.usefixtures("packed_off")
def test_products_with_b_transposed_as_dot_products_keep_the_bound_and_the_bits(dot_products):
    """On AVX-512 an f32 c = a b^T (both read along k) is computed as dot products in 4x4 blocks of c, not
    by OpenBLAS. On or off (on a machine without AVX-512 both are OpenBLAS): rows, columns and depths
    that leave partial blocks and a partial last step, a batch (b broadcast over it too), a c with a
    longer row stride, alpha and beta, and a NaN stay within the bound (or the reference BLAS semantics)
    with the same bits on 1, 2 and 3 threads."""
    rng = np.random.default_rng(18)
    lib = cpu_matmul._state["lib"]
    try:
        lib.dot_products(int(dot_products))
        cases = [((64, 784), (256, 784)), ((63, 785), (255, 785)), ((37, 300), (50, 300))]
        cases += [((10, 256), (800, 256)), ((3, 33, 256), (3, 40, 256)), ((3, 34, 130), (41, 130))]
        cases += [((70, 1568), (10, 1568)), ((17, 3100), (37, 3100))]  # a long k: few columns and rows
        cases += [((6, 300), (300, 300)), ((64, 100), (64, 100))]  # too few rows; k too short: OpenBLAS
        for sa, sb in cases:
            a, b = rand(rng, sa, np.float32), rand(rng, sb, np.float32)
            bt = np.swapaxes(b, -1, -2)
            fast_on_every_thread_count(a, bt, a, np.ascontiguousarray(bt))
        products_with_alpha_beta_and_nan(rng, 34, 270, 66, b_transposed=True)
    finally:
        lib.dot_products(1)


@pytest.mark.parametrize("outer_products", [False, True])
@pytest.mark.usefixtures("packed_off")
def test_products_of_plain_b_as_outer_products_keep_the_bound_and_the_bits(outer_products):
    """On AVX-512 an f32 c = a b with b's rows along n, few rows and a long k, is computed as a sum of
    outer products in blocks of 6 x 64 elements of c, not by OpenBLAS. On or off (on a machine without
    AVX-512 both are OpenBLAS): partial blocks of rows and columns and a partial last block of k, a
    transposed a, a batch (b broadcast over it too), a c with a longer row stride, alpha, beta 1 (c
    accumulated) and 0.5, and a NaN stay within the bound (or the reference BLAS semantics) with the same
    bits on 1, 2 and 3 threads."""
    rng = np.random.default_rng(19)
    lib = cpu_matmul._state["lib"]
    try:
        lib.outer_products(int(outer_products))
        cases = [((37, 2100), (2100, 77)), ((200, 1030), (1030, 150)), ((2, 20, 2050), (2, 2050, 17))]
        cases += [((2, 20, 2050), (2050, 17)), ((128, 1024), (1024, 130))]  # units of 66 and 62 rows
        cases += [((300, 2100), (2100, 20)), ((8, 1100), (1100, 40))]
        for sa, sb in cases:  # the last two: too many rows; too few columns for k < 2048: OpenBLAS
            a, b = rand(rng, sa, np.float32), rand(rng, sb, np.float32)
            fast_on_every_thread_count(a, b, a, b)
            if a.ndim == 2:  # a transposed
                at = np.asfortranarray(a)
                fast_on_every_thread_count(at, b, a, b)
        products_with_alpha_beta_and_nan(rng, 35, 2060, 70, b_transposed=False)
    finally:
        lib.outer_products(1)


def test_outer_product_units_share_the_rows_evenly():
    """An outer-product work unit takes at most 96 rows, the rows shared as evenly as multiples of 6 allow:
    a GPT's weight gradient of 128 rows (x^T g) gives two threads units of 66 and 62 rows, not 96 and 32."""
    rows = cpu_matmul._state["lib"].outer_rows
    assert [rows(m) for m in (128, 96, 97, 200, 256, 20, 1)] == [66, 96, 54, 72, 90, 24, 6]


@pytest.mark.usefixtures("packed_off")
def test_a_wide_products_operand_scan_runs_on_the_threads():
    """A product whose c holds more than its operands (m k + k n < m n: a GPT head's 1024x128 by 128x4096)
    scans a and b for what could overflow rather than c, and that scan runs on the threads too (each
    operand's rows split, the largest magnitude folded in: the same answer whatever the split): on 2
    threads in the static schedule the worker runs a chunk of each scan and one of the product's. An
    infinity or a NaN only in rows the worker scans still gives the reference's infinities and NaNs,
    with the 1-thread bits."""
    rng = np.random.default_rng(21)
    a, b = rand(rng, (1024, 128), np.float32), rand(rng, (128, 4096), np.float32)
    verigrad.set_threads(2)
    with cpu.static_schedule():
        cpu.chunks_run()
        cpu_matmul.gemm(a, b, exact=False)
        assert cpu.chunks_run()[:2] == (3, 3)
    for where, value in (((1000, 5), np.inf), ((100, 4000), np.nan)):
        x, y = a.copy(), b.copy()
        (x if where[0] == 1000 else y)[where] = value
        fast_on_every_thread_count(x, y, x, y)


# ---------------------------------------------------------------- matmul_packed.c

needs_packed = pytest.mark.skipif(
    not cpu.available() or not cpu_matmul._lib().packed_available(), reason="the packed GEMM needs AVX-512"
)


def fma_chain(a: np.ndarray, b: np.ndarray, alpha: float = 1.0, c: np.ndarray | None = None) -> np.ndarray:
    """Each element of a @ b as one f32 fused multiply-add chain in increasing k, from 0 (or c), times
    f32 alpha (when not 1): each step a product exact in f64, its sum with the f32 chain rounded once
    to f32 (the f64 sum's rounding error, found by TwoSum, breaks the ties the f64 sum lands on)."""
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32) if c is None else c.astype(np.float32)
    with np.errstate(all="ignore"):
        for p in range(a.shape[1]):
            x, y = acc.astype(np.float64), np.outer(a[:, p].astype(np.float64), b[p].astype(np.float64))
            s = x + y
            t = s - x
            err = (x - (s - t)) + (y - t)
            r = s.astype(np.float32)
            away = np.nextafter(r, np.where(s > r, np.inf, -np.inf).astype(np.float32))
            tie = (s != r) & ((r.astype(np.float64) + away.astype(np.float64)) / 2 == s)
            wrong_side = tie & (err != 0) & ((err > 0) == (away > r))
            acc = np.where(wrong_side, away, r)
        return acc if alpha == 1.0 else acc * np.float32(alpha)


def layouts(rng, m: int, k: int, n: int):
    """(a, b) of an m x k by k x n product as views: plain, b transposed (x @ W^T), a transposed (g^T x)."""
    a, b = rand(rng, (m, k), np.float32), rand(rng, (k, n), np.float32)
    yield a, b
    yield a, np.ascontiguousarray(b.T).T
    yield np.ascontiguousarray(a.T).T, b


@needs_packed
@pytest.mark.parametrize(
    "shape",
    [
        (37, 300, 190),
        (130, 460, 37),
        (1030, 40, 200),
        (33, 129, 700),
        (64, 1100, 48),
        (200, 64, 1088),
        (600, 70, 384),
        (700, 1500, 40),
    ],
)
def test_packed_products_are_one_fma_chain_in_increasing_k(shape):
    """matmul_packed.c's products are, element for element, one f32 FMA chain in increasing k, on 1, 2
    and 3 threads, in every layout: rows and columns that leave partial tiles (6 rows, 64 columns, 16
    lanes), k in several blocks, b packed first (m >= n) or by each unit (a wide c), a transposed a with
    a long row (1030) or a larger than the L2 cache (700 x 1500) packed too."""
    rng = np.random.default_rng(40)
    for a, b in layouts(rng, *shape):
        expected = fma_chain(a, b)
        for threads in (1, 2, 3):
            verigrad.set_threads(threads)
            np.testing.assert_array_equal(cpu_matmul.matmul(a, b, exact=False), expected)


@needs_packed
def test_packed_products_scale_at_the_end_accumulate_into_c_and_write_only_c():
    """alpha multiplies the chain's end; beta 1 (alpha 1) starts the chain from c; a c with a longer row
    stride keeps what lies past its columns; a batch of a with b broadcast; a c large enough to be
    written with streaming stores, aligned and not."""
    rng = np.random.default_rng(41)
    a, b = rand(rng, (70, 300), np.float32), rand(rng, (300, 110), np.float32)
    wide = np.full((70, 130), 7.0, np.float32)
    cpu_matmul.gemm(a, b, wide[:, 5:115], alpha=-0.75, exact=False)
    np.testing.assert_array_equal(wide[:, 5:115], fma_chain(a, b, -0.75))
    assert (wide[:, :5] == 7).all() and (wide[:, 115:] == 7).all()
    c = rand(rng, (70, 110), np.float32)
    out = cpu_matmul.gemm(a, b, c.copy(), beta=1.0, exact=False)
    np.testing.assert_array_equal(out, fma_chain(a, b, c=c))
    batch = rand(rng, (3, 70, 300), np.float32)
    out = cpu_matmul.matmul(batch, b, exact=False)
    for i in range(3):
        np.testing.assert_array_equal(out[i], fma_chain(batch[i], b))
    a, b = rand(rng, (1030, 20), np.float32), rand(rng, (20, 1030), np.float32)
    expected = fma_chain(a, b)
    memory = np.full(1030 * 1040 + 32, 7.0, np.float32)
    start = -(memory.ctypes.data // 4) % 16  # the first element 64-byte aligned
    for threads in (1, 2):
        verigrad.set_threads(threads)
        np.testing.assert_array_equal(cpu_matmul.matmul(a, b, exact=False), expected)
        for offset in (start, start + 1):  # streamed (row stride 1040, aligned), and not
            c = memory[offset : offset + 1030 * 1040].reshape(1030, 1040)
            np.testing.assert_array_equal(cpu_matmul.gemm(a, b, c[:, :1030], exact=False), expected)
            assert (c[:, 1030:] == 7).all()
            memory[:] = 7.0


@needs_packed
def test_packed_products_with_an_infinity_or_a_nan_give_the_references():
    """An infinity or a NaN in a or b, or partial sums that overflow, make the packed GEMM's check send
    the product to the exact path: the reference's infinities and NaNs, on every thread count."""
    rng = np.random.default_rng(42)
    for where in ((0, 3), (35, 299), (36, 0)):
        a, b = rand(rng, (37, 300), np.float32), rand(rng, (300, 190), np.float32)
        a[where[0] % 37, where[1]] = np.inf if where[0] else np.nan
        b[where[1], (5 * where[0]) % 190] = -np.inf
        fast_on_every_thread_count(a, b, a, b)
    a, b = rand(rng, (40, 300), np.float32), rand(rng, (300, 190), np.float32)
    a[7, :4], b[:4] = [2e38, 2e38, -2e38, -2e38], 1.0  # the chain overflows, the sum does not
    fast_on_every_thread_count(a, b, a, b)
    assert np.isfinite(cpu_matmul.matmul(a, b, exact=False)).all()


@needs_packed
@pytest.mark.usefixtures("packed_off")
def test_packed_products_are_off_when_turned_off():
    """With the packed GEMM off the same product takes another path (OpenBLAS's bits, which split this k
    into blocks: not the chain's)."""
    rng = np.random.default_rng(43)
    a, b = rand(rng, (37, 700), np.float32), rand(rng, (700, 190), np.float32)
    assert bits(cpu_matmul.matmul(a, b, exact=False)) != bits(fma_chain(a, b))
