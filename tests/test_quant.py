"""Quantized ops (qmatmul, qmatmul_q8, qembedding), their shape and dtype rules, the nn layers, and the cpu
kernels: the references' bits (qmatmul_q8's and qmatmul's), for every thread count."""

from __future__ import annotations

from fractions import Fraction

import gguf
import numpy as np
import pytest

import verigrad as vg
from verigrad import nn
from verigrad.backends import cpu
from verigrad.backends.cpu import quant as cpu_quant
from verigrad.dtypes import as_dtype
from verigrad.ops.quant import (
    BLOCK_QTYPES,
    FORMATS,
    LANES,
    dequantize,
    dequantize_op,
    fma32,
    lane_dot,
    q8_weight,
    qembedding,
    qmatmul,
    qmatmul_q8,
    quantize_q8,
    rms_norm_qmatmul_q8,
)

needs_cc = pytest.mark.skipif(not cpu.available(), reason="the cpu backend could not be built here")
Q8_QTYPES = ["q8_0", "q4_0", "q4_1"]


def weights(qtype: str, n: int, k: int, seed: int = 0) -> np.ndarray:
    """u8[n, row bytes]: gguf's quantization of normal values (k-quants: random bytes, small scales)."""
    rng = np.random.default_rng(seed)
    if qtype in Q8_QTYPES:
        values = rng.standard_normal((n, k)).astype(np.float32)
        return gguf.quants.quantize(values, gguf.GGMLQuantizationType[qtype.upper()])
    fmt = FORMATS[qtype]
    raw = rng.integers(0, 256, (n, fmt.row_bytes(k)), dtype=np.uint8)
    scales = raw.reshape(-1, fmt.nbytes)
    for at in fmt.scales:
        scales[:, at : at + 2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    return raw


def _u8(raw: np.ndarray) -> vg.Tensor:
    return vg.tensor(raw, dtype="u8")


def x_values(shape: tuple, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- references


@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_qmatmul_is_x_times_the_dequantized_weight(qtype):
    """f32: lane_dot's bits (32 partial sums of fused multiply-adds, folded), within f32 summation's bound of
    the exact product; f64 x: the f64 product."""
    k = FORMATS[qtype].block if FORMATS[qtype].block == 256 else 64
    raw = weights(qtype, 5, k)
    w = dequantize(raw, qtype, (5, k))
    for shape in [(k,), (3, k), (2, 3, k)]:
        x = x_values(shape)
        out = qmatmul(vg.from_numpy(x), _u8(raw), qtype=qtype)
        assert out.shape == (*shape[:-1], 5) and out.dtype == vg.f32
        np.testing.assert_array_equal(out.numpy().view(np.uint32), lane_dot(x, w).view(np.uint32))
        exact = x.astype(np.float64) @ w.astype(np.float64).T
        bound = (k // LANES + 5) * 2.0**-24 * (np.abs(x).astype(np.float64) @ np.abs(w).astype(np.float64).T)
        assert (np.abs(out.numpy() - exact) <= bound).all()
        wide = qmatmul(vg.from_numpy(x.astype(np.float64)), _u8(raw), qtype=qtype).numpy()
        np.testing.assert_array_equal(wide, exact)


def test_qmatmul_sums_in_lanes_of_fused_multiply_adds():
    """Lane 0 takes k = 0, 32, 64 in order (2**25 + 1 rounds to 2**25 in f32, then - 2**25: 0), lane 1 takes
    0.5 and k = 33's 0.25 is in lane 1 too: the result is 0.75, where the exact sum is 1.75."""
    x = np.zeros((1, 96), np.float32)
    x[0, [0, 32, 64, 1, 33]] = [2.0**25, 1.0, -(2.0**25), 0.5, 0.25]
    raw = np.frombuffer((np.float16(1.0).tobytes() + bytes([1] * 32)) * 3, np.uint8).reshape(1, 102)
    assert qmatmul(vg.from_numpy(x), _u8(raw), qtype="q8_0").numpy().tolist() == [[0.75]]
    assert lane_dot(x, np.ones((1, 96), np.float32)).tolist() == [[0.75]]


_F32_OVERFLOW = Fraction(2**128 - 2**103)  # f32 values at or past this round to infinity


def _round_f32(f: Fraction) -> np.float32:
    """f rounded once to f32, to nearest, ties to the even significand (exact rational arithmetic)."""
    if abs(f) >= _F32_OVERFLOW:
        return np.float32(np.inf if f > 0 else -np.inf)
    with np.errstate(over="ignore"):
        r = np.float32(float(f))  # within an ulp of the answer
    near = [c for c in (r, np.nextafter(r, np.float32(np.inf)), np.nextafter(r, np.float32(-np.inf)))]
    near = [c for c in near if np.isfinite(c)]
    return min(near, key=lambda c: (abs(Fraction(float(c)) - f), int(c.view(np.uint32)) & 1))


def test_fma32_rounds_once_as_a_fused_multiply_add():
    rng = np.random.default_rng(3)
    n = 3000
    a = (rng.standard_normal(n) * 2.0 ** rng.integers(-40, 40, n)).astype(np.float32)
    x = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    v = rng.standard_normal(n).astype(np.float32)
    # halfway cases of a + p in f64 with an error that decides them (a naive rounding of s misses each)
    # (p = -+2**-24 (1 - 2**-46): s is halfway, the exact sum 2**-70 below or above it)
    one, three, big = np.float32(1 + 2.0**-23), np.float32(1 + 3 * 2.0**-23), np.float32(2.0**103 + 2.0**80)
    a = np.concatenate([a, [one, three, np.finfo(np.float32).max, -1.0, 0.0]]).astype(np.float32)
    x = np.concatenate([x, [2.0**-24 * (1 + 2.0**-23), -(2.0**-24) * (1 + 2.0**-23), big, 3.0, 2.0]])
    v = np.concatenate([v, [1 - 2.0**-23, 1 - 2.0**-23, 1 - 2.0**-23, 1.0, -0.0]])
    x, v = x.astype(np.float32), v.astype(np.float32)
    p = x.astype(np.float64) * v.astype(np.float64)  # exact
    got = fma32(a, p)
    want = np.array([_round_f32(Fraction(float(ai)) + Fraction(float(pi))) for ai, pi in zip(a, p)])
    np.testing.assert_array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32))
    assert got[n] == one and got[n + 1] == three  # s rounded to even would give 1 + 2**-22 for both
    assert got[n + 2] == np.finfo(np.float32).max  # s is the overflow threshold, the exact sum below it
    assert got[n + 3] == 2.0 and np.signbit(fma32(np.float32([-0.0]), np.array([-0.0])))[0]
    assert np.isnan(fma32(np.float32([1.0]), np.array([np.nan])))[0]
    assert fma32(np.float32([np.inf]), np.array([1.0]))[0] == np.inf


def test_quantize_q8_by_hand():
    x = np.zeros(64, np.float32)
    x[:6] = [127.0, -63.5, 0.5, 1.5, -2.5, 126.49]  # d = 1: ties go to the even integer
    x[32:] = 0.0  # an all-zero block: d = 0, q = 0
    q, d, s = quantize_q8(x)
    assert q.shape == (2, 32) and q.dtype == np.int8
    assert list(q[0, :6]) == [127, -64, 0, 2, -2, 126] and not q[0, 6:].any() and not q[1].any()
    assert list(d) == [1.0, 0.0] and list(s) == [127 - 64 + 2 - 2 + 126, 0]
    x[40] = np.inf
    q, d, _ = quantize_q8(x.reshape(1, 64))
    assert d[0, 0] == 1.0 and np.isnan(d[0, 1]) and not q[0, 1].any()


def test_qmatmul_q8_by_hand():
    """d = 1 weights and activations with max 127: every step is exact, so the result is the integer dot."""
    wq = np.arange(-16, 16, dtype=np.int8)
    raw = np.frombuffer(np.float16(1.0).tobytes() + wq.tobytes(), np.uint8).reshape(1, 34)
    x = np.arange(32, dtype=np.float32) * 4 - 1  # max |x| = 123: d = 123/127, not exact
    x[0] = 127.0  # now d = 1 and q = x
    want = np.dot(wq.astype(np.int64), x.astype(np.int64))
    assert qmatmul_q8(vg.from_numpy(x), _u8(raw), qtype="q8_0").numpy().tolist() == [want]
    q4 = np.frombuffer(np.float16(0.5).tobytes() + np.float16(-1).tobytes() + bytes(range(16)), np.uint8)
    nibbles = np.concatenate([np.arange(16) & 15, np.arange(16) >> 4])  # q4_1 value: 0.5 * q - 1
    want = np.dot(0.5 * nibbles - 1, x.astype(np.float64))
    assert qmatmul_q8(vg.from_numpy(x), _u8(q4.reshape(1, 20)), qtype="q4_1").numpy().tolist() == [want]


@pytest.mark.parametrize("qtype", Q8_QTYPES)
def test_qmatmul_q8_is_the_quantized_product(qtype):
    """The reference equals the f64 product of the dequantized x and w (to f64 rounding), and is close to
    qmatmul (8-bit activations lose about 1/254 of each block's largest value)."""
    raw, x = weights(qtype, 9, 128), x_values((4, 128))
    q, d, _ = quantize_q8(x)
    xq = (q * d[..., None]).reshape(4, 128)
    exact = xq @ dequantize(raw, qtype, (9, 128)).astype(np.float64).T
    got = qmatmul_q8(vg.from_numpy(x), _u8(raw), qtype=qtype).numpy()
    np.testing.assert_allclose(got, exact, rtol=2e-7, atol=1e-6)
    full = qmatmul(vg.from_numpy(x), _u8(raw), qtype=qtype).numpy()
    assert np.abs(got - full).max() < 0.05 * np.abs(full).max()


def test_q8_weight_integers():
    raw = weights("q4_1", 2, 64)
    q, d, m = q8_weight(raw, "q4_1")
    np.testing.assert_array_equal(
        (d[..., None] * q + m[..., None]).reshape(2, 64), dequantize(raw, "q4_1", (2, 64))
    )


def test_qembedding_gathers_dequantized_rows():
    raw = weights("q4_0", 6, 64)
    ids = np.array([[5, 0], [2, 2]])
    out = qembedding(vg.from_numpy(ids), _u8(raw), qtype="q4_0")
    assert out.shape == (2, 2, 64)
    np.testing.assert_array_equal(out.numpy(), dequantize(raw, "q4_0", (6, 64))[ids])


def test_dequantize_op_and_the_gradient_of_qmatmul():
    raw = weights("q4_0", 5, 64)
    w = dequantize(raw, "q4_0", (5, 64))
    np.testing.assert_array_equal(dequantize_op(_u8(raw), qtype="q4_0").numpy(), w)
    x = vg.tensor(x_values((3, 64)), requires_grad=True)
    g = x_values((3, 5), 7)
    (qmatmul(x, _u8(raw), qtype="q4_0") * vg.from_numpy(g)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), g.astype(np.float64) @ w, rtol=1e-6, atol=1e-6)
    assert not qmatmul_q8.differentiable


