"""Kernels of a GPT's training step, made faster for it: attention's AVX-512 loops (attention_flash.c) and
its AVX2 ones give the bits of its plain ones on every thread count, and on Intel's AVX-512 cores an
nn.Linear's x @ W^T of a training step's size is OpenBLAS's product (matmul_blas.c's dot products lost
there), while a short product still takes the dot products."""

from __future__ import annotations

import ctypes
import platform

import numpy as np
import pytest

import verigrad as vg
from verigrad import ops
from verigrad.backends import cpu
from verigrad.backends.cpu import matmul as cpu_matmul

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")


def bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint32)


def has_avx512() -> bool:
    return cpu.available() and "avx512" in cpu.vector_paths()


def intel() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        with open("/proc/cpuinfo") as f:
            return "GenuineIntel" in f.read(4096)
    except OSError:
        return False


# (B, H, KV, T, S, D, Dv, q's scale): head dims 32 (4 vectors), 40 (8 + 4 columns), 12 (4 only), 6 and 10 (the
# dot products' last d mod 4 terms in vector lanes too); the fourth's scores lie more than 708 apart (exp's
# zeros)
ATTENTION_CASES = [(2, 4, 4, 128, 128, 32, 32, 1.0), (1, 6, 2, 37, 70, 40, 12, 1.0)]
ATTENTION_CASES += [(1, 2, 1, 9, 9, 12, 40, 1.0), (1, 2, 1, 33, 45, 16, 16, 300.0)]
ATTENTION_CASES += [(1, 3, 1, 21, 29, 6, 10, 1.0)]
# heads of 128 + 128: the backward's queries 8 at a time, so a group of four keys can straddle a group of
# queries (its last keys see none of them: weights 0 in the four-key loops)
ATTENTION_CASES += [(1, 2, 1, 30, 37, 128, 128, 1.0)]


def attention_avx512(flag: int) -> int:
    """Turns attention_flash.c's AVX-512 loops on (1) or off (0); returns the setting before."""
    fn = cpu.cpu.library.fn("vg_attention_avx512", [ctypes.c_int], restype=ctypes.c_int)
    return fn(flag)


def attention_avx2(flag: int) -> int:
    """Turns attention_flash.c's AVX2 loops, and with them its AVX-512 ones, on (1) or off (0: the plain
    loops alone); returns the setting before."""
    fn = cpu.cpu.library.fn("vg_attention_avx2", [ctypes.c_int], restype=ctypes.c_int)
    return fn(flag)


def attention_operands(sizes):
    """q, k, v and g of one of ATTENTION_CASES."""
    b, h, kv, t, s, d, dv, spread = sizes
    rng = np.random.default_rng(3)
    q = rng.uniform(-2, 2, (b, h, t, d)).astype(np.float32) * np.float32(spread)
    k = rng.uniform(-2, 2, (b, kv, s, d)).astype(np.float32)
    v = rng.uniform(-2, 2, (b, kv, s, dv)).astype(np.float32)
    g = rng.uniform(-2, 2, (b, h, t, dv + 1)).astype(np.float32)
    return q, k, v, g


@needs_cc
@pytest.mark.skipif(not has_avx512(), reason="no AVX-512 on this machine: one path")
@pytest.mark.parametrize("sizes", ATTENTION_CASES)
def test_attention_avx512_loops_give_the_avx2_bits_on_every_thread_count(sizes):
    q, k, v, g = attention_operands(sizes)
    was = attention_avx512(0)
    try:
        out = cpu.cpu.native(ops.attention_lse, vg.f32)(q, k, v, scale=None)
        cases = [(ops.attention_lse, (q, k, v)), (ops.attention_grad, (g, q, k, v, out))]
        avx2 = [cpu.cpu.native(op, vg.f32)(*args, scale=None) for op, args in cases]
        attention_avx512(1)
        for threads in (1, 2, 3):
            vg.set_threads(threads)
            for (op, args), want in zip(cases, avx2):
                got = cpu.cpu.native(op, vg.f32)(*args, scale=None)
                np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"{op.name}, {threads} threads")
    finally:
        vg.set_threads(1)
        attention_avx512(was)


