/* 8-bit-activation products with quantized weights (GGML blocks of 32 values), computed from the blocks.
 *
 * Formats (qtype codes): 0 q8_0 {f16 d; int8 q[32]} value d*q; 1 q4_0 {f16 d; u8 nibbles[16]} value
 * d*(q-8); 2 q4_1 {f16 d, m; u8 nibbles[16]} value d*q+m. Byte j of the nibbles holds value j (low
 * nibble) and value j+16 (high nibble).
 *
 * vg_qmatmul_q8: out[t, n] = qmatmul_q8's reference (ops/quant.py), bit for bit. x is quantized per
 * block of 32 (d = max|x|/127 in f32, q = rint(x * (1/d)), ties to even), the integer dot of each block
 * is exact, and each output sums, in block order in double from +0.0, the terms
 * (d_w * d_x) * dot [+ m_w * (d_x * sum(q_x))], rounded once to f32.
 *
 * It also takes 6 q5_0 (value d*(q-16), q of 5 bits), 7 q5_1 (d*q+m) and 10 iq4_nl (d * its table's value
 * at the nibble): their dots are exact integers too, scaled as q4_0's and q4_1's (AVX2: q5_0 and q5_1 8 rows
 * at a time as the q4 formats, the fifth bits spread to bytes and or-ed in; iq4_nl and a band's last rows a
 * row at a time).
 *
 * vg_rms_norm_qmatmul_q8: the same after rms_norm's kernel (rows.c) on x.
 *
 * Threads take bands of weight rows (each reads only its band); every output is computed by one thread
 * in one order, so every thread count gives the same bits. The AVX2 paths (chosen at run time) do the
 * portable paths' arithmetic, lane by lane, in the same order: the q8 products take 8 rows (q4 formats;
 * two activation rows at once in a prompt) or 4 rows (q8_0) at a time, one row per double lane, and
 * prefetch the next rows while they compute (the hardware prefetcher alone left the 28 MB output head at
 * a fifth of the read bandwidth). Where the CPU has AVX-512 VNNI (level 3), quant_vnni.c takes a band's
 * rows 8 at a time first (every format here; before it, q8_0 on 5 or more activation rows, quant_amx.c's AMX
 * tiles 16 at a time where the CPU and the OS allow them), these paths the rows left.
 */
#include "quant.h"

/* ---------------------------------------------------------------- activations */

/* x f32[k] -> q int8[k], d[k/32] (NaN for a block with an inf or NaN), dxs[k/32] = d * sum(q) */
static void quantize_row(const float *x, int64_t k, int8_t *q, double *d, double *dxs, int32_t *sx) {
    for (int64_t b = 0; b < k / 32; b++) {
        const float *xb = x + 32 * b;
        uint32_t amax = 0;
        for (int i = 0; i < 32; i++) {
            uint32_t bits;
            memcpy(&bits, xb + i, 4);
            bits &= 0x7fffffffu;
            if (bits > amax) amax = bits;
        }
        int32_t sum = 0;
        float m, dd;
        memcpy(&m, &amax, 4);
        dd = m / 127.0f;
        float id = dd != 0.0f ? 1.0f / dd : 0.0f;
        if (amax >= 0x7f800000u) { /* inf or NaN */
            memset(q + 32 * b, 0, 32);
            d[b] = NAN;
        } else if (isinf(id)) { /* 1 / d overflows: a block of zeros */
            memset(q + 32 * b, 0, 32);
            d[b] = 0.0;
        } else {
            for (int i = 0; i < 32; i++) {
                int v = (int)nearbyintf(xb[i] * id);
                q[32 * b + i] = (int8_t)v;
                sum += v;
            }
            d[b] = (double)dd;
        }
        sx[b] = sum;
        dxs[b] = d[b] * (double)sum;
    }
}