# ---------------------------------------------------------------- rules


def test_symbolic_shapes():
    n = vg.dims("n")
    k = vg.dims("qk", multiple_of=32)
    got = vg.check(lambda x, w: qmatmul(x, w, qtype="q4_1"), vg.spec([n, k]), vg.spec([7, k / 32 * 20], "u8"))
    assert str(got) == "f32[n, 7]"
    din = vg.dims("din")
    with pytest.raises(
        vg.ShapeError, match=r"K = din .* multiple of the q4_1 block size 32 .*multiple_of=32"
    ):
        vg.check(lambda x, w: qmatmul(x, w, qtype="q4_1"), vg.spec([n, din]), vg.spec([7, 20], "u8"))
    ids = vg.dims("t")
    got = vg.check(lambda i, w: qembedding(i, w, qtype="q8_0"), vg.spec([ids], "i64"), vg.spec([9, 68], "u8"))
    assert str(got) == "f32[t, 64]"


@pytest.mark.parametrize(
    ("x", "w", "qtype", "error", "message"),
    [
        ((3, 64), (7, 36), "q4_1", vg.ShapeError, r"rows of 36 bytes are not whole q4_1 blocks \(20 bytes\)"),
        ((3, 64), (7, 20), "q4_1", vg.ShapeError, r"rows hold 32 values .* K = 64"),
        ((3, 64), (7, 2, 20), "q4_1", vg.ShapeError, r"weight must be \[N, row bytes\]"),
        ((3, 48), (7, 40), "q4_1", vg.ShapeError, r"K = 48 .* multiple of the q4_1 block size 32"),
        ((3, 64), (7, 40), "iq2_xxs", vg.DTypeError, r"qtype must be one of"),
    ],
)
def test_shape_errors(x, w, qtype, error, message):
    with pytest.raises(error, match=message):
        qmatmul(vg.zeros(*x), vg.zeros(*w, dtype="u8"), qtype=qtype)