@needs_cc
@pytest.mark.skipif(not (cpu.available() and "avx2" in cpu.vector_paths()), reason="no AVX2 here: one path")
@pytest.mark.parametrize("sizes", ATTENTION_CASES)
def test_attention_vector_loops_give_the_plain_loops_bits_on_every_thread_count(sizes):
    """The plain loops (C's fma and exp, the paths of a machine without AVX2) and the fastest vector
    loops give the same bits."""
    q, k, v, g = attention_operands(sizes)
    was = attention_avx2(0)
    try:
        out = cpu.cpu.native(ops.attention_lse, vg.f32)(q, k, v, scale=None)
        cases = [(ops.attention_lse, (q, k, v)), (ops.attention_grad, (g, q, k, v, out))]
        plain = [cpu.cpu.native(op, vg.f32)(*args, scale=None) for op, args in cases]
        attention_avx2(1)
        for threads in (1, 2, 3):
            vg.set_threads(threads)
            for (op, args), want in zip(cases, plain):
                got = cpu.cpu.native(op, vg.f32)(*args, scale=None)
                np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"{op.name}, {threads} threads")
    finally:
        vg.set_threads(1)
        attention_avx2(was)


@needs_cc
@pytest.mark.skipif(not has_avx512(), reason="no AVX-512 on this machine: one path")
def test_attention_grad_keys_past_a_rows_log_sum_exp_give_the_avx2_bits():
    """attention_grad takes any forward result: where a row's log-sum-exp lies below some of its scores
    (exp(s - lse) > 1), the keys that see it take C's exp and the others of their group of four the vector
    loop; the reference's result rounded, and the AVX-512 and AVX2 paths give the same bits on every
    thread count."""
    rng = np.random.default_rng(4)
    b, h, t, d = 1, 2, 45, 16
    q, k, v = (rng.uniform(-2, 2, (b, h, t, d)).astype(np.float32) for _ in range(3))
    g = rng.uniform(-2, 2, (b, h, t, d + 1)).astype(np.float32)
    out = ops.attention_lse.reference(q, k, v, scale=None)
    out[:, :, 30:33, d] -= np.float32(2.5)  # below some of their keys' scores (keys 12-14 of 12-15: a mix)
    was = attention_avx512(0)
    try:
        want = cpu.cpu.native(ops.attention_grad, vg.f32)(g, q, k, v, out, scale=None)
        reference = ops.attention_grad.reference(g, q, k, v, out, scale=None).astype(np.float64)
        assert np.abs(want - reference).max() <= 2.0**-22 * np.abs(reference).max()
        attention_avx512(1)
        for threads in (1, 2, 3):
            vg.set_threads(threads)
            got = cpu.cpu.native(ops.attention_grad, vg.f32)(g, q, k, v, out, scale=None)
            np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"{threads} threads")
    finally:
        vg.set_threads(1)
        attention_avx512(was)


@needs_cc
@pytest.mark.skipif(not (has_avx512() and intel()), reason="the rule is for Intel's AVX-512 cores")
def test_on_intel_a_linear_layers_product_is_openblass_and_a_short_one_the_dot_products():
    rng = np.random.default_rng(5)
    lib = cpu_matmul._state["lib"] or cpu_matmul._lib()

    def both(m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        try:
            lib.packed_products(0)  # the rule between these two (the packed GEMM would take both)
            lib.dot_products(1)
            dots = cpu_matmul.matmul(x, w.T, exact=False)
            lib.dot_products(0)
            return dots, cpu_matmul.matmul(x, w.T, exact=False)
        finally:
            lib.dot_products(1)
            lib.packed_products(1)

    for m, k, n in [(1024, 128, 512), (1024, 128, 384), (128, 768, 768)]:  # OpenBLAS's, dot products on
        dots, blas_product = both(m, k, n)
        np.testing.assert_array_equal(bits(dots), bits(blas_product), err_msg=f"{m}x{k}x{n}")
    dots, blas_product = both(64, 784, 256)  # still the dot products: their order of sums
    assert not np.array_equal(bits(dots), bits(blas_product))
