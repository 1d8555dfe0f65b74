/* cached_attention_q8 (ops/composite/attention_q8.py): the decode step's attention over a window of a q8_0
 * KV cache, read as the cache stores it: each key and value row is D / 32 blocks of llama.cpp's q8_0 (an f16
 * scale d, then 32 int8 q), de-quantized in registers, never as an f32 window in memory.
 *
 * As the reference (the window de-quantized, then cached_attention's reference), in double: each stored
 * number is d q, exact in double (11 bits times 8); scores s_j = (q . key_j) * scale + bias_j, p = exp(s -
 * max) / sum, out = sum_j p_j value_j over the window and then the T new keys and values (f32), rounded once
 * to f32. Only the order and rounding of the double sums (fused multiply-adds in 16 lanes, combined by a
 * fixed tree) and exp (`exp_plain`, within a few ulps of double's) differ from the reference, so the results
 * are within the bound of cached_attention's f32 kernel (attention_q8.py states it).
 *
 * A unit of work is one (batch, key/value head, token) row: its G query heads share each de-quantized key
 * and value (converted once for all of them). Threads take bands of units; each output is computed by one
 * thread in one order, and the AVX2 loops compute the plain loops' lanes with the same fused operations, so
 * every thread count and path gives the same bits. The hidden positions at the end of the window (a cache's
 * unused slots) are skipped when the queries and their blocks' scales are finite: their weight is then
 * exactly 0 and adds nothing (a NaN or an infinity there is counted, as the reference counts it). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vg.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define Q8_X86 1
#else
#define Q8_X86 0
#endif

#define Q8_BLOCK 32
#define Q8_BYTES 34
#define LANES 16

typedef struct {
    int64_t b, h, kv, t, d, dv, w;
    const float *q, *k, *v, *bias;
    const uint8_t *pk, *pv;
    const int64_t *qs, *ks, *vs, *pks, *pvs, *bs; /* element strides (4 each); bytes for pk, pv (3: batch,
                                                   * head, position; a row's bytes are contiguous); bias 3 */
    double scale;
    float *out;    /* [B, H, T, Dv], each row of Dv contiguous */
    int64_t os[3]; /* its element strides (batch, head, token) */
    volatile int failed;
} q8_job;

/* row (n values, a multiple of 32) of q8_0 blocks as doubles: d q, exact */
static void q8_row(const uint8_t *row, int64_t n, double *x) {
    for (int64_t c = 0; c < n / Q8_BLOCK; c++) {
        const uint8_t *blk = row + c * Q8_BYTES;
        const double d = (double)vg_f16_at(blk);
        const int8_t *qs = (const int8_t *)(blk + 2);
        for (int i = 0; i < Q8_BLOCK; i++) x[c * Q8_BLOCK + i] = d * (double)qs[i];
    }
}

/* whether every block scale of a row of n values is finite (so is every value it stores) */
static int q8_finite(const uint8_t *row, int64_t n) {
    for (int64_t c = 0; c < n / Q8_BLOCK; c++)
        if (!isfinite(vg_f16_at(row + c * Q8_BYTES))) return 0;
    return 1;
}

/* x . y for n a multiple of 16: lane l sums x[i] y[i] for i = l mod 16 with fused multiply-adds in i order,
 * then ((l0..3) + (l4..7)) + ((l8..11) + (l12..15)) lane-wise, then (a0 + a1) + (a2 + a3) */
static double dot_plain(const double *x, const double *y, int64_t n) {
    double a[LANES] = {0};
    for (int64_t i = 0; i < n; i += LANES)
        for (int l = 0; l < LANES; l++) a[l] = fma(x[i + l], y[i + l], a[l]);
    double r[4];
    for (int l = 0; l < 4; l++) r[l] = (a[l] + a[4 + l]) + (a[8 + l] + a[12 + l]);
    return (r[0] + r[1]) + (r[2] + r[3]);
}

/* acc[e] += p x[e], e < n, a fused multiply-add each */
static void axpy_plain(double p, const double *x, int64_t n, double *acc) {
    for (int64_t e = 0; e < n; e++) acc[e] = fma(p, x[e], acc[e]);
}

