"""qmatmul's f32-activation cpu kernels on the paths that de-quantize blocks in registers (a decode step: one
activation row against 4 weight rows at a time; 2 to 8 rows of the 32-value formats on AVX-512, each block
de-quantized once for all of them, 4 or 3 weight rows at a time) and on the tiles of several activation rows
activation rows by 6 weight rows on AVX-512, 3 by 3 on AVX2, and the remainders of each): the reference's bits
for every format, on every vector path and 1-3 threads, for row counts on both sides of each tile's edge, with
blocks of raw bytes (scales of any f16: subnormal, huge, infinite, NaN) and activations with infinities and
huge values."""

from __future__ import annotations

import platform

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu import quant as cpu_quant
from verigrad.ops.quant import BLOCK_QTYPES, FORMATS, random_blocks

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

# weight rows: every panel of 1 to 6 (AVX-512's tiles; a decode step's groups of 4, AVX2's of 3), one and
# a remainder, several
ROWS = (1, 2, 3, 4, 5, 6, 7, 13, 17)
# activation rows: a decode step, batched steps of 2 to 8 (every tile of 1 to 4 rows, AVX2's of 3), whole
# tiles and remainders
TOKENS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 17)


def _assert_same(got: np.ndarray, want: np.ndarray, where: str) -> None:
    """The same bits, a NaN standing for any NaN (the reference's and a kernel's payloads may differ)."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, where)
    np.testing.assert_array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32), where)


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_decode_and_prompt_tiles_give_the_reference_bits(qtype, monkeypatch):
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)  # bands of a row or two: every split is tried
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    reference = vg.REGISTRY["qmatmul"].reference
    k = 512 if FORMATS[qtype].block == 256 else 96
    rng = np.random.default_rng(11)
    raw = rng.integers(0, 256, (max(ROWS), FORMATS[qtype].row_bytes(k)), dtype=np.uint8)
    x = rng.standard_normal((max(TOKENS), k)).astype(np.float32)
    x[5, 3] = np.inf
    x[6] *= np.float32(1e30)
    x[12, 40] = -np.inf
    try:
        for n in ROWS:
            for t in TOKENS:
                with np.errstate(all="ignore"):
                    want = reference(x[:t], raw[:n], qtype)
                for path in cpu_quant.PATHS:
                    taken = cpu_quant.path(path)
                    for threads in (1, 2, 3):
                        vg.set_threads(threads)
                        _assert_same(kernel(x[:t], raw[:n], qtype=qtype), want, f"{taken} {threads} {n}x{t}")
    finally:
        vg.set_threads(1)
        cpu_quant.simd(True)


@pytest.mark.parametrize("qtype", ["q5_0", "q6_k"])
def test_rows_wider_than_the_tiles_stack_buffer(qtype):
    """Rows of 2560 values: a panel of 6 de-quantized rows no longer fits the band's stack buffer (sized for
    SmolLM2's 1536) and is allocated; the same bits on every path."""
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    k, n, t = 2560, 7, 5
    rng = np.random.default_rng(3)
    raw = rng.integers(0, 256, (n, FORMATS[qtype].row_bytes(k)), dtype=np.uint8)
    x = rng.standard_normal((t, k)).astype(np.float32)
    with np.errstate(all="ignore"):
        want = vg.REGISTRY["qmatmul"].reference(x, raw, qtype)
    try:
        for path in cpu_quant.PATHS:
            taken = cpu_quant.path(path)
            _assert_same(kernel(x, raw, qtype=qtype), want, taken)
    finally:
        cpu_quant.simd(True)


