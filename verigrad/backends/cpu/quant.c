/* Products with quantized weights (GGML blocks of 32 values), computed from the blocks themselves.
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
 * at the nibble): their dots are exact integers too, scaled as q4_0's and q4_1's (AVX2: a row at a time).
 *
 * vg_rms_norm_qmatmul_q8: the same after rms_norm's kernel (rows.c) on x.
 *
 * vg_qmatmul_f32: out[t, n] = qmatmul's reference (ops/quant.py `lane_dot`), bit for bit: sum_k x[t, k] *
 * w[n, k] with w dequantized to f32 as the reference does, in 32 f32 partial sums (sum j takes k = j mod 32
 * in order, one fused multiply-add rounded once a step), folded s[j] + s[j + h] for h = 16, 8, 4, 2, 1. It
 * also takes 5 q5_k, 6 q5_0, 7 q5_1, 8 q2_k, 9 q3_k, 10 iq4_nl and 11 iq4_xs (the k-quants' blocks hold 256
 * values; see ops/quant.py for every layout). Rows are de-quantized into a row buffer (q4_k, q5_k and q6_k 8
 * values (AVX2) or 16 (AVX-512) at a time, the 32-value formats 8 (AVX2) or 16 (AVX-512)) and multiplied
 * 4 rows at a time on AVX-512, in tiles of up to 4 activation rows by 2 weight rows (one activation row by
 * 4 weight rows; AVX2: two activation rows by one weight row), the partial sums in vector lanes; a decode
 * step (one activation row) of a 32-value format de-quantizes each block in registers and multiplies it at
 * once (no row buffer), 4 weight rows at a time. On AVX-512 the 4-bit formats look their values up in the
 * block's table of 16 (its scale times each nibble's value, computed as the portable path computes it).
 * Every path does the portable path's operations, so the same bits (vg_quant_simd chooses one, for tests),
 * and each output is summed as a tile of one sums it: a row's bits do not depend on how many rows there
 * are or what they hold.
 *
 * Threads take bands of weight rows (each reads only its band); every output is computed by one thread
 * in one order, so every thread count gives the same bits. The AVX2 paths (chosen at run time) do the
 * portable paths' arithmetic, lane by lane, in the same order: the q8 products take 8 rows (q4 formats;
 * two activation rows at once in a prompt) or 4 rows (q8_0) at a time, one row per double lane, and
 * prefetch the next rows while they compute (the hardware prefetcher alone left the 28 MB output head at
 * a fifth of the read bandwidth).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vg.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define VG_X86 1
#else
#define VG_X86 0
#endif

enum { Q8_0 = 0, Q4_0 = 1, Q4_1 = 2, Q4_K = 3, Q6_K = 4, Q5_K = 5, Q5_0 = 6, Q5_1 = 7, Q2_K = 8, Q3_K = 9 };
enum { IQ4_NL = 10, IQ4_XS = 11, NQTYPES = 12 };
static const int64_t BLOCK_BYTES[NQTYPES] = {34, 18, 20, 144, 210, 176, 22, 24, 84, 110, 18, 136};
static const int64_t BLOCK_VALUES[NQTYPES] = {32, 32, 32, 256, 256, 256, 32, 32, 256, 256, 32, 256};
static const int8_t IQ4_VALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};


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

static inline int32_t load32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
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

/* q4 formats: rows w + i stride, i = 0..7, against TN (1 or 2) consecutive activation rows: 8 outputs
 * each, at out + t * out_step. The even rows' sums are in one vector and the odd rows' in another (fewer
 * shuffles than twice 4 rows); with TN = 2 the weights' nibbles and scales are unpacked once for both. */