/* exp(x) for x <= 0 or NaN (a softmax's s - max): 2^n e^r, n = nearest(x log2 e), r = x - n ln 2 (two
 * fused steps), e^r by its Taylor polynomial of degree 13 (|r| <= 0.35: within 2e-16 relative) in fused
 * Horner steps; 0 below -708 (where e^x < 2^-1021). Within a few ulps of exp; exp_avx2 computes the same
 * operations four at a time: the same bits. */
#define EXP_TERMS 14
static const double exp_coef[EXP_TERMS] = {
    1.0,                      1.0,
    1.0 / 2,                  1.0 / 6,
    1.0 / 24,                 1.0 / 120,
    1.0 / 720,                1.0 / 5040,
    1.0 / 40320,              1.0 / 362880,
    1.0 / 3628800,            1.0 / 39916800,
    1.0 / 479001600,          1.0 / 6227020800.0,
};
#define LOG2E 1.4426950408889634
#define LN2_HI 0.693147180369123816490 /* ln 2 to 32 bits: n LN2_HI is exact */
#define LN2_LO 1.90821492927058770002e-10
#define EXP_FLOOR (-708.0)

static double exp_plain(double x) {
    const double n = nearbyint(x * LOG2E);
    double r = fma(-n, LN2_HI, x);
    r = fma(-n, LN2_LO, r);
    double e = exp_coef[EXP_TERMS - 1];
    for (int i = EXP_TERMS - 2; i >= 0; i--) e = fma(e, r, exp_coef[i]);
    const double t = n + 1023.0 + 0x1p52;
    uint64_t bits;
    memcpy(&bits, &t, 8);
    bits <<= 52;
    double scale;
    memcpy(&scale, &bits, 8);
    return x < EXP_FLOOR ? 0.0 : e * scale;
}

#if Q8_X86
/* four int8 at p as doubles times d (exact) */
__attribute__((target("avx2"))) static inline __m256d q8_four(const uint8_t *p, __m256d d) {
    int32_t four;
    memcpy(&four, p, 4);
    return _mm256_mul_pd(d, _mm256_cvtepi32_pd(_mm_cvtepi8_epi32(_mm_cvtsi32_si128(four))));
}

/* s[hh n + j] = (qd_hh . key_j) scale + bias_j for the G heads and the window's first w keys (rows of q8_0
 * blocks at stride `stride` bytes): dot_plain's lanes (4 accumulators of 4 per head) and tree, each key
 * converted once, eight values at a time, for every head; each head's lanes summed into u [w, 4] first,
 * then the tree taken for four keys at once (the same sums). G a constant where inlined (registers). */
__attribute__((target("avx2,fma"), always_inline)) static inline void dots_g(
    const double *qd, const int64_t G, const uint8_t *pk, int64_t stride, int64_t w, int64_t d, double scale,
    const float *bias, int64_t bstride, double *s, int64_t n, double *u) {
    for (int64_t j = 0; j < w; j++) {
        const uint8_t *row = pk + j * stride;
        __m256d acc[4][4];
        for (int64_t hh = 0; hh < G; hh++)
            for (int l = 0; l < 4; l++) acc[hh][l] = _mm256_setzero_pd();
        for (int64_t c = 0; c < d / Q8_BLOCK; c++) {
            const uint8_t *blk = row + c * Q8_BYTES;
            const __m256d dd = _mm256_set1_pd((double)vg_f16_at(blk));
            for (int64_t i0 = 0; i0 < Q8_BLOCK; i0 += 8) {
                const __m256d x0 = q8_four(blk + 2 + i0, dd), x1 = q8_four(blk + 6 + i0, dd);
                const int l = (int)(i0 % LANES) / 4;
                const double *qc = qd + c * Q8_BLOCK + i0;
                for (int64_t hh = 0; hh < G; hh++) {
                    acc[hh][l] = _mm256_fmadd_pd(_mm256_loadu_pd(qc + hh * d), x0, acc[hh][l]);
                    acc[hh][l + 1] = _mm256_fmadd_pd(_mm256_loadu_pd(qc + hh * d + 4), x1, acc[hh][l + 1]);
                }
            }
        }
        for (int64_t hh = 0; hh < G; hh++)
            _mm256_storeu_pd(u + (hh * w + j) * 4, _mm256_add_pd(_mm256_add_pd(acc[hh][0], acc[hh][1]),
                                                                 _mm256_add_pd(acc[hh][2], acc[hh][3])));
    }
    const __m256d sc = _mm256_set1_pd(scale);
    for (int64_t hh = 0; hh < G; hh++) {
        const double *uh = u + hh * w * 4;
        double *sh = s + hh * n;
        int64_t j = 0;
        if (bstride == 1)
            for (; j + 4 <= w; j += 4) { /* (r0 + r1) + (r2 + r3) of keys j .. j + 3 */
                const double *uj = uh + 4 * j;
                const __m256d h01 = _mm256_hadd_pd(_mm256_loadu_pd(uj), _mm256_loadu_pd(uj + 4));
                const __m256d h23 = _mm256_hadd_pd(_mm256_loadu_pd(uj + 8), _mm256_loadu_pd(uj + 12));
                const __m256d r = _mm256_add_pd(_mm256_permute2f128_pd(h01, h23, 0x20),
                                                _mm256_permute2f128_pd(h01, h23, 0x31));
                const __m256d bj = _mm256_cvtps_pd(_mm_loadu_ps(bias + j));
                _mm256_storeu_pd(sh + j, _mm256_add_pd(_mm256_mul_pd(r, sc), bj));
            }
        for (; j < w; j++) {
            const double *r = uh + 4 * j;
            sh[j] = ((r[0] + r[1]) + (r[2] + r[3])) * scale + (double)bias[j * bstride];
        }
    }
}

