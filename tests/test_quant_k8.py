"""qmatmul_q8 on the 256-value formats (q4_k, q5_k, q6_k, q2_k, q3_k, iq4_xs): the activations quantized as
llama.cpp's q8_K, the weights' integers against the `gguf` package's de-quantization, and the cpu kernels
(quant_k8.c) bit for bit against the reference on every vector path, thread count and batch."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

import verigrad as vg
from verigrad import nn
from verigrad.backends import cpu
from verigrad.backends.cpu import quant as cpu_quant
from verigrad.ops.quant import (
    Q8_QTYPES,
    Q8K_QTYPES,
    dequantize,
    q8k_weight,
    qmatmul_q8,
    quantize_q8_k,
    random_blocks,
    rms_norm_qmatmul_q8,
)

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def _activations(t: int, k: int, seed: int = 3) -> np.ndarray:
    """t rows with the blocks that take special paths: an infinity, a NaN, zeros, values so small that
    llama.cpp's iscale overflows, huge values, a subnormal peak and exact ties."""
    x = np.random.default_rng(seed).standard_normal((t, k)).astype(np.float32)
    specials = [
        lambda r: r.__setitem__(7, np.inf),
        lambda r: r.__setitem__(300 % k, np.nan),
        lambda r: r.__setitem__(slice(0, 256), 0.0),
        lambda r: r.__setitem__(slice(None), r * np.float32(1e-38)),
        lambda r: r.__setitem__(slice(None), r * np.float32(1e30)),
        lambda r: r.__setitem__(slice(None), np.round(r * 4) / 4),
    ]
    for i in range(1, t):
        specials[i % len(specials)](x[i])
    return x


def _exact_weight(raw: np.ndarray, qtype: str) -> np.ndarray:
    """The weight's values from its integers, in f64 (exact: products of f16 scales and small integers)."""
    q, scale, mins, d, dmin = q8k_weight(raw, qtype)
    values = d[..., None] * np.repeat(scale, 16, axis=-1) * q
    if mins is not None:
        values = values - dmin[..., None] * np.repeat(mins, 16, axis=-1)
    return values.reshape(raw.shape[0], -1)


# ---------------------------------------------------------------- the reference


def test_quantize_q8_k_by_hand():
    """llama.cpp's q8_K: the first value of the largest |x| sets iscale = -127 / max (its sign too), q =
    rint(iscale * x) with ties to even, d = 1 / iscale, bsums per 16."""
    x = np.zeros((1, 512), np.float32)
    x[0, :6] = [1.0, -2.0, 2.0, 0.5 * 2 / 127, 1.5 * 2 / 127, -2.5 * 2 / 127]
    q, d, bsums = quantize_q8_k(x)
    assert q.shape == (1, 2, 256) and d.shape == (1, 2) and bsums.shape == (1, 2, 16)
    iscale = np.float32(-127) / np.float32(-2.0)  # -2 comes first: positive iscale
    assert d[0, 0] == np.float64(np.float32(1) / iscale)
    want = np.rint(x[0, :6] * iscale).astype(np.int8)
    assert list(q[0, 0, :6]) == list(want) and list(want[1:3]) == [-127, 127]
    assert not q[0, 0, 6:].any() and q[0, 1].tolist() == [0] * 256 and d[0, 1] == 0.0
    assert bsums[0, 0, 0] == int(want.astype(int).sum()) and not bsums[0, 0, 1:].any()
    x[0, 1] = 3.0  # now a positive max: iscale negative, d negative
    q, d, _ = quantize_q8_k(x)
    assert q[0, 0, 1] == -127 and d[0, 0] < 0
    x[0, 300] = np.nan
    x[0, 1] = np.float32(1e-38)  # 127 / 1e-38 overflows f32
    x[0, 0] = x[0, 2] = x[0, 3] = x[0, 4] = x[0, 5] = 0
    q, d, bsums = quantize_q8_k(x)
    assert d[0, 0] == 0.0 and not q[0, 0].any() and np.isnan(d[0, 1]) and not q[0, 1].any()


@pytest.mark.parametrize("qtype", Q8K_QTYPES)
def test_weight_integers_are_the_values_gguf_decodes(qtype):
    """d * scale * q (- dmin * min) per 16 values is the de-quantized weight: ours and the gguf package's (an
    independent implementation)."""
    raw = random_blocks(np.random.default_rng(5), qtype, 6, 512)
    values = _exact_weight(raw, qtype)
    decoded = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[qtype.upper()]).reshape(6, 512)
    np.testing.assert_array_equal(dequantize(raw, qtype, (6, 512)), decoded)
    # the f32 de-quantization rounds (d * scale) and the product: within 2 f32 roundings of the exact value
    np.testing.assert_allclose(values, decoded, rtol=3 * 2.0**-24, atol=1e-30)