def test_dtype_errors():
    w = vg.zeros(7, 40, dtype="u8")
    with pytest.raises(vg.DTypeError, match="x must be f32 or f64, got f16"):
        qmatmul(vg.zeros(3, 64, dtype="f16"), w, qtype="q4_1")
    with pytest.raises(vg.DTypeError, match="weight must be u8"):
        qmatmul(vg.zeros(3, 64), vg.zeros(7, 40, dtype="i32"), qtype="q4_1")
    with pytest.raises(vg.DTypeError, match=r"one of q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q4_k, .*'f16'"):
        qmatmul_q8(vg.zeros(3, 256), vg.zeros(7, 512, dtype="u8"), qtype="f16")
    with pytest.raises(vg.DTypeError, match="ids must be an integer tensor"):
        qembedding(vg.zeros(3), w, qtype="q4_1")


def test_uint8_arrays_are_u8():
    raw = np.zeros(3, np.uint8)
    t = vg.from_numpy(raw)
    assert t.dtype.name == "u8" and np.shares_memory(t.numpy(), raw)
    assert as_dtype(np.uint8).name == "u8" and vg.from_numpy(np.zeros(3, np.int8)).dtype == vg.int8


def test_f64_activations():
    raw, x = weights("q4_1", 3, 64), x_values((2, 64)).astype(np.float64)
    w = dequantize(raw, "q4_1", (3, 64)).astype(np.float64)
    out = qmatmul(vg.from_numpy(x), _u8(raw), qtype="q4_1")
    assert out.dtype == vg.f64 and np.array_equal(out.numpy(), x @ w.T)
    q8 = qmatmul_q8(vg.from_numpy(x), _u8(raw), qtype="q4_1")
    assert q8.dtype == vg.f64
    np.testing.assert_allclose(q8.numpy(), x @ w.T, rtol=0.05, atol=0.05)