__attribute__((target("avx2,fma"))) static void dots_avx2(const double *qd, int64_t G, const uint8_t *pk,
                                                          int64_t stride, int64_t w, int64_t d, double scale,
                                                          const float *bias, int64_t bstride, double *s,
                                                          int64_t n, double *u) {
    switch (G) { /* the common group sizes with their accumulators in registers */
    case 1: dots_g(qd, 1, pk, stride, w, d, scale, bias, bstride, s, n, u); return;
    case 2: dots_g(qd, 2, pk, stride, w, d, scale, bias, bstride, s, n, u); return;
    case 3: dots_g(qd, 3, pk, stride, w, d, scale, bias, bstride, s, n, u); return;
    case 4: dots_g(qd, 4, pk, stride, w, d, scale, bias, bstride, s, n, u); return;
    default:
        for (int64_t h0 = 0; h0 < G; h0 += 4) {
            const int64_t g = G - h0 < 4 ? G - h0 : 4;
            dots_g(qd + h0 * d, g, pk, stride, w, d, scale, bias, bstride, s + h0 * n, n, u);
        }
    }
}

/* acc[hh dv + e] += p[hh n + j] value_j[e] for the G heads and the window's first w values (rows of q8_0
 * blocks at stride `stride` bytes), in j order (axpy_plain's fused operations): sixteen columns (half a
 * block) at a time over every value, the G heads' accumulators in registers for G <= 2, eight columns for
 * more; `scales` [w] takes the block's scales of a column block */
__attribute__((target("avx2,fma"), always_inline)) static inline void weighted_g(
    const double *p, const int64_t G, int64_t n, const uint8_t *pv, int64_t stride, int64_t w, int64_t dv,
    double *acc, double *scales) {
    const int64_t step = G <= 2 ? 16 : 8;
    for (int64_t e = 0; e < dv; e += step) {
        const uint8_t *col = pv + e / Q8_BLOCK * Q8_BYTES;
        if (e % Q8_BLOCK == 0)
            for (int64_t j = 0; j < w; j++) scales[j] = (double)vg_f16_at(col + j * stride);
        __m256d a[4][4];
        for (int64_t hh = 0; hh < G; hh++)
            for (int64_t l = 0; l < step / 4; l++) a[hh][l] = _mm256_loadu_pd(acc + hh * dv + e + 4 * l);
        for (int64_t j = 0; j < w; j++) {
            const uint8_t *blk = col + j * stride + 2 + e % Q8_BLOCK;
            const __m256d dd = _mm256_broadcast_sd(scales + j);
            __m256d x[4];
            for (int64_t l = 0; l < step / 4; l++) x[l] = q8_four(blk + 4 * l, dd);
            for (int64_t hh = 0; hh < G; hh++) {
                const __m256d pj = _mm256_broadcast_sd(p + hh * n + j);
                for (int64_t l = 0; l < step / 4; l++) a[hh][l] = _mm256_fmadd_pd(pj, x[l], a[hh][l]);
            }
        }
        for (int64_t hh = 0; hh < G; hh++)
            for (int64_t l = 0; l < step / 4; l++) _mm256_storeu_pd(acc + hh * dv + e + 4 * l, a[hh][l]);
    }
}