__attribute__((target("avx2,f16c"), always_inline)) static inline void q4_rows8(
    int qtype, int tn, const uint8_t *w, int64_t stride, int64_t nb, const int8_t *qx, const double *dx,
    const double *dxs, const int32_t *sx, float *out, int64_t out_step) {
    const int64_t bytes = BLOCK_BYTES[qtype], at = qtype == Q4_1 ? 4 : 2;
    const __m256i mask = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
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
            for (int t = 0; t < tn; t++) { /* |lo + hi| <= 7620: no int16 overflow */
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
            __m256d x = _mm256_set1_pd(dx[t * nb + b]);
            __m256d t_e = _mm256_mul_pd(_mm256_mul_pd(d_e, x), _mm256_cvtepi32_pd(_mm256_castsi256_si128(h)));
            __m256d h_o = _mm256_cvtepi32_pd(_mm256_extracti128_si256(h, 1));
            __m256d t_o = _mm256_mul_pd(_mm256_mul_pd(d_o, x), h_o);
            if (qtype == Q4_1) {
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

typedef void (*rows_fn)(ROWS_PARAMS);
static const rows_fn ROWS4_FNS[3] = {rows4_q8_0, rows4_q4_0, rows4_q4_1};
static const rows_fn ROWS8_FNS[3] = {0, rows8_q4_0, rows8_q4_1};
static const rows_fn ROWS8X2_FNS[3] = {0, rows8x2_q4_0, rows8x2_q4_1};
#endif

static int simd_allowed = 2; /* the most vector path taken: 2 AVX-512, 1 AVX2, 0 the portable (for tests) */

#if VG_X86
/* F16C from CPUID leaf 1 (ECX bit 29): Clang's __builtin_cpu_supports does not know "f16c" */
static int has_f16c(void) {
    unsigned int eax, ebx, ecx, edx;
    return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
}
#endif

static int has_avx2(void) {
#if VG_X86
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    return known && simd_allowed >= 1;
#else
    return 0;
#endif
}

/* the AVX-512 paths (the f32-activation products of q4_k, q5_k and q6_k) */
static int has_avx512(void) { return has_avx2() && vg_has_avx512() && simd_allowed >= 2; }

/* level 0, 1 or 2: the most vector path allowed (portable, AVX2, AVX-512); -1 leaves it; returns the path
 * taken now (after the change), capped at what the machine has */
int vg_quant_simd(int level) {
    if (level >= 0) simd_allowed = level;
    return has_avx512() ? 2 : has_avx2() ? 1 : 0;
}

typedef struct {
    int qtype;
    const uint8_t *w;
    int64_t n, k, t;
    const int8_t *qx;
    const double *dx, *dxs;
    const int32_t *sx;
    const float *x; /* the f32 path's activations */
    float *out;
    volatile int failed; /* a band could not allocate its row buffer */
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

static void q8_band(void *ctx, int64_t lo, int64_t hi) {
    const qjob *p = (const qjob *)ctx;
    const int64_t nb = p->k / 32, stride = nb * BLOCK_BYTES[p->qtype];
    int64_t r = lo;
#if VG_X86
    if (has_avx2() && p->qtype > Q4_1) { /* q5_0, q5_1, iq4_nl: a row at a time, 16 activation rows at once */
        for (; r < hi; r++)
            for (int64_t t = 0; t < p->t; t += 16)
                q8_row_avx2(p->qtype, p->w + r * stride, nb, p, t, t + 16 < p->t ? t + 16 : p->t, p->out + r, p->n);
        return;
    }
    if (has_avx2()) {
        const rows_fn rows4 = ROWS4_FNS[p->qtype], rows8 = ROWS8_FNS[p->qtype];
        const rows_fn rows8x2 = ROWS8X2_FNS[p->qtype];
        float o[8];
        if (rows8)
            for (; r + 8 <= hi; r += 8) {
                int64_t t = 0;
                for (; t + 2 <= p->t; t += 2) /* two activation rows share the unpacked weights */
                    rows8x2(p->w + r * stride, stride, nb, p->qx + t * p->k, p->dx + t * nb, p->dxs + t * nb,
                            p->sx + t * nb, p->out + t * p->n + r, p->n);
                for (; t < p->t; t++)
                    rows8(p->w + r * stride, stride, nb, p->qx + t * p->k, p->dx + t * nb, p->dxs + t * nb,
                          p->sx + t * nb, p->out + t * p->n + r, p->n);
            }
        for (; r + 4 <= hi; r += 4)
            for (int64_t t = 0; t < p->t; t++) {
                rows4(p->w + r * stride, stride, nb, p->qx + t * p->k, p->dx + t * nb, p->dxs + t * nb,
                      p->sx + t * nb, o, 0);
                memcpy(p->out + t * p->n + r, o, 4 * sizeof(float));
            }
    }
#endif
    for (; r < hi; r++)
        for (int64_t t = 0; t < p->t; t++)
            p->out[t * p->n + r] = q8_row(p->qtype, p->w + r * stride, nb, p->qx + t * p->k, p->dx + t * nb,
                                          p->dxs + t * nb, p->sx + t * nb);
}

/* out f32[t, n] = qmatmul_q8(x f32[t, k], w[n, k/32 blocks]); returns 0, or -1 when out of memory */
int vg_qmatmul_q8(int qtype, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t, float *out,
                  int64_t min_rows, int threads) {
    const int64_t nb = k / 32;
    int8_t *qx = malloc((size_t)(t * k) + 1);
    double *dx = malloc(sizeof(double) * (size_t)(2 * t * nb + 1));
    int32_t *sx = malloc(sizeof(int32_t) * (size_t)(t * nb + 1));
    if (!qx || !dx || !sx) {
        free(qx), free(dx), free(sx);
        return -1;
    }
    double *dxs = dx + t * nb;
    for (int64_t i = 0; i < t; i++) {
#if VG_X86
        if (has_avx2()) {
            quantize_row_avx2(x + i * k, k, qx + i * k, dx + i * nb, dxs + i * nb, sx + i * nb);
            continue;
        }
#endif
        quantize_row(x + i * k, k, qx + i * k, dx + i * nb, dxs + i * nb, sx + i * nb);
    }
    qjob p = {.qtype = qtype, .w = w, .n = n, .k = k, .t = t, .qx = qx, .dx = dx, .dxs = dxs, .sx = sx,
              .out = out};
    vg_parallel_for(n, min_rows, threads, q8_band, &p);
    free(qx), free(dx), free(sx);
    return 0;
}

/* defined in rows.c: rms_norm's kernel (the reference's bits) */
void vg_rms_norm_f32(const float *x, const float *w, float *out, int64_t rows, int64_t n, double eps,
                     int64_t block, int64_t min_rows, int threads);

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

/* ---------------------------------------------------------------- f32 activations */

/* q4_k/q5_k's 6-bit scale and min of sub-block j from the 12 bytes s */
static void k4_scale(const uint8_t *s, int j, int *sc, int *m) {
    *sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
}

/* a q4_k (q5_k: qh given) block: 8 sub-blocks of 32 with 6-bit scales and mins; value (d * sc) * q - dmin * m,
 * q the nibbles (and bit j of qh[i] as the fifth bit of value i of sub-block j) */
static void dequantize_k4(const uint8_t *wb, const uint8_t *qh, const uint8_t *qs, float *v) {
    const float d = vg_f16_at(wb), dmin = vg_f16_at(wb + 2);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_scale(wb + 4, j, &sc, &m);
        const float ds = d * (float)sc, dm = dmin * (float)m;
        const uint8_t *q = qs + 32 * (j / 2); /* sub-block 2c: low nibbles of chunk c; 2c + 1: high */
        for (int i = 0; i < 32; i++) {
            int qi = j % 2 ? q[i] >> 4 : q[i] & 15;
            if (qh) qi |= ((qh[i] >> j) & 1) << 4;
            v[32 * j + i] = ds * (float)qi - dm;
        }
    }
}

/* q5_0 (value d * (q - 16)) and q5_1 (d * q + m): the fifth bit of value i is bit i of a little-endian u32 */
static void dequantize_q5(int qtype, const uint8_t *wb, float *v) {
    const float d = vg_f16_at(wb), m = qtype == Q5_1 ? vg_f16_at(wb + 2) : 0.0f;
    const uint8_t *qh = wb + (qtype == Q5_1 ? 4 : 2), *qs = qh + 4;
    const uint32_t high = (uint32_t)qh[0] | ((uint32_t)qh[1] << 8) | ((uint32_t)qh[2] << 16) | ((uint32_t)qh[3] << 24);
    for (int i = 0; i < 32; i++) {
        int q = (i < 16 ? qs[i] & 15 : qs[i - 16] >> 4) | (int)(((high >> i) & 1) << 4);
        v[i] = qtype == Q5_1 ? d * (float)q + m : d * (float)(q - 16);
    }
}

/* q2_k and q3_k: value i of group g (16 groups of 16) has 2 bits at shift 2 * ((g / 2) % 4) of byte
 * qs[32 * (g / 8) + 16 * (g % 2) + i] */
static int crumb(const uint8_t *qs, int g, int i) {
    return (qs[32 * (g / 8) + 16 * (g % 2) + i] >> (2 * ((g / 2) % 4))) & 3;
}

/* q2_k: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin: (d * sc) * q - dmin * m */
static void dequantize_q2_k(const uint8_t *wb, float *v) {
    const float d = vg_f16_at(wb + 80), dmin = vg_f16_at(wb + 82);
    for (int g = 0; g < 16; g++) {
        const float dl = d * (float)(wb[g] & 15), ml = dmin * (float)(wb[g] >> 4);
        for (int i = 0; i < 16; i++) v[16 * g + i] = dl * (float)crumb(wb + 16, g, i) - ml;
    }
}

/* q3_k: hmask[32], qs[64], 12 bytes of 6-bit scales (less 32), d: (d * scale) * (q - 4 if the value's
 * bit of hmask is clear); value 32 s + l's bit is bit s of hmask[l] */
static void dequantize_q3_k(const uint8_t *wb, float *v) {
    const uint8_t *s = wb + 96;
    const float d = vg_f16_at(wb + 108);
    for (int g = 0; g < 16; g++) {
        int low = g < 8 ? s[g] & 15 : s[g - 8] >> 4, high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
        const float dl = d * (float)((low | (high << 4)) - 32);
        for (int i = 0; i < 16; i++) {
            int at = 16 * g + i, q = crumb(wb + 32, g, i) - (((wb[at % 32] >> (at / 32)) & 1) ? 0 : 4);
            v[at] = dl * (float)q;
        }
    }
}

/* iq4_nl (d, 16 bytes of nibbles: values from IQ4_VALUES) and iq4_xs (d, 2 + 4 bytes of 6-bit scales less
 * 32, 8 sub-blocks of 16 bytes): (d * scale) * IQ4_VALUES[q] */
static void dequantize_iq4(int qtype, const uint8_t *wb, float *v) {
    const float d = vg_f16_at(wb);
    if (qtype == IQ4_NL) {
        for (int i = 0; i < 16; i++) {
            v[i] = d * (float)IQ4_VALUES[wb[2 + i] & 15];
            v[i + 16] = d * (float)IQ4_VALUES[wb[2 + i] >> 4];
        }
        return;
    }
    const int high = wb[2] | (wb[3] << 8);
    for (int j = 0; j < 8; j++) {
        int ls = ((wb[4 + j / 2] >> (4 * (j % 2))) & 15) | (((high >> (2 * j)) & 3) << 4);
        const float dl = d * (float)(ls - 32);
        const uint8_t *q = wb + 8 + 16 * j;
        for (int i = 0; i < 16; i++) {
            v[32 * j + i] = dl * (float)IQ4_VALUES[q[i] & 15];
            v[32 * j + i + 16] = dl * (float)IQ4_VALUES[q[i] >> 4];
        }
    }
}

/* a q6_k block: 16 groups of 16 with int8 scales; value (d * sc) * (q - 32), q from 4 + 2 bits */
static void dequantize_q6_k(const uint8_t *wb, float *v) {
    const float d = vg_f16_at(wb + 208);
    for (int h = 0; h < 2; h++) {
        const uint8_t *ql = wb + 64 * h, *qh = wb + 128 + 32 * h;
        const int8_t *sc = (const int8_t *)(wb + 192) + 8 * h;
        for (int l = 0; l < 32; l++) {
            const int low[4] = {ql[l] & 15, ql[l + 32] & 15, ql[l] >> 4, ql[l + 32] >> 4};
            for (int quarter = 0; quarter < 4; quarter++) {
                int q = low[quarter] | (((qh[l] >> (2 * quarter)) & 3) << 4);
                v[128 * h + 32 * quarter + l] = (d * (float)sc[2 * quarter + l / 16]) * (float)(q - 32);
            }
        }
    }
}

/* one row of w dequantized to f32 exactly as the reference does (d * q, d * (q - 8), d * q + m, ...) */
static void dequantize_row(int qtype, const uint8_t *w, int64_t nb, float *v) {
    const int64_t bytes = BLOCK_BYTES[qtype];
    for (int64_t b = 0; b < nb; b++, v += BLOCK_VALUES[qtype]) {
        const uint8_t *wb = w + b * bytes;
        float d = vg_f16_at(wb);
        if (qtype == Q8_0) {
            for (int i = 0; i < 32; i++) v[i] = d * (float)((const int8_t *)(wb + 2))[i];
        } else if (qtype == Q4_0) {
            for (int i = 0; i < 16; i++) {
                v[i] = d * (float)((wb[2 + i] & 15) - 8);
                v[i + 16] = d * (float)((wb[2 + i] >> 4) - 8);
            }
        } else if (qtype == Q4_1) {
            float m = vg_f16_at(wb + 2);
            for (int i = 0; i < 16; i++) {
                v[i] = d * (float)(wb[4 + i] & 15) + m;
                v[i + 16] = d * (float)(wb[4 + i] >> 4) + m;
            }
        } else if (qtype == Q4_K) {
            dequantize_k4(wb, 0, wb + 16, v);
        } else if (qtype == Q5_K) {
            dequantize_k4(wb, wb + 16, wb + 48, v);
        } else if (qtype == Q6_K) {
            dequantize_q6_k(wb, v);
        } else if (qtype == Q5_0 || qtype == Q5_1) {
            dequantize_q5(qtype, wb, v);
        } else if (qtype == Q2_K) {
            dequantize_q2_k(wb, v);
        } else if (qtype == Q3_K) {
            dequantize_q3_k(wb, v);
        } else {
            dequantize_iq4(qtype, wb, v);
        }
    }
}

/* qmatmul's f32 sum of x[i] * v[i] (ops/quant.py): partial sum j of 32 takes i = j (mod 32) in order, each
 * step one fused multiply-add rounded once, from +0.0; then s[j] = s[j] + s[j + h] for h = 16, 8, 4, 2, 1 */
static float fold32(float *a) {
    for (int h = 16; h; h >>= 1)
        for (int j = 0; j < h; j++) a[j] = a[j] + a[j + h];
    return a[0];
}

static float dot_f32(const float *x, const float *v, int64_t k) {
    float a[32] = {0};
    for (int64_t i = 0; i < k; i += 32)
        for (int j = 0; j < 32; j++) a[j] = fmaf(x[i + j], v[i + j], a[j]);
    return fold32(a);
}

#if VG_X86
/* 8 integers (int32) as floats, times d, plus m when m is given: the reference's f32 values */
__attribute__((target("avx2"), always_inline)) static inline void put8(float *v, __m256i q, __m256 d,
                                                                         const __m256 *m) {
    __m256 x = _mm256_mul_ps(d, _mm256_cvtepi32_ps(q));
    _mm256_storeu_ps(v, m ? _mm256_add_ps(x, *m) : x);
}

__attribute__((target("avx2,f16c"))) static void dequantize_row_avx2(int qtype, const uint8_t *w, int64_t nb,
                                                                       float *v) {
    const int64_t bytes = BLOCK_BYTES[qtype];
    for (int64_t b = 0; b < nb; b++, v += 32) {
        const uint8_t *wb = w + b * bytes;
        __m256 d = _mm256_set1_ps(vg_f16_at(wb));
        if (qtype == Q8_0) {
            for (int j = 0; j < 4; j++) {
                __m128i q = _mm_loadl_epi64((const __m128i *)(wb + 2 + 8 * j));
                put8(v + 8 * j, _mm256_cvtepi8_epi32(q), d, 0);
            }
            continue;
        }
        const __m128i mask = _mm_set1_epi8(15);
        const int five = qtype == Q5_0 || qtype == Q5_1, affine = qtype == Q4_1 || qtype == Q5_1;
        const uint8_t *qh = wb + (affine ? 4 : 2); /* q5: the fifth bits (a u32), then the nibbles */
        __m128i n = _mm_loadu_si128((const __m128i *)(qh + (five ? 4 : 0)));
        __m128i lo = _mm_and_si128(n, mask), hi = _mm_and_si128(_mm_srli_epi16(n, 4), mask);
        __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        __m256 m = _mm256_set1_ps(affine ? vg_f16_at(wb + 2) : 0.0f);
        __m256i off = _mm256_set1_epi32(qtype == Q4_0 ? 8 : qtype == Q5_0 ? 16 : 0);
        __m256i high = _mm256_set1_epi32(five ? load32(qh) : 0); /* x86 is little-endian */
        for (int j = 0; j < 4; j++) {
            __m256i shift = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * j));
            __m256i bits = _mm256_and_si256(_mm256_srlv_epi32(high, shift), _mm256_set1_epi32(1));
            __m256i q = _mm256_or_si256(_mm256_cvtepu8_epi32(parts[j]), _mm256_slli_epi32(bits, 4));
            put8(v + 8 * j, _mm256_sub_epi32(q, off), d, affine ? &m : 0);
        }
    }
}

/* 8 (AVX2) or 16 (AVX-512) k-quant values: q = ((lo[i] >> ls) & lm) | (((hi[i] >> hs) & hm) << 4) - off
 * (no hi: the first term alone), then ds * q (less dm where has_m): the portable paths' operations */
__attribute__((target("avx2"), always_inline)) static inline void k_avx2(float *v, const uint8_t *lo, int ls,
                                                                           const uint8_t *hi, int hs, int hm,
                                                                           int off, float ds, float dm,
                                                                           int has_m) {
    __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)lo));
    q = _mm256_and_si256(_mm256_srl_epi32(q, _mm_cvtsi32_si128(ls)), _mm256_set1_epi32(15));
    if (hi) {
        __m256i h = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)hi));
        h = _mm256_and_si256(_mm256_srl_epi32(h, _mm_cvtsi32_si128(hs)), _mm256_set1_epi32(hm));
        q = _mm256_or_si256(q, _mm256_slli_epi32(h, 4));
    }
    __m256 x = _mm256_mul_ps(_mm256_set1_ps(ds), _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(off))));
    _mm256_storeu_ps(v, has_m ? _mm256_sub_ps(x, _mm256_set1_ps(dm)) : x);
}

