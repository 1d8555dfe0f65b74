"""qmatmul's f32-activation kernels of the 256-value formats on 1 to 8 activation rows (a decode step, a
server's batched step: quant_f32_k_rows.c's kernels on AVX-512, each block de-quantized once for all
rows, 6, 4 or 3 weight rows at a time): every row of a batch has the bits of the same row alone and the
reference's, on every vector path and 1-3 threads."""

from __future__ import annotations

import ctypes
import platform

import numpy as np
import pytest
from test_quant_f32_tiles import _assert_same, assert_rows_alone

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu import quant as cpu_quant
from verigrad.ops.quant import BLOCK_QTYPES, FORMATS, random_blocks

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

K_QTYPES = tuple(q for q in BLOCK_QTYPES if FORMATS[q].block == 256)


@pytest.mark.parametrize("qtype", K_QTYPES)
def test_a_rows_bits_do_not_depend_on_its_batch(qtype, monkeypatch):
    """Rows of 1 block, 5 (two chunks of 2 and a part) and SmolLM2's 1536 values (3 chunks); 13 weight rows
    (groups of 6, 4 and 3 and a remainder of each) in bands of a row or two: each of 1 to 8 activation rows
    has the bits of the same row alone and the reference's."""
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)
    assert_rows_alone(qtype, 31, (256, 256 * 5, 1536), 13, (1, 2, 3), big=6)


@pytest.mark.parametrize("qtype", K_QTYPES)
def test_raw_blocks_and_infinities_give_the_reference_bits(qtype):
    """Blocks of raw bytes (scales of any f16: subnormal, huge, infinite, NaN) and activations with
    infinities, for 2 to 8 rows at once and a row of them alone, on every path."""
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    reference = vg.REGISTRY["qmatmul"].reference
    k, n = 768, 7
    rng = np.random.default_rng(32)
    raw = rng.integers(0, 256, (n, FORMATS[qtype].row_bytes(k)), dtype=np.uint8)
    x = rng.standard_normal((8, k)).astype(np.float32)
    x[2, 5], x[7, 700] = np.inf, -np.inf
    try:
        for path in cpu_quant.PATHS:
            taken = cpu_quant.path(path)
            for t in range(1, 9):
                with np.errstate(all="ignore"):
                    want = reference(x[:t], raw, qtype)
                _assert_same(kernel(x[:t], raw, qtype=qtype), want, f"{taken} t={t}")
    finally:
        cpu_quant.simd(True)


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 vector paths")
def test_the_k_formats_batched_rows_take_their_kernels_on_avx512():
    """2 to 8 rows of a 256-value format on AVX-512 take quant_f32_k_rows.c's kernels (their bits are those of
    the row buffer's tiles, so only the dispatch tells them apart); 1 row, 9 rows, AVX2 and a 32-value format
    do not."""
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    taken = ctypes.CDLL(cpu.build_info()["path"]).vg_k_rows_taken
    taken.argtypes, taken.restype = [ctypes.c_int], ctypes.c_int
    rng = np.random.default_rng(33)
    x = rng.standard_normal((9, 512)).astype(np.float32)
    try:
        for path in cpu_quant.PATHS:
            name = cpu_quant.path(path)
            for qtype in (*K_QTYPES, "q4_1"):
                raw = random_blocks(rng, qtype, 5, 512)
                for t in (1, 2, 5, 8, 9):
                    taken(1)
                    kernel(x[:t], raw, qtype=qtype)
                    want = name in ("avx512", "vnni") and qtype != "q4_1" and 2 <= t <= 8
                    assert taken(1) == want, (name, qtype, t)
    finally:
        cpu_quant.simd(True)