@pytest.mark.parametrize("qtype", Q8K_QTYPES)
def test_reference_is_the_quantized_activations_times_the_weight(qtype):
    """The integer form computes (d_x * q_x) @ dequantize(w).T: within a few f64 roundings of it; and close
    to the f32 product (the 8-bit activations lose about 1/254 of each block's largest value)."""
    rng = np.random.default_rng(6)
    raw, x = random_blocks(rng, qtype, 7, 768), rng.standard_normal((3, 768)).astype(np.float32)
    q, d, _ = quantize_q8_k(x)
    w = _exact_weight(raw, qtype)
    exact = (d[..., None] * q).reshape(3, 768) @ w.T
    got = qmatmul_q8(vg.from_numpy(x), vg.tensor(raw, dtype="u8"), qtype=qtype).numpy()
    scale = np.abs((d[..., None] * q).reshape(3, 768)) @ np.abs(w.T)
    assert np.all(np.abs(got - exact) <= 2.0**-24 * np.abs(exact) + 1e-12 * scale)
    np.testing.assert_allclose(got, x @ w.T, atol=0.02 * np.abs(x @ w.T).max())


def test_k_quants_take_the_8_bit_path():
    """QLinear with activations="q8" runs qmatmul_q8 for every format that has it (the 256-value ones ran
    qmatmul in f32 before), and the op's errors list them."""
    assert set(Q8K_QTYPES) <= set(Q8_QTYPES)
    raw = random_blocks(np.random.default_rng(1), "q6_k", 3, 256)
    layer = nn.QLinear(raw, "q6_k", (3, 256), activations="q8")
    x = vg.from_numpy(np.random.default_rng(2).standard_normal((2, 256)).astype(np.float32))
    np.testing.assert_array_equal(layer(x).numpy(), qmatmul_q8.reference(x.numpy(), raw, "q6_k"))
    with pytest.raises(vg.ShapeError, match="multiple of the q4_k block size 256"):
        qmatmul_q8(vg.zeros(2, 96), vg.zeros(3, 54, dtype="u8"), qtype="q4_k")


# ---------------------------------------------------------------- the kernels


@needs_cc
@pytest.mark.parametrize("qtype", Q8K_QTYPES)
def test_kernel_gives_the_reference_bits_on_every_path_and_thread_count(qtype, monkeypatch):
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul_q8"], vg.f32)
    assert cpu.cpu.exactness("qmatmul_q8", "f32").is_exact
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)  # bands of a few rows: every thread count splits
    raw = random_blocks(np.random.default_rng(9), qtype, 11, 512)
    x = _activations(40, 512)  # more rows than a tile of 16
    want = qmatmul_q8.reference(x, raw, qtype)
    assert np.isnan(want[[1, 6]]).all() and (want[3] == 0).all() and np.isfinite(want[[2, 4, 5]]).all()
    try:
        for path in cpu_quant.PATHS:
            taken = cpu_quant.path(path)
            for threads in (1, 2, 3):
                vg.set_threads(threads)
                for rows in (slice(None), slice(0, 1), slice(5, 22)):
                    got = kernel(x[rows], raw, qtype=qtype)
                    np.testing.assert_array_equal(_bits(got), _bits(want[rows]), f"{taken} {threads} {rows}")
    finally:
        vg.set_threads(1)
        cpu_quant.simd(True)