# ---------------------------------------------------------------- layers


def test_qlinear_views_the_bytes_and_picks_its_op():
    raw = weights("q4_1", 12, 64)
    layer = nn.QLinear(raw, "q4_1", (12, 64), activations="q8")
    assert layer.weight.dtype.name == "u8" and np.shares_memory(layer.weight.numpy(), raw)
    assert list(layer.parameters()) == [] and set(layer.state_dict()) == {"weight"}
    x = vg.from_numpy(x_values((2, 64)))
    np.testing.assert_array_equal(layer(x).numpy(), qmatmul_q8(x, layer.weight, qtype="q4_1").numpy())
    plain = nn.QLinear(raw, "q4_1", (12, 64))
    np.testing.assert_array_equal(plain(x).numpy(), qmatmul(x, plain.weight, qtype="q4_1").numpy())
    k_quant = nn.QLinear(weights("q6_k", 3, 256), "q6_k", (3, 256), activations="q8")  # q8_K activations
    y = vg.from_numpy(x_values((256,)))
    np.testing.assert_array_equal(k_quant(y).numpy(), qmatmul_q8(y, k_quant.weight, qtype="q6_k").numpy())
    assert "qtype=q4_1" in repr(layer)


def test_qlayers_check_their_bytes():
    with pytest.raises(ValueError, match=r"q4_1 weight of shape \(12, 64\) is u8 bytes of shape \(12, 40\)"):
        nn.QLinear(np.zeros((12, 36), np.uint8), "q4_1", (12, 64))
    with pytest.raises(ValueError, match="activations must be 'f32' or 'q8'"):
        nn.QLinear(np.zeros((12, 40), np.uint8), "q4_1", (12, 64), activations="q4")
    with pytest.raises(ValueError, match="multiples of 32"):
        nn.QEmbedding(np.zeros((2, 40), np.uint8), "q4_1", (2, 70))


def test_quantized_state_round_trips_through_a_checkpoint(tmp_path):
    raw = weights("q4_1", 4, 64)
    vg.save(nn.QLinear(raw, "q4_1", (4, 64)).state_dict(), tmp_path / "q.safetensors")
    weight = vg.load(tmp_path / "q.safetensors")["weight"]
    assert weight.dtype.name == "u8" and np.array_equal(weight.numpy(), raw)


def test_qembedding_layer_and_abstract_mode():
    raw = weights("q8_0", 10, 64)
    emb = nn.QEmbedding(raw, "q8_0", (10, 64))
    np.testing.assert_array_equal(emb(vg.tensor([3, 9])).numpy(), dequantize(raw, "q8_0", (10, 64))[[3, 9]])
    with vg.abstract():
        layer = nn.QLinear(raw, "q8_0", (10, 64), activations="q8")
    assert str(vg.check(layer, vg.spec([vg.dims("b"), 64]))) == "f32[b, 10]"


