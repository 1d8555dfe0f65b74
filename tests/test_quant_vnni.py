"""qmatmul_q8's AVX-512 VNNI paths (quant_vnni.c: 8 weight rows at a time against tiles of 1 to 8
activation rows; quant_amx.c's AMX tiles of q8_0, with and without them) against the reference, bit for
bit, beside the AVX2 and portable paths they fall back to: every 32-value format, 1..17 activation rows,
weight rows before, at and past the groups of 8, 1-3 threads, and blocks that stress the integer dots
(q8_0's -128 bytes, q5's fifth bits all set, activations of +-127) or the double sums (an infinity, huge
and tiny blocks); and every row of a call of 1 to 8 rows against the row alone, on every format."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import verigrad as vg
from verigrad.backends import cpu
from verigrad.backends.cpu import quant as cpu_quant
from verigrad.backends.reference import composite_reference
from verigrad.ops.quant import (
    FORMATS,
    Q8_32_QTYPES,
    Q8_QTYPES,
    qmatmul_q8,
    random_blocks,
    rms_norm_qmatmul_q8,
)

pytestmark = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")

VNNI_FLAGS = {"avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni", "avx2", "f16c"}


def _flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    found = re.search(r"^flags\s*:(.*)$", text, re.M)
    return set(found.group(1).split()) if found else set()


def _activations(rng: np.random.Generator, t: int, k: int) -> np.ndarray:
    x = rng.standard_normal((t, k)).astype(np.float32)
    if t > 3:
        x[1, 3] = np.inf  # a block of NaN outputs
        x[2, 32:64] *= np.float32(1e30)
        x[3, :32] = np.float32(1e-40)  # subnormal: 1 / d overflows, a block of zeros
    if t > 5:
        x[5, :32] = np.where(np.arange(32) % 2, 1.0, -1.0)  # q of +-127 throughout
    return x


def _weights(rng: np.random.Generator, qtype: str, n: int, k: int) -> np.ndarray:
    raw = random_blocks(rng, qtype, n, k)
    nbytes = FORMATS[qtype].nbytes
    blocks = raw.reshape(n, k // 32, nbytes)
    if qtype == "q8_0":
        blocks[0, :, 2:] = 0x80  # -128: the largest |w|
        blocks[1, 0, 2:] = 0x7F
    elif qtype in ("q5_0", "q5_1"):
        at = 2 if qtype == "q5_0" else 4
        blocks[0, :, at : at + 4] = 0xFF  # every fifth bit set
        blocks[0, :, at + 4 :] = 0xFF  # and every nibble 15: values of 31
        blocks[2, 0, at : at + 4] = [0x01, 0x80, 0x00, 0x80]  # the bits at the halves' edges
    elif qtype == "iq4_nl":
        blocks[0, :, 2:] = 0x00  # every value -127: the largest |w|
        blocks[1, :, 2:] = 0xFF  # every value 113: the largest table value plus 128 (241) as u8
        blocks[2, 0, 2:] = np.arange(16, dtype=np.uint8) * 17  # every table entry, in both nibbles
    return raw


def _paths():
    """Each vector path taken in turn (its name), "vnni" with quant_amx.c's tiles allowed, then forbidden."""
    try:
        for path in cpu_quant.PATHS:
            for amx in (True, False) if path == "vnni" else (True,):
                cpu_quant.amx(amx)
                taken = cpu_quant.path(path)
                yield taken if amx or taken != "vnni" else "vnni without amx"
    finally:
        cpu_quant.simd(True)
        cpu_quant.amx(True)


def test_the_vnni_path_is_taken_where_the_cpu_has_it():
    try:
        has = _flags() >= VNNI_FLAGS
        taken = cpu_quant.path("vnni")
        assert taken == ("vnni" if has else taken)
        if has:
            assert cpu_quant.path("avx512") == "avx512"
    finally:
        cpu_quant.simd(True)
    assert cpu_quant.path() == cpu_quant.path("vnni")


