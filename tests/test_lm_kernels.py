"""Kernels of a GPT's training step, made faster for it: on Intel's AVX-512 cores an nn.Linear's x @ W^T
of a training step's size is OpenBLAS's product (matmul_blas.c's dot products lost there), while a short
product still takes the dot products."""

from __future__ import annotations

import platform

import numpy as np
import pytest

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


@needs_cc
@pytest.mark.skipif(not (has_avx512() and intel()), reason="the rule is for Intel's AVX-512 cores")
def test_on_intel_a_linear_layers_product_is_openblass_and_a_short_one_the_dot_products():
    rng = np.random.default_rng(5)
    lib = cpu_matmul._state["lib"] or cpu_matmul._lib()

    def both(m: int, k: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.standard_normal((m, k)).astype(np.float32)
        w = rng.standard_normal((n, k)).astype(np.float32)
        try:
            lib.dot_products(1)
            dots = cpu_matmul.matmul(x, w.T, exact=False)
            lib.dot_products(0)
            return dots, cpu_matmul.matmul(x, w.T, exact=False)
        finally:
            lib.dot_products(1)

    for m, k, n in [(1024, 128, 512), (1024, 128, 384), (128, 768, 768)]:  # OpenBLAS's, dot products on
        dots, blas_product = both(m, k, n)
        np.testing.assert_array_equal(bits(dots), bits(blas_product), err_msg=f"{m}x{k}x{n}")
    dots, blas_product = both(64, 784, 256)  # still the dot products: their order of sums
    assert not np.array_equal(bits(dots), bits(blas_product))