@needs_cc
@pytest.mark.parametrize("qtype", Q8K_QTYPES)
def test_kernel_rows_do_not_depend_on_the_batch(qtype):
    """Row i of B rows has the bits of row i alone, whatever B is and the other rows hold."""
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul_q8"], vg.f32)
    raw = random_blocks(np.random.default_rng(4), qtype, 5, 256)
    alone = _activations(1, 256, seed=8)
    try:
        for path in cpu_quant.PATHS:
            cpu_quant.path(path)
            want = kernel(alone, raw, qtype=qtype)
            for b in (2, 17, 33):
                rows = _activations(b, 256, seed=b)
                rows[b // 2] = alone[0]
                np.testing.assert_array_equal(_bits(kernel(rows, raw, qtype=qtype)[b // 2]), _bits(want[0]))
    finally:
        cpu_quant.simd(True)


@needs_cc
@pytest.mark.parametrize("qtype", Q8K_QTYPES)
def test_fused_norm_kernel_is_the_norm_then_the_product(qtype):
    kernel = cpu.cpu.native(vg.REGISTRY["rms_norm_qmatmul_q8"], vg.f32)
    raw = random_blocks(np.random.default_rng(2), qtype, 6, 512)
    x = np.random.default_rng(3).standard_normal((3, 512)).astype(np.float32)
    norm = nn.RMSNorm(512, eps=1e-5)
    norm.weight.data = vg.from_numpy(np.random.default_rng(4).uniform(0.5, 1.5, 512).astype(np.float32))
    want = qmatmul_q8.reference(norm(vg.from_numpy(x)).numpy(), raw, qtype)
    try:
        for path in cpu_quant.PATHS:
            cpu_quant.path(path)
            got = kernel(x, norm.weight.numpy(), raw, qtype=qtype, eps=1e-5)
            np.testing.assert_array_equal(_bits(got), _bits(want), path)
    finally:
        cpu_quant.simd(True)
    op = rms_norm_qmatmul_q8(vg.from_numpy(x), norm.weight, vg.tensor(raw, dtype="u8"), qtype=qtype, eps=1e-5)
    np.testing.assert_array_equal(_bits(op.numpy()), _bits(want))


@needs_cc
@pytest.mark.parametrize("qtype", ["q8_0", "q4_0", "q5_1", "iq4_nl", "q4_k"])
def test_a_block_too_small_to_invert_counts_as_zeros(qtype):
    """A block whose largest |x| is so small that 1 / d overflows f32 (here 3.9e-39: d is 3e-41) is taken
    as zeros by the references and by every kernel path (C's float-to-int conversion of x * inf was
    undefined: the 32-value kernels answered 8.6e-38 where the reference said 0)."""
    from verigrad.ops.quant import FORMATS, quantize_q8

    k = FORMATS[qtype].block * 2
    x = np.random.default_rng(0).standard_normal((3, k)).astype(np.float32)
    x[:, : k // 2] = np.float32(-3.918315e-39)
    x[1, 1] = np.float32(2e-39)
    q, d, _ = quantize_q8(x) if FORMATS[qtype].block == 32 else quantize_q8_k(x)[:3]
    assert not q[:, 0].any() and (d[:, 0] == 0).all()
    raw = random_blocks(np.random.default_rng(1), qtype, 4, k)
    want = qmatmul_q8.reference(x, raw, qtype)
    zeroed = x.copy()
    zeroed[:, : k // 2] = 0
    np.testing.assert_array_equal(_bits(want), _bits(qmatmul_q8.reference(zeroed, raw, qtype)))
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul_q8"], vg.f32)
    try:
        for path in cpu_quant.PATHS:
            cpu_quant.path(path)
            np.testing.assert_array_equal(_bits(kernel(x, raw, qtype=qtype)), _bits(want), path)
    finally:
        cpu_quant.simd(True)


# the bytes (start, stop, value) of blocks at the integer dots' extremes: the largest values and scales, the
# most negative scales (q6_k's -128, q3_k's -32) and iq4_xs's -127 throughout
_EXTREMES = {
    "q4_k": [[(4, 144, 0xFF)], [(4, 16, 0xFF), (16, 144, 0x00)]],
    "q5_k": [[(4, 176, 0xFF)], [(4, 16, 0xFF), (16, 48, 0xAA), (48, 176, 0x0F)]],
    "q6_k": [[(0, 192, 0xFF), (192, 208, 0x80)], [(0, 192, 0x00), (192, 208, 0x7F)]],
    "q2_k": [[(0, 80, 0xFF)], [(0, 16, 0xF0), (16, 80, 0x00)]],
    "q3_k": [[(0, 96, 0xFF), (96, 108, 0x00)], [(0, 96, 0xFF), (96, 108, 0xFF)]],
    "iq4_xs": [[(2, 8, 0xFF), (8, 136, 0x00)], [(2, 8, 0x00), (8, 136, 0xFF)]],
}


@needs_cc
@pytest.mark.parametrize("qtype", Q8K_QTYPES)
def test_vnni_rows_give_the_reference_bits(qtype, monkeypatch):
    """quant_k8.c's VNNI path (8 weight rows at a time against tiles of 8, 4, 2 and 1 activation rows,
    the last rows of a band a row at a time) on 1, 2, 3, 5, 8 and 64 activation rows, 1-3 threads, weight
    rows before, at and past the groups of 8, and blocks at the integer dots' extremes, beside the other
    paths."""
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)  # bands of a few rows: every thread count splits
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul_q8"], vg.f32)
    n, k = 29, 768  # 3 groups of 8 and 5 rows, 3 blocks a row
    raw = random_blocks(np.random.default_rng(6), qtype, n, k)
    blocks = raw.reshape(n, 3, -1)
    for row, spans in enumerate(_EXTREMES[qtype]):
        for start, stop, value in spans:
            blocks[(row, 9 + row), :, start:stop] = value
    x = _activations(64, k, seed=7)
    x[0, 256:512] = np.where(np.arange(256) % 3, 1.0, -1.0)  # q of +-127 throughout a block
    try:
        for path in cpu_quant.PATHS:
            taken = cpu_quant.path(path)
            if taken == "vnni":
                assert cpu_quant.q8_path(qtype, 1) == cpu_quant.q8_path(qtype, 64) == "vnni"
            for t in (1, 2, 3, 5, 8, 64):
                want = qmatmul_q8.reference(x[:t], raw, qtype)
                for threads in (1, 2, 3):
                    vg.set_threads(threads)
                    for rows in (n, 8, 16, 7):
                        got = kernel(x[:t], raw[:rows], qtype=qtype)
                        where = f"{taken} {threads} threads, {rows} x {t}"
                        np.testing.assert_array_equal(_bits(got), _bits(want[:, :rows]), where)
    finally:
        vg.set_threads(1)
        cpu_quant.simd(True)