#if VG_X86
/* quantize_row with 8 lanes: the same operations (x * id rounded to nearest even), so the same bits */
__attribute__((target("avx2"))) static void quantize_row_avx2(const float *x, int64_t k, int8_t *q, double *d,
                                                               double *dxs, int32_t *sx) {
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < k / 32; b++) {
        const float *xb = x + 32 * b;
        __m256 v[4];
        __m256i m = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(xb + 8 * i);
            m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(v[i]), abs_mask));
        }
        __m128i m4 = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
        m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0x4e));
        m4 = _mm_max_epu32(m4, _mm_shuffle_epi32(m4, 0xb1));
        uint32_t amax = (uint32_t)_mm_cvtsi128_si32(m4);
        if (amax >= 0x7f800000u) { /* inf or NaN */
            memset(q + 32 * b, 0, 32);
            d[b] = NAN;
            sx[b] = 0;
            dxs[b] = NAN;
            continue;
        }
        float mf, dd;
        memcpy(&mf, &amax, 4);
        dd = mf / 127.0f;
        const float inverse = dd != 0.0f ? 1.0f / dd : 0.0f;
        if (isinf(inverse)) { /* 1 / d overflows: a block of zeros (quantize_row's) */
            memset(q + 32 * b, 0, 32);
            d[b] = 0.0, sx[b] = 0, dxs[b] = 0.0;
            continue;
        }
        const __m256 id = _mm256_set1_ps(inverse);
        __m256i qi[4];
        for (int i = 0; i < 4; i++)
            qi[i] = _mm256_cvtps_epi32(
                _mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i total = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
        __m128i t4 = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
        t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0x4e));
        t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0xb1));
        __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
        _mm256_storeu_si256((__m256i *)(q + 32 * b), _mm256_permutevar8x32_epi32(packed, order));
        sx[b] = _mm_cvtsi128_si32(t4);
        d[b] = (double)dd;
        dxs[b] = d[b] * (double)sx[b];
    }
}
#endif

/* ---------------------------------------------------------------- q8 products, portable */

/* the integer dot of weight block wb with activations y (q4_0, q5_0: of the raw 4 or 5 bits; iq4_nl: of
 * its table's values) */
static int32_t block_dot(int qtype, const uint8_t *wb, const int8_t *y) {
    int32_t s = 0;
    if (qtype == Q8_0) {
        const int8_t *w = (const int8_t *)(wb + 2);
        for (int i = 0; i < 32; i++) s += (int32_t)w[i] * y[i];
    } else if (qtype == Q5_0 || qtype == Q5_1) {
        const uint8_t *qh = wb + (qtype == Q5_1 ? 4 : 2), *n = qh + 4;
        const uint32_t high = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
        for (int i = 0; i < 16; i++)
            s += (int32_t)((n[i] & 15) | ((high >> i & 1) << 4)) * y[i] +
                 (int32_t)((n[i] >> 4) | ((high >> (i + 16) & 1) << 4)) * y[i + 16];
    } else if (qtype == IQ4_NL) {
        const uint8_t *n = wb + 2;
        for (int i = 0; i < 16; i++) s += (int32_t)IQ4_VALUES[n[i] & 15] * y[i] + (int32_t)IQ4_VALUES[n[i] >> 4] * y[i + 16];
    } else {
        const uint8_t *n = wb + (qtype == Q4_1 ? 4 : 2);
        for (int i = 0; i < 16; i++) s += (int32_t)(n[i] & 15) * y[i] + (int32_t)(n[i] >> 4) * y[i + 16];
    }
    return s;
}

static float q8_row(int qtype, const uint8_t *w, int64_t nb, const int8_t *qx, const double *dx,
                    const double *dxs, const int32_t *sx) {
    const int64_t bytes = BLOCK_BYTES[qtype];
    double acc = 0.0;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bytes;
        int32_t dot = block_dot(qtype, wb, qx + 32 * b);
        if (qtype == Q4_0) dot -= 8 * sx[b];
        if (qtype == Q5_0) dot -= 16 * sx[b];
        double term = ((double)vg_f16_at(wb) * dx[b]) * (double)dot;
        if (qtype == Q4_1 || qtype == Q5_1) term = term + (double)vg_f16_at(wb + 2) * dxs[b];
        acc = acc + term;
    }
    return (float)acc;
}

/* ---------------------------------------------------------------- q8 products, AVX2: 4 rows at once */
#if VG_X86
/* q8_0: the 8 partial sums of block wb's dot with activations y */
__attribute__((target("avx2,f16c"), always_inline)) static inline __m256i dot_q8_avx2(const uint8_t *wb,
                                                                                      __m256i y) {
    __m256i w = _mm256_loadu_si256((const __m256i *)(wb + 2));
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(y, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* q4: the nibbles at n0 (low lane) and n1 (high lane) against y_lo = values 0..15 and y_hi = values
 * 16..31 in both lanes: 4 partial sums per row, row 0 in the low lane */
__attribute__((target("avx2,f16c"), always_inline)) static inline __m256i dot_q4x2_avx2(const uint8_t *n0,
                                                                                        const uint8_t *n1,
                                                                                        __m256i y_lo,
                                                                                        __m256i y_hi) {
    const __m256i mask = _mm256_set1_epi8(15);
    __m256i n = _mm256_loadu2_m128i((const __m128i *)n1, (const __m128i *)n0);
    __m256i lo = _mm256_maddubs_epi16(_mm256_and_si256(n, mask), y_lo);
    __m256i hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(n, 4), mask), y_hi);
    return _mm256_madd_epi16(_mm256_add_epi16(lo, hi), _mm256_set1_epi16(1)); /* |lo + hi| <= 7620 */
}