@pytest.mark.parametrize("t", [2, 16, 100])
def test_a_small_matrix_against_several_rows_runs_on_both_threads(t):
    """SmolLM2's k and v projections (192 x 576 q5_0, 76 KB): several activation rows' work splits between
    2 threads (bands of MIN_BAND_BYTES of weight bytes times rows), with the 1-thread bits."""
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    rng = np.random.default_rng(5)
    raw = random_blocks(rng, "q5_0", 192, 576)
    x = rng.standard_normal((t, 576)).astype(np.float32)
    results, counts = [], []
    try:
        for threads in (1, 2):
            vg.set_threads(threads)
            with cpu.static_schedule():
                cpu.chunks_run()
                results.append(kernel(x, raw, qtype="q5_0"))
                counts.append(cpu.chunks_run())
    finally:
        vg.set_threads(1)
    assert len(counts[1]) >= 2 and counts[1][0] > 0 and counts[1][1] > 0, counts
    _assert_same(results[1], results[0], "2 threads")


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_long_rows_give_the_reference_bits(qtype, monkeypatch):
    """Rows of 37 blocks of 32 (or 5 of 256): the AVX-512 kernels read the 32-value formats' scales 16 blocks
    at a time (two whole groups and a part), the last row's last group up to its end and no further; those of
    5 to 8 activation rows make their tables 32 blocks at a time (a whole chunk and a part). Activations at
    a 64-byte boundary and 4 bytes past one (the kernel copies them to one)."""
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    reference = vg.REGISTRY["qmatmul"].reference
    k = FORMATS[qtype].block * (5 if FORMATS[qtype].block == 256 else 37)
    rng = np.random.default_rng(12)
    memory = np.empty(8 * k + 32, np.float32)
    at = (-memory.ctypes.data % 64) // 4
    try:
        for n in (1, 4, 5, 11):
            raw = rng.integers(0, 256, (n, FORMATS[qtype].row_bytes(k)), dtype=np.uint8)
            for t, offset in ((1, 0), (2, 1), (3, 0), (4, 1), (5, 0), (6, 1), (7, 1), (8, 0), (8, 1)):
                x = memory[at + offset : at + offset + t * k].reshape(t, k)
                x[...] = rng.standard_normal((t, k))
                with np.errstate(all="ignore"):
                    want = reference(x, raw, qtype)
                for path in cpu_quant.PATHS:
                    taken = cpu_quant.path(path)
                    for threads in (1, 2, 3):
                        vg.set_threads(threads)
                        _assert_same(kernel(x, raw, qtype=qtype), want, f"{taken} {threads} {n}x{t}+{offset}")
    finally:
        vg.set_threads(1)
        cpu_quant.simd(True)


# the 32-value formats: 2 to 8 activation rows take FEW_ROWS and HALVES on AVX-512
BLOCK32 = tuple(q for q in BLOCK_QTYPES if FORMATS[q].block == 32)


def assert_rows_alone(qtype: str, seed: int, ks: tuple[int, ...], n: int, threads: tuple[int, ...], big=None):
    """For each k: n weight rows of random blocks against 8 activation rows (row `big` scaled by 1e30
    where given): each row alone has the reference's bits, and every batch of its first 2..8 rows has the
    rows' bits alone, on each vector path and thread count."""
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    reference = vg.REGISTRY["qmatmul"].reference
    rng = np.random.default_rng(seed)
    try:
        for k in ks:
            raw = random_blocks(rng, qtype, n, k)
            x = rng.standard_normal((8, k)).astype(np.float32)
            if big is not None:
                x[big] *= np.float32(1e30)
            with np.errstate(all="ignore"):
                want = reference(x, raw, qtype)
            for path in cpu_quant.PATHS:
                taken = cpu_quant.path(path)
                for count in threads:
                    vg.set_threads(count)
                    alone = np.concatenate([kernel(x[u : u + 1], raw, qtype=qtype) for u in range(8)])
                    _assert_same(alone, want, f"{taken} {count} k={k} alone")
                    for t in range(2, 9):
                        got = kernel(x[:t], raw, qtype=qtype)
                        _assert_same(got, alone[:t], f"{taken} {count} k={k} t={t}")
    finally:
        vg.set_threads(1)
        cpu_quant.simd(True)