#define AVX512_Q __attribute__((target("avx2,f16c,avx512f,avx512dq")))
AVX512_Q __attribute__((always_inline)) static inline void k_avx512(float *v, const uint8_t *lo, int ls,
                                                                    const uint8_t *hi, int hs, int hm, int off,
                                                                    float ds, float dm, int has_m) {
    __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)lo));
    q = _mm512_and_si512(_mm512_srl_epi32(q, _mm_cvtsi32_si128(ls)), _mm512_set1_epi32(15));
    if (hi) {
        __m512i h = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)hi));
        h = _mm512_and_si512(_mm512_srl_epi32(h, _mm_cvtsi32_si128(hs)), _mm512_set1_epi32(hm));
        q = _mm512_or_si512(q, _mm512_slli_epi32(h, 4));
    }
    __m512 x = _mm512_mul_ps(_mm512_set1_ps(ds), _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(off))));
    _mm512_storeu_ps(v, has_m ? _mm512_sub_ps(x, _mm512_set1_ps(dm)) : x);
}

/* rows of q4_k, q5_k or q6_k blocks, L values a step, with PUT (k_avx2 or k_avx512); the layouts are those
 * of dequantize_k4 and dequantize_q6_k */
#define DEQUANTIZE_K(NAME, ATTR, L, PUT)                                                                    \
    ATTR static void NAME(int qtype, const uint8_t *w, int64_t nb, float *v) {                              \
        for (int64_t b = 0; b < nb; b++, v += 256) {                                                        \
            const uint8_t *wb = w + b * BLOCK_BYTES[qtype];                                                 \
            if (qtype == Q6_K) {                                                                            \
                const float d = vg_f16_at(wb + 208);                                                    \
                const int8_t *sc = (const int8_t *)(wb + 192);                                              \
                for (int h = 0; h < 2; h++)                                                                 \
                    for (int quarter = 0; quarter < 4; quarter++)                                           \
                        for (int l = 0; l < 32; l += L)                                                     \
                            PUT(v + 128 * h + 32 * quarter + l, wb + 64 * h + 32 * (quarter & 1) + l,        \
                                4 * (quarter >> 1), wb + 128 + 32 * h + l, 2 * quarter, 3, 32,              \
                                d * (float)sc[8 * h + 2 * quarter + l / 16], 0.0f, 0);                      \
                continue;                                                                                   \
            }                                                                                               \
            const float d = vg_f16_at(wb), dmin = vg_f16_at(wb + 2);                                \
            const uint8_t *qh = qtype == Q5_K ? wb + 16 : 0, *qs = wb + (qtype == Q5_K ? 48 : 16);          \
            for (int j = 0; j < 8; j++) {                                                                   \
                int sc, m;                                                                                  \
                k4_scale(wb + 4, j, &sc, &m);                                                               \
                const float ds = d * (float)sc, dm = dmin * (float)m;                                       \
                for (int l = 0; l < 32; l += L)                                                             \
                    PUT(v + 32 * j + l, qs + 32 * (j / 2) + l, 4 * (j % 2), qh ? qh + l : 0, j, 1, 0, ds, dm, 1); \
            }                                                                                               \
        }                                                                                                   \
    }