/* the f16 pairs at the start of blocks w, w + stride, w + 2 stride, w + 3 stride: (first, second) */
__attribute__((target("avx2,f16c"), always_inline)) static inline __m256 halves4(const uint8_t *w,
                                                                                   int64_t stride) {
    __m128i h = _mm_setr_epi32(load32(w), load32(w + stride), load32(w + 2 * stride), load32(w + 3 * stride));
    return _mm256_permutevar8x32_ps(_mm256_cvtph_ps(h), _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
}

/* rows w, w + stride, w + 2 stride, w + 3 stride against one activation row: 4 outputs */
__attribute__((target("avx2,f16c"), always_inline)) static inline void q8_rows4(int qtype, const uint8_t *w,
                                                                 int64_t stride, int64_t nb,
                                                                 const int8_t *qx, const double *dx,
                                                                 const double *dxs, const int32_t *sx,
                                                                 float *out) {
    const int64_t bytes = BLOCK_BYTES[qtype];
    __m256d acc = _mm256_setzero_pd();
    const uint8_t *next = w + 4 * stride; /* the next 4 rows: fetched while these are computed */
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bytes;
        for (int64_t off = 4 * b * bytes; off < 4 * (b + 1) * bytes; off += 64)
            _mm_prefetch((const char *)(next + off), _MM_HINT_T0);
        __m128i dots;
        if (qtype == Q8_0) {
            __m256i y = _mm256_loadu_si256((const __m256i *)(qx + 32 * b));
            __m256i p0 = dot_q8_avx2(wb, y), p1 = dot_q8_avx2(wb + stride, y);
            __m256i p2 = dot_q8_avx2(wb + 2 * stride, y), p3 = dot_q8_avx2(wb + 3 * stride, y);
            __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
            dots = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        } else {
            const uint8_t *n = wb + (qtype == Q4_1 ? 4 : 2);
            __m256i y_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(qx + 32 * b)));
            __m256i y_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(qx + 32 * b + 16)));
            __m256i p01 = dot_q4x2_avx2(n, n + stride, y_lo, y_hi);
            __m256i p23 = dot_q4x2_avx2(n + 2 * stride, n + 3 * stride, y_lo, y_hi);
            __m256i h = _mm256_hadd_epi32(p01, p23); /* lanes: r0 r0 r2 r2 | r1 r1 r3 r3 */
            h = _mm256_hadd_epi32(h, h);             /* lanes: r0 r2 r0 r2 | r1 r3 r1 r3 */
            dots = _mm_unpacklo_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        }
        if (qtype == Q4_0) dots = _mm_sub_epi32(dots, _mm_set1_epi32(8 * sx[b]));
        __m256 dm = halves4(wb, stride);
        __m256d scale = _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(dm)), _mm256_set1_pd(dx[b]));
        __m256d term = _mm256_mul_pd(scale, _mm256_cvtepi32_pd(dots));
        if (qtype == Q4_1) {
            __m256d m = _mm256_cvtps_pd(_mm256_extractf128_ps(dm, 1));
            term = _mm256_add_pd(term, _mm256_mul_pd(m, _mm256_set1_pd(dxs[b])));
        }
        acc = _mm256_add_pd(acc, term);
    }
    _mm_storeu_ps(out, _mm256_cvtpd_ps(acc));
}

/* q4 and q5 formats: rows w + i stride, i = 0..7, against TN (1 or 2) consecutive activation rows: 8 outputs
 * each, at out + t * out_step. The even rows' sums are in one vector and the odd rows' in another (fewer
 * shuffles than twice 4 rows); with TN = 2 the weights' nibbles and scales are unpacked once for both. */
