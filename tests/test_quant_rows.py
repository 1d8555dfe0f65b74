"""Batch invariance of the quantized products' cpu kernels: row i of a product of B activation rows (the
server's batched decode step) has the bits of row i's product alone, whatever B is, whatever the other rows
hold, on every vector path and thread count."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu import quant as cpu_quant
from verigrad.ops.quant import BLOCK_QTYPES, FORMATS, Q8_QTYPES, dequantize, random_blocks

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

N = 13  # weight rows: an odd last row after the pairs, and bands of odd sizes on 2 and 3 threads


def _activations(b: int, w: np.ndarray) -> np.ndarray:
    """b rows for the de-quantized weight w: row 0 the same for every b, the others different in each b
    (one with an infinity, one huge). Row i holds 2**30 w[r, 1] and -2**30 w[r, 0] (r = i mod N) at 0 and
    1: exactly cancelling products in different partial sums, so that output r of row i depends on the
    order the sums are combined in (a small result: the double sums' roundings show in its f32 bits)."""
    x = np.random.default_rng(b).standard_normal((b, w.shape[1])).astype(np.float32)
    x[0] = np.random.default_rng(100).standard_normal(w.shape[1]).astype(np.float32)
    for i in range(b):
        x[i, :2] = np.float32(2.0**30) * w[i % N, 1::-1] * np.float32([1, -1])
    if b > 2:
        x[1, 5] = np.inf
        x[2, 2:] *= np.float32(1e25)
    return x


def _assert_rows_alone(name: str, qtype: str, k: int, paths: tuple[str, ...], monkeypatch) -> None:
    kernel = cpu.cpu.native(vg.REGISTRY[name], vg.f32)
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)  # bands of a few rows: every thread count splits
    raw = random_blocks(np.random.default_rng(7), qtype, N, k)
    w = dequantize(raw, qtype, (N, k))
    try:
        for path in paths:
            taken = cpu_quant.path(path)
            for threads in (1, 2, 3):
                vg.set_threads(threads)
                for b in range(1, 10):
                    x = _activations(b, w)
                    got = kernel(x, raw, qtype=qtype)
                    for i in range(b):
                        alone = kernel(x[i : i + 1], raw, qtype=qtype)[0]
                        where = f"{taken} {threads} {b} {i}"
                        np.testing.assert_array_equal(got[i].view(np.uint32), alone.view(np.uint32), where)
    finally:
        vg.set_threads(1)
        cpu_quant.simd(True)


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_qmatmul_rows_have_the_bits_of_each_row_alone(qtype, monkeypatch):
    k = 512 if FORMATS[qtype].block == 256 else 96
    _assert_rows_alone("qmatmul", qtype, k, cpu_quant.PATHS, monkeypatch)


@pytest.mark.parametrize("qtype", Q8_QTYPES)
def test_qmatmul_q8_rows_have_the_bits_of_each_row_alone(qtype, monkeypatch):
    k = 512 if FORMATS[qtype].block == 256 else 96
    _assert_rows_alone("qmatmul_q8", qtype, k, cpu_quant.PATHS, monkeypatch)


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_qmatmul_rows_equal_the_reference_on_each_path(qtype):
    """B = 1..9 rows on each path (a decode step's fused de-quantization at B = 1, tiles of a row buffer
    above): the NumPy reference's bits."""
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    k = 512 if FORMATS[qtype].block == 256 else 96
    raw = random_blocks(np.random.default_rng(8), qtype, N, k)
    try:
        for b in range(1, 10):
            x = np.random.default_rng(b).standard_normal((b, k)).astype(np.float32)
            outs = {cpu_quant.path(p): kernel(x, raw, qtype=qtype) for p in cpu_quant.PATHS}
            want = vg.REGISTRY["qmatmul"].reference(x, raw, qtype)
            for path, out in outs.items():
                np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32), f"{path} {b}")
    finally:
        cpu_quant.simd(True)
