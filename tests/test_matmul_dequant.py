"""matmul_dequant.c through the cpu backend's dequantized_matmul: the packed GEMM with a quantized weight's
panels de-quantized from its blocks gives the fast matmul path's bits on the de-quantized weight, in
both layouts (x @ W.T, g @ W), on every thread count, and declines what that path would not compute as one
packed GEMM."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends.cpu import matmul as cpu_matmul
from verigrad.backends.cpu.quant import dequantized_matmul
from verigrad.ops.quant import BLOCK_QTYPES, FORMATS, dequantize_op, random_blocks

pytestmark = pytest.mark.skipif(
    not cpu_matmul.fast_available(), reason="the fast matmul path (NumPy's BLAS) is not available"
)

# m x n x k: the LoRA step's x W^T of qkv; b packed first (m >= n); a last panel of 32 columns and a last
# tile of 2 rows; k of three 256-value blocks (a 32-value format: blocks of k of 128 and a last of 32)
SHAPES = [(256, 960, 576), (200, 64, 768), (70, 352, 768), (38, 1088, 256)]


@pytest.fixture(autouse=True)
def cpu_fast_path():
    with vg.backend("cpu"), cpu_matmul.exact_mode(False):
        (vg.zeros(2) + 1).numpy()  # the library loaded
        yield
    vg.set_threads(1)


def weight(rng: np.random.Generator, qtype: str, rows: int, values: int) -> tuple[np.ndarray, np.ndarray]:
    blocks = random_blocks(rng, qtype, rows, values)
    return blocks, dequantize_op(vg.from_numpy(blocks), qtype=qtype).numpy()


def packed_available() -> bool:
    return bool(cpu_matmul._lib().packed_available())


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("transposed", [True, False], ids=["x@W.T", "g@W"])
def test_the_products_are_the_fast_paths_bits_on_every_thread_count(qtype, shape, transposed):
    if not packed_available():
        pytest.skip("no AVX-512: the packed GEMM is not taken")
    m, n, k = shape
    block = FORMATS[qtype].block
    if (k if transposed else n) % block:
        pytest.skip(f"{qtype}'s rows are whole blocks of {block}")
    rng = np.random.default_rng(0)
    blocks, w = weight(rng, qtype, n, k) if transposed else weight(rng, qtype, k, n)
    a = rng.standard_normal((m, k), dtype=np.float32)
    want = cpu_matmul.matmul(a, w.T if transposed else w)
    for threads in (1, 2, 3):
        vg.set_threads(threads)
        got = dequantized_matmul(a, blocks, qtype, transposed)
        assert got is not None
        np.testing.assert_array_equal(got, want)


def test_a_batch_of_rows_and_a_strided_a_are_taken_as_their_matmul_takes_them():
    if not packed_available():
        pytest.skip("no AVX-512: the packed GEMM is not taken")
    rng = np.random.default_rng(0)
    blocks, w = weight(rng, "q4_1", 320, 256)
    x = rng.standard_normal((2, 64, 256), dtype=np.float32)
    np.testing.assert_array_equal(dequantized_matmul(x, blocks, "q4_1", True), cpu_matmul.matmul(x, w.T))
    g = rng.standard_normal((320, 96), dtype=np.float32).T  # a transposed g: a copy's bits
    np.testing.assert_array_equal(dequantized_matmul(g, blocks, "q4_1", False), cpu_matmul.matmul(g, w))
    strided = rng.standard_normal((3, 64, 256), dtype=np.float32)[::2]  # two products of 64 rows, not one
    assert dequantized_matmul(strided, blocks, "q4_1", True) is None


def test_what_the_packed_gemm_does_not_take_is_declined():
    rng = np.random.default_rng(0)
    blocks, _ = weight(rng, "q8_0", 512, 512)
    x = rng.standard_normal((16, 512), dtype=np.float32)  # fewer than 32 rows: other kernels'
    assert dequantized_matmul(x, blocks, "q8_0", True) is None
    x = rng.standard_normal((64, 512), dtype=np.float32)
    with cpu_matmul.exact_mode():
        assert dequantized_matmul(x, blocks, "q8_0", True) is None
    assert dequantized_matmul(x[:, :480], blocks, "q8_0", True) is None  # k is not w's
    if packed_available():
        assert dequantized_matmul(x, blocks, "q8_0", True) is not None
    lib = cpu_matmul._state["lib"]
    lib.packed_products(0)  # the fast path's products go elsewhere: so do these
    try:
        assert dequantized_matmul(x, blocks, "q8_0", True) is None
    finally:
        lib.packed_products(1)
    x[3, 7] = np.inf  # c holds infinities and NaNs: the caller's matmul computes it again
    assert dequantized_matmul(x, blocks, "q8_0", True) is None