@pytest.mark.parametrize("qtype", Q8_32_QTYPES)
def test_qmatmul_q8_equals_the_reference_on_every_path(qtype, monkeypatch):
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)  # bands of a few rows on 2 and 3 threads
    rng = np.random.default_rng(11)
    n, k = 29, 96  # 3 groups of 8 and 5 rows; bands of 10, 10 and 9 rows on 3 threads
    raw = _weights(rng, qtype, n, k)
    x = _activations(rng, 17, k)
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul_q8"], vg.f32)
    try:
        for t in range(1, 18):
            want = qmatmul_q8.reference(x[:t], raw, qtype)
            for taken in _paths():
                for threads in (1, 2, 3):
                    vg.set_threads(threads)
                    for rows in (n, 8, 16, 7):
                        got = kernel(x[:t], raw[:rows], qtype=qtype)
                        where = f"{taken} {threads} threads, {rows} x {t}"
                        expected = want[:, :rows].view(np.uint32)
                        np.testing.assert_array_equal(got.view(np.uint32), expected, where)
    finally:
        cpu_quant.simd(True)
        vg.set_threads(1)


@pytest.mark.parametrize("qtype", Q8_QTYPES)
def test_each_row_has_the_bits_of_a_call_of_one_row(qtype):
    """A request's outputs do not depend on its batch: every activation row of a call of 1 to 8 rows (the
    tiles of 1 to 8 rows: pairs of rows reduced together, an odd last row alone) has the bits of that row
    alone, on 8 and 16 weight rows and on each path, over blocks whose scales vary from row to row."""
    rng = np.random.default_rng(13)
    k = 512 if FORMATS[qtype].block == 256 else 160
    raw = random_blocks(rng, qtype, 16, k) if FORMATS[qtype].block == 256 else _weights(rng, qtype, 16, k)
    x = rng.standard_normal((8, k)).astype(np.float32) * rng.uniform(0.01, 100, (8, 1)).astype(np.float32)
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul_q8"], vg.f32)
    try:
        for taken in _paths():
            alone = np.concatenate([kernel(x[i : i + 1], raw, qtype=qtype) for i in range(8)])
            want = qmatmul_q8.reference(x, raw, qtype).view(np.uint32)
            np.testing.assert_array_equal(alone.view(np.uint32), want, f"{taken}, rows alone")
            for t in range(1, 9):
                for rows in (8, 16):
                    got = kernel(x[:t], raw[:rows], qtype=qtype).view(np.uint32)
                    np.testing.assert_array_equal(got, want[:t, :rows], f"{taken}, {rows} x {t}")
    finally:
        cpu_quant.simd(True)


@pytest.mark.parametrize("qtype", Q8_32_QTYPES)
def test_rms_norm_qmatmul_q8_equals_its_decomposition_on_every_path(qtype):
    rng = np.random.default_rng(12)
    raw = _weights(rng, qtype, 24, 64)
    x = rng.standard_normal((9, 64)).astype(np.float32) * 40
    weight = rng.uniform(-2, 2, 64).astype(np.float32)
    kernel = cpu.cpu.native(vg.REGISTRY["rms_norm_qmatmul_q8"], vg.f32)
    want = composite_reference(rms_norm_qmatmul_q8)(x, weight, raw, qtype=qtype, eps=1e-5)
    try:
        for taken in _paths():
            got = kernel(x, weight, raw, qtype=qtype, eps=1e-5)
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), taken)
    finally:
        cpu_quant.simd(True)