DEQUANTIZE_K(dequantize_k_avx2, __attribute__((target("avx2,f16c"))), 8, k_avx2)
DEQUANTIZE_K(dequantize_k_avx512, AVX512_Q, 16, k_avx512)

/* 16 values of a 32-value block format (not q8_0) from its nibbles n (byte i: value i low, i + 16 high), the
 * upper half (values 16..31) when upper: the portable path's operations, so its values */
AVX512_Q __attribute__((always_inline)) static inline __m512 block16_avx512(int qtype, const uint8_t *wb,
                                                                           __m128i n, int upper, __m512 d,
                                                                           __m512 m) {
    __m512i q = _mm512_cvtepu8_epi32(n);
    if (qtype == IQ4_NL || qtype == Q4_0 || qtype == Q4_1) { /* the 16 values a nibble may stand for */
        const __m512i nibble = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        __m512 table;
        if (qtype == IQ4_NL)
            table = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)IQ4_VALUES))));
        else if (qtype == Q4_0)
            table = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(nibble, _mm512_set1_epi32(8))));
        else
            table = _mm512_add_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(nibble)), m);
        /* permutexvar reads the low 4 bits of each index: the low nibble as it is */
        return _mm512_permutexvar_ps(upper ? _mm512_srli_epi32(q, 4) : q, table);
    }
    /* q5_0, q5_1: the 32 values a 5-bit q may stand for, in two tables; bit i of the u32 before the
     * nibbles is value i's fifth bit, which picks the second (permutex2var reads 5 bits of each index) */
    const __m512i nibble = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i off = _mm512_set1_epi32(qtype == Q5_0 ? 16 : 0);
    __m512 low = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(nibble, off)));
    __m512 high = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_add_epi32(nibble, _mm512_set1_epi32(16)), off)));
    if (qtype == Q5_1) low = _mm512_add_ps(low, m), high = _mm512_add_ps(high, m);
    const uint32_t bits = (uint32_t)load32(wb + (qtype == Q5_1 ? 4 : 2));
    q = upper ? _mm512_srli_epi32(q, 4) : _mm512_and_si512(q, _mm512_set1_epi32(15));
    q = _mm512_mask_or_epi32(q, (__mmask16)(upper ? bits >> 16 : bits & 0xffff), q, _mm512_set1_epi32(16));
    return _mm512_permutex2var_ps(low, q, high);
}

