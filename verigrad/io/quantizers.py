"""NumPy quantizers reproducing llama.cpp's reference ones (`quantize_row_*_ref` in ggml-quants.c, used
by `llama-quantize` without an importance matrix): the same block layouts and the same f32 operations in
the same order, so the blocks decode (ops/quant.py's `dequantize`) to llama.cpp's values.

`quantize(values, qtype)` takes f32 rows [..., K] (K a multiple of the block) and gives u8 [rows, row
bytes]. Every block of a tensor is worked on at once: loops run over a block's values (sequential sums
as the C loops add, never NumPy's pairwise ones) and over a search's candidates, not over blocks.

The C code is taken as written, each f32 operation rounded on its own: the K-quants give the bytes of the C
compiled with -ffp-contract=off on every block tried. A compiler contracting `a*b + c` into a fused
multiply-add (GCC's default for GNU C on a machine with FMA) picks another level or scale in some blocks
(2-30% of them), an equally valid quantization that llama.cpp decodes alike.
`nearest_int` (the C trick of adding 1.5 * 2^23) is round-half-to-even, `np.rint`; `roundf` (Q8_0)
rounds halves away from zero.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ops.quant import FORMATS

F = np.float32
GROUP_MAX_EPS = F(1e-15)
QK_K = 256


def _nearest(a: np.ndarray) -> np.ndarray:
    """llama.cpp's nearest_int: round half to even, as int32."""
    return np.rint(a).astype(np.int32)


def _half(a: np.ndarray) -> np.ndarray:
    """f32 -> the two little-endian bytes of its f16 (round to nearest even, as GGML_FP32_TO_FP16)."""
    return np.asarray(a, F).astype("<f2").reshape(-1, 1).view(np.uint8)


def _half_value(a: np.ndarray) -> np.ndarray:
    """The f32 value of a's f16 rounding (GGML_FP16_TO_FP32(GGML_FP32_TO_FP16(a)))."""
    return np.asarray(a, F).astype(np.float16).astype(F)


def _inverse(d: np.ndarray) -> np.ndarray:
    """`d ? 1.0f/d : 0.0f`."""
    with np.errstate(divide="ignore"):
        return np.where(d != 0, F(1) / d, F(0)).astype(F)