# ---------------------------------------------------------------- cpu kernels


def _cases() -> list[tuple[np.ndarray, np.ndarray]]:
    """x and w pairs: sizes with row counts not a multiple of 4, batches, and special activations."""
    rng = np.random.default_rng(3)
    x = x_values((5, 96), 4)
    x[0, :32] = 0.0  # a zero block
    x[1, 40] = np.inf  # a block with an infinity, and one with a NaN: NaN outputs
    x[2, 70] = np.nan
    x[3, :32] = rng.uniform(-1e-30, 1e-30, 32)  # tiny and huge scales
    x[4, 32:64] *= 1e30
    return [(x_values((1, 64)), 13), (x_values((3, 256), 2), 33), (x, 7), (x_values((0, 64)), 5)]


@needs_cc
@pytest.mark.parametrize("qtype", Q8_QTYPES)
def test_cpu_qmatmul_q8_gives_the_reference_bits(qtype, monkeypatch):
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul_q8"], vg.f32)
    assert cpu.cpu.exactness("qmatmul_q8", "f32").is_exact
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)  # bands of a row or two: every split is tried
    for x, n in _cases():
        raw = weights(qtype, n, x.shape[-1])
        with np.errstate(all="ignore"):
            want = qmatmul_q8.reference(x, raw, qtype)
        for threads in (1, 2, 3):
            vg.set_threads(threads)
            try:
                got = kernel(x, raw, qtype=qtype)
            finally:
                vg.set_threads(1)
            assert got.dtype == np.float32 and got.shape == want.shape
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{threads}")


@needs_cc
@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_cpu_qembedding_gives_the_reference_bits(qtype, small_chunks):
    """Rows at ids of any integer dtype and shape (0-d, repeated, the last row), the SIMD and the
    portable paths, 1-3 threads; an id out of range is the reference's IndexError."""
    kernel = cpu.cpu.native(vg.REGISTRY["qembedding"], vg.f32)
    raw = weights(qtype, 37, 512)
    cases = [np.array([[4, 0, 36], [2, 2, 1]]), np.array(5, np.int32), np.arange(37, dtype=np.uint8)]
    for simd in cpu_quant.PATHS:
        cpu_quant.path(simd)
        for ids in [*cases, np.zeros((0, 2), np.int64)]:
            want = qembedding.reference(ids, raw, qtype)
            for threads in (1, 2, 3):
                vg.set_threads(threads)
                got = kernel(ids, raw, qtype=qtype)
                assert got.shape == want.shape and got.dtype == np.float32
                assert got.tobytes() == want.tobytes(), (qtype, simd, ids.shape, threads)
    vg.set_threads(1)
    cpu_quant.simd(True)
    with pytest.raises(IndexError):
        kernel(np.array([3, 37]), raw, qtype=qtype)


@needs_cc
@pytest.mark.parametrize("qtype", BLOCK_QTYPES)
def test_cpu_qmatmul_is_within_its_bound(qtype, monkeypatch):
    kernel = cpu.cpu.native(vg.REGISTRY["qmatmul"], vg.f32)
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)
    cases = [(x_values((1, 256)), 13), (x_values((3, 512), 2), 9), (x_values((2, 3, 1536), 5), 11)]
    for x, n in cases if FORMATS[qtype].block == 256 else [*_cases()[:2], cases[2]]:
        raw = weights(qtype, n, x.shape[-1])
        want = qmatmul.reference(x, raw, qtype)
        w = dequantize(raw, qtype, (n, x.shape[-1])).astype(np.float64)
        s = np.abs(x.astype(np.float64)) @ np.abs(w).T
        bound = 2.0**-24 * np.abs(want) + 2 * x.shape[-1] * 2.0**-53 * s
        outs = []
        for path in cpu_quant.PATHS:  # every vector path and thread count: the same bits
            for threads in (1, 2, 3):
                vg.set_threads(threads)
                cpu_quant.path(path)
                try:
                    outs.append(kernel(x, raw, qtype=qtype))
                finally:
                    vg.set_threads(1)
                    cpu_quant.simd(True)
        with np.errstate(invalid="ignore"):
            assert (np.abs(outs[0] - want) <= bound).all()
        for out in outs[1:]:
            np.testing.assert_array_equal(out.view(np.uint32), outs[0].view(np.uint32))