__attribute__((target("avx2,fma"))) static void weighted_avx2(const double *p, int64_t G, int64_t n,
                                                              const uint8_t *pv, int64_t stride, int64_t w,
                                                              int64_t dv, double *acc, double *scales) {
    switch (G) {
    case 1: weighted_g(p, 1, n, pv, stride, w, dv, acc, scales); return;
    case 2: weighted_g(p, 2, n, pv, stride, w, dv, acc, scales); return;
    case 3: weighted_g(p, 3, n, pv, stride, w, dv, acc, scales); return;
    case 4: weighted_g(p, 4, n, pv, stride, w, dv, acc, scales); return;
    default:
        for (int64_t h0 = 0; h0 < G; h0 += 4)
            weighted_g(p + h0 * n, G - h0 < 4 ? G - h0 : 4, n, pv, stride, w, dv, acc + h0 * dv, scales);
    }
}

/* exp_plain of x[0..n), four at a time (the same operations) */
__attribute__((target("avx2,fma"))) static void exps_avx2(double *x, int64_t n) {
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const __m256d v = _mm256_loadu_pd(x + j);
        const __m256d k = _mm256_round_pd(_mm256_mul_pd(v, _mm256_set1_pd(LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_HI), v);
        r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_LO), r);
        __m256d e = _mm256_set1_pd(exp_coef[EXP_TERMS - 1]);
        for (int i = EXP_TERMS - 2; i >= 0; i--) e = _mm256_fmadd_pd(e, r, _mm256_set1_pd(exp_coef[i]));
        const __m256d t = _mm256_add_pd(_mm256_add_pd(k, _mm256_set1_pd(1023.0)), _mm256_set1_pd(0x1p52));
        const __m256d scale = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_castpd_si256(t), 52));
        const __m256d keep = _mm256_cmp_pd(v, _mm256_set1_pd(EXP_FLOOR), _CMP_NLT_UQ); /* or NaN */
        _mm256_storeu_pd(x + j, _mm256_and_pd(keep, _mm256_mul_pd(e, scale)));
    }
    for (; j < n; j++) x[j] = exp_plain(x[j]);
}
#endif

static int q8_plain_only = 0; /* vg_attention_q8_plain(1): the plain loops alone (the tests compare paths) */

int vg_attention_q8_plain(int flag) {
    const int was = q8_plain_only;
    if (flag >= 0) q8_plain_only = flag;
    return was;
}