def _signed_max(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(max |x|, the first value of largest |x|) per row, as `if (amax < fabsf(v)) { amax = ...; max = v; }`
    from amax = max = 0 (so an all-zero row gives +0)."""
    ax = np.abs(x)
    amax = ax.max(axis=-1)
    first = np.take_along_axis(x, ax.argmax(axis=-1)[..., None], axis=-1)[..., 0]
    return amax, np.where(amax > 0, first, F(0)).astype(F)


def _pack_nibbles(q: np.ndarray) -> np.ndarray:
    """[n, 32] values 0..15 -> 16 bytes: value j in the low nibble of byte j, value 16 + j in the high."""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def _fifth_bits(q: np.ndarray) -> np.ndarray:
    """[n, 32] values 0..31 -> the 4 bytes of qh (value j's fifth bit is bit j of the little-endian u32)."""
    return np.packbits((q >> 4).astype(np.uint8) & 1, axis=1, bitorder="little")


# 32-value blocks ------------------------------------------------------------------------------------------
def _q8_0(x: np.ndarray) -> np.ndarray:
    amax = np.abs(x).max(axis=1)
    d = amax / F(127)
    v = x * _inverse(d)[:, None]
    q = np.copysign(np.floor(np.abs(v).astype(np.float64) + 0.5), v)  # roundf: halves away from zero
    return np.concatenate([_half(d), q.astype(np.int8).view(np.uint8)], axis=1)


def _symmetric(x: np.ndarray, half_range: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0/Q5_0: d = max / -half_range (max the value of largest |x|), q = min(2 half - 1, (int8)(x/d +
    half + 0.5))."""
    _, mx = _signed_max(x)
    d = mx / F(-half_range)
    v = x * _inverse(d)[:, None] + F(half_range + 0.5)
    return d, np.minimum(2 * half_range - 1, np.trunc(v).astype(np.int32))


def _affine(x: np.ndarray, top: int, clamp: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q4_1/Q5_1: d = (max - min) / top, q = (int)((x - min)/d + 0.5) (at most `top` where `clamp`)."""
    lo, hi = x.min(axis=1), x.max(axis=1)
    d = (hi - lo) / F(top)
    q = np.trunc((x - lo[:, None]) * _inverse(d)[:, None] + F(0.5)).astype(np.int32)
    return d, lo, np.minimum(top, q) if clamp else q


def _q4_0(x: np.ndarray) -> np.ndarray:
    d, q = _symmetric(x, 8)
    return np.concatenate([_half(d), _pack_nibbles(q)], axis=1)


def _q4_1(x: np.ndarray) -> np.ndarray:
    d, lo, q = _affine(x, 15, True)
    return np.concatenate([_half(d), _half(lo), _pack_nibbles(q)], axis=1)


def _q5_0(x: np.ndarray) -> np.ndarray:
    d, q = _symmetric(x, 16)
    return np.concatenate([_half(d), _fifth_bits(q), _pack_nibbles(q & 15)], axis=1)


def _q5_1(x: np.ndarray) -> np.ndarray:
    d, lo, q = _affine(x, 31, False)
    return np.concatenate([_half(d), _half(lo), _fifth_bits(q), _pack_nibbles(q & 15)], axis=1)


# the K-quants' searches --------------------------------------------------------------------------------
# These work on x transposed, [n, m] (value i of every row at once): the sums then add whole rows, in the
# C's order. Quantized levels L are kept as f32 integers (exact), clamped as the C's MAX/MIN.
def _sum0(a: np.ndarray) -> np.ndarray:
    """The sum over axis 0 added in order (a[0] + a[1] + ...) in a's dtype."""
    total = a[0].copy()
    for row in a[1:]:
        total += row
    return total


def _levels(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """clamp(nearest_int(v), lo, hi) as f32 (v is overwritten)."""
    np.rint(v, out=v)
    np.maximum(v, F(lo), out=v)
    return np.minimum(v, F(hi), out=v)


def _make_qkx2(
    x: np.ndarray, w: np.ndarray, nmax: int, rmin: float, rdelta: float, nstep: int, use_mad: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """make_qkx2_quants on each column of x [n, m] with weights w: (scale, the_min, L [n, m]) with
    x ~ scale * L - the_min, L in 0..nmax. The min moves with the best fit, as the C's does."""
    lo = np.minimum(x.min(axis=0), F(0))
    hi = x.max(axis=0)
    sum_w, sum_x = _sum0(w), _sum0(w * x)
    flat = hi == lo

    def error(scale: np.ndarray, L: np.ndarray, mn: np.ndarray) -> np.ndarray:
        diff = scale * L + mn - x
        return _sum0(w * (np.abs(diff) if use_mad else diff * diff))

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iscale = F(nmax) / (hi - lo)
        scale = F(1) / iscale
        best = error(scale, _levels(iscale * (x - lo), 0, nmax), lo)
        # the levels are those of the last improving step: kept as its iscale and min, made once after
        chosen, chosen_min = iscale, lo
        mn = lo.copy()
        for step in range(nstep + 1):
            iscale = (F(rmin) + F(rdelta) * F(step) + F(nmax)) / (hi - mn)
            laux = _levels(iscale * (x - mn), 0, nmax)
            wl = w * laux
            sum_l, sum_l2, sum_xl = _sum0(wl), _sum0(wl * laux), _sum0(wl * x)
            D = sum_w * sum_l2 - sum_l * sum_l
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            positive = this_min > 0
            this_min = np.where(positive, F(0), this_min)
            this_scale = np.where(positive, sum_xl / sum_l2, this_scale)
            err = error(this_scale, laux, this_min)
            better = (D > 0) & (err < best) & ~flat
            chosen, chosen_min = np.where(better, iscale, chosen), np.where(better, mn, chosen_min)
            best = np.where(better, err, best)
            scale = np.where(better, this_scale, scale)
            mn = np.where(better, this_min, mn)
        L = _levels(chosen * (x - chosen_min), 0, nmax)
    L[:, flat] = 0
    return np.where(flat, F(0), scale).astype(F), (-mn).astype(F), L


def _make_qx(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """make_qx_quants(n, nmax, x, L, rmse_type=1, NULL) on each column of x [n, m]: (scale, L in
    0..2 nmax - 1)."""
    amax, mx = _signed_max(x.T)
    w = x * x
    wx = w * x
    zero = amax < GROUP_MAX_EPS
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):

        def attempt(iscale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            lq = _levels(iscale * x, -nmax, nmax - 1)
            return _sum0(wx * lq), _sum0(w * lq * lq)

        chosen = F(-nmax) / mx
        sumlx, suml2 = attempt(chosen)
        scale = np.where(suml2 != 0, sumlx / suml2, F(0)).astype(F)
        best = scale * sumlx
        for step in range(-9, 10):
            if step == 0:
                continue
            iscale = -(F(nmax) + F(0.1) * F(step)) / mx
            slx, sl2 = attempt(iscale)
            better = (sl2 > 0) & (slx * slx > best * sl2)
            chosen = np.where(better, iscale, chosen)  # its levels are made once, after
            scale = np.where(better, slx / sl2, scale)
            best = np.where(better, scale * slx, best)
        L = _levels(chosen * x, -nmax, nmax - 1) + F(nmax)
    L[:, zero] = 0
    return np.where(zero, F(0), scale).astype(F), L


def _make_q3(x: np.ndarray, nmax: int) -> tuple[np.ndarray, np.ndarray]:
    """make_q3_quants(n, nmax, x, L, do_rmse=true) on each column of x [n, m]: (scale, L in 0..2 nmax - 1)."""
    amax, mx = _signed_max(x.T)
    zero = amax < GROUP_MAX_EPS
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        L = _levels((F(-nmax) / mx) * x, -nmax, nmax - 1)
        w = x * x
        wx = w * x
        sumlx, suml2 = _sum0(wx * L), _sum0(w * L * L)
        active = ~zero
        for _ in range(5):
            changed = np.zeros(x.shape[1], bool)
            for i in range(len(x)):
                wi, xi, li = w[i], x[i], L[i]
                slx = sumlx - wx[i] * li
                sl2 = suml2 - wi * li * li
                new = _levels(xi * sl2 / slx, -nmax, nmax - 1)
                slx2, sl22 = slx + wx[i] * new, sl2 + wi * new * new
                take = active & (slx > 0) & (new != li) & (sl22 > 0)
                take &= slx2 * slx2 * suml2 > sumlx * sumlx * sl22
                np.copyto(L[i], new, where=take)
                sumlx = np.where(take, slx2, sumlx)
                suml2 = np.where(take, sl22, suml2)
                changed |= take
            active &= changed
            if not active.any():
                break
        scale = np.where(suml2 > 0, sumlx / suml2, F(0)).astype(F)
    L = L + F(nmax)
    L[:, zero] = 0
    return np.where(zero, F(0), scale).astype(F), L


# the K-quants: super-blocks of 256 -------------------------------------------------------------------------
def _columns(x: np.ndarray, size: int) -> np.ndarray:
    """Super-blocks [n, 256] -> their sub-blocks of `size` as columns [size, n * 256 / size]."""
    return np.ascontiguousarray(x.reshape(-1, size).T)


def _rows(L: np.ndarray, n: int) -> np.ndarray:
    """Levels of sub-blocks as columns (f32) -> int32 [n, sub-blocks, size]."""
    return L.T.astype(np.int32).reshape(n, -1, L.shape[0])


def _pack_k4_scales(ls: np.ndarray, lm: np.ndarray) -> np.ndarray:
    """8 six-bit scales and mins [n, 8] -> Q4_K/Q5_K's 12 bytes (get_scale_min_k4's inverse)."""
    s = np.zeros((len(ls), 12), np.uint8)
    s[:, 0:4] = ls[:, :4] | ((ls[:, 4:] >> 4) << 6)
    s[:, 4:8] = lm[:, :4] | ((lm[:, 4:] >> 4) << 6)
    s[:, 8:12] = (ls[:, 4:] & 0xF) | ((lm[:, 4:] & 0xF) << 4)
    return s


def _requantize(
    x: np.ndarray, L: np.ndarray, d: np.ndarray, dm: np.ndarray | None, lo: int, hi: int, offset: int = 0
) -> None:
    """Where d != 0, L = clamp(nearest((x + dm) / d), lo, hi) + offset (x / d without dm); elsewhere L
    stays (the C's `if (!d) continue`). x, L [n, groups, size], d and dm [n, groups]."""
    with np.errstate(divide="ignore", invalid="ignore"):
        v = x if dm is None else x + dm[..., None]
        new = np.clip(_nearest(v / d[..., None]), lo, hi) + offset
    np.copyto(L, new, where=(d != 0)[..., None])


def _k_affine(x: np.ndarray, nmax: int, rmin: float, rdelta: float, nstep: int) -> tuple[np.ndarray, ...]:
    """Q4_K/Q5_K: per super-block x [n, 256]: (d, dmin as f16 bytes, 12 scale bytes, L [n, 8, 32])."""
    n = len(x)
    sub = _columns(x, 32)
    av_x = np.sqrt(_sum0(sub * sub) / F(32))
    scales, mins, L = _make_qkx2(sub, av_x + np.abs(sub), nmax, rmin, rdelta, nstep, False)
    scales, mins, L = scales.reshape(n, 8), mins.reshape(n, 8), _rows(L, n)
    max_scale = np.maximum(scales.max(axis=1), F(0))
    max_min = np.maximum(mins.max(axis=1), F(0))
    with np.errstate(divide="ignore"):
        inv_scale = np.where(max_scale > 0, F(63) / max_scale, F(0)).astype(F)
        inv_min = np.where(max_min > 0, F(63) / max_min, F(0)).astype(F)
    ls = np.minimum(63, _nearest(inv_scale[:, None] * scales) & 0xFF).astype(np.uint8)
    lm = np.minimum(63, _nearest(inv_min[:, None] * mins) & 0xFF).astype(np.uint8)
    d, dmin = max_scale / F(63), max_min / F(63)
    dd = _half_value(d)[:, None] * ls.astype(F)
    dm = _half_value(dmin)[:, None] * lm.astype(F)
    _requantize(x.reshape(n, 8, 32), L, dd, dm, 0, nmax)
    return _half(d), _half(dmin), _pack_k4_scales(ls, lm), L


def _q4_k(x: np.ndarray) -> np.ndarray:
    d, dmin, scales, L = _k_affine(x, 15, -1.0, 0.1, 20)
    q = L.reshape(-1, 4, 2, 32)
    qs = (q[:, :, 0] | (q[:, :, 1] << 4)).astype(np.uint8).reshape(-1, 128)
    return np.concatenate([d, dmin, scales, qs], axis=1)


def _q5_k(x: np.ndarray) -> np.ndarray:
    d, dmin, scales, L = _k_affine(x, 31, -0.5, 0.1, 15)
    q = L.reshape(-1, 4, 2, 32)
    qs = ((q[:, :, 0] & 15) | ((q[:, :, 1] & 15) << 4)).astype(np.uint8).reshape(-1, 128)
    high = (L >> 4).astype(np.uint8)  # [n, 8, 32]: sub-block j's fifth bits are bit j of qh's bytes
    qh = (high << np.arange(8, dtype=np.uint8)[:, None]).sum(axis=1, dtype=np.uint8)
    return np.concatenate([d, dmin, scales, qh, qs], axis=1)


def _pack_crumbs(L: np.ndarray) -> np.ndarray:
    """L [n, 256] values 0..3 -> 64 bytes: per half of 128, byte l holds values l, l+32, l+64, l+96."""
    q = L.reshape(-1, 2, 4, 32)
    return (
        (q[:, :, 0] | (q[:, :, 1] << 2) | (q[:, :, 2] << 4) | (q[:, :, 3] << 6))
        .astype(np.uint8)
        .reshape(-1, 64)
    )


def _q2_k(x: np.ndarray) -> np.ndarray:
    n = len(x)
    sub = _columns(x, 16)
    scales, mins, L = _make_qkx2(sub, np.abs(sub), 3, -0.5, 0.1, 15, True)
    scales, mins, L = scales.reshape(n, 16), mins.reshape(n, 16), _rows(L, n)
    max_scale = np.maximum(scales.max(axis=1), F(0))
    max_min = np.maximum(mins.max(axis=1), F(0))
    with np.errstate(divide="ignore", invalid="ignore"):
        ls = np.where(max_scale[:, None] > 0, _nearest((F(15) / max_scale)[:, None] * scales), 0) & 0xFF
        lm = np.where(max_min[:, None] > 0, _nearest((F(15) / max_min)[:, None] * mins), 0) & 0xFF
    sc = (ls | (lm << 4)) & 0xFF
    d = np.where(max_scale > 0, max_scale / F(15), F(0)).astype(F)
    dmin = np.where(max_min > 0, max_min / F(15), F(0)).astype(F)
    dd = _half_value(d)[:, None] * (sc & 0xF).astype(F)
    dm = _half_value(dmin)[:, None] * (sc >> 4).astype(F)
    _requantize(x.reshape(n, 16, 16), L, dd, dm, 0, 3)
    return np.concatenate(
        [sc.astype(np.uint8), _pack_crumbs(L.reshape(n, 256)), _half(d), _half(dmin)], axis=1
    )


def _first_max_abs(s: np.ndarray) -> np.ndarray:
    """The value of largest |s| per row, the first of ties (+0 for an all-zero row)."""
    return _signed_max(s)[1]


def _q3_k(x: np.ndarray) -> np.ndarray:
    n = len(x)
    scales, L = _make_q3(_columns(x, 16), 4)
    scales, L = scales.reshape(n, 16), _rows(L, n)
    max_scale = _first_max_abs(scales)
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = F(-32) / max_scale
        l6 = np.clip(_nearest(iscale[:, None] * scales).astype(np.int8), -32, 31).astype(np.int32) + 32
        d = F(1) / iscale
    nonzero = max_scale != 0
    l6 = np.where(nonzero[:, None], l6, 0)
    d = np.where(nonzero, d, F(0)).astype(F)
    s = np.zeros((n, 12), np.uint8)
    s[:, 0:8] = (l6[:, :8] & 0xF) | ((l6[:, 8:] & 0xF) << 4)
    high = (l6 >> 4).reshape(n, 4, 4)  # scale j = 4 a + b: bits 2a of byte 8 + b
    s[:, 8:12] = (high << (2 * np.arange(4))[:, None]).sum(axis=1)
    s = np.where(nonzero[:, None], s, 0).astype(np.uint8)
    sc = np.where(nonzero[:, None], l6 - 32, -32)  # the decoded six-bit scales (0 bytes decode to -32)
    dd = _half_value(d)[:, None] * sc.astype(F)
    _requantize(x.reshape(n, 16, 16), L, dd, None, -4, 3, 4)
    L4 = L.reshape(n, 256)
    hmask = np.packbits((L4 > 3).reshape(n, 8, 32).astype(np.uint8), axis=1, bitorder="little")[:, 0]
    crumbs = _pack_crumbs(np.where(L4 > 3, L4 - 4, L4))
    return np.concatenate([hmask, crumbs, s, _half(d)], axis=1)


def _q6_k(x: np.ndarray) -> np.ndarray:
    n = len(x)
    scales, L = _make_qx(_columns(x, 16), 32)
    scales, L = scales.reshape(n, 16), _rows(L, n)
    amax, max_scale = _signed_max(scales)
    zero = amax < GROUP_MAX_EPS
    with np.errstate(divide="ignore", invalid="ignore"):
        iscale = F(-128) / max_scale
        d = np.where(zero, F(0), F(1) / iscale).astype(F)
        sc = np.minimum(127, _nearest(iscale[:, None] * scales)).astype(np.int8)
    sc[zero] = 0
    dd = _half_value(d)[:, None] * sc.astype(F)
    _requantize(x.reshape(n, 16, 16), L, dd, None, -32, 31, 32)
    L = L.reshape(n, 2, 4, 32)
    L[zero] = 0
    low, high = L & 0xF, L >> 4
    ql = np.stack([low[:, :, 0] | (low[:, :, 2] << 4), low[:, :, 1] | (low[:, :, 3] << 4)], axis=2)
    qh = high[:, :, 0] | (high[:, :, 1] << 2) | (high[:, :, 2] << 4) | (high[:, :, 3] << 6)
    parts = [ql.astype(np.uint8).reshape(n, 128), qh.astype(np.uint8).reshape(n, 64), sc.view(np.uint8)]
    return np.concatenate([*parts, _half(d)], axis=1)


def _f16(x: np.ndarray) -> np.ndarray:
    return x.astype("<f2").view(np.uint8)


def _f32(x: np.ndarray) -> np.ndarray:
    return x.astype("<f4").view(np.uint8)


QUANTIZERS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "f32": _f32,
    "f16": _f16,
    "q8_0": _q8_0,
    "q4_0": _q4_0,
    "q4_1": _q4_1,
    "q5_0": _q5_0,
    "q5_1": _q5_1,
    "q2_k": _q2_k,
    "q3_k": _q3_k,
    "q4_k": _q4_k,
    "q5_k": _q5_k,
    "q6_k": _q6_k,
}


def quantize(values: np.ndarray, qtype: str) -> np.ndarray:
    """f32 rows [..., K] -> u8 [rows, K / block * block bytes] of `qtype` blocks (llama.cpp's reference
    quantizer's bytes); ValueError for an unknown type, a K that is not whole blocks or non-finite values."""
    if qtype not in QUANTIZERS:
        raise ValueError(f"quantize: cannot quantize to {qtype!r}; one of {', '.join(QUANTIZERS)}")
    fmt = FORMATS[qtype]
    values = np.asarray(values, F)
    k = values.shape[-1] if values.ndim else 1
    if k % fmt.block:
        raise ValueError(f"quantize: rows of {k} values are not whole {qtype} blocks of {fmt.block}")
    if not np.isfinite(values).all():
        raise ValueError(f"quantize: the values hold an infinity or a NaN; {qtype} blocks cannot hold them")
    rows = values.size // k if k else 0
    blocks = np.ascontiguousarray(values).reshape(-1, fmt.block)
    return np.ascontiguousarray(QUANTIZERS[qtype](blocks)).reshape(rows, fmt.row_bytes(k))
