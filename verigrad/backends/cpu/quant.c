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
 * vg_rms_norm_qmatmul_q8: the same after rms_norm's kernel (rows.c) on x.
 *
 * vg_qmatmul_f32: out[t, n] = sum_k x[t, k] * w[n, k] with w dequantized to f32 as the reference does,
 * the exact products summed in double (16 partial sums, combined in a fixed tree) and rounded once. It
 * also takes llama.cpp's k-quants (blocks of 256): 3 q4_k, 4 q6_k (see ops/quant.py for their layout).
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

enum { Q8_0 = 0, Q4_0 = 1, Q4_1 = 2, Q4_K = 3, Q6_K = 4 };
static const int64_t BLOCK_BYTES[5] = {34, 18, 20, 144, 210};
static const int64_t BLOCK_VALUES[5] = {32, 32, 32, 256, 256};

static float half_to_float(const uint8_t *p) {
    uint32_t h = (uint32_t)p[0] | ((uint32_t)p[1] << 8);
    uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        float v = (float)mant * 0x1p-24f; /* zero or subnormal: exact */
        return sign ? -v : v;
    }
    bits = exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

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
        if (amax >= 0x7f800000u) { /* inf or NaN */
            memset(q + 32 * b, 0, 32);
            d[b] = NAN;
        } else {
            float m, dd;
            memcpy(&m, &amax, 4);
            dd = m / 127.0f;
            float id = dd != 0.0f ? 1.0f / dd : 0.0f;
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
        const __m256 id = _mm256_set1_ps(dd != 0.0f ? 1.0f / dd : 0.0f);
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

/* the integer dot of weight block wb with activations y (q4_0: of the raw nibbles) */
static int32_t block_dot(int qtype, const uint8_t *wb, const int8_t *y) {
    int32_t s = 0;
    if (qtype == Q8_0) {
        const int8_t *w = (const int8_t *)(wb + 2);
        for (int i = 0; i < 32; i++) s += (int32_t)w[i] * y[i];
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
        double term = ((double)half_to_float(wb) * dx[b]) * (double)dot;
        if (qtype == Q4_1) term = term + (double)half_to_float(wb + 2) * dxs[b];
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

static int simd_allowed = 1; /* vg_quant_simd(0) runs the portable paths (for tests) */

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
    if (known < 0) known = __builtin_cpu_supports("avx2") && has_f16c();
    return known && simd_allowed;
#else
    return 0;
#endif
}

/* flag 0 or 1: forbid or allow the AVX2 paths; returns whether they are taken now (after the change) */
int vg_quant_simd(int flag) {
    if (flag >= 0) simd_allowed = flag;
    return has_avx2();
}

typedef struct {
    int qtype;
    const uint8_t *w;
    int64_t n, k, t;
    const int8_t *qx;
    const double *dx, *dxs;
    const int32_t *sx;
    const double *xd; /* x in double (the f32 path) */
    float *out;
    volatile int failed; /* a band could not allocate its row buffer */
} qjob;

static void q8_band(void *ctx, int64_t lo, int64_t hi) {
    const qjob *p = (const qjob *)ctx;
    const int64_t nb = p->k / 32, stride = nb * BLOCK_BYTES[p->qtype];
    int64_t r = lo;
#if VG_X86
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

/* a q4_k block: 8 sub-blocks of 32 with 6-bit scales and mins; value (d * sc) * q - dmin * m */
static void dequantize_q4_k(const uint8_t *wb, float *v) {
    const float d = half_to_float(wb), dmin = half_to_float(wb + 2);
    const uint8_t *s = wb + 4, *qs = wb + 16;
    for (int j = 0; j < 8; j++) {
        int sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        int m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        const float ds = d * (float)sc, dm = dmin * (float)m;
        const uint8_t *q = qs + 32 * (j / 2); /* sub-block 2c: low nibbles of chunk c; 2c + 1: high */
        for (int i = 0; i < 32; i++) v[32 * j + i] = ds * (float)(j % 2 ? q[i] >> 4 : q[i] & 15) - dm;
    }
}

/* a q6_k block: 16 groups of 16 with int8 scales; value (d * sc) * (q - 32), q from 4 + 2 bits */
static void dequantize_q6_k(const uint8_t *wb, float *v) {
    const float d = half_to_float(wb + 208);
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
        float d = half_to_float(wb);
        if (qtype == Q8_0) {
            for (int i = 0; i < 32; i++) v[i] = d * (float)((const int8_t *)(wb + 2))[i];
        } else if (qtype == Q4_0) {
            for (int i = 0; i < 16; i++) {
                v[i] = d * (float)((wb[2 + i] & 15) - 8);
                v[i + 16] = d * (float)((wb[2 + i] >> 4) - 8);
            }
        } else if (qtype == Q4_1) {
            float m = half_to_float(wb + 2);
            for (int i = 0; i < 16; i++) {
                v[i] = d * (float)(wb[4 + i] & 15) + m;
                v[i + 16] = d * (float)(wb[4 + i] >> 4) + m;
            }
        } else if (qtype == Q4_K) {
            dequantize_q4_k(wb, v);
        } else {
            dequantize_q6_k(wb, v);
        }
    }
}

/* sum x[i] * v[i] in double: partial sum j takes i = j (mod 16); then a fixed tree */
static double dot_f64(const double *x, const float *v, int64_t k) {
    double a[16] = {0};
    for (int64_t i = 0; i < k; i += 16)
        for (int j = 0; j < 16; j++) a[j] = a[j] + x[i + j] * (double)v[i + j];
    double t[4];
    for (int j = 0; j < 4; j++) t[j] = (a[j] + a[4 + j]) + (a[8 + j] + a[12 + j]);
    return (t[0] + t[2]) + (t[1] + t[3]);
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
        __m256 d = _mm256_set1_ps(half_to_float(wb));
        if (qtype == Q8_0) {
            for (int j = 0; j < 4; j++) {
                __m128i q = _mm_loadl_epi64((const __m128i *)(wb + 2 + 8 * j));
                put8(v + 8 * j, _mm256_cvtepi8_epi32(q), d, 0);
            }
            continue;
        }
        const __m128i mask = _mm_set1_epi8(15);
        __m128i n = _mm_loadu_si128((const __m128i *)(wb + (qtype == Q4_1 ? 4 : 2)));
        __m128i lo = _mm_and_si128(n, mask), hi = _mm_and_si128(_mm_srli_epi16(n, 4), mask);
        __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
        __m256 m = _mm256_set1_ps(qtype == Q4_1 ? half_to_float(wb + 2) : 0.0f);
        __m256i off = _mm256_set1_epi32(qtype == Q4_0 ? 8 : 0);
        for (int j = 0; j < 4; j++)
            put8(v + 8 * j, _mm256_sub_epi32(_mm256_cvtepu8_epi32(parts[j]), off), d, qtype == Q4_1 ? &m : 0);
    }
}

__attribute__((target("avx2"))) static double dot_f64_avx2(const double *x, const float *v, int64_t k) {
    __m256d a[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    for (int64_t i = 0; i < k; i += 16)
        for (int j = 0; j < 4; j++) {
            __m256d vs = _mm256_cvtps_pd(_mm_loadu_ps(v + i + 4 * j));
            a[j] = _mm256_add_pd(a[j], _mm256_mul_pd(_mm256_loadu_pd(x + i + 4 * j), vs));
        }
    __m256d s = _mm256_add_pd(_mm256_add_pd(a[0], a[1]), _mm256_add_pd(a[2], a[3]));
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h));
}
#endif