/* a row of q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl blocks, 16 values a step: dequantize_row's values */
#define DEQUANTIZE_32(NAME, QTYPE)                                                                          \
    AVX512_Q static void NAME(const uint8_t *w, int64_t nb, float *v) {                                     \
        const int qt = QTYPE; /* an int: the codes are two enums */                                         \
        for (int64_t b = 0; b < nb; b++, v += 32) {                                                         \
            const uint8_t *wb = w + b * BLOCK_BYTES[qt];                                                    \
            const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(load32(wb))); /* F16C: vg_f16_at's */     \
            const __m512 d = _mm512_broadcastss_ps(dm);                                                     \
            if (qt == Q8_0) {                                                                               \
                for (int h = 0; h < 2; h++) {                                                               \
                    __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(wb + 2 + 16 * h)));  \
                    _mm512_storeu_ps(v + 16 * h, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q)));                  \
                }                                                                                           \
                continue;                                                                                   \
            }                                                                                               \
            const int at = qt == Q5_1 ? 8 : qt == Q5_0 ? 6 : qt == Q4_1 ? 4 : 2;                            \
            const __m128i n = _mm_loadu_si128((const __m128i *)(wb + at));                                  \
            const __m512 m = _mm512_broadcastss_ps(_mm_movehdup_ps(dm));                                    \
            _mm512_storeu_ps(v, block16_avx512(qt, wb, n, 0, d, m));                                        \
            _mm512_storeu_ps(v + 16, block16_avx512(qt, wb, n, 1, d, m));                                   \
        }                                                                                                   \
    }