__attribute__((target("avx2,f16c"), always_inline)) static inline void q4_rows8(
    int qtype, int tn, const uint8_t *w, int64_t stride, int64_t nb, const int8_t *qx, const double *dx,
    const double *dxs, const int32_t *sx, float *out, int64_t out_step) {
    const int five = qtype == Q5_0 || qtype == Q5_1, affine = qtype == Q4_1 || qtype == Q5_1;
    const int64_t bytes = BLOCK_BYTES[qtype], at = qtype == Q5_1 ? 8 : qtype == Q5_0 ? 6 : affine ? 4 : 2;
    const __m256i mask = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    /* q5: byte j of the fifth bits' u32 spread over bytes 8j..8j+7 (values 0..15 in the low half of each
     * 128-bit lane, 16..31 in the high), all ones where the value's bit is set */
    const __m256i spread_lo = _mm256_setr_epi64x(0, 0x0101010101010101, 0, 0x0101010101010101);
    const __m256i spread_hi = _mm256_setr_epi64x(0x0202020202020202, 0x0303030303030303, 0x0202020202020202,
                                                 0x0303030303030303);
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe), sixteen = _mm256_set1_epi8(16);
    __m256d acc_e[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    __m256d acc_o[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
    const uint8_t *next = w + 8 * stride;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bytes, *n = wb + at;
        const uint8_t *pf = next + 8 * b * bytes;
        _mm_prefetch((const char *)pf, _MM_HINT_T0);
        _mm_prefetch((const char *)(pf + 64), _MM_HINT_T0);
        _mm_prefetch((const char *)(pf + 128), _MM_HINT_T0);
        __m256i y_lo[2], y_hi[2], sums[2][4];
        for (int t = 0; t < tn; t++) {
            const int8_t *y = qx + t * 32 * nb + 32 * b;
            y_lo[t] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)y));
            y_hi[t] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(y + 16)));
        }
        for (int i = 0; i < 4; i++) { /* rows 2i (low lane) and 2i + 1 (high lane) */
            const uint8_t *n0 = n + 2 * i * stride;
            __m256i v = _mm256_loadu2_m128i((const __m128i *)(n0 + stride), (const __m128i *)n0);
            __m256i lo = _mm256_and_si256(v, mask), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
            if (five) { /* value j's fifth bit: bit j of the u32 before the nibbles */
                const __m256i h = _mm256_set_m128i(_mm_set1_epi32(load32(n0 + stride - 4)), _mm_set1_epi32(load32(n0 - 4)));
                const __m256i ones8 = _mm256_set1_epi8(-1);
                __m256i set_lo = _mm256_cmpeq_epi8(_mm256_or_si256(_mm256_shuffle_epi8(h, spread_lo), others), ones8);
                __m256i set_hi = _mm256_cmpeq_epi8(_mm256_or_si256(_mm256_shuffle_epi8(h, spread_hi), others), ones8);
                lo = _mm256_or_si256(lo, _mm256_and_si256(set_lo, sixteen));
                hi = _mm256_or_si256(hi, _mm256_and_si256(set_hi, sixteen));
            }
            for (int t = 0; t < tn; t++) { /* |lo + hi| <= 4 * 31 * 127: no int16 overflow */
                __m256i p_lo = _mm256_maddubs_epi16(lo, y_lo[t]), p_hi = _mm256_maddubs_epi16(hi, y_hi[t]);
                sums[t][i] = _mm256_madd_epi16(_mm256_add_epi16(p_lo, p_hi), ones);
            }
        }
        __m256 dm_e = halves4(wb, 2 * stride), dm_o = halves4(wb + stride, 2 * stride);
        __m256d d_e = _mm256_cvtps_pd(_mm256_castps256_ps128(dm_e));
        __m256d d_o = _mm256_cvtps_pd(_mm256_castps256_ps128(dm_o));
        __m256d m_e = _mm256_cvtps_pd(_mm256_extractf128_ps(dm_e, 1));
        __m256d m_o = _mm256_cvtps_pd(_mm256_extractf128_ps(dm_o, 1));
        for (int t = 0; t < tn; t++) {
            /* lanes r0 r0 r2 r2 | r1 r1 r3 r3, then r0 r2 r4 r6 | r1 r3 r5 r7 */
            __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(sums[t][0], sums[t][1]),
                                          _mm256_hadd_epi32(sums[t][2], sums[t][3]));
            if (qtype == Q4_0) h = _mm256_sub_epi32(h, _mm256_set1_epi32(8 * sx[t * nb + b]));
            if (qtype == Q5_0) h = _mm256_sub_epi32(h, _mm256_set1_epi32(16 * sx[t * nb + b]));
            __m256d x = _mm256_set1_pd(dx[t * nb + b]);
            __m256d t_e = _mm256_mul_pd(_mm256_mul_pd(d_e, x), _mm256_cvtepi32_pd(_mm256_castsi256_si128(h)));
            __m256d h_o = _mm256_cvtepi32_pd(_mm256_extracti128_si256(h, 1));
            __m256d t_o = _mm256_mul_pd(_mm256_mul_pd(d_o, x), h_o);
            if (affine) {
                __m256d s = _mm256_set1_pd(dxs[t * nb + b]);
                t_e = _mm256_add_pd(t_e, _mm256_mul_pd(m_e, s));
                t_o = _mm256_add_pd(t_o, _mm256_mul_pd(m_o, s));
            }
            acc_e[t] = _mm256_add_pd(acc_e[t], t_e);
            acc_o[t] = _mm256_add_pd(acc_o[t], t_o);
        }
    }
    for (int t = 0; t < tn; t++) {
        __m128 e = _mm256_cvtpd_ps(acc_e[t]), o = _mm256_cvtpd_ps(acc_o[t]);
        _mm_storeu_ps(out + t * out_step, _mm_unpacklo_ps(e, o));
        _mm_storeu_ps(out + t * out_step + 4, _mm_unpackhi_ps(e, o));
    }
}

