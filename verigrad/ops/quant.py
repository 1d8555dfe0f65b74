"""Quantized weights: the GGML block formats, and the ops that use them without a dequantized copy.

A quantized matrix [N, K] is stored as u8 [N, K / block * nbytes]: each row is K / block blocks of
`nbytes` bytes (llama.cpp's layouts). `dequantize` (through `FORMATS[qtype].decode`) is the one
definition of what the bytes mean; every kernel is measured against it.

The ops: `qmatmul` (x @ dequantize(w).T; f32 x summed in f32 in a fixed order, `lane_dot`), `qmatmul_q8`
(llama.cpp's scheme: x quantized to 8 bits per block of 32, integer block dots; its order of float
operations is part of its definition, so kernels give its very bits), `rms_norm_qmatmul_q8` (rms_norm,
then qmatmul_q8), `qmatmul_q8_group` and `rms_norm_qmatmul_q8_group` (several weights on one input, x
quantized once: a fused projection whose parts mix formats), `qembedding` (dequantized rows) and `dequantize`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..dtypes import DType, f32, f64, u8
from ..errors import DTypeError, ShapeError
from ..shapes import Dim, DimLike, exact_div, shape_text
from ._op import Op, Sample
from ._samples import uniform


@dataclass(frozen=True)
class QFormat:
    """A block format: `block` values stored in `nbytes` bytes; `decode(u8[n, nbytes]) -> f32[n, block]`;
    `scales`: the byte offsets of its f16 scales in a block."""

    name: str
    block: int
    nbytes: int
    decode: Callable[[np.ndarray], np.ndarray]
    scales: tuple[int, ...] = ()

    def row_bytes(self, k: int) -> int:
        """Bytes of one row of k values (k a multiple of `block`)."""
        return k // self.block * self.nbytes


def _f16(blocks: np.ndarray, at: int) -> np.ndarray:
    """The little-endian f16 at byte `at` of each block, as f32 [n, 1]."""
    return blocks[:, at : at + 2].copy().view("<f2").astype(np.float32)


def _nibbles(qs: np.ndarray) -> np.ndarray:
    """16 bytes -> 32 values: the low nibbles are values 0..15, the high nibbles 16..31."""
    return np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32)


def _q8_0(b: np.ndarray) -> np.ndarray:
    return _f16(b, 0) * b[:, 2:].view(np.int8).astype(np.float32)


def _q4_0(b: np.ndarray) -> np.ndarray:
    return _f16(b, 0) * (_nibbles(b[:, 2:]) - np.float32(8))


def _q4_1(b: np.ndarray) -> np.ndarray:
    return _f16(b, 0) * _nibbles(b[:, 4:]) + _f16(b, 2)


def _k4_scales(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q4_K's 12 scale bytes -> 8 six-bit scales and 8 six-bit mins per block."""
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 0x0F) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    mn = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    return sc.astype(np.float32), mn.astype(np.float32)


def _bits(b: np.ndarray) -> np.ndarray:
    """u8[n, m] -> u8[n, 8, m]: [:, i, j] is bit i of byte j."""
    return (b[:, None, :] >> np.arange(8, dtype=np.uint8)[:, None]) & 1