DEQUANTIZE_32(dequantize_q8_0_avx512, Q8_0)
DEQUANTIZE_32(dequantize_q4_0_avx512, Q4_0)
DEQUANTIZE_32(dequantize_q4_1_avx512, Q4_1)
DEQUANTIZE_32(dequantize_q5_0_avx512, Q5_0)
DEQUANTIZE_32(dequantize_q5_1_avx512, Q5_1)
DEQUANTIZE_32(dequantize_iq4_nl_avx512, IQ4_NL)
/* dot_f32's fold of its 32 partial sums: a holds sums 0..15, b 16..31 */
AVX512_Q __attribute__((always_inline)) static inline float fold_avx512(__m512 a, __m512 b) {
    __m512 s = _mm512_add_ps(a, b);                                                                 /* h = 16 */
    __m256 e = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));           /* 8 */
    __m128 f = _mm_add_ps(_mm256_castps256_ps128(e), _mm256_extractf128_ps(e, 1));                /* 4 */
    f = _mm_add_ps(f, _mm_movehl_ps(f, f));                                                         /* 2 */
    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));                                        /* 1 */
}

/* dot_f32 of one activation row x with the 4 rows w + j stride (j = 0..3) of a 32-value block format, each
 * block de-quantized in registers (DEQUANTIZE_32's values) and multiplied at once: s[j], as dot_f32 sums
 * it (a decode step: no row buffer written and read back); the next 4 rows are fetched meanwhile */
#define FUSED_32(NAME, QTYPE)                                                                               \
    AVX512_Q static void NAME(const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {     \
        const int qt = QTYPE; /* an int: the codes are two enums */                                         \
        __m512 a[4], b[4];                                                                                  \
        for (int j = 0; j < 4; j++) a[j] = b[j] = _mm512_setzero_ps();                                      \
        const int64_t bytes = BLOCK_BYTES[qt];                                                              \
        const uint8_t *next = w + 4 * stride;                                                               \
        for (int64_t i = 0; i < nb; i++) {                                                                  \
            const __m512 x0 = _mm512_loadu_ps(x + 32 * i), x1 = _mm512_loadu_ps(x + 32 * i + 16);           \
            for (int j = 0; j < 4; j++) {                                                                   \
                const uint8_t *wb = w + j * stride + i * bytes;                                             \
                _mm_prefetch((const char *)(next + j * stride + i * bytes), _MM_HINT_T0);                   \
                const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(load32(wb)));                              \
                const __m512 d = _mm512_broadcastss_ps(dm);                                                 \
                __m512 lo, hi;                                                                              \
                if (qt == Q8_0) {                                                                           \
                    lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(wb + 2)))); \
                    hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(wb + 18)))); \
                    lo = _mm512_mul_ps(d, lo), hi = _mm512_mul_ps(d, hi);                                   \
                } else {                                                                                    \
                    const int at = qt == Q5_1 ? 8 : qt == Q5_0 ? 6 : qt == Q4_1 ? 4 : 2;                    \
                    const __m128i n = _mm_loadu_si128((const __m128i *)(wb + at));                          \
                    const __m512 m = _mm512_broadcastss_ps(_mm_movehdup_ps(dm));                            \
                    lo = block16_avx512(qt, wb, n, 0, d, m), hi = block16_avx512(qt, wb, n, 1, d, m);       \
                }                                                                                           \
                a[j] = _mm512_fmadd_ps(x0, lo, a[j]);                                                       \
                b[j] = _mm512_fmadd_ps(x1, hi, b[j]);                                                       \
            }                                                                                               \
        }                                                                                                   \
        for (int j = 0; j < 4; j++) s[j] = fold_avx512(a[j], b[j]);                                         \
    }
FUSED_32(fused_q8_0_avx512, Q8_0)
FUSED_32(fused_q4_0_avx512, Q4_0)
FUSED_32(fused_q4_1_avx512, Q4_1)
FUSED_32(fused_q5_0_avx512, Q5_0)
FUSED_32(fused_q5_1_avx512, Q5_1)
FUSED_32(fused_iq4_nl_avx512, IQ4_NL)
typedef void (*fused_fn)(const uint8_t *, int64_t, int64_t, const float *, float *);
static const fused_fn FUSED_AVX512[NQTYPES] = {
    [Q8_0] = fused_q8_0_avx512, [Q4_0] = fused_q4_0_avx512, [Q4_1] = fused_q4_1_avx512,
    [Q5_0] = fused_q5_0_avx512, [Q5_1] = fused_q5_1_avx512, [IQ4_NL] = fused_iq4_nl_avx512};