/* one copy per format, row count and activation rows, so that the branches are resolved at compile time */
#define ROWS_PARAMS                                                                                   \
    const uint8_t *w, int64_t stride, int64_t nb, const int8_t *qx, const double *dx, const double *dxs, \
        const int32_t *sx, float *out, int64_t out_step
#define ROWS4(NAME, QTYPE)                                                                            \
    __attribute__((target("avx2,f16c"))) static void NAME(ROWS_PARAMS) {                             \
        (void)out_step;                                                                               \
        q8_rows4(QTYPE, w, stride, nb, qx, dx, dxs, sx, out);                                         \
    }
#define ROWS8(NAME, QTYPE, TN)                                                                        \
    __attribute__((target("avx2,f16c"))) static void NAME(ROWS_PARAMS) {                             \
        q4_rows8(QTYPE, TN, w, stride, nb, qx, dx, dxs, sx, out, out_step);                           \
    }
ROWS4(rows4_q8_0, Q8_0)
ROWS4(rows4_q4_0, Q4_0)
ROWS4(rows4_q4_1, Q4_1)
ROWS8(rows8_q4_0, Q4_0, 1)
ROWS8(rows8_q4_1, Q4_1, 1)
ROWS8(rows8x2_q4_0, Q4_0, 2)
ROWS8(rows8x2_q4_1, Q4_1, 2)
ROWS8(rows8_q5_0, Q5_0, 1)
ROWS8(rows8_q5_1, Q5_1, 1)
ROWS8(rows8x2_q5_0, Q5_0, 2)
ROWS8(rows8x2_q5_1, Q5_1, 2)

typedef void (*rows_fn)(ROWS_PARAMS);
/* by format code (0: none) */
static const rows_fn ROWS4_FNS[NQTYPES] = {[Q8_0] = rows4_q8_0, [Q4_0] = rows4_q4_0, [Q4_1] = rows4_q4_1};
static const rows_fn ROWS8_FNS[NQTYPES] = {[Q4_0] = rows8_q4_0, [Q4_1] = rows8_q4_1, [Q5_0] = rows8_q5_0,
                                           [Q5_1] = rows8_q5_1};
static const rows_fn ROWS8X2_FNS[NQTYPES] = {[Q4_0] = rows8x2_q4_0, [Q4_1] = rows8x2_q4_1,
                                             [Q5_0] = rows8x2_q5_0, [Q5_1] = rows8x2_q5_1};
#endif

static int simd_allowed = 3; /* the most vector path taken: 3 AVX-512 VNNI, 2 AVX-512, 1 AVX2, 0 the portable
                              * (for tests) */

static int has_avx2(void) {
#if VG_X86
    static int known = -1;
    if (known < 0) known = vg_has_avx2_fma() && vg_has_f16c();
    return known && simd_allowed >= 1;
#else
    return 0;
#endif
}