@needs_cc
@pytest.mark.parametrize("qtype", Q8_QTYPES)
def test_rms_norm_qmatmul_q8_gives_the_norm_then_the_product(qtype, monkeypatch):
    """The fused op's kernel: the bits of rms_norm, then qmatmul_q8 (its reference), for every thread
    count; QLinear.normed runs it (one op) on 8-bit activations and the two ops on f32 ones."""
    kernel = cpu.cpu.native(vg.REGISTRY["rms_norm_qmatmul_q8"], vg.f32)
    assert cpu.cpu.exactness("rms_norm_qmatmul_q8", "f32").is_exact
    monkeypatch.setattr(cpu_quant, "MIN_BAND_BYTES", 1)
    norm = nn.RMSNorm(256, eps=1e-5)
    norm.weight = vg.from_numpy(np.random.default_rng(4).uniform(-2, 2, 256).astype(np.float32))
    raw, x = weights(qtype, 21, 256), vg.from_numpy(x_values((3, 256)) * 40)
    with vg.backend("reference"):
        want = qmatmul_q8(norm(x), _u8(raw), qtype=qtype).numpy()
        assert np.array_equal(
            rms_norm_qmatmul_q8(x, norm.weight, _u8(raw), qtype=qtype, eps=1e-5).numpy(), want
        )
    for threads in (1, 2, 3):
        vg.set_threads(threads)
        try:
            got = kernel(x.numpy(), norm.weight.numpy(), raw, qtype=qtype, eps=1e-5)
        finally:
            vg.set_threads(1)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=f"{threads}")
    with vg.backend("cpu"):
        layer = nn.QLinear(raw, qtype, (21, 256), activations="q8")
        np.testing.assert_array_equal(layer.normed(x, norm).numpy(), want)
        f32 = nn.QLinear(raw, qtype, (21, 256), activations="f32")
        np.testing.assert_array_equal(f32.normed(x, norm).numpy(), f32(norm(x)).numpy())


@needs_cc
def test_cpu_kernels_take_views_and_fall_back_for_other_dtypes():
    raw = weights("q4_0", 6, 128)
    x = x_values((4, 256))[:, ::2]  # a strided view
    with vg.backend("cpu"):
        got = qmatmul_q8(vg.from_numpy(x), _u8(raw), qtype="q4_0").numpy()
        y = x_values((2, 128)).astype(np.float64)  # f64 activations: the reference
        f64_out = qmatmul(vg.from_numpy(y), _u8(raw), qtype="q4_0").numpy()
    np.testing.assert_array_equal(got, qmatmul_q8.reference(np.ascontiguousarray(x), raw, "q4_0"))
    np.testing.assert_array_equal(f64_out, qmatmul.reference(y, raw, "q4_0"))


@needs_cc
@pytest.mark.parametrize("qtype", [*Q8_QTYPES, "q5_0", "q5_1", "q4_k", "q5_k", "q6_k"])
def test_portable_and_simd_paths_give_the_same_bits(qtype):
    """Every vector path this machine has (AVX-512, AVX2) against the portable one, decode (one row of x)
    and prompt (several)."""
    if not cpu_quant.simd():
        pytest.skip("this CPU has no AVX2: only the portable paths run here")
    x, n = _cases()[2] if qtype in Q8_QTYPES else (x_values((3, 512)), 9)
    raw = weights(qtype, n, x.shape[-1])
    names = ("qmatmul_q8", "qmatmul") if qtype in Q8_QTYPES else ("qmatmul",)
    kernels = [cpu.cpu.native(vg.REGISTRY[name], vg.f32) for name in names]
    outs = {}
    try:
        for path in cpu_quant.PATHS:
            taken = cpu_quant.path(path)
            outs[taken] = [k(rows, raw, qtype=qtype) for k in kernels for rows in (x, x[:1])]
    finally:
        cpu_quant.simd(True)
    assert "scalar" in outs and "avx2" in outs
    for path, results in outs.items():
        for a, b in zip(results, outs["scalar"]):
            np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32), err_msg=path)


@needs_cc
def test_every_block_format_has_a_kernel():
    """qmatmul and qembedding run C for every format (a format missing from QTYPES ran the reference)."""
    assert set(cpu_quant.QTYPES) == set(BLOCK_QTYPES)