typedef void (*dequantize_fn)(const uint8_t *, int64_t, float *);
/* the formats of 32-value blocks with an AVX-512 de-quantization, by code (0: none) */
static const dequantize_fn DEQUANTIZE_AVX512[NQTYPES] = {
    [Q8_0] = dequantize_q8_0_avx512, [Q4_0] = dequantize_q4_0_avx512, [Q4_1] = dequantize_q4_1_avx512,
    [Q5_0] = dequantize_q5_0_avx512, [Q5_1] = dequantize_q5_1_avx512, [IQ4_NL] = dequantize_iq4_nl_avx512};

/* dot_f32 of TN activation rows (x + u xs) with RN de-quantized weight rows (v + j vs), 16 f32 lanes, each
 * output's 32 partial sums in two vectors: s[u RN + j], each as dot_f32 sums it */
#define DOTS_AVX512(NAME, TN, RN)                                                                          \
    AVX512_Q static void NAME(const float *x, int64_t xs, const float *v, int64_t vs, int64_t k, float *s) { \
        __m512 a[TN][RN], b[TN][RN];                                                                       \
        for (int u = 0; u < TN; u++)                                                                       \
            for (int j = 0; j < RN; j++) a[u][j] = b[u][j] = _mm512_setzero_ps();                          \
        for (int64_t i = 0; i < k; i += 32) {                                                              \
            for (int u = 0; u < TN; u++) {                                                                 \
                __m512 x0 = _mm512_loadu_ps(x + u * xs + i), x1 = _mm512_loadu_ps(x + u * xs + i + 16);    \
                for (int j = 0; j < RN; j++) {                                                             \
                    a[u][j] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(v + j * vs + i), a[u][j]);               \
                    b[u][j] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(v + j * vs + i + 16), b[u][j]);          \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        for (int u = 0; u < TN; u++)                                                                       \
            for (int j = 0; j < RN; j++) s[u * RN + j] = fold_avx512(a[u][j], b[u][j]);                    \
    }
DOTS_AVX512(dot1x1_avx512, 1, 1)
DOTS_AVX512(dot2x1_avx512, 2, 1)
DOTS_AVX512(dot3x1_avx512, 3, 1)
DOTS_AVX512(dot4x1_avx512, 4, 1)
DOTS_AVX512(dot1x2_avx512, 1, 2)
DOTS_AVX512(dot2x2_avx512, 2, 2)
DOTS_AVX512(dot3x2_avx512, 3, 2)
DOTS_AVX512(dot4x2_avx512, 4, 2)
DOTS_AVX512(dot1x3_avx512, 1, 3)
DOTS_AVX512(dot1x4_avx512, 1, 4)
typedef void (*dots_fn)(const float *, int64_t, const float *, int64_t, int64_t, float *);
/* DOTS[RN - 1][TN - 1]: tiles of up to 4 activation rows by 2 weight rows (16 accumulators; 4 by 4 took
 * twice the loads), and ROW_DOTS[RN - 1] one activation row by up to 4 weight rows (8 chains of fused
 * multiply-adds in flight). Every tile sums each output as dot1x1 does, so a row's bits do not depend on
 * the tile it falls in (how many activation rows there are). */
static const dots_fn DOTS[2][4] = {{dot1x1_avx512, dot2x1_avx512, dot3x1_avx512, dot4x1_avx512},
                                   {dot1x2_avx512, dot2x2_avx512, dot3x2_avx512, dot4x2_avx512}};
static const dots_fn ROW_DOTS[4] = {dot1x1_avx512, dot1x2_avx512, dot1x3_avx512, dot1x4_avx512};

/* dot_f32 of TN (1 or 2) activation rows (x, x + xs) with one weight row v, 8 lanes (each output's 32 partial
 * sums in 4 vectors): s[u] */
#define DOTS_AVX2(NAME, TN)                                                                                \
    __attribute__((target("avx2,fma"))) static void NAME(const float *x, int64_t xs, const float *v, int64_t k, \
                                                         float *s) {                                       \
        __m256 a[TN][4];                                                                                   \
        for (int u = 0; u < TN; u++)                                                                       \
            for (int j = 0; j < 4; j++) a[u][j] = _mm256_setzero_ps();                                     \
        for (int64_t i = 0; i < k; i += 32)                                                                \
            for (int j = 0; j < 4; j++) {                                                                  \
                __m256 w = _mm256_loadu_ps(v + i + 8 * j);                                                 \
                for (int u = 0; u < TN; u++)                                                               \
                    a[u][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + u * xs + i + 8 * j), w, a[u][j]);        \
            }                                                                                              \
        for (int u = 0; u < TN; u++) {                                                                     \
            __m256 e = _mm256_add_ps(_mm256_add_ps(a[u][0], a[u][2]), _mm256_add_ps(a[u][1], a[u][3]));    \
            __m128 f = _mm_add_ps(_mm256_castps256_ps128(e), _mm256_extractf128_ps(e, 1));                \
            f = _mm_add_ps(f, _mm_movehl_ps(f, f));                                                         \
            s[u] = _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));                                       \
        }                                                                                                  \
    }
DOTS_AVX2(dot1_avx2, 1)
DOTS_AVX2(dot2_avx2, 2)
#endif

/* row r of w de-quantized into v (the vector path's way, the same values) */
static void dequantize_into(const qjob *p, int avx2, int avx512, int64_t r, int64_t nb, int64_t stride, float *v) {
    const uint8_t *row = p->w + r * stride;
    (void)avx2, (void)avx512; /* the vector paths are for x86 */
#if VG_X86
    const int k_quant = p->qtype == Q4_K || p->qtype == Q5_K || p->qtype == Q6_K;
    for (int64_t off = 0; off < stride; off += 64) /* the next row */
        _mm_prefetch((const char *)(row + stride + off), _MM_HINT_T0);
    if (avx512 && k_quant)
        dequantize_k_avx512(p->qtype, row, nb, v);
    else if (avx512 && DEQUANTIZE_AVX512[p->qtype])
        DEQUANTIZE_AVX512[p->qtype](row, nb, v);
    else if (avx2 && k_quant)
        dequantize_k_avx2(p->qtype, row, nb, v);
    else if (avx2 && (p->qtype <= Q4_1 || p->qtype == Q5_0 || p->qtype == Q5_1))
        dequantize_row_avx2(p->qtype, row, nb, v);
    else
#endif
        dequantize_row(p->qtype, row, nb, v);
}