/* the AVX-512 paths (quant_f32.c's, quant_k8.c's) */
static int has_avx512(void) { return has_avx2() && vg_has_avx512() && simd_allowed >= 2; }

/* quant_vnni.c's paths (the 32-value formats' q8 products; the others take level 3 as 2) */
static int has_vnni(void) { return has_avx512() && vg_has_avx512vnni() && simd_allowed >= 3; }

int vg_quant_simd(int level) {
    if (level >= 0) simd_allowed = level;
    return has_vnni() ? 3 : has_avx512() ? 2 : has_avx2() ? 1 : 0;
}

int vg_k8_path(int64_t t); /* quant_k8.c */

/* the code a qmatmul_q8 of `qtype` on t activation rows runs now (4 AMX, quant_amx.c's, then vg_quant_simd's
 * levels: 3 VNNI, quant_vnni.c's or quant_k8.c's, 2 AVX-512, 1 AVX2, 0 portable), for benchmarks and tests
 * that name it */
int vg_quant_q8_path(int qtype, int64_t t) {
    if (qtype < 0 || qtype >= NQTYPES) return -1;
    if (BLOCK_VALUES[qtype] == 256) return vg_k8_path(t);
    if (has_vnni() && vg_q8_amx_takes(qtype, t)) return 4; /* quant_amx.c's (its band's last rows VNNI's) */
    return has_vnni() && vg_q8_vnni_takes(qtype) ? 3 : has_avx2() ? 1 : 0;
}

typedef struct {
    int qtype;
    const uint8_t *w;
    int64_t n, k, t; /* n: the outputs' row stride (the bands say which weight rows) */
    const int8_t *qx;
    const double *dx, *dxs;
    const int32_t *sx;
    float *out;
} qjob;

#if VG_X86
/* q5_0, q5_1, iq4_nl against 8-bit activations: weight row w against activation rows t0..t1 (at most 16,
 * each block unpacked once for all of them), q8_row's arithmetic with each block's integer dot made 32 bytes
 * at a time (pairs of products summed in 16 bits, |a*b + c*d| <= 2 * 127 * 127, then in 32: an exact
 * integer, as block_dot's) and each output's terms added in block order */
__attribute__((target("avx2,f16c"))) static void q8_row_avx2(int qtype, const uint8_t *w, int64_t nb,
                                                              const qjob *p, int64_t t0, int64_t t1,
                                                              float *out, int64_t out_stride) {
    const int64_t bytes = BLOCK_BYTES[qtype], k = p->k;
    const __m256i low4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    /* byte i of a 32-bit mask spread to 32 bytes: all ones where bit i is set (bytes 8l..8l+7 see byte l) */
    const __m256i spread = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)IQ4_VALUES));
    const int nibbles_at = qtype == Q5_0 ? 6 : qtype == Q5_1 ? 8 : 2;
    double acc[16] = {0};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bytes;
        const __m128i n = _mm_loadu_si128((const __m128i *)(wb + nibbles_at));
        __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(n, 4), n), low4); /* values 0..31 */
        __m256i sign = q;
        if (qtype == IQ4_NL) { /* signed: |q| times y with q's sign */
            sign = _mm256_shuffle_epi8(table, q);
            q = _mm256_abs_epi8(sign);
        } else {
            const __m256i bits = _mm256_shuffle_epi8(_mm256_set1_epi32(load32(wb + nibbles_at - 4)), spread);
            const __m256i set = _mm256_cmpeq_epi8(_mm256_or_si256(bits, others), _mm256_set1_epi8(-1));
            q = _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(16)));
        }
        const double d = (double)vg_f16_at(wb), m = qtype == Q5_1 ? (double)vg_f16_at(wb + 2) : 0.0;
        for (int64_t t = t0; t < t1; t++) {
            __m256i y = _mm256_loadu_si256((const __m256i *)(p->qx + t * k + 32 * b));
            if (qtype == IQ4_NL) y = _mm256_sign_epi8(y, sign);
            const __m256i sums = _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), ones);
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
            int32_t dot = _mm_cvtsi128_si32(s4);
            const int64_t at = t * nb + b;
            if (qtype == Q5_0) dot -= 16 * p->sx[at];
            double term = (d * p->dx[at]) * (double)dot;
            if (qtype == Q5_1) term = term + m * p->dxs[at];
            acc[t - t0] = acc[t - t0] + term;
        }
    }
    for (int64_t t = t0; t < t1; t++) out[t * out_stride] = (float)acc[t - t0];
}
#endif