def _rounding_term(qtype: str) -> tuple[np.ndarray, np.ndarray, np.float32]:
    """Two blocks whose second term rounds where a fused multiply-add would not: x f32[64], a weight row, and
    the f32 that a fused sum would give. Block 0's term is 2^-33 (d 2^-14, d_x 2^-26, dot 128); block 1's
    product d_w d_x dot = A/1024 * B 2^-23 * C is the 54-bit odd N 2^-33 = (2^53 + F 2^30 + 2^29 + 1) 2^-33
    (A, B, C found by a search), which rounds down to an f32 midpoint; the reference's sum 2^-33 + that is a
    tie in double, kept at the midpoint, then rounded to the even f32 below; the exact sum (a fused
    multiply-add's) rounds to the double above the midpoint, then to the f32 above."""
    a, b, c, amax = 1939, 11270745, 469523, np.float32(170.63433837890625)  # amax / 127 in f32 is B 2^-23
    dx = np.float32(b * 2.0**-23)
    x = np.zeros(64, np.float32)
    x[0], x[1] = np.float32(127 * 2.0**-26), np.float32(2.0**-26)
    # block 1: q -127 (x[32], the block's largest), q[1..30] summing to s, q[31] = r: with weights -127 on
    # values 0..30 and 1 on value 31, dot = 127 * 127 - 127 s + r = C
    r = (c - 16129) % 127
    r = r - 127 if r > 63 else r
    s = (16129 + r - c) // 127
    x[32] = -amax
    x[33:63] = np.float32([s // 30 + (i < s % 30) for i in range(30)]) * dx
    x[63] = np.float32(r) * dx
    nb = FORMATS[qtype].nbytes
    row = np.zeros(2 * nb, np.uint8)
    row[0:2] = np.frombuffer(np.float16(2.0**-14).tobytes(), np.uint8)
    row[nb : nb + 2] = np.frombuffer(np.float16(a / 1024).tobytes(), np.uint8)
    if qtype == "iq4_nl":  # nibble 8: the value 1, nibble 0: -127 (value 31 in byte 15's high nibble)
        row[2:18], row[nb + 17] = 0x88, 0x80
    else:
        row[2:34], row[nb + 2 : nb + 33], row[nb + 33] = 1, 256 - 127, 1
    fused = np.float32(float(Fraction(2) ** -33 + Fraction(a, 1024) * Fraction(float(dx)) * c))
    return x, row, fused


@pytest.mark.parametrize("qtype", ["iq4_nl", "q8_0"])
def test_terms_that_round_are_not_fused(qtype):
    """iq4_nl's and q8_0's products (d_w * d_x) * dot may round (|dot| up to 32 * 128 * 127), so a kernel
    must multiply, then add, where the 4- and 5-bit formats' exact products take one fused multiply-add: a
    block whose product rounds, after one that leaves the sum at a tie, gives the reference's f32 one unit
    below the fused sum's, on every path, tile size and weight-row group."""
    x, row, fused = _rounding_term(qtype)
    w = np.tile(row, (16, 1))
    want = qmatmul_q8.reference(x[None], w, qtype)[0, 0]
    assert want.view(np.uint32) == fused.view(np.uint32) - 1  # the case tells the two apart
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul_q8"], vg.f32)
    try:
        for taken in _paths():
            for t in (1, 2, 4, 5, 8):
                got = kernel(np.tile(x, (t, 1)), w, qtype=qtype).view(np.uint32)
                np.testing.assert_array_equal(got, want.view(np.uint32), f"{taken}, {t} rows")
    finally:
        cpu_quant.simd(True)


def test_q8_path_names_the_code_each_level_runs():
    """benchmarks/qmatmul_formats.py names its q8 rows by it: on "avx512" the 32-value formats run AVX2's
    code (they have no AVX-512 code of their own), the 256-value formats AVX2's below 32 rows."""
    flags = _flags()
    try:
        if flags >= VNNI_FLAGS:
            cpu_quant.path("vnni")
            assert [cpu_quant.q8_path(q, 1) for q in Q8_32_QTYPES] == ["vnni"] * len(Q8_32_QTYPES)
            # quant_amx.c's tiles: q8_0 on 5 rows or more, where the machine and its OS allow them
            amx = "amx" if cpu_quant.amx() else "vnni"
            assert [cpu_quant.q8_path("q8_0", t) for t in (4, 5, 8)] == ["vnni", amx, amx]
            assert cpu_quant.q8_path("q4_1", 8) == "vnni"
            cpu_quant.amx(False)
            assert cpu_quant.q8_path("q8_0", 8) == "vnni"
        if flags >= {"avx512f", "avx512dq", "avx512bw", "avx2", "f16c"}:
            cpu_quant.path("avx512")
            assert cpu_quant.q8_path("q5_0", 8) == "avx2"
            assert (cpu_quant.q8_path("q4_k", 1), cpu_quant.q8_path("q4_k", 32)) == ("avx2", "avx512")
        cpu_quant.path("scalar")
        assert {cpu_quant.q8_path(q, 4) for q in ("q8_0", "q5_0", "q6_k")} == {"scalar"}
    finally:
        cpu_quant.simd(True)
        cpu_quant.amx(True)