static void f32_band(void *ctx, int64_t lo, int64_t hi) {
    qjob *p = (qjob *)ctx;
    const int64_t nb = p->k / BLOCK_VALUES[p->qtype], stride = nb * BLOCK_BYTES[p->qtype], k = p->k;
    const int avx2 = has_avx2(), avx512 = has_avx512();
    float stack[8192];
    float *v = 4 * k <= 8192 ? stack : malloc(sizeof(float) * (size_t)(4 * k));
    if (!v) {
        p->failed = 1;
        return;
    }
    for (int64_t r = lo; r < hi;) {
        /* AVX-512 de-quantizes up to 4 weight rows, then multiplies them with one activation row, or in
         * tiles of up to 4 activation rows by 2 weight rows (each weight and activation vector loaded once
         * for the tile) */
        const int rn = avx512 ? (hi - r < 4 ? (int)(hi - r) : 4) : 1;
#if VG_X86
        float s[8];
        if (avx512 && p->t == 1 && rn == 4 && FUSED_AVX512[p->qtype]) { /* a decode step: no row buffer */
            FUSED_AVX512[p->qtype](p->w + r * stride, stride, nb, p->x, s);
            for (int j = 0; j < 4; j++) p->out[r + j] = s[j];
            r += 4;
            continue;
        }
#endif
        for (int j = 0; j < rn; j++) dequantize_into(p, avx2, avx512, r + j, nb, stride, v + j * k);
        int64_t t = 0;
#if VG_X86
        if (avx512 && p->t == 1) {
            ROW_DOTS[rn - 1](p->x, k, v, k, k, s);
            for (int j = 0; j < rn; j++) p->out[r + j] = s[j];
            t = 1;
        } else if (avx512) {
            for (int j0 = 0; j0 < rn; j0 += 2) {
                const int rj = rn - j0 < 2 ? rn - j0 : 2;
                for (t = 0; t < p->t; t += 4) {
                    const int tn = p->t - t < 4 ? (int)(p->t - t) : 4;
                    DOTS[rj - 1][tn - 1](p->x + t * k, k, v + j0 * k, k, k, s);
                    for (int u = 0; u < tn; u++)
                        for (int j = 0; j < rj; j++) p->out[(t + u) * p->n + r + j0 + j] = s[u * rj + j];
                }
            }
        } else if (avx2) {
            for (; t + 2 <= p->t; t += 2) { /* two activation rows share each weight vector */
                dot2_avx2(p->x + t * k, k, v, k, s);
                for (int u = 0; u < 2; u++) p->out[(t + u) * p->n + r] = s[u];
            }
            if (t < p->t) dot1_avx2(p->x + t * k, k, v, k, s), p->out[t * p->n + r] = s[0], t++;
        }
#endif
        for (; t < p->t; t++) p->out[t * p->n + r] = dot_f32(p->x + t * k, v, k);
        r += rn;
    }
    if (v != stack) free(v);
}

/* out f32[t, n] = x f32[t, k] @ dequantize(w)^T, each output as dot_f32 sums it; returns 0, or -1 when out
 * of memory */
int vg_qmatmul_f32(int qtype, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t, float *out,
                   int64_t min_rows, int threads) {
    qjob p = {.qtype = qtype, .w = w, .n = n, .k = k, .t = t, .x = x, .out = out, .failed = 0};
    vg_parallel_for(n, min_rows, threads, f32_band, &p);
    return p.failed ? -1 : 0;
}

/* ---------------------------------------------------------------- qembedding */
typedef struct {
    int qtype;
    const uint8_t *w;
    int64_t vocab, row_bytes, k;
    const int64_t *ids;
    float *out;
} embed_job;

static void embed_rows(void *ctx, int64_t lo, int64_t hi) {
    const embed_job *p = (const embed_job *)ctx;
    const int64_t nb = p->k / BLOCK_VALUES[p->qtype];
    for (int64_t i = lo; i < hi; i++) {
        const uint8_t *row = p->w + p->ids[i] * p->row_bytes;
#if VG_X86
        const int k_quant = p->qtype == Q4_K || p->qtype == Q5_K || p->qtype == Q6_K;
        if (k_quant && has_avx512()) {
            dequantize_k_avx512(p->qtype, row, nb, p->out + i * p->k);
            continue;
        }
        if ((k_quant || p->qtype <= Q4_1 || p->qtype == Q5_0 || p->qtype == Q5_1) && has_avx2()) {
            (k_quant ? dequantize_k_avx2 : dequantize_row_avx2)(p->qtype, row, nb, p->out + i * p->k);
            continue;
        }
#endif
        dequantize_row(p->qtype, row, nb, p->out + i * p->k);
    }
}

/* out f32[count, k] = the rows ids[0..count) of the table w [vocab, row_bytes], dequantized as the
 * reference does (its very values); returns -1 - i for the first id i out of [0, vocab) (nothing
 * written), else 0 */
int64_t vg_qembedding(int qtype, const uint8_t *w, int64_t vocab, int64_t row_bytes, int64_t k,
                      const int64_t *ids, int64_t count, float *out, int64_t min_rows, int threads) {
    for (int64_t i = 0; i < count; i++)
        if (ids[i] < 0 || ids[i] >= vocab) return -1 - i;
    embed_job p = {.qtype = qtype, .w = w, .vocab = vocab, .row_bytes = row_bytes, .k = k, .ids = ids,
                   .out = out};
    vg_parallel_for(count, min_rows, threads, embed_rows, &p);
    return 0;
}