static void f32_band(void *ctx, int64_t lo, int64_t hi) {
    qjob *p = (qjob *)ctx;
    const int64_t nb = p->k / BLOCK_VALUES[p->qtype], stride = nb * BLOCK_BYTES[p->qtype];
    float stack[2048];
    float *v = p->k <= 2048 ? stack : malloc(sizeof(float) * (size_t)p->k);
    if (!v) {
        p->failed = 1;
        return;
    }
    int avx2 = has_avx2();
    (void)avx2; /* the AVX2 paths are for x86 */
    for (int64_t r = lo; r < hi; r++) {
        const uint8_t *row = p->w + r * stride;
#if VG_X86
        for (int64_t off = 0; off < stride; off += 64) /* the next row */
            _mm_prefetch((const char *)(row + stride + off), _MM_HINT_T0);
        if (avx2 && p->qtype <= Q4_1)
            dequantize_row_avx2(p->qtype, row, nb, v);
        else
#endif
            dequantize_row(p->qtype, row, nb, v);
        for (int64_t t = 0; t < p->t; t++) {
#if VG_X86
            double s = avx2 ? dot_f64_avx2(p->xd + t * p->k, v, p->k) : dot_f64(p->xd + t * p->k, v, p->k);
#else
            double s = dot_f64(p->xd + t * p->k, v, p->k);
#endif
            p->out[t * p->n + r] = (float)s;
        }
    }
    if (v != stack) free(v);
}

/* out f32[t, n] = x f32[t, k] @ dequantize(w)^T; returns 0, or -1 when out of memory */
int vg_qmatmul_f32(int qtype, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t, float *out,
                   int64_t min_rows, int threads) {
    double *xd = malloc(sizeof(double) * (size_t)(t * k + 1));
    if (!xd) return -1;
    for (int64_t i = 0; i < t * k; i++) xd[i] = (double)x[i];
    qjob p = {.qtype = qtype, .w = w, .n = n, .k = k, .t = t, .xd = xd, .out = out, .failed = 0};
    vg_parallel_for(n, min_rows, threads, f32_band, &p);
    free(xd);
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
        if (p->qtype <= Q4_1 && has_avx2()) {
            dequantize_row_avx2(p->qtype, row, nb, p->out + i * p->k);
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