static void q8_units(void *ctx, int64_t lo, int64_t hi) {
    q8_job *a = (q8_job *)ctx;
    const int64_t group = a->h / a->kv, n = a->w + a->t, wide = a->d > a->dv ? a->d : a->dv;
#if Q8_X86
    const int vector = !q8_plain_only && vg_has_avx2_fma();
#else
    const int vector = 0;
#endif
    /* scores [group, n], q in double [group, d], accumulators [group, dv], one row in double [max(d, dv)],
     * the vector loops' lane sums [min(group, 4), w, 4] and block scales [w] */
    double *s = malloc(sizeof(double) * (size_t)(group * (n + a->d + a->dv) + wide + 17 * a->w + 1));
    if (!s) {
        a->failed = 1;
        return;
    }
    double *qd = s + group * n, *acc = qd + group * a->d, *x = acc + group * a->dv, *u = x + wide;
    (void)u; /* the vector loops' scratch: unused where they are not built (not x86) */
    for (int64_t unit = lo; unit < hi; unit++) { /* unit = (b, g, t) */
        const int64_t t = unit % a->t, g = (unit / a->t) % a->kv, b = unit / (a->t * a->kv);
        const uint8_t *pk = a->pk + b * a->pks[0] + g * a->pks[1];
        const uint8_t *pv = a->pv + b * a->pvs[0] + g * a->pvs[1];
        const float *k = a->k + b * a->ks[0] + g * a->ks[1];
        const float *v = a->v + b * a->vs[0] + g * a->vs[1];
        const float *bias = a->bias + b * a->bs[0] + t * a->bs[1];
        int finite = 1;
        for (int64_t hh = 0; hh < group; hh++) {
            const float *q = a->q + b * a->qs[0] + (g * group + hh) * a->qs[1] + t * a->qs[2];
            for (int64_t i = 0; i < a->d; i++) {
                qd[hh * a->d + i] = (double)q[i * a->qs[3]];
                finite &= isfinite(q[i * a->qs[3]]) != 0;
            }
        }
        /* the window's end: hidden slots whose weight is exactly 0 left out */
        int64_t w = a->w;
        while (finite && w > 0 && bias[(w - 1) * a->bs[2]] == -INFINITY &&
               q8_finite(pk + (w - 1) * a->pks[2], a->d) && q8_finite(pv + (w - 1) * a->pvs[2], a->dv))
            w--;
        /* scores: the window's, then the new keys' */
#if Q8_X86
        if (vector)
            dots_avx2(qd, group, pk, a->pks[2], w, a->d, a->scale, bias, a->bs[2], s, n, u);
#endif
        for (int64_t j = vector ? w : 0; j < w; j++) {
            q8_row(pk + j * a->pks[2], a->d, x);
            const double bj = (double)bias[j * a->bs[2]];
            for (int64_t hh = 0; hh < group; hh++)
                s[hh * n + j] = dot_plain(qd + hh * a->d, x, a->d) * a->scale + bj;
        }
        for (int64_t i = 0; i < a->t; i++) {
            for (int64_t e = 0; e < a->d; e++) x[e] = (double)k[i * a->ks[2] + e * a->ks[3]];
            const double bj = (double)bias[(a->w + i) * a->bs[2]];
            for (int64_t hh = 0; hh < group; hh++)
                s[hh * n + w + i] = dot_plain(qd + hh * a->d, x, a->d) * a->scale + bj;
        }
        const int64_t m_all = w + a->t;
        for (int64_t hh = 0; hh < group; hh++) { /* softmax */
            double *sh = s + hh * n, m = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < m_all; j++) m = sh[j] > m ? sh[j] : m;
            for (int64_t j = 0; j < m_all; j++) sh[j] = sh[j] - m; /* a NaN stays NaN, as every sum with it */
#if Q8_X86
            if (vector)
                exps_avx2(sh, m_all);
            else
#endif
                for (int64_t j = 0; j < m_all; j++) sh[j] = exp_plain(sh[j]);
            for (int64_t j = 0; j < m_all; j++) sum += sh[j];
            for (int64_t j = 0; j < m_all; j++) sh[j] = sh[j] / sum;
        }
        memset(acc, 0, sizeof(double) * (size_t)(group * a->dv));
        /* weighted sums: the window's values, then the new ones */
#if Q8_X86
        if (vector) weighted_avx2(s, group, n, pv, a->pvs[2], w, a->dv, acc, u + 16 * a->w);
#endif
        for (int64_t j = vector ? w : 0; j < w; j++) {
            q8_row(pv + j * a->pvs[2], a->dv, x);
            for (int64_t hh = 0; hh < group; hh++) axpy_plain(s[hh * n + j], x, a->dv, acc + hh * a->dv);
        }
        for (int64_t i = 0; i < a->t; i++) {
            for (int64_t e = 0; e < a->dv; e++) x[e] = (double)v[i * a->vs[2] + e * a->vs[3]];
            for (int64_t hh = 0; hh < group; hh++) axpy_plain(s[hh * n + w + i], x, a->dv, acc + hh * a->dv);
        }
        for (int64_t hh = 0; hh < group; hh++) {
            float *o = a->out + b * a->os[0] + (g * group + hh) * a->os[1] + t * a->os[2];
            for (int64_t e = 0; e < a->dv; e++) o[e] = (float)acc[hh * a->dv + e];
        }
    }
    free(s);
}

/* ints: b, h, kv, t, d, dv, w, then the strides (q 4, k 4, v 4, pk 3, pv 3, bias 3); d and dv multiples of
 * 32. Returns 0, or -1 when out of memory. */