#if VG_X86
/* rows r.. of a band 8 at a time (the formats of ROWS8_FNS), two activation rows at once (they share the
 * unpacked weights); returns the first row left (fewer than 8 before hi) */
static int64_t q8_rows8_band(const qjob *p, int64_t r, int64_t hi, int64_t stride, int64_t nb) {
    const rows_fn rows8 = ROWS8_FNS[p->qtype], rows8x2 = ROWS8X2_FNS[p->qtype];
    for (; r + 8 <= hi; r += 8) {
        int64_t t = 0;
        for (; t + 2 <= p->t; t += 2)
            rows8x2(p->w + r * stride, stride, nb, p->qx + t * p->k, p->dx + t * nb, p->dxs + t * nb,
                    p->sx + t * nb, p->out + t * p->n + r, p->n);
        for (; t < p->t; t++)
            rows8(p->w + r * stride, stride, nb, p->qx + t * p->k, p->dx + t * nb, p->dxs + t * nb,
                  p->sx + t * nb, p->out + t * p->n + r, p->n);
    }
    return r;
}
#endif

static void q8_band(void *ctx, int64_t lo, int64_t hi) {
    const qjob *p = (const qjob *)ctx;
    const int64_t nb = p->k / 32, stride = nb * BLOCK_BYTES[p->qtype];
    int64_t r = lo;
    if (has_vnni() && vg_q8_amx_takes(p->qtype, p->t))
        r = vg_q8_rows16_amx(p->qtype, p->w, r, hi, p->n, p->k, p->t, p->qx, p->dx, p->out);
    if (has_vnni() && vg_q8_vnni_takes(p->qtype))
        r = vg_q8_rows8_vnni(p->qtype, p->w, r, hi, p->n, p->k, p->t, p->qx, p->dx, p->dxs, p->sx, p->out);
#if VG_X86
    if (has_avx2()) {
        if (ROWS8_FNS[p->qtype]) r = q8_rows8_band(p, r, hi, stride, nb);
        if (!ROWS4_FNS[p->qtype]) { /* q5_0, q5_1 (the last rows), iq4_nl: a row at a time, 16 activation
                                     * rows at once */
            for (; r < hi; r++)
                for (int64_t t = 0; t < p->t; t += 16)
                    q8_row_avx2(p->qtype, p->w + r * stride, nb, p, t, t + 16 < p->t ? t + 16 : p->t, p->out + r,
                                p->n);
            return;
        }
        float o[8];
        for (; r + 4 <= hi; r += 4)
            for (int64_t t = 0; t < p->t; t++) {
                ROWS4_FNS[p->qtype](p->w + r * stride, stride, nb, p->qx + t * p->k, p->dx + t * nb,
                                    p->dxs + t * nb, p->sx + t * nb, o, 0);
                memcpy(p->out + t * p->n + r, o, 4 * sizeof(float));
            }
    }
#endif
    for (; r < hi; r++)
        for (int64_t t = 0; t < p->t; t++)
            p->out[t * p->n + r] = q8_row(p->qtype, p->w + r * stride, nb, p->qx + t * p->k, p->dx + t * nb,
                                          p->dxs + t * nb, p->sx + t * nb);
}

/* frees a zeroed or quantized q8_acts (and zeroes it) */
static void q8_free(q8_acts *a) {
    free(a->qx), free(a->dx), free(a->sx);
    a->qx = NULL, a->dx = NULL, a->sx = NULL;
}

/* x f32[t, k] quantized by blocks of 32 (quantize_row's): returns 0, or -1 when out of memory */
static int q8_quantize(const float *x, int64_t t, int64_t k, q8_acts *a) {
    const int64_t nb = k / 32;
    a->qx = malloc((size_t)(t * k) + 1);
    a->dx = malloc(sizeof(double) * (size_t)(2 * t * nb + 1));
    a->sx = malloc(sizeof(int32_t) * (size_t)(t * nb + 1));
    if (!a->qx || !a->dx || !a->sx) {
        q8_free(a);
        return -1;
    }
    a->dxs = a->dx + t * nb;
    for (int64_t i = 0; i < t; i++) {
#if VG_X86
        if (has_avx2()) {
            quantize_row_avx2(x + i * k, k, a->qx + i * k, a->dx + i * nb, a->dxs + i * nb, a->sx + i * nb);
            continue;
        }
#endif
        quantize_row(x + i * k, k, a->qx + i * k, a->dx + i * nb, a->dxs + i * nb, a->sx + i * nb);
    }
    return 0;
}