@pytest.mark.parametrize("qtype", BLOCK32)
def test_a_rows_bits_do_not_depend_on_its_batch(qtype):
    """SmolLM2's widths (18 blocks: one chunk of HALVES; 48: two of 24) and 41 (21 and 20): every row of a
    product of 1 to 8 activation rows has the bits of the same row alone (a decode step's kernel) and the
    reference's, on each vector path, with 1 and 2 threads."""
    assert_rows_alone(qtype, 21, (576, 1536, 32 * 41), 7, (1, 2))


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_every_nan_is_the_one_quiet_nan(qtype, monkeypatch):
    """Each output that is a NaN is 0x7fc00000, as the reference writes it, whatever NaN the sum ended in
    (activations holding NaNs of other signs and payloads, infinities that cancel): 1 to 8 activation rows
    (the 32-value formats' kernels of 2 to 8 rows write their sums and NaNs themselves; the 256-value
    formats' take quant_f32_k_rows.c's kernels) and 9 to 17 (the tiles of the row buffer, f32_band's NaN
    pass), at widths of one chunk and of several, on each vector path, 1 and 2 threads."""
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    rng = np.random.default_rng(23)
    widths = (576, 1536) if FORMATS[qtype].block == 32 else (768, 1536)
    try:
        for k in widths:
            raw = random_blocks(rng, qtype, 7, k)
            x = rng.standard_normal((17, k)).astype(np.float32)
            nans = np.array([0xFFC01234, 0x7F800001] * 9, np.uint32)[:17]  # NaNs of another sign and payloads
            x[:, 5] = nans.view(np.float32)
            x[1::2, 5] = np.inf
            x[1::2, 6] = -np.inf  # inf - inf where the weights' values agree in sign
            for path in cpu_quant.PATHS:
                taken = cpu_quant.path(path)
                for threads in (1, 2):
                    vg.set_threads(threads)
                    for t in (*range(1, 10), 12, 17):
                        got = kernel(x[:t], raw, qtype=qtype).view(np.uint32)
                        nan = np.isnan(got.view(np.float32))
                        assert nan.sum() > 0, f"{taken} k={k} t={t}"
                        where = f"{taken} {threads} k={k} t={t}: {got[nan][:4]}"
                        assert (got[nan] == 0x7FC00000).all(), where
    finally:
        vg.set_threads(1)
        cpu_quant.simd(True)


# the formats whose AVX2 decode kernels (and q2_k's and q3_k's AVX2 and AVX-512 row de-quantization) came last
LOW_BIT = ("q2_k", "q3_k", "iq4_nl", "iq4_xs")


@pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"), reason="x86 vector paths")
@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_every_format_has_its_own_code_on_each_vector_path(qtype):
    """A decode step's fused kernel and the row de-quantization (prompt tiles, qembedding) on AVX2 and on
    AVX-512 for every format, so that no level falls back to a lower one's code."""
    for name in ("avx2", "avx512"):
        assert cpu_quant.f32_kernels(qtype, name) == ("decode", "rows"), name
    with pytest.raises(ValueError, match="f32_kernels: name must be"):
        cpu_quant.f32_kernels(qtype, "scalar")


@pytest.mark.parametrize("qtype", LOW_BIT)
def test_low_bit_formats_on_odd_shapes_give_the_reference_bits(qtype, monkeypatch):
    """q2_k, q3_k, iq4_nl and iq4_xs on each vector path (the level forced) and the portable one: weight rows
    that are no multiple of a decode step's 2 (AVX2) or 4 (AVX-512) or a tile's 3 or 6, rows of several
    blocks, 1, 2, 3, 5, 8 and 100 activation rows, 1-3 threads; raw blocks (any f16 scale) and activations
    with infinities and huge values."""
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    reference = vg.REGISTRY["qmatmul"].reference
    k = FORMATS[qtype].block * (3 if FORMATS[qtype].block == 256 else 7)
    rng = np.random.default_rng(17)
    x = rng.standard_normal((100, k)).astype(np.float32)
    x[3, 7], x[5, k - 1], x[4] = np.inf, -np.inf, x[4] * np.float32(1e30)  # t <= 3: finite
    try:
        for n in (1, 2, 3, 5, 7, 11):
            raw = rng.integers(0, 256, (n, FORMATS[qtype].row_bytes(k)), dtype=np.uint8)
            for t in (1, 2, 3, 5, 8, 100):
                with np.errstate(all="ignore"):
                    want = reference(x[:t], raw, qtype)
                for path in cpu_quant.PATHS:
                    taken = cpu_quant.path(path)
                    for threads in (1, 2, 3):
                        vg.set_threads(threads)
                        _assert_same(kernel(x[:t], raw, qtype=qtype), want, f"{taken} {threads} {n}x{t}")
    finally:
        vg.set_threads(1)
        cpu_quant.simd(True)