int vg_cached_attention_q8(const int64_t *ints, const float *q, const float *k, const float *v,
                           const uint8_t *pk, const uint8_t *pv, const float *bias, double scale, float *out,
                           int threads) {
    const int64_t *st = ints + 7;
    q8_job a = {.b = ints[0], .h = ints[1], .kv = ints[2], .t = ints[3], .d = ints[4], .dv = ints[5],
                .w = ints[6], .q = q, .k = k, .v = v, .bias = bias, .pk = pk, .pv = pv, .qs = st,
                .ks = st + 4, .vs = st + 8, .pks = st + 12, .pvs = st + 15, .bs = st + 18, .scale = scale,
                .out = out, .os = {ints[1] * ints[3] * ints[5], ints[3] * ints[5], ints[5]}, .failed = 0};
    vg_parallel_for(a.b * a.kv * a.t, 1, threads, q8_units, &a);
    return a.failed ? -1 : 0;
}

/* ragged_attention_q8 (ops/composite/attention_ragged.py): attention.c's ragged_attention over q8_0 windows.
 * Token i = start + t of run (row, start, count, length) is unit (g, t) of q8_units on its sequence alone:
 * b = 1, the row's first `length` positions, the run's tokens, a bias hiding their future (a view of
 * `causal`, as attention.c's); cached_attention_q8 gives it the same bits with the wider window (the hidden
 * positions skipped). Units (g, i), each computed by one thread in one order. */
typedef struct {
    q8_job a;            /* b = the windows' rows, t = N tokens, w = W; q, k, v [1, ...] */
    const int64_t *runs; /* [S, 4] */
    const int64_t *run_of;
    const float *causal; /* W + N zeros, then N -infinities */
} q8_ragged_job;

static const int64_t Q8_ROW_BIAS[3] = {0, 0, 1};

static void q8_ragged_units(void *ctx, int64_t lo, int64_t hi) {
    q8_ragged_job *r = (q8_ragged_job *)ctx;
    const q8_job *a = &r->a;
    for (int64_t unit = lo; unit < hi; unit++) {
        const int64_t g = unit / a->t, i = unit % a->t, *run = r->runs + 4 * r->run_of[i];
        const int64_t start = run[1];
        q8_job l = *a;
        l.b = 1, l.t = run[2], l.w = run[3];
        l.q = a->q + start * a->qs[2], l.k = a->k + start * a->ks[2], l.v = a->v + start * a->vs[2];
        l.pk = a->pk + run[0] * a->pks[0], l.pv = a->pv + run[0] * a->pvs[0];
        l.bias = r->causal + (a->w + a->t) - (run[3] + i - start + 1), l.bs = Q8_ROW_BIAS;
        l.out = a->out + start * a->os[2];
        l.failed = 0;
        q8_units(&l, g * l.t + i - start, g * l.t + i - start + 1);
        if (l.failed) r->a.failed = 1;
    }
}

int vg_ragged_runs(const int64_t *runs, int64_t s, int64_t n, int64_t rows, int64_t w, int64_t *run_of);
float *vg_ragged_causal(int64_t w, int64_t n);

/* ints: r (the windows' rows), h, kv, n (tokens), d, dv, w, s (runs), then the strides (q 4, k 4, v 4, pk
 * 3, pv 3); d and dv multiples of 32. Returns 0, -1 when out of memory, -2 for runs that do not cover the
 * tokens in order (or name a row or length the windows do not hold). */
int vg_ragged_attention_q8(const int64_t *ints, const float *q, const float *k, const float *v,
                           const uint8_t *pk, const uint8_t *pv, const int64_t *runs, double scale, float *out,
                           int threads) {
    const int64_t *st = ints + 8, n = ints[3], w = ints[6];
    q8_ragged_job r = {.a = {.b = ints[0], .h = ints[1], .kv = ints[2], .t = n, .d = ints[4], .dv = ints[5],
                             .w = w, .q = q, .k = k, .v = v, .pk = pk, .pv = pv, .qs = st, .ks = st + 4,
                             .vs = st + 8, .pks = st + 12, .pvs = st + 15, .scale = scale, .out = out,
                             .os = {0, n * ints[5], ints[5]}, .failed = 0},
                       .runs = runs};
    int64_t *run_of = malloc(sizeof(int64_t) * (size_t)(n + 1));
    float *causal = vg_ragged_causal(w, n);
    int rc = run_of && causal ? vg_ragged_runs(runs, ints[7], n, ints[0], w, run_of) : -1;
    if (rc == 0) {
        r.run_of = run_of, r.causal = causal;
        vg_parallel_for(r.a.kv * n, 1, threads, q8_ragged_units, &r);
        rc = r.a.failed ? -1 : 0;
    }
    free(run_of);
    free(causal);
    return rc;
}