/* out[i, r] (rows out_stride apart) = qmatmul_q8 of w's n rows against the quantized activations a */
static void q8_product(int qtype, const uint8_t *w, int64_t n, int64_t k, int64_t t, const q8_acts *a,
                       float *out, int64_t out_stride, int64_t min_rows, int threads) {
    qjob p = {.qtype = qtype, .w = w, .n = out_stride, .k = k, .t = t, .qx = a->qx, .dx = a->dx, .dxs = a->dxs,
              .sx = a->sx, .out = out};
    vg_parallel_for(n, min_rows, threads, q8_band, &p);
}

/* out f32[t, n] = qmatmul_q8(x f32[t, k], w[n, k/32 blocks]); returns 0, or -1 when out of memory */
int vg_qmatmul_q8(int qtype, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t, float *out,
                  int64_t min_rows, int threads) {
    q8_acts a;
    if (q8_quantize(x, t, k, &a)) return -1;
    q8_product(qtype, w, n, k, t, &a, out, n, min_rows, threads);
    q8_free(&a);
    return 0;
}

/* out f32[t, n] = qmatmul_q8(rms_norm(x, norm_w, eps), w): rms_norm's kernel (on one thread: t rows of k
 * values are little work), then vg_qmatmul_q8; returns 0, or -1 when out of memory */
int vg_rms_norm_qmatmul_q8(int qtype, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t,
                           float *out, int64_t min_rows, int threads, const float *norm_w, double eps,
                           int64_t block) {
    float *normed = malloc(sizeof(float) * (size_t)(t * k) + 1);
    if (!normed) return -1;
    vg_rms_norm_f32(x, norm_w, normed, t, k, eps, block, t, 1);
    int status = vg_qmatmul_q8(qtype, w, n, k, normed, t, out, min_rows, threads);
    free(normed);
    return status;
}

/* out f32[t, width] = the parts' qmatmul_q8 side by side, part i (spec[3i..3i+2]: its format, its n_i weight
 * rows ws[i], the fewest rows a thread takes) in the n_i columns after the earlier parts': x (rms-normalized
 * first where norm_w is given: once) quantized once for the 32-value parts and once (q8_K) for the 256-value
 * ones, every part reading the same 8-bit activations. Each part's columns are its own qmatmul_q8's (or
 * rms_norm_qmatmul_q8's) bits. At most 4 parts; returns 0, or -1 when out of memory */
int vg_qmatmul_q8_group(const int64_t *spec, int64_t parts, const uint8_t *w0, const uint8_t *w1,
                        const uint8_t *w2, const uint8_t *w3, int64_t k, const float *x, int64_t t, float *out,
                        int threads, const float *norm_w, double eps, int64_t block) {
    const uint8_t *ws[4] = {w0, w1, w2, w3};
    int64_t width = 0;
    int need32 = 0, need256 = 0, status = 0;
    if (parts < 1 || parts > 4) return -1;
    for (int64_t i = 0; i < parts; i++) {
        width += spec[3 * i + 1];
        if (BLOCK_VALUES[spec[3 * i]] == 32) need32 = 1;
        else need256 = 1;
    }
    float *normed = NULL;
    if (norm_w) {
        normed = malloc(sizeof(float) * (size_t)(t * k) + 1);
        if (!normed) return -1;
        vg_rms_norm_f32(x, norm_w, normed, t, k, eps, block, t, 1);
        x = normed;
    }
    q8_acts a = {0};
    k8_acts a8 = {0};
    if ((need32 && q8_quantize(x, t, k, &a)) || (need256 && vg_k8_quantize(x, t, k, &a8))) {
        status = -1;
    } else {
        for (int64_t i = 0, at = 0; i < parts; at += spec[3 * i + 1], i++) {
            const int qtype = (int)spec[3 * i];
            if (BLOCK_VALUES[qtype] == 32)
                q8_product(qtype, ws[i], spec[3 * i + 1], k, t, &a, out + at, width, spec[3 * i + 2], threads);
            else
                vg_k8_product(qtype, ws[i], spec[3 * i + 1], k, t, &a8, out + at, width, spec[3 * i + 2], threads);
        }
    }
    q8_free(&a);
    vg_k8_free(&a8);
    free(normed);
    return status;
}