def _k_affine(b: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Q4_K/Q5_K: (d * sc) * q - dmin * m per sub-block of 32, q [n, 8, 32] (f32)."""
    d, dmin = _f16(b, 0), _f16(b, 2)
    sc, mn = _k4_scales(b[:, 4:16])
    return ((d * sc)[:, :, None] * q - (dmin * mn)[:, :, None]).reshape(-1, 256)


def _k_nibbles(qs: np.ndarray) -> np.ndarray:
    """128 bytes -> [n, 8, 32]: 4 chunks of 32 bytes, sub-block 2c the low nibbles of chunk c, 2c + 1 the
    high."""
    qs = qs.reshape(-1, 4, 32)
    return np.stack([qs & 0x0F, qs >> 4], axis=2).reshape(-1, 8, 32)


def _q4_k(b: np.ndarray) -> np.ndarray:
    return _k_affine(b, _k_nibbles(b[:, 16:]).astype(np.float32))


def _q5_k(b: np.ndarray) -> np.ndarray:
    # sub-block j's fifth bit is bit j of qh's 32 bytes
    return _k_affine(b, (_k_nibbles(b[:, 48:]) | (_bits(b[:, 16:48]) << 4)).astype(np.float32))


def _five(qh: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """Q5_0/Q5_1: 4 bytes of fifth bits (value j's is bit j of the little-endian u32) and 16 bytes of
    nibbles -> 32 values in 0..31 (f32)."""
    high = np.unpackbits(qh, axis=1, bitorder="little")
    return _nibbles(qs) + (high << 4).astype(np.float32)


def _q5_0(b: np.ndarray) -> np.ndarray:
    return _f16(b, 0) * (_five(b[:, 2:6], b[:, 6:]) - np.float32(16))


def _q5_1(b: np.ndarray) -> np.ndarray:
    return _f16(b, 0) * _five(b[:, 4:8], b[:, 8:]) + _f16(b, 2)


def _crumbs(qs: np.ndarray) -> np.ndarray:
    """64 bytes -> [n, 16, 16] 2-bit values: two chunks of 32 bytes, each 4 shifts (0, 2, 4, 6) of 32."""
    q = (qs.reshape(-1, 2, 1, 32) >> np.array([0, 2, 4, 6], np.uint8)[:, None]) & 3
    return q.reshape(-1, 16, 16)


def _q2_k(b: np.ndarray) -> np.ndarray:
    sc, d, dmin = b[:, 0:16], _f16(b, 80), _f16(b, 82)
    q = _crumbs(b[:, 16:80]).astype(np.float32)
    low, high = (sc & 0x0F).astype(np.float32), (sc >> 4).astype(np.float32)
    return ((d * low)[:, :, None] * q - (dmin * high)[:, :, None]).reshape(-1, 256)


def _q3_k_ints(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Q3_K's 16 scales (i32 [n, 16]) and 256 values (i32 [n, 16, 16], in -4..3)."""
    s = b[:, 96:108]
    # 16 six-bit scales: low 4 bits from bytes 0..7 (low nibbles, then high), high 2 bits of scale i
    # from byte 8 + i % 4 at shift 2 * (i // 4)
    low = np.concatenate([s[:, 0:8] & 0x0F, s[:, 0:8] >> 4], axis=1)
    high = (s[:, None, 8:12] >> np.array([0, 2, 4, 6], np.uint8)[:, None]).reshape(-1, 16) & 3
    # a value is its 2 bits less 4 where its bit of hmask is clear
    clear = (_bits(b[:, 0:32]) ^ 1).reshape(-1, 16, 16)
    q = _crumbs(b[:, 32:96]).astype(np.int32) - (clear.astype(np.int32) << 2)
    return (low | (high << 4)).astype(np.int32) - 32, q


def _q3_k(b: np.ndarray) -> np.ndarray:
    scale, q = _q3_k_ints(b)
    return ((_f16(b, 108) * scale.astype(np.float32))[:, :, None] * q.astype(np.float32)).reshape(-1, 256)


IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.float32)


def _iq4_nl(b: np.ndarray) -> np.ndarray:
    return _f16(b, 0) * IQ4_VALUES[_nibbles(b[:, 2:]).astype(np.intp)]


def _iq4_xs_ints(b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """IQ4_XS's 8 scales (i32 [n, 8]) and the table indices of its 256 values ([n, 8, 32])."""
    high = b[:, 2:4].copy().view("<u2")  # [n, 1]
    low = np.stack([b[:, 4:8] & 0x0F, b[:, 4:8] >> 4], axis=2).reshape(-1, 8)  # sub-block j: j // 2, j % 2
    high = (high >> np.arange(0, 16, 2, dtype=np.uint16)) & 3
    q = np.concatenate([b[:, 8:].reshape(-1, 8, 16) & 0x0F, b[:, 8:].reshape(-1, 8, 16) >> 4], axis=2)
    return (low | (high << 4)).astype(np.int32) - 32, q.astype(np.intp)


def _iq4_xs(b: np.ndarray) -> np.ndarray:
    scale, q = _iq4_xs_ints(b)
    return ((_f16(b, 0) * scale.astype(np.float32))[:, :, None] * IQ4_VALUES[q]).reshape(-1, 256)


def _q6_k_ints(b: np.ndarray) -> np.ndarray:
    """Q6_K's 256 values (i8 [n, half, quarter, 32], in -32..31)."""
    ql = b[:, 0:128].reshape(-1, 2, 64)
    qh = b[:, 128:192].reshape(-1, 2, 1, 32)
    low = np.stack([ql[:, :, :32] & 0x0F, ql[:, :, 32:] & 0x0F, ql[:, :, :32] >> 4, ql[:, :, 32:] >> 4], 2)
    high = (qh >> np.array([0, 2, 4, 6], np.uint8)[:, None]) & 3  # [n, 2, 4, 32]
    return (low | (high << 4)).astype(np.int8) - np.int8(32)


def _q6_k(b: np.ndarray) -> np.ndarray:
    sc = b[:, 192:208].view(np.int8).astype(np.float32).reshape(-1, 2, 8)
    d = _f16(b, 208)
    q = _q6_k_ints(b)  # [n, half, quarter, 32]
    scale = d[:, :, None] * sc  # [n, 2, 8]: 16-value groups, two per quarter
    q = q.reshape(-1, 2, 8, 16).astype(np.float32)
    return (scale[:, :, :, None] * q).reshape(-1, 256)


def _f32(b: np.ndarray) -> np.ndarray:
    return b.view("<f4").astype(np.float32)


def _f16_values(b: np.ndarray) -> np.ndarray:
    return b.view("<f2").astype(np.float32)


def _bf16(b: np.ndarray) -> np.ndarray:
    return (b.view("<u2").astype(np.uint32) << 16).view(np.float32)


FORMATS: dict[str, QFormat] = {
    f.name: f
    for f in (
        QFormat("f32", 1, 4, _f32),
        QFormat("f16", 1, 2, _f16_values),
        QFormat("bf16", 1, 2, _bf16),
        QFormat("q8_0", 32, 34, _q8_0, (0,)),
        QFormat("q4_0", 32, 18, _q4_0, (0,)),
        QFormat("q4_1", 32, 20, _q4_1, (0, 2)),
        QFormat("q5_0", 32, 22, _q5_0, (0,)),
        QFormat("q5_1", 32, 24, _q5_1, (0, 2)),
        QFormat("iq4_nl", 32, 18, _iq4_nl, (0,)),
        QFormat("q2_k", 256, 84, _q2_k, (80, 82)),
        QFormat("q3_k", 256, 110, _q3_k, (108,)),
        QFormat("q4_k", 256, 144, _q4_k, (0, 2)),
        QFormat("q5_k", 256, 176, _q5_k, (0, 2)),
        QFormat("q6_k", 256, 210, _q6_k, (208,)),
        QFormat("iq4_xs", 256, 136, _iq4_xs, (0,)),
    )
}
# the block formats the quantized ops take (the float ones are plain tensors)
BLOCK_QTYPES = tuple(name for name, f in FORMATS.items() if f.block > 1)


def qformat(qtype: str) -> QFormat:
    """The format named `qtype`, or ValueError listing the known ones."""
    try:
        return FORMATS[qtype]
    except KeyError:
        raise ValueError(f"unknown quantization {qtype!r}; known: {', '.join(FORMATS)}") from None


def dequantize(raw: np.ndarray, qtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """The f32 values of `shape` that the bytes `raw` (u8, any shape, rows in order) hold in `qtype`."""
    fmt = qformat(qtype)
    count = int(np.prod(shape, dtype=np.int64))
    expected = count // fmt.block * fmt.nbytes
    if count % fmt.block or raw.nbytes != expected:
        raise ValueError(f"{qtype} values of shape {tuple(shape)} take {expected} bytes, got {raw.nbytes}")
    with np.errstate(invalid="ignore", over="ignore"):  # an infinite scale times 0 is NaN, as llama.cpp's
        return fmt.decode(np.ascontiguousarray(raw).reshape(-1, fmt.nbytes)).reshape(shape)


# the ops ------------------------------------------------------------------------------------------
# Formats `qmatmul_q8` takes: 32-value blocks whose value is d * q (+ m), q an integer (as llama.cpp's
# vec_dot_*_q8_0 / _q8_1 take them against 8-bit activations), and the 256-value ones, which llama.cpp
# multiplies with activations quantized per 256 values (its q8_K: `quantize_q8_k`).
Q8_32_QTYPES = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl")
Q8K_QTYPES = ("q4_k", "q5_k", "q6_k", "q2_k", "q3_k", "iq4_xs")
Q8_QTYPES = Q8_32_QTYPES + Q8K_QTYPES
# the offset of the integers q8_weight gives: a value is d * (q - offset) (+ m)
_Q8_OFFSET = {"q4_0": 8, "q5_0": 16}
Q8_BLOCK = 32  # activations are quantized in blocks of this many values


def _format(qtype: str, allowed: tuple[str, ...] = BLOCK_QTYPES) -> QFormat:
    if qtype not in allowed:
        raise DTypeError(f"qtype must be one of {', '.join(allowed)}, got {qtype!r}")
    return FORMATS[qtype]


def _row_values(fmt: QFormat, row_bytes: DimLike, what: str) -> DimLike:
    """The values in a row of `row_bytes` bytes of `fmt` blocks."""
    blocks = exact_div(row_bytes, fmt.nbytes)
    if blocks is None:
        raise ShapeError(
            f"{what} rows of {row_bytes} bytes are not whole {fmt.name} blocks ({fmt.nbytes} bytes)"
        )
    return blocks * fmt.block


def _qmatmul_shape(x: tuple, w: tuple, qtype: str, allowed: tuple[str, ...] = BLOCK_QTYPES) -> tuple:
    fmt = FORMATS.get(qtype)
    if (  # the common case, concrete and right, in a few integer operations (a decode step makes hundreds)
        qtype in allowed
        and len(w) == 2
        and x
        and type(x[-1]) is int
        and type(w[1]) is int
        and x[-1] % fmt.block == 0
        and x[-1] // fmt.block * fmt.nbytes == w[1]
    ):
        return (*x[:-1], w[0])
    fmt = _format(qtype, allowed)
    if len(w) != 2:
        raise ShapeError(f"the weight must be [N, row bytes] (one row per output), got {shape_text(w)}")
    if not x:
        raise ShapeError("x must have at least one dimension (its last is K)")
    k = x[-1]
    if exact_div(k, fmt.block) is None:
        raise ShapeError(
            f"K = {k} (x's last dimension) must be a multiple of the {qtype} block size {fmt.block}"
            + (f" (declare it with dims(..., multiple_of={fmt.block}))" if isinstance(k, Dim) else "")
        )
    values = _row_values(fmt, w[1], "the weight's")
    if values != k:
        raise ShapeError(
            f"the weight's rows hold {values} values ({w[1]} bytes of {qtype}) but x's last dimension is "
            f"K = {k}; rule x[..., K], w[N, K / {fmt.block} * {fmt.nbytes}] -> [..., N]"
        )
    return (*x[:-1], w[0])


def _qmatmul_dtype(x: DType, w: DType, qtype: str) -> DType:
    if x is not f32 and x is not f64:
        raise DTypeError(f"x must be f32 or f64, got {x.name}")
    if w is not u8:
        raise DTypeError(f"the weight must be u8 (its blocks' bytes), got {w.name}")
    return x


LANES = 32  # qmatmul's f32 partial sums: lane j takes the products k = j (mod LANES)
_MAX_SUMS = 1 << 21  # partial sums the f32 reference holds at once (it takes the weight's rows in groups)
_F32_MAX = np.finfo(np.float32).max
_OVERFLOW = 2.0**128 - 2.0**103  # the f32 rounding threshold to infinity: max + half its ulp


def fma32(a: np.ndarray, p: np.ndarray) -> np.ndarray:
    """f32 a + f64 p (an exact product of two f32 values: 48 bits) rounded once to f32, as a fused
    multiply-add rounds: s = a + p in f64 and its exact error e (Knuth's TwoSum); s rounded to f32 is the
    answer except where s falls exactly halfway between two f32 values and e is not 0, where e decides."""
    a64 = a.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        s = a64 + p
        bb = s - a64
        e = (a64 - (s - bb)) + (p - bb)  # NaN where s is infinite or NaN: no correction there
        r = s.astype(np.float32)
        d = s - r.astype(np.float64)
        other = np.nextafter(r, np.where(d > 0, np.float32(np.inf), np.float32(-np.inf)))
        half = (other.astype(np.float64) - r.astype(np.float64)) * 0.5
        finite = np.isfinite(r)
        push = finite & (d != 0) & (d == half) & (e != 0) & ((e > 0) == (d > 0))
        # exactly at the overflow threshold (rounded to infinity, ties to even) with e toward zero
        back = ~finite & (np.abs(s) == _OVERFLOW) & (e * s < 0)
    r = np.where(push, other, r)
    return np.where(back, np.copysign(np.float32(_F32_MAX), r), r)


def lane_dot(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    """f32[..., N]: the f32 products of x f32[..., K] and the rows of v f32[N, K] (K a multiple of LANES) as
    qmatmul sums them: partial sum j (of LANES, from +0.0) takes k = j, j + LANES, ... in order, each step a
    fused multiply-add (`fma32`); then s[j] = s[j] + s[j + h] for h = 16, 8, 4, 2, 1 (f32 additions). A NaN
    result is the quiet NaN 0x7fc00000 (which NaN a sum ends in otherwise depends on its operands' order)."""
    k = x.shape[-1]
    xs = x.reshape(-1, k).astype(np.float64)
    n, rows = v.shape[0], xs.shape[0]
    out = np.empty((rows, n), np.float32)
    group = max(1, _MAX_SUMS // (LANES * max(rows, 1)))
    for n0 in range(0, n, group):
        vs = v[n0 : n0 + group].astype(np.float64)
        acc = np.zeros((rows, vs.shape[0], LANES), np.float32)
        for i in range(0, k, LANES):
            acc = fma32(acc, xs[:, None, i : i + LANES] * vs[None, :, i : i + LANES])
        h = LANES // 2
        while h:
            acc = acc[..., :h] + acc[..., h : 2 * h]
            h //= 2
        out[:, n0 : n0 + group] = acc[..., 0]
    out[np.isnan(out)] = np.float32(np.nan)
    return out.reshape((*x.shape[:-1], n))


def _qmatmul_reference(x: np.ndarray, w: np.ndarray, qtype: str) -> np.ndarray:
    k = x.shape[-1]
    weight = dequantize(w, qtype, (w.shape[0], k))
    if x.dtype == np.float32:
        return lane_dot(x, weight)
    return np.matmul(x.astype(np.float64), weight.astype(np.float64).T).astype(x.dtype)


def random_blocks(rng: np.random.Generator, qtype: str, rows: int, k: int) -> np.ndarray:
    """u8[rows, row bytes] of random blocks whose f16 scales are finite (in [-0.1, 0.1])."""
    fmt = FORMATS[qtype]
    raw = rng.integers(0, 256, (rows, fmt.row_bytes(k)), dtype=np.uint8)
    blocks = raw.reshape(-1, fmt.nbytes)
    for at in fmt.scales:
        scales = rng.uniform(-0.1, 0.1, len(blocks)).astype("<f2")
        blocks[:, at : at + 2] = scales.view(np.uint8).reshape(-1, 2)
    return raw


def _qmatmul_samples(qtypes: tuple[str, ...]) -> Callable[[np.random.Generator], list[Sample]]:
    """x of several ranks (and none of its rows) against 4 random rows of each format."""

    def samples(rng: np.random.Generator) -> list[Sample]:
        shapes = [(3, 1), (1,), (2, 1, 1)] + [(i % 2 + 1,) for i in range(1, len(qtypes))] + [(0, 1)]
        names = [qtypes[0]] * 3 + list(qtypes[1:]) + [qtypes[0]]
        out = []
        for shape, qtype in zip(shapes, names):
            k = FORMATS[qtype].block * shape[-1]
            x = uniform(rng, (*shape[:-1], k))
            out.append(Sample((x, random_blocks(rng, qtype, 4, k)), {"qtype": qtype}))
        return out

    return samples


def _dequantize_shape(w: tuple, qtype: str) -> tuple:
    if not w:
        raise ShapeError("the weight must have at least one dimension (its last is the row bytes)")
    return (*w[:-1], _row_values(_format(qtype), w[-1], "the weight's"))


def _dequantize_dtype(w: DType, qtype: str) -> DType:
    if w is not u8:
        raise DTypeError(f"the weight must be u8 (its blocks' bytes), got {w.name}")
    return f32


dequantize_op = Op(
    "dequantize",
    shape=_dequantize_shape,
    dtype=_dequantize_dtype,
    reference=lambda w, qtype: dequantize(w, qtype, _dequantize_shape(w.shape, qtype)),
    samples=lambda rng: [
        Sample((random_blocks(rng, q, 3, FORMATS[q].block),), {"qtype": q}) for q in BLOCK_QTYPES
    ],
    exact=True,
    doc="The f32 values of quantized rows (u8 blocks of `qtype`): u8[..., B] -> f32[..., B / block bytes * "
    "block].",
)

qmatmul = Op(
    "qmatmul",
    shape=_qmatmul_shape,
    dtype=_qmatmul_dtype,
    reference=_qmatmul_reference,
    vjp=lambda g, out, x, w, qtype: (g @ dequantize_op(w, qtype=qtype).cast(g.dtype), None),
    samples=_qmatmul_samples(BLOCK_QTYPES),
    exact=True,
    doc="x @ dequantize(w).T for a quantized weight w (u8 blocks of `qtype`), as nn.Linear does: "
    "f32[..., K], u8[N, K / block * block bytes] -> f32[..., N] (or f64). f32: each output in 32 f32 "
    "partial sums of fused multiply-adds in a fixed order, folded in a fixed tree (`lane_dot`), so every "
    "kernel gives the reference's bits; f64: summed in f64 (like matmul). Differentiable in x (the weight "
    "is constant).",
)


def quantize_q8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x[..., K] (f32 or f64) -> (q int8[..., K/32, 32], d f64[..., K/32], s i64[..., K/32]): x ~ d * q per
    block of 32, d = max|x| / 127 and q = x * (1 / d) rounded to the nearest integer (ties to even), both
    in x's dtype; s = sum(q). A block whose 1 / d overflows (max|x| < 127 / the dtype's largest value)
    gets d = 0 and q = 0, as a block of zeros; a block holding an infinity or a NaN gets d = NaN (and q =
    0), so its outputs are NaN."""
    blocks = np.ascontiguousarray(x).reshape((*x.shape[:-1], x.shape[-1] // Q8_BLOCK, Q8_BLOCK))
    bits = np.int32 if blocks.dtype.itemsize == 4 else np.int64
    amax_bits = (blocks.view(bits) & np.iinfo(bits).max).max(axis=-1, initial=0)  # NaN > inf > finite
    finite = amax_bits < np.array(np.inf, blocks.dtype).view(bits)
    d = np.where(finite, amax_bits.view(blocks.dtype), 0) / blocks.dtype.type(127)
    with np.errstate(over="ignore"):
        inverse = np.divide(blocks.dtype.type(1), d, out=np.zeros_like(d), where=d != 0)
    live = np.isfinite(inverse)
    d, inverse = np.where(live, d, 0), np.where(live, inverse, 0)
    q = np.rint(np.where(finite[..., None], blocks, 0) * inverse[..., None]).astype(np.int8)
    return q, np.where(finite, d.astype(np.float64), np.nan), q.sum(axis=-1, dtype=np.int64)


def q8_weight(w: np.ndarray, qtype: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """The integers of a weight u8[N, B] of a Q8_QTYPES format: (q i32[N, nb, 32], d f64[N, nb], m f64[N, nb]
    or None); a value is d * q (+ m). Q4_0's and Q5_0's q are their raw 4 and 5 bits: their values are
    d * (q - 8) and d * (q - 16); IQ4_NL's are its table's values."""
    fmt = FORMATS[qtype]
    rows, nb = w.shape[0], w.shape[1] // fmt.nbytes
    b = np.ascontiguousarray(w).reshape(rows * nb, fmt.nbytes)
    d = _f16(b, 0).astype(np.float64).reshape(rows, nb)
    m = _f16(b, 2).astype(np.float64).reshape(rows, nb) if qtype in ("q4_1", "q5_1") else None
    if qtype == "q8_0":
        q = b[:, 2:].view(np.int8)
    elif qtype in ("q5_0", "q5_1"):
        at = 2 if qtype == "q5_0" else 4
        q = _five(b[:, at : at + 4], b[:, at + 4 :])
    else:
        q = np.concatenate([b[:, -16:] & 0x0F, b[:, -16:] >> 4], axis=-1)
        if qtype == "iq4_nl":
            q = IQ4_VALUES[q]
    return q.astype(np.int32).reshape(rows, nb, 32), d, m


Q8K_BLOCK = 256  # the 256-value formats' activations are quantized in blocks of this many values


def quantize_q8_k(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x[..., K] (f32 or f64) -> (q int8[..., K/256, 256], d f64[..., K/256], bsums i64[..., K/256, 16]),
    llama.cpp's q8_K (quantize_row_q8_K_ref), each step in x's dtype: per block of 256, max is the first
    value of the largest |x|, iscale = -127 / max, q = iscale * x rounded to the nearest integer (ties to
    even; |q| <= 127), d = 1 / iscale (so x ~ d * q), bsums the sums of q per 16 values. A block of zeros,
    or whose iscale overflows (|max| < 127 / the dtype's largest value), gets d = 0 and q = 0; a block
    holding an infinity or a NaN gets d = NaN (and q = 0), so its outputs are NaN."""
    blocks = np.ascontiguousarray(x).reshape((*x.shape[:-1], x.shape[-1] // Q8K_BLOCK, Q8K_BLOCK))
    dt = blocks.dtype.type
    finite = np.isfinite(blocks).all(axis=-1)
    clean = np.where(finite[..., None], blocks, 0)
    peak = np.take_along_axis(clean, np.abs(clean).argmax(axis=-1)[..., None], axis=-1)[..., 0]
    with np.errstate(divide="ignore", over="ignore"):
        iscale = np.divide(dt(-127), peak, out=np.zeros_like(peak), where=peak != 0)
    live = np.isfinite(iscale) & (iscale != 0)
    iscale = np.where(live, iscale, 0)
    q = np.rint(clean * iscale[..., None]).astype(np.int8)
    d = np.divide(dt(1), iscale, out=np.zeros_like(iscale), where=live).astype(np.float64)
    bsums = q.reshape((*q.shape[:-1], 16, 16)).sum(axis=-1, dtype=np.int64)
    return q, np.where(finite, d, np.nan), bsums


def q8k_weight(
    w: np.ndarray, qtype: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None]:
    """The integers of a weight u8[N, B] of a Q8K_QTYPES format: (q i32[N, nb, 256], scale i32[N, nb, 16],
    mins i32[N, nb, 16] or None, d f64[N, nb], dmin f64[N, nb] or None), one scale and min per 16 values:
    value i of block b is d * scale[i // 16] * q[i] (- dmin * mins[i // 16])."""
    fmt = FORMATS[qtype]
    rows, nb = w.shape[0], w.shape[1] // fmt.nbytes
    b = np.ascontiguousarray(w).reshape(rows * nb, fmt.nbytes)
    mins, dmin = None, None
    if qtype in ("q4_k", "q5_k"):
        d, dmin = _f16(b, 0), _f16(b, 2)
        q = _k_nibbles(b[:, 16:]) if qtype == "q4_k" else _k_nibbles(b[:, 48:]) | (_bits(b[:, 16:48]) << 4)
        sc, mn = _k4_scales(b[:, 4:16])
        scale, mins = np.repeat(sc, 2, axis=1), np.repeat(mn, 2, axis=1)
    elif qtype == "q6_k":
        d, q, scale = _f16(b, 208), _q6_k_ints(b), b[:, 192:208].view(np.int8)
    elif qtype == "q2_k":
        sc, d, dmin = b[:, 0:16], _f16(b, 80), _f16(b, 82)
        q, scale, mins = _crumbs(b[:, 16:80]), sc & 0x0F, sc >> 4
    elif qtype == "q3_k":
        d, (scale, q) = _f16(b, 108), _q3_k_ints(b)
    else:  # iq4_xs
        d, (scale, nibbles) = _f16(b, 0), _iq4_xs_ints(b)
        scale, q = np.repeat(scale, 2, axis=1), IQ4_VALUES[nibbles]

    def ints(a: np.ndarray, size: int) -> np.ndarray:
        return np.asarray(a).astype(np.int32).reshape(rows, nb, size)

    def scales(a: np.ndarray) -> np.ndarray:
        return a.astype(np.float64).reshape(rows, nb)

    return (
        ints(q, 256),
        ints(scale, 16),
        None if mins is None else ints(mins, 16),
        scales(d),
        None if dmin is None else scales(dmin),
    )


def _qmatmul_q8_k_reference(x: np.ndarray, w: np.ndarray, qtype: str) -> np.ndarray:
    """Per block b of 256: x quantized as llama.cpp's q8_K (`quantize_q8_k`), the exact integers
    sumi = sum_g scale_g * dot_g (dot_g the integer dot of group g's 16 values) and summ = sum_g mins_g *
    bsums_g, scaled in f64 as (d_w * d_x) * sumi (- (dmin_w * d_x) * summ for q2_k, q4_k and q5_k); the
    blocks' terms are added in order in f64, starting from +0.0, and the sum is rounded once to x's dtype."""
    qx, dx, bsums = quantize_q8_k(x)
    qw, scale, mins, dw, dmin = q8k_weight(w, qtype)
    lead, (n, nb) = qx.shape[:-2], dw.shape
    groups = qx.reshape((*lead, nb, 16, 16)).astype(np.int64)
    dots = np.einsum("...bgi,nbgi->...nbg", groups, qw.reshape(n, nb, 16, 16).astype(np.int64))
    sumi = (dots * scale).sum(axis=-1)  # exact: |sumi| < 2^31
    terms = (dw * dx[..., None, :]) * sumi
    if mins is not None:
        summ = (bsums[..., None, :, :] * mins).sum(axis=-1)
        terms = terms - (dmin * dx[..., None, :]) * summ
    acc = np.zeros(terms.shape[:-1])
    for b in range(nb):
        acc = acc + terms[..., b]
    return acc.astype(x.dtype)


def _qmatmul_q8_reference(x: np.ndarray, w: np.ndarray, qtype: str) -> np.ndarray:
    """Per block b of 32: the integer dot of x's and w's quantized values (exact), scaled in f64 as
    (d_w * d_x) * dot (+ m_w * (d_x * sum(q_x)) for q4_1 and q5_1); the blocks' terms are added in order in
    f64, starting from +0.0, and the sum is rounded once to x's dtype. The 256-value formats: see
    `_qmatmul_q8_k_reference`."""
    if qtype in Q8K_QTYPES:
        return _qmatmul_q8_k_reference(x, w, qtype)
    qx, dx, sx = quantize_q8(x)
    qw, dw, mw = q8_weight(w, qtype)
    dots = np.einsum("...bi,nbi->...nb", qx.astype(np.int32), qw).astype(np.int64)  # exact: |dot| < 2^20
    if qtype in _Q8_OFFSET:
        dots = dots - _Q8_OFFSET[qtype] * sx[..., None, :]
    scale = dw * dx[..., None, :]
    terms = scale * dots
    if mw is not None:
        terms = terms + mw * (dx * sx)[..., None, :]
    acc = np.zeros(terms.shape[:-1])
    for b in range(terms.shape[-1]):
        acc = acc + terms[..., b]
    return acc.astype(x.dtype)


qmatmul_q8 = Op(
    "qmatmul_q8",
    shape=lambda x, w, qtype: _qmatmul_shape(x, w, qtype, Q8_QTYPES),
    dtype=_qmatmul_dtype,
    reference=_qmatmul_q8_reference,
    samples=_qmatmul_samples(Q8_QTYPES),
    exact=True,
    doc="qmatmul with x quantized to 8 bits (as llama.cpp does): integer block dots, scaled and summed in "
    "f64 in block order; per block of 32 for q8_0, q4_0, q4_1, q5_0, q5_1 and iq4_nl weights (see "
    "`quantize_q8`), per block of 256 (llama.cpp's q8_K, see `quantize_q8_k`) for q4_k, q5_k, q6_k, q2_k, "
    "q3_k and iq4_xs weights.",
)


def _normed_shape(x: tuple, weight: tuple, w: tuple, qtype: str, eps: float) -> tuple:
    if not x or weight != (x[-1],):
        raise ShapeError(
            f"the norm's weight must be [K] (the size of x's last axis) for x of shape {shape_text(x)}, "
            f"got {shape_text(weight)}"
        )
    return _qmatmul_shape(x, w, qtype, Q8_QTYPES)


def _normed_dtype(x: DType, weight: DType, w: DType, qtype: str, eps: float) -> DType:
    if weight is not x:
        raise DTypeError(f"the norm's weight must have x's dtype {x.name}, got {weight.name}")
    return _qmatmul_dtype(x, w, qtype)


def _normed_decompose(x, weight, w, qtype: str, eps: float):
    from .composite.normalization import rms_norm  # the composite ops import this module's package

    return qmatmul_q8(rms_norm(x, weight, eps=eps), w, qtype=qtype)


def _normed_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for sample, eps in zip(_qmatmul_samples(Q8_QTYPES)(rng), (1e-5, 1e-6, 0.1, 1e-5, 1e-3, 1e-5) * 3):
        x, w = sample.args
        out.append(Sample((x, uniform(rng, x.shape[-1:]), w), {**sample.params, "eps": eps}))
    return out


rms_norm_qmatmul_q8 = Op(
    "rms_norm_qmatmul_q8",
    shape=_normed_shape,
    dtype=_normed_dtype,
    params=lambda x, weight, w, qtype, eps=1e-6: {"qtype": qtype, "eps": float(eps)},
    decompose=_normed_decompose,
    samples=_normed_samples,
    exact=False,
    differentiable=False,
    doc="qmatmul_q8(rms_norm(x, weight, eps), w, qtype) in one op (a Llama block's norm and the product "
    "it feeds: one kernel call in the decode step instead of two).",
)


def _group_shape(x: tuple, *ws: tuple, qtypes: tuple[str, ...]) -> tuple:
    if not ws or len(ws) != len(qtypes):
        raise ShapeError(f"one qtype per weight: got {len(ws)} weights and qtypes {qtypes!r}")
    total: DimLike = 0
    for w, qtype in zip(ws, qtypes):
        total = total + _qmatmul_shape(x, w, qtype, Q8_QTYPES)[-1]
    return (*x[:-1], total)


def _group_dtype(x: DType, *ws: DType, qtypes: tuple[str, ...]) -> DType:
    for w, qtype in zip(ws, qtypes):
        out = _qmatmul_dtype(x, w, qtype)
    return out


def _group_params(x, *ws, qtypes) -> dict:
    if isinstance(qtypes, str) or not all(isinstance(q, str) for q in qtypes):
        raise ValueError(f"qtypes must be a sequence of format names (one per weight), got {qtypes!r}")
    return {"qtypes": tuple(qtypes)}


def _group_reference(x: np.ndarray, *ws: np.ndarray, qtypes: tuple[str, ...]) -> np.ndarray:
    """Each weight's qmatmul_q8 of x, side by side (x's 8-bit activations are a function of x: quantized
    once, they are every part's)."""
    return np.concatenate([_qmatmul_q8_reference(x, w, q) for w, q in zip(ws, qtypes)], axis=-1)


_GROUPS = (("q5_0", "q8_0"), ("q4_k", "q6_k"), ("q5_0", "q4_k", "q8_0"), ("iq4_nl", "q4_1", "q5_1", "iq4_xs"))


def _group_samples(rng: np.random.Generator) -> list[Sample]:
    """x of several ranks against groups of 2-4 parts of 1-7 rows, mixing the 32- and 256-value formats."""
    out = []
    for shape, qtypes in zip([(3,), (2, 1), (1,), (2, 2)], _GROUPS):
        x = uniform(rng, (*shape, 256))
        ws = [random_blocks(rng, q, 1 + i * 2, 256) for i, q in enumerate(qtypes)]
        out.append(Sample((x, *ws), {"qtypes": qtypes}))
    return out


qmatmul_q8_group = Op(
    "qmatmul_q8_group",
    shape=_group_shape,
    dtype=_group_dtype,
    params=_group_params,
    reference=_group_reference,
    samples=_group_samples,
    exact=True,
    doc="concat([qmatmul_q8(x, w, qtype) for w, qtype in zip(ws, qtypes)], -1) in one op: x quantized once "
    "(per block scheme: 32 values, llama.cpp's q8_K for the 256-value formats) for every weight, as a fused "
    "projection whose parts are stored in different formats needs.",
)


def _normed_group_shape(x: tuple, weight: tuple, *ws: tuple, qtypes: tuple[str, ...], eps: float) -> tuple:
    if not x or weight != (x[-1],):
        raise ShapeError(
            f"the norm's weight must be [K] (the size of x's last axis) for x of shape {shape_text(x)}, "
            f"got {shape_text(weight)}"
        )
    return _group_shape(x, *ws, qtypes=qtypes)


def _normed_group_dtype(x: DType, weight: DType, *ws: DType, qtypes: tuple[str, ...], eps: float) -> DType:
    if weight is not x:
        raise DTypeError(f"the norm's weight must have x's dtype {x.name}, got {weight.name}")
    return _group_dtype(x, *ws, qtypes=qtypes)


def _normed_group_decompose(x, weight, *ws, qtypes: tuple[str, ...], eps: float):
    from .composite.normalization import rms_norm  # the composite ops import this module's package

    return qmatmul_q8_group(rms_norm(x, weight, eps=eps), *ws, qtypes=qtypes)


def _normed_group_samples(rng: np.random.Generator) -> list[Sample]:
    out = []
    for sample, eps in zip(_group_samples(rng), (1e-5, 1e-6, 0.1, 1e-5)):
        x, *ws = sample.args
        out.append(Sample((x, uniform(rng, x.shape[-1:]), *ws), {**sample.params, "eps": eps}))
    return out


rms_norm_qmatmul_q8_group = Op(
    "rms_norm_qmatmul_q8_group",
    shape=_normed_group_shape,
    dtype=_normed_group_dtype,
    params=lambda x, weight, *ws, qtypes, eps=1e-6: {
        **_group_params(x, *ws, qtypes=qtypes),
        "eps": float(eps),
    },
    decompose=_normed_group_decompose,
    samples=_normed_group_samples,
    exact=False,
    differentiable=False,
    doc="qmatmul_q8_group(rms_norm(x, weight, eps), *ws, qtypes) in one op: the norm made once and x "
    "quantized once for every weight (a Llama block's norm and a fused projection whose parts mix formats).",
)


def _qembedding_shape(ids: tuple, w: tuple, qtype: str) -> tuple:
    fmt = _format(qtype)
    if len(w) != 2:
        raise ShapeError(f"the table must be [V, row bytes] (one row per token id), got {shape_text(w)}")
    return (*ids, _row_values(fmt, w[1], "the table's"))


def _qembedding_dtype(ids: DType, w: DType, qtype: str) -> DType:
    if ids.kind != "i":
        raise DTypeError(f"ids must be an integer tensor (i32 or i64), got {ids.name}")
    if w is not u8:
        raise DTypeError(f"the table must be u8 (its blocks' bytes), got {w.name}")
    return f32


def _qembedding_reference(ids: np.ndarray, w: np.ndarray, qtype: str) -> np.ndarray:
    rows = np.take(w, ids.reshape(-1), axis=0)  # IndexError names an id out of range
    k = w.shape[1] // FORMATS[qtype].nbytes * FORMATS[qtype].block
    return dequantize(rows, qtype, (*ids.shape, k))


qembedding = Op(
    "qembedding",
    shape=_qembedding_shape,
    dtype=_qembedding_dtype,
    reference=_qembedding_reference,
    samples=lambda rng: [
        Sample((np.array([[4, 0, 2], [2, 2, 1]]), random_blocks(rng, "q4_1", 5, 64)), {"qtype": "q4_1"}),
        Sample((np.array(3), random_blocks(rng, "q8_0", 4, 32)), {"qtype": "q8_0"}),
        Sample((np.zeros((0,), np.int64), random_blocks(rng, "q6_k", 2, 256)), {"qtype": "q6_k"}),
        Sample((np.array([1, 0, 1]), random_blocks(rng, "q5_k", 2, 512)), {"qtype": "q5_k"}),
        Sample((np.array([2]), random_blocks(rng, "iq4_xs", 3, 256)), {"qtype": "iq4_xs"}),
    ],
    exact=True,
    doc="The dequantized rows of a quantized table w (u8 blocks of `qtype`) at integer ids: "
    "i64[...], u8[V, row bytes] -> f32[..., K].",
)
