/* cached_attention (ops/composite/attention.py) for f32: T new queries over a window of W cached
 * positions and the T new keys and values, with an additive bias [T, W+T] (or [B, T, W+T]: a mask per
 * sequence, the C function takes its three strides, 0 for the batch's of a shared one).
 *
 * As the reference, in double: scores s_j = (q . key_j) * scale + bias_j, p = exp(s - max) / sum, out =
 * sum_{j<W} p_j past_v_j + sum_{j>=W} p_j v_j, rounded once to f32. Only the order and the rounding of the
 * double sums (the reference's are BLAS's; fused multiply-adds here) and exp (within a few ulps of
 * double's) differ, so the results are within an f32 rounding (attention.py states the bound). Any
 * strides (the window is a view of the cache, keys transposed); query heads h = g G .. g G + G - 1 share
 * key/value head g and are computed by one thread. Threads take bands of (batch, key/value head, token)
 * rows; each output is computed by one thread in one order.
 *
 * With AVX2 and FMA and contiguous head dims, the G heads of a key/value head are computed together
 * (group_dots, group_weighted: each key and value is converted to double once for all of them); with AVX2
 * alone, the dot products take four keys at once and the weighted sums sixteen columns; exp is evaluated
 * four at a time (exps_avx2). A hidden position (score -inf, finite maximum) gets exp's value 0 without
 * the call, and the hidden positions at the end of the window (a cache's unused slots) are skipped when
 * their keys and values are finite: their weight is then exactly 0 and adds nothing (a NaN or an infinity
 * there is counted, as the reference counts it).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vg.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define VG_X86 1
#else
#define VG_X86 0
#endif

typedef struct {
    int64_t b, h, kv, t, d, dv, w;
    const float *q, *k, *v, *kt, *pv, *bias;
    const int64_t *qs, *ks, *vs, *kts, *pvs, *bs; /* element strides: 4 each, bias 3 (batch, row, column) */
    double scale;
    float *out; /* contiguous [B, H, T, Dv] */
    volatile int failed;
} attn_job;

/* q . key for 4 keys at once (independent sums: instruction-level parallelism), each in d order */
static void dots4(const float *q, int64_t qd, const float *key, int64_t kd, int64_t kj, int64_t n,
                  double *s) {
    double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double x = (double)q[i * qd];
        const float *c = key + i * kd;
        a0 = a0 + x * (double)c[0];
        a1 = a1 + x * (double)c[kj];
        a2 = a2 + x * (double)c[2 * kj];
        a3 = a3 + x * (double)c[3 * kj];
    }
    s[0] = a0, s[1] = a1, s[2] = a2, s[3] = a3;
}

static double dot1(const float *q, int64_t qd, const float *key, int64_t kd, int64_t n) {
    double a = 0.0;
    for (int64_t i = 0; i < n; i++) a = a + (double)q[i * qd] * (double)key[i * kd];
    return a;
}

#if VG_X86
/* q . key for contiguous q and key (4 partial sums, then a fixed tree) */
__attribute__((target("avx2"))) static double dot_avx2(const float *q, const float *key, int64_t n) {
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(q + i), y = _mm256_loadu_ps(key + i);
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x)),
                                             _mm256_cvtps_pd(_mm256_castps256_ps128(y))));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)),
                                             _mm256_cvtps_pd(_mm256_extractf128_ps(y, 1))));
    }
    __m256d s = _mm256_add_pd(a0, a1);
    __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    double r = _mm_cvtsd_f64(h) + _mm_cvtsd_f64(_mm_unpackhi_pd(h, h));
    for (; i < n; i++) r = r + (double)q[i] * (double)key[i];
    return r;
}

/* q . key_r for the 4 contiguous keys key + r kj, r < 4, with q given in double (4 partial sums each,
 * combined in a fixed order) */
__attribute__((target("avx2"))) static void dots4_avx2(const double *qd, const float *key, int64_t kj,
                                                       int64_t n, double *s) {
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i < n; i += 4) {
        __m256d x = _mm256_loadu_pd(qd + i);
        a0 = _mm256_add_pd(a0, _mm256_mul_pd(x, _mm256_cvtps_pd(_mm_loadu_ps(key + i))));
        a1 = _mm256_add_pd(a1, _mm256_mul_pd(x, _mm256_cvtps_pd(_mm_loadu_ps(key + kj + i))));
        a2 = _mm256_add_pd(a2, _mm256_mul_pd(x, _mm256_cvtps_pd(_mm_loadu_ps(key + 2 * kj + i))));
        a3 = _mm256_add_pd(a3, _mm256_mul_pd(x, _mm256_cvtps_pd(_mm_loadu_ps(key + 3 * kj + i))));
    }
    __m256d h01 = _mm256_hadd_pd(a0, a1), h23 = _mm256_hadd_pd(a2, a3); /* (0 1 0 1), (2 3 2 3) */
    __m256d lo = _mm256_permute2f128_pd(h01, h23, 0x20), hi = _mm256_permute2f128_pd(h01, h23, 0x31);
    _mm256_storeu_pd(s, _mm256_add_pd(lo, hi));
}

/* acc[e] = sum_j p_j rows[j][e] for contiguous rows, e < dv (a multiple of 4): 16 columns at once */
__attribute__((target("avx2"))) static void weighted_avx2(const double *p, const float *vals, int64_t vj,
                                                          int64_t n, int64_t dv, double *acc) {
    int64_t e = 0;
    for (; e + 16 <= dv; e += 16) {
        __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t j = 0; j < n; j++) {
            const float *r = vals + j * vj + e;
            __m256d pj = _mm256_set1_pd(p[j]);
            a0 = _mm256_add_pd(a0, _mm256_mul_pd(pj, _mm256_cvtps_pd(_mm_loadu_ps(r))));
            a1 = _mm256_add_pd(a1, _mm256_mul_pd(pj, _mm256_cvtps_pd(_mm_loadu_ps(r + 4))));
            a2 = _mm256_add_pd(a2, _mm256_mul_pd(pj, _mm256_cvtps_pd(_mm_loadu_ps(r + 8))));
            a3 = _mm256_add_pd(a3, _mm256_mul_pd(pj, _mm256_cvtps_pd(_mm_loadu_ps(r + 12))));
        }
        _mm256_storeu_pd(acc + e, a0), _mm256_storeu_pd(acc + e + 4, a1);
        _mm256_storeu_pd(acc + e + 8, a2), _mm256_storeu_pd(acc + e + 12, a3);
    }
    for (; e < dv; e += 4) {
        __m256d a = _mm256_setzero_pd();
        for (int64_t j = 0; j < n; j++)
            a = _mm256_add_pd(a, _mm256_mul_pd(_mm256_set1_pd(p[j]),
                                               _mm256_cvtps_pd(_mm_loadu_ps(vals + j * vj + e))));
        _mm256_storeu_pd(acc + e, a);
    }
}

/* exp(x) for x <= 0 (-inf gives 0): x = k ln2 + r, |r| <= ln2/2, with a two-part ln2; exp(r) by its
 * Taylor series to degree 13 (truncation below 1e-17 relative), 2^k put in the exponent; x < -708 gives 0
 * (a true value below 2^-1021, where the sum it joins is at least 1) */
__attribute__((target("avx2"), always_inline)) static inline __m256d exp_nonpos_avx2(__m256d x) {
    const __m256d lo = _mm256_set1_pd(-708.0), magic = _mm256_set1_pd(6755399441055744.0); /* 2^52 + 2^51 */
    __m256d xc = _mm256_max_pd(x, lo);
    __m256d k = _mm256_round_pd(_mm256_mul_pd(xc, _mm256_set1_pd(1.4426950408889634)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_sub_pd(xc, _mm256_mul_pd(k, _mm256_set1_pd(6.93147180369123816490e-01)));
    r = _mm256_sub_pd(r, _mm256_mul_pd(k, _mm256_set1_pd(1.90821492927058770002e-10)));
    static const double inv_fact[14] = {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                                        1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
                                        1.0 / 479001600, 1.0 / 6227020800.0};
    __m256d p = _mm256_set1_pd(inv_fact[13]);
    for (int i = 12; i >= 0; i--) p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(inv_fact[i]));
    __m256i ki = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(k, magic)), _mm256_castpd_si256(magic));
    __m256i scale = _mm256_slli_epi64(_mm256_add_epi64(ki, _mm256_set1_epi64x(1023)), 52);
    __m256d e = _mm256_mul_pd(p, _mm256_castsi256_pd(scale));
    return _mm256_and_pd(e, _mm256_cmp_pd(x, lo, _CMP_GE_OQ)); /* 0 below -708 and at -inf */
}

/* s[j] = exp(s[j] - m) for j < n, m finite and every s[j] <= m (none NaN) */
__attribute__((target("avx2"))) static void exps_avx2(double *s, int64_t n, double m) {
    const __m256d mv = _mm256_set1_pd(m);
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) _mm256_storeu_pd(s + j, exp_nonpos_avx2(_mm256_sub_pd(_mm256_loadu_pd(s + j), mv)));
    if (j < n) {
        double tail[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
        for (int64_t i = j; i < n; i++) tail[i - j] = s[i] - m;
        _mm256_storeu_pd(tail, exp_nonpos_avx2(_mm256_loadu_pd(tail)));
        for (int64_t i = j; i < n; i++) s[i] = tail[i - j];
    }
}

/* s[h s_step + j] = q_h . key_j for the HN heads q_h = qd + h d (in double) and the keys j < w at
 * key + j kj (contiguous), two keys at a time: each key is converted once for all the heads. Each dot is
 * 4 partial sums of fused multiply-adds in d order, then a fixed tree. */
__attribute__((target("avx2,fma"), always_inline)) static inline void group_dots(const double *qd, int hn,
                                                                                  int64_t d, const float *key,
                                                                                  int64_t kj, int64_t w,
                                                                                  double *s, int64_t s_step) {
    int64_t j = 0;
    for (; j + 2 <= w; j += 2) {
        __m256d a[4][2];
        for (int h = 0; h < hn; h++) a[h][0] = a[h][1] = _mm256_setzero_pd();
        const float *k0 = key + j * kj, *k1 = k0 + kj;
        for (int64_t i = 0; i < 2 * d; i += 16) /* two keys further on (the window is likely not cached) */
            _mm_prefetch((const char *)(k0 + 8 * kj) + (i / d) * kj * 4 + (i % d) * 4, _MM_HINT_T0);
        for (int64_t i = 0; i < d; i += 4) {
            __m256d x0 = _mm256_cvtps_pd(_mm_loadu_ps(k0 + i)), x1 = _mm256_cvtps_pd(_mm_loadu_ps(k1 + i));
            for (int h = 0; h < hn; h++) {
                __m256d qv = _mm256_loadu_pd(qd + h * d + i);
                a[h][0] = _mm256_fmadd_pd(qv, x0, a[h][0]);
                a[h][1] = _mm256_fmadd_pd(qv, x1, a[h][1]);
            }
        }
        for (int h = 0; h < hn; h++) {
            __m256d t = _mm256_hadd_pd(a[h][0], a[h][1]); /* (0 1 0 1) */
            _mm_storeu_pd(s + h * s_step + j, _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1)));
        }
    }
    for (; j < w; j++) {
        __m256d a[4];
        for (int h = 0; h < hn; h++) a[h] = _mm256_setzero_pd();
        for (int64_t i = 0; i < d; i += 4) {
            __m256d x0 = _mm256_cvtps_pd(_mm_loadu_ps(key + j * kj + i));
            for (int h = 0; h < hn; h++) a[h] = _mm256_fmadd_pd(_mm256_loadu_pd(qd + h * d + i), x0, a[h]);
        }
        for (int h = 0; h < hn; h++) {
            __m256d t = _mm256_hadd_pd(a[h], a[h]);
            __m128d r = _mm_add_pd(_mm256_castpd256_pd128(t), _mm256_extractf128_pd(t, 1));
            s[h * s_step + j] = _mm_cvtsd_f64(r);
        }
    }
}

/* acc[h dv + e] = sum_{j < w} p[h p_step + j] vals[j vj + e] for the HN heads, e < dv (a multiple of 8):
 * eight columns at a time, each value converted once for all the heads; fused multiply-adds in j order */
__attribute__((target("avx2,fma"), always_inline)) static inline void group_weighted(
    const double *p, int64_t p_step, int hn, const float *vals, int64_t vj, int64_t w, int64_t dv, double *acc) {
    for (int64_t e = 0; e < dv; e += 8) {
        __m256d a[4][2];
        for (int h = 0; h < hn; h++) a[h][0] = a[h][1] = _mm256_setzero_pd();
        for (int64_t j = 0; j < w; j++) {
            const float *r = vals + j * vj + e;
            if (e == 0) /* the first pass reads the rows from memory: a row further on */
                for (int64_t i = 0; i < dv; i += 16) _mm_prefetch((const char *)(r + 8 * vj + i), _MM_HINT_T0);
            __m256d v0 = _mm256_cvtps_pd(_mm_loadu_ps(r)), v1 = _mm256_cvtps_pd(_mm_loadu_ps(r + 4));
            for (int h = 0; h < hn; h++) {
                __m256d pj = _mm256_broadcast_sd(p + h * p_step + j);
                a[h][0] = _mm256_fmadd_pd(pj, v0, a[h][0]);
                a[h][1] = _mm256_fmadd_pd(pj, v1, a[h][1]);
            }
        }
        for (int h = 0; h < hn; h++) {
            _mm256_storeu_pd(acc + h * dv + e, a[h][0]);
            _mm256_storeu_pd(acc + h * dv + e + 4, a[h][1]);
        }
    }
}

/* the two above for G heads, up to 4 at once (each count its own copy, the loops unrolled) */
__attribute__((target("avx2,fma"))) static void group_dots_all(const double *qd, int64_t g, int64_t d,
                                                               const float *key, int64_t kj, int64_t w,
                                                               double *s, int64_t s_step) {
    for (int64_t h = 0; h < g; h += 4) {
        const double *q = qd + h * d;
        double *o = s + h * s_step;
        switch (g - h >= 4 ? 4 : (int)(g - h)) {
        case 4: group_dots(q, 4, d, key, kj, w, o, s_step); break;
        case 3: group_dots(q, 3, d, key, kj, w, o, s_step); break;
        case 2: group_dots(q, 2, d, key, kj, w, o, s_step); break;
        default: group_dots(q, 1, d, key, kj, w, o, s_step);
        }
    }
}

__attribute__((target("avx2,fma"))) static void group_weighted_all(const double *p, int64_t p_step, int64_t g,
                                                                   const float *vals, int64_t vj, int64_t w,
                                                                   int64_t dv, double *acc) {
    for (int64_t h = 0; h < g; h += 4) {
        const double *ph = p + h * p_step;
        double *o = acc + h * dv;
        switch (g - h >= 4 ? 4 : (int)(g - h)) {
        case 4: group_weighted(ph, p_step, 4, vals, vj, w, dv, o); break;
        case 3: group_weighted(ph, p_step, 3, vals, vj, w, dv, o); break;
        case 2: group_weighted(ph, p_step, 2, vals, vj, w, dv, o); break;
        default: group_weighted(ph, p_step, 1, vals, vj, w, dv, o);
        }
    }
}

static int has_avx2(void) {
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx2");
    return known;
}

static int has_fma(void) {
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return known;
}
#endif

/* acc[0..dv) += p_j * rows j of vals (rows at stride vj, elements at stride vd), j < n */
static void weighted_rows(const double *p, const float *vals, int64_t vj, int64_t vd, int64_t n, int64_t dv,
                          double *acc) {
#if VG_X86
    if (vd == 1 && dv % 4 == 0 && has_avx2()) {
        weighted_avx2(p, vals, vj, n, dv, acc);
        return;
    }
#endif
    for (int64_t e = 0; e < dv; e++) acc[e] = 0.0;
    if (vd == 1) {
        for (int64_t j = 0; j < n; j++) {
            const float *r = vals + j * vj;
            const double pj = p[j];
            for (int64_t e = 0; e < dv; e++) acc[e] = acc[e] + pj * (double)r[e];
        }
    } else {
        for (int64_t j = 0; j < n; j++)
            for (int64_t e = 0; e < dv; e++) acc[e] = acc[e] + p[j] * (double)vals[j * vj + e * vd];
    }
}

/* the dot products s[j] (w window positions, then the t new ones) -> the softmax of s * scale + bias */
static void softmax_row(double *s, const float *bias, const attn_job *a, int64_t w) {
    const int64_t n = w + a->t;
    double m = -INFINITY;
    for (int64_t j = 0; j < n; j++) {
        s[j] = s[j] * a->scale + (double)bias[(j < w ? j : j - w + a->w) * a->bs[2]];
        if (isnan(s[j]) || s[j] > m) m = isnan(m) ? m : s[j];
    }
    double sum = 0.0;
#if VG_X86
    if (isfinite(m) && has_avx2()) {
        exps_avx2(s, n, m);
        for (int64_t j = 0; j < n; j++) sum = sum + s[j];
    } else
#endif
        for (int64_t j = 0; j < n; j++) {
            s[j] = s[j] == -INFINITY && m > -INFINITY ? 0.0 : exp(s[j] - m); /* exp(-inf) = 0 */
            sum = sum + s[j];
        }
    for (int64_t j = 0; j < n; j++) s[j] = s[j] / sum;
}

/* whether any of the n floats at x (stride 1) is an infinity or a NaN */
static int any_nonfinite(const float *x, int64_t n) {
    uint32_t found = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, x + i, 4);
        found |= (bits & 0x7f800000u) == 0x7f800000u;
    }
    return (int)found;
}

/* The window positions row t must visit: up to the last one its bias leaves visible, when the hidden ones
 * after it have finite keys and values (their weights are then exactly 0); else all W. */
static int64_t visible_end(const attn_job *a, const float *bias, const float *kt, const float *pv) {
    int64_t end = a->w;
    while (end > 0 && bias[(end - 1) * a->bs[2]] == -INFINITY) end--;
    if (end == a->w) return end;
    const int64_t *ks = a->kts, *vs = a->pvs;
    if (ks[2] == 1 && ks[3] == a->d && vs[3] == 1 && vs[2] == a->dv) { /* whole rows of a cache */
        int64_t n = a->w - end;
        return any_nonfinite(kt + end * a->d, n * a->d) || any_nonfinite(pv + end * a->dv, n * a->dv) ? a->w
                                                                                                      : end;
    }
    for (int64_t j = end; j < a->w; j++) {
        for (int64_t i = 0; i < a->d; i++)
            if (!isfinite(kt[i * ks[2] + j * ks[3]])) return a->w;
        for (int64_t e = 0; e < a->dv; e++)
            if (!isfinite(pv[j * vs[2] + e * vs[3]])) return a->w;
    }
    return end;
}

static void attn_rows(void *ctx, int64_t lo, int64_t hi) {
    attn_job *a = (attn_job *)ctx;
    const int64_t n = a->w + a->t, group = a->h / a->kv;
    /* scores [group, n], then acc1 and acc2 [group, dv] each, then q in double [group, d] */
    double *s = malloc(sizeof(double) * (size_t)(group * (n + 2 * a->dv + a->d) + 4));
    if (!s) {
        a->failed = 1;
        return;
    }
    double *acc1 = s + group * n, *acc2 = acc1 + group * a->dv, *qd = acc2 + group * a->dv;
#if VG_X86
    const int grouped = has_fma() && a->qs[3] == 1 && a->kts[2] == 1 && a->pvs[3] == 1 && a->d % 4 == 0 &&
                        a->dv % 8 == 0;
#else
    const int grouped = 0;
    (void)grouped, (void)qd; /* the grouped path is for x86 */
#endif
    for (int64_t row = lo; row < hi; row++) { /* row = (b, g, t) */
        const int64_t t = row % a->t, g = (row / a->t) % a->kv, b = row / (a->t * a->kv);
        const float *kt = a->kt + b * a->kts[0] + g * a->kts[1];
        const float *pv = a->pv + b * a->pvs[0] + g * a->pvs[1];
        const float *k = a->k + b * a->ks[0] + g * a->ks[1];
        const float *v = a->v + b * a->vs[0] + g * a->vs[1];
        const float *bias = a->bias + b * a->bs[0] + t * a->bs[1];
        const int64_t w = visible_end(a, bias, kt, pv), m_all = w + a->t; /* s: w window scores, then t */
        (void)m_all;
#if VG_X86
        if (grouped) {
            for (int64_t hh = 0; hh < group; hh++) {
                const float *q = a->q + b * a->qs[0] + (g * group + hh) * a->qs[1] + t * a->qs[2];
                for (int64_t i = 0; i < a->d; i++) qd[hh * a->d + i] = (double)q[i];
            }
            group_dots_all(qd, group, a->d, kt, a->kts[3], w, s, m_all);
            for (int64_t hh = 0; hh < group; hh++) {
                double *sh = s + hh * m_all;
                const float *q = a->q + b * a->qs[0] + (g * group + hh) * a->qs[1] + t * a->qs[2];
                for (int64_t i = 0; i < a->t; i++)
                    sh[w + i] = a->ks[3] == 1 ? dot_avx2(q, k + i * a->ks[2], a->d)
                                              : dot1(q, 1, k + i * a->ks[2], a->ks[3], a->d);
                softmax_row(sh, bias, a, w);
            }
            group_weighted_all(s, m_all, group, pv, a->pvs[2], w, a->dv, acc1);
            for (int64_t hh = 0; hh < group; hh++) {
                const int64_t h = g * group + hh;
                weighted_rows(s + hh * m_all + w, v, a->vs[2], a->vs[3], a->t, a->dv, acc2);
                float *o = a->out + ((b * a->h + h) * a->t + t) * a->dv;
                for (int64_t e = 0; e < a->dv; e++) o[e] = (float)(acc1[hh * a->dv + e] + acc2[e]);
            }
            continue;
        }
#endif
        for (int64_t hh = 0; hh < group; hh++) {
            const int64_t h = g * group + hh;
            const float *q = a->q + b * a->qs[0] + h * a->qs[1] + t * a->qs[2];
            int64_t j = 0;
#if VG_X86
            if (a->qs[3] == 1 && a->kts[2] == 1 && has_avx2()) {
                if (a->d % 4 == 0 && a->d <= 256) {
                    double qd[256];
                    for (int64_t i = 0; i < a->d; i++) qd[i] = (double)q[i];
                    for (; j + 4 <= w; j += 4) dots4_avx2(qd, kt + j * a->kts[3], a->kts[3], a->d, s + j);
                }
                for (; j < w; j++) s[j] = dot_avx2(q, kt + j * a->kts[3], a->d);
            }
#endif
            for (; j + 4 <= w; j += 4)
                dots4(q, a->qs[3], kt + j * a->kts[3], a->kts[2], a->kts[3], a->d, s + j);
            for (; j < w; j++) s[j] = dot1(q, a->qs[3], kt + j * a->kts[3], a->kts[2], a->d);
            for (int64_t i = 0; i < a->t; i++) {
#if VG_X86
                if (a->qs[3] == 1 && a->ks[3] == 1 && has_avx2()) {
                    s[w + i] = dot_avx2(q, k + i * a->ks[2], a->d);
                    continue;
                }
#endif
                s[w + i] = dot1(q, a->qs[3], k + i * a->ks[2], a->ks[3], a->d);
            }
            softmax_row(s, bias, a, w);
            weighted_rows(s, pv, a->pvs[2], a->pvs[3], w, a->dv, acc1);
            weighted_rows(s + w, v, a->vs[2], a->vs[3], a->t, a->dv, acc2);
            float *o = a->out + ((b * a->h + h) * a->t + t) * a->dv;
            for (int64_t e = 0; e < a->dv; e++) o[e] = (float)(acc1[e] + acc2[e]);
        }
    }
    free(s);
}

/* returns 0, or -1 when out of memory */
int vg_cached_attention_f32(const int64_t *sizes, const float *q, const int64_t *qs, const float *k,
                            const int64_t *ks, const float *v, const int64_t *vs, const float *kt,
                            const int64_t *kts, const float *pv, const int64_t *pvs, const float *bias,
                            const int64_t *bs, double scale, float *out, int threads) {
    attn_job a = {.b = sizes[0], .h = sizes[1], .kv = sizes[2], .t = sizes[3], .d = sizes[4], .dv = sizes[5],
                  .w = sizes[6], .q = q, .k = k, .v = v, .kt = kt, .pv = pv, .bias = bias, .qs = qs, .ks = ks,
                  .vs = vs, .kts = kts, .pvs = pvs, .bs = bs, .scale = scale, .out = out, .failed = 0};
    vg_parallel_for(a.b * a.kv * a.t, 1, threads, attn_rows, &a);
    return a.failed ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * attention_lse and attention_grad (ops/composite/attention.py) for f32: causal attention of the last T of S
 * positions, forward and the gradients of q, k and v, flash-attention style. In double as the references:
 * a unit of work is one (batch, key/value head), whose keys, values, queries (and output gradients) are
 * converted to double once; no [T, S] matrix is formed. Forward: each query row visits its visible keys
 * in blocks of FA_BLOCK with an online softmax (running max m and sum l, the accumulator rescaled when m
 * grows; a block is taken by every row that sees it before the next, so its keys and values stay in
 * cache); it writes the output and the row's log-sum-exp lse = m + log(l) (rounded to f32 as the
 * output). The backward runs no forward pass: it reads the forward's output o_i and lse_i, so
 * p_ij = exp(s_ij - lse_i) and delta_i = g_i . o_i - glse_i (glse_i: the gradient of lse_i), and takes
 * the keys in blocks of FA_KEYS, each key over the queries that see it (FA_QUERIES of them at a time for
 * every key of the block, so that they stay in cache): ds_ij = p_ij (g_i . v_j - delta_i),
 * dv_j = sum_i p_ij g_i and dk_j = scale sum_i ds_ij q_i in i order, then dq_i += scale ds_ij k_j for the
 * block's keys in j order (dq in double, a row read and written once a block). Each output is computed by
 * one thread in one order (threads take units), so every thread count gives the same bits. The three
 * gradients come from one pass (attention_grad packs them per unit). */
#define FA_BLOCK 64 /* keys a forward row takes at a time */
#define FA_KEYS 16  /* keys the backward takes at a time (dq's rows updated once per block) */
#define FA_QUERIES 32 /* queries the backward takes at a time for each key of a block */

typedef struct {
    int64_t b, h, kv, t, s, d, dv;
    const float *q, *k, *v, *g, *o; /* g and o (the forward's result): [B, H, T, Dv + 1], the backward's */
    const int64_t *qs, *ks, *vs, *gs, *os; /* element strides */
    double scale;
    int which; /* 0 forward, 1 the gradients */
    float *out; /* contiguous: [B, H, T, Dv + 1] (forward: output, lse); the gradients
                 * [B, KV, G T D + S D + S Dv]: per unit dq of its G heads [G, T, D], dk [S, D], dv [S, Dv] */
    volatile int failed, nonfinite;
} fa_job;

/* Whether the AVX-512 loops below may run (where the CPU has them); vg_attention_avx512(0) turns them off
 * for the tests, -1 only asks. Returns the setting before the call. */
static int fa_avx512_enabled = 1;
int vg_attention_avx512(int flag) {
    const int was = fa_avx512_enabled;
    if (flag >= 0) fa_avx512_enabled = flag;
    return was;
}
#if VG_X86
static inline int fa_avx512(void) { return fa_avx512_enabled && vg_has_avx512(); }
#endif

/* out[r] = x . rows[r] for r < n (rows contiguous, length d): four partial sums of fused multiply-adds in
 * d order, then (a0 + a1) + (a2 + a3); the same for every r whichever vector is x. The dot products, the
 * weighted sums (fa_axpys) and dq's updates (fa_dq) fuse each multiply and add on every path (the vector
 * ones need FMA, else the plain loops run, with C's fma: the same bits) */
static void fa_dots_plain(const double *x, const double *rows, int64_t n, int64_t d, double *out) {
    for (int64_t r = 0; r < n; r++) {
        const double *y = rows + r * d;
        double a[4] = {0.0, 0.0, 0.0, 0.0};
        int64_t i = 0;
        for (; i + 4 <= d; i += 4)
            for (int l = 0; l < 4; l++) a[l] = fma(x[i + l], y[i + l], a[l]);
        for (int l = 0; i < d; i++, l++) a[l] = fma(x[i], y[i], a[l]);
        out[r] = (a[0] + a[1]) + (a[2] + a[3]);
    }
}

#if VG_X86
__attribute__((target("avx2"))) static inline double fa_tree(__m256d a) {
    double l[4];
    _mm256_storeu_pd(l, a);
    return (l[0] + l[1]) + (l[2] + l[3]);
}

/* fa_dots_plain for d a multiple of 4 (the same bits: lane l sums x[i + l] y[i + l], a fused multiply-add
 * each, as C's fma) */
__attribute__((target("avx2,fma"))) static void fa_dots_avx2(const double *x, const double *rows, int64_t n,
                                                         int64_t d, double *out) {
    int64_t r = 0;
    for (; r + 4 <= n; r += 4) {
        const double *y = rows + r * d;
        __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t i = 0; i < d; i += 4) {
            __m256d xv = _mm256_loadu_pd(x + i);
            a0 = _mm256_fmadd_pd(xv, _mm256_loadu_pd(y + i), a0);
            a1 = _mm256_fmadd_pd(xv, _mm256_loadu_pd(y + d + i), a1);
            a2 = _mm256_fmadd_pd(xv, _mm256_loadu_pd(y + 2 * d + i), a2);
            a3 = _mm256_fmadd_pd(xv, _mm256_loadu_pd(y + 3 * d + i), a3);
        }
        out[r] = fa_tree(a0), out[r + 1] = fa_tree(a1), out[r + 2] = fa_tree(a2), out[r + 3] = fa_tree(a3);
    }
    for (; r < n; r++) {
        __m256d a = _mm256_setzero_pd();
        for (int64_t i = 0; i < d; i += 4)
            a = _mm256_fmadd_pd(_mm256_loadu_pd(x + i), _mm256_loadu_pd(rows + r * d + i), a);
        out[r] = fa_tree(a);
    }
}

/* fa_axpys for d a multiple of 4 (the same bits): 16 columns at a time held in registers over all r */
__attribute__((target("avx2,fma"))) static void fa_axpys_avx2(const double *c, const double *rows, int64_t n,
                                                          int64_t d, double *acc) {
    int64_t e = 0;
    for (; e + 16 <= d; e += 16) {
        __m256d a0 = _mm256_loadu_pd(acc + e), a1 = _mm256_loadu_pd(acc + e + 4);
        __m256d a2 = _mm256_loadu_pd(acc + e + 8), a3 = _mm256_loadu_pd(acc + e + 12);
        for (int64_t r = 0; r < n; r++) {
            const double *y = rows + r * d + e;
            const __m256d cr = _mm256_broadcast_sd(c + r);
            a0 = _mm256_fmadd_pd(cr, _mm256_loadu_pd(y), a0);
            a1 = _mm256_fmadd_pd(cr, _mm256_loadu_pd(y + 4), a1);
            a2 = _mm256_fmadd_pd(cr, _mm256_loadu_pd(y + 8), a2);
            a3 = _mm256_fmadd_pd(cr, _mm256_loadu_pd(y + 12), a3);
        }
        _mm256_storeu_pd(acc + e, a0), _mm256_storeu_pd(acc + e + 4, a1);
        _mm256_storeu_pd(acc + e + 8, a2), _mm256_storeu_pd(acc + e + 12, a3);
    }
    for (; e < d; e += 4) {
        __m256d a = _mm256_loadu_pd(acc + e);
        for (int64_t r = 0; r < n; r++)
            a = _mm256_fmadd_pd(_mm256_broadcast_sd(c + r), _mm256_loadu_pd(rows + r * d + e), a);
        _mm256_storeu_pd(acc + e, a);
    }
}

/* The AVX-512 forms of the three loops above, for d a multiple of 4: the same operations on each value
 * (a fused multiply-add, correctly rounded on every path: C's fma in the plain loops), so the same bits; a
 * vector holds two rows' four lanes (fa_dots) or eight columns (fa_axpys, fa_dq_block). */
#define FA512 __attribute__((target("avx2,avx512f,avx512dq")))
#define FA512F __attribute__((target("avx2,fma,avx512f,avx512dq"))) /* with fused multiply-adds */

FA512 static inline __m512d fa_pair(const double *y0, const double *y1) {
    return _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(y0)), _mm256_loadu_pd(y1), 1);
}

/* fa_tree of each four lanes of a0..a3 (rows 0-1, 2-3, 4-5, 6-7), as one vector of eight rows:
 * (l0 + l1) + (l2 + l3) in every lane of each four (a sum of two finite doubles does not depend on their
 * order), then lane 0 of each four gathered */
FA512 static inline __m512d fa_trees8(__m512d a0, __m512d a1, __m512d a2, __m512d a3) {
    __m512d t[4] = {a0, a1, a2, a3};
    for (int p = 0; p < 4; p++) {
        t[p] = _mm512_add_pd(t[p], _mm512_permute_pd(t[p], 0x55));              /* l0+l1 l0+l1 l2+l3 l2+l3 */
        t[p] = _mm512_add_pd(t[p], _mm512_permutex_pd(t[p], _MM_SHUFFLE(1, 0, 3, 2))); /* the tree's sum */
    }
    const __m512i first = _mm512_set_epi64(12, 8, 4, 0, 12, 8, 4, 0); /* lanes 0, 4 of two vectors */
    const __m512d lo = _mm512_permutex2var_pd(t[0], first, t[1]);
    const __m512d hi = _mm512_permutex2var_pd(t[2], first, t[3]);
    return _mm512_shuffle_f64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
}

/* fa_dots_avx2's sums, eight rows at a time: lanes 0-3 one row's, 4-7 the next's */
FA512F static void fa_dots_avx512(const double *x, const double *rows, int64_t n, int64_t d, double *out) {
    int64_t r = 0;
    for (; r + 8 <= n; r += 8) {
        const double *y = rows + r * d;
        __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t i = 0; i < d; i += 4) {
            const __m512d xv = _mm512_broadcast_f64x4(_mm256_loadu_pd(x + i));
            a0 = _mm512_fmadd_pd(xv, fa_pair(y + i, y + d + i), a0);
            a1 = _mm512_fmadd_pd(xv, fa_pair(y + 2 * d + i, y + 3 * d + i), a1);
            a2 = _mm512_fmadd_pd(xv, fa_pair(y + 4 * d + i, y + 5 * d + i), a2);
            a3 = _mm512_fmadd_pd(xv, fa_pair(y + 6 * d + i, y + 7 * d + i), a3);
        }
        _mm512_storeu_pd(out + r, fa_trees8(a0, a1, a2, a3));
    }
    if (r < n) fa_dots_avx2(x, rows + r * d, n - r, d, out + r);
}

/* fa_axpys_avx2's sums, 32 then 8 columns at a time */
FA512F static void fa_axpys_avx512(const double *c, const double *rows, int64_t n, int64_t d, double *acc) {
    int64_t e = 0;
    for (; e + 32 <= d; e += 32) {
        __m512d a0 = _mm512_loadu_pd(acc + e), a1 = _mm512_loadu_pd(acc + e + 8);
        __m512d a2 = _mm512_loadu_pd(acc + e + 16), a3 = _mm512_loadu_pd(acc + e + 24);
        for (int64_t r = 0; r < n; r++) {
            const double *y = rows + r * d + e;
            const __m512d cr = _mm512_set1_pd(c[r]);
            a0 = _mm512_fmadd_pd(cr, _mm512_loadu_pd(y), a0);
            a1 = _mm512_fmadd_pd(cr, _mm512_loadu_pd(y + 8), a1);
            a2 = _mm512_fmadd_pd(cr, _mm512_loadu_pd(y + 16), a2);
            a3 = _mm512_fmadd_pd(cr, _mm512_loadu_pd(y + 24), a3);
        }
        _mm512_storeu_pd(acc + e, a0), _mm512_storeu_pd(acc + e + 8, a1);
        _mm512_storeu_pd(acc + e + 16, a2), _mm512_storeu_pd(acc + e + 24, a3);
    }
    for (; e + 8 <= d; e += 8) {
        __m512d a = _mm512_loadu_pd(acc + e);
        for (int64_t r = 0; r < n; r++)
            a = _mm512_fmadd_pd(_mm512_set1_pd(c[r]), _mm512_loadu_pd(rows + r * d + e), a);
        _mm512_storeu_pd(acc + e, a);
    }
    if (e < d) { /* the last four columns */
        __m256d a = _mm256_loadu_pd(acc + e);
        for (int64_t r = 0; r < n; r++)
            a = _mm256_fmadd_pd(_mm256_set1_pd(c[r]), _mm256_loadu_pd(rows + r * d + e), a);
        _mm256_storeu_pd(acc + e, a);
    }
}

/* exp_nonpos_avx2 on eight lanes: the same operations on each, so the same bits */
FA512 static inline __m512d exp_nonpos_avx512(__m512d x) {
    const __m512d lo = _mm512_set1_pd(-708.0), magic = _mm512_set1_pd(6755399441055744.0);
    __m512d xc = _mm512_max_pd(x, lo);
    __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(xc, _mm512_set1_pd(1.4426950408889634)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_sub_pd(xc, _mm512_mul_pd(k, _mm512_set1_pd(6.93147180369123816490e-01)));
    r = _mm512_sub_pd(r, _mm512_mul_pd(k, _mm512_set1_pd(1.90821492927058770002e-10)));
    static const double inv_fact[14] = {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                                        1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
                                        1.0 / 479001600, 1.0 / 6227020800.0};
    __m512d p = _mm512_set1_pd(inv_fact[13]);
    for (int i = 12; i >= 0; i--) p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(inv_fact[i]));
    __m512i ki = _mm512_sub_epi64(_mm512_castpd_si512(_mm512_add_pd(k, magic)), _mm512_castpd_si512(magic));
    __m512i scale = _mm512_slli_epi64(_mm512_add_epi64(ki, _mm512_set1_epi64(1023)), 52);
    __m512d e = _mm512_mul_pd(p, _mm512_castsi512_pd(scale));
    return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, lo, _CMP_GE_OQ), e); /* 0 below -708 and at -inf */
}

/* fa_exps_avx2 eight at a time (the last partial vector as the AVX2 form does it) */
FA512 static void fa_exps_avx512(double *x, int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm512_storeu_pd(x + j, exp_nonpos_avx512(_mm512_loadu_pd(x + j)));
    if (j < n) exps_avx2(x + j, n - j, 0.0);
}

/* s[j] = s[j] scale for j < n and the largest of them and m, for finite s (fa_row's loop, whose result
 * differs only in the sign of a zero maximum: no exp(x - m) or comparison with m sees it) */
FA512 static double fa_scale_max_avx512(double *s, int64_t n, double scale, double m) {
    const __m512d sc = _mm512_set1_pd(scale);
    __m512d top = _mm512_set1_pd(m);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m512d x = _mm512_mul_pd(_mm512_loadu_pd(s + j), sc);
        _mm512_storeu_pd(s + j, x);
        top = _mm512_max_pd(top, x);
    }
    m = _mm512_reduce_max_pd(top);
    for (; j < n; j++) {
        s[j] = s[j] * scale;
        if (s[j] > m) m = s[j];
    }
    return m;
}

/* x[j] = exp(x[j]) for x[j] <= 0, none NaN */
__attribute__((target("avx2"))) static void fa_exps_avx2(double *x, int64_t n) { exps_avx2(x, n, 0.0); }
#endif

static void fa_dots(const double *x, const double *rows, int64_t n, int64_t d, double *out) {
#if VG_X86
    if (d % 4 == 0 && fa_avx512()) {
        fa_dots_avx512(x, rows, n, d, out);
        return;
    }
    if (d % 4 == 0 && has_fma()) {
        fa_dots_avx2(x, rows, n, d, out);
        return;
    }
#endif
    fa_dots_plain(x, rows, n, d, out);
}

/* x[j] = exp(x[j]) (-inf gives 0) */
static void fa_exps(double *x, int64_t n) {
#if VG_X86
    int ok = has_avx2();
    for (int64_t j = 0; j < n && ok; j++) ok = x[j] <= 0.0; /* false for NaN */
    if (ok && fa_avx512()) {
        fa_exps_avx512(x, n);
        return;
    }
    if (ok) {
        fa_exps_avx2(x, n);
        return;
    }
#endif
    for (int64_t j = 0; j < n; j++) x[j] = exp(x[j]);
}

/* acc[e] += sum_{r<n} c[r] rows[r][e], e < d, in r order */
static void fa_axpys(const double *c, const double *rows, int64_t n, int64_t d, double *acc) {
#if VG_X86
    if (d % 4 == 0 && fa_avx512()) {
        fa_axpys_avx512(c, rows, n, d, acc);
        return;
    }
    if (d % 4 == 0 && has_fma()) {
        fa_axpys_avx2(c, rows, n, d, acc);
        return;
    }
#endif
    for (int64_t r = 0; r < n; r++) {
        const double cr = c[r], *y = rows + r * d;
        for (int64_t e = 0; e < d; e++) acc[e] = fma(cr, y[e], acc[e]);
    }
}

/* dq[i][e] += sum_{j < kb, i >= first[j]} ds[j js + i] k[j][e] for rows i in [lo, n), in j order (k
 * rows of length d): each dq row is read and written once per block of keys */
static void fa_dq_block(const double *ds, int64_t js, const int64_t *first, int64_t kb, const double *k,
                        int64_t lo, int64_t n, int64_t d, double *dq) {
    for (int64_t i = lo; i < n; i++) {
        double *row = dq + i * d;
        for (int64_t j = 0; j < kb; j++) {
            if (i < first[j]) continue;
            const double c = ds[j * js + i], *y = k + j * d;
            for (int64_t e = 0; e < d; e++) row[e] = fma(c, y[e], row[e]);
        }
    }
}

#if VG_X86
/* fa_dq_block for d a multiple of 4 (the same bits): 16 columns of a row held in registers */
__attribute__((target("avx2,fma"))) static void fa_dq_block_avx2(const double *ds, int64_t js, const int64_t *first,
                                                             int64_t kb, const double *k, int64_t lo, int64_t n,
                                                             int64_t d, double *dq) {
    for (int64_t i = lo; i < n; i++) {
        double *row = dq + i * d;
        int64_t e = 0;
        for (; e + 16 <= d; e += 16) {
            __m256d a0 = _mm256_loadu_pd(row + e), a1 = _mm256_loadu_pd(row + e + 4);
            __m256d a2 = _mm256_loadu_pd(row + e + 8), a3 = _mm256_loadu_pd(row + e + 12);
            for (int64_t j = 0; j < kb; j++) {
                if (i < first[j]) continue;
                const __m256d c = _mm256_broadcast_sd(ds + j * js + i);
                const double *y = k + j * d + e;
                a0 = _mm256_fmadd_pd(c, _mm256_loadu_pd(y), a0);
                a1 = _mm256_fmadd_pd(c, _mm256_loadu_pd(y + 4), a1);
                a2 = _mm256_fmadd_pd(c, _mm256_loadu_pd(y + 8), a2);
                a3 = _mm256_fmadd_pd(c, _mm256_loadu_pd(y + 12), a3);
            }
            _mm256_storeu_pd(row + e, a0), _mm256_storeu_pd(row + e + 4, a1);
            _mm256_storeu_pd(row + e + 8, a2), _mm256_storeu_pd(row + e + 12, a3);
        }
        for (; e < d; e += 4) {
            __m256d a = _mm256_loadu_pd(row + e);
            for (int64_t j = 0; j < kb; j++)
                if (i >= first[j])
                    a = _mm256_fmadd_pd(_mm256_broadcast_sd(ds + j * js + i), _mm256_loadu_pd(k + j * d + e), a);
            _mm256_storeu_pd(row + e, a);
        }
    }
}
#endif

#if VG_X86
/* fa_dq_block_avx2's sums, 32 then 8 columns of a row at a time */
FA512F static void fa_dq_block_avx512(const double *ds, int64_t js, const int64_t *first, int64_t kb,
                                     const double *k, int64_t lo, int64_t n, int64_t d, double *dq) {
    for (int64_t i = lo; i < n; i++) {
        double *row = dq + i * d;
        int64_t e = 0;
        for (; e + 32 <= d; e += 32) {
            __m512d a0 = _mm512_loadu_pd(row + e), a1 = _mm512_loadu_pd(row + e + 8);
            __m512d a2 = _mm512_loadu_pd(row + e + 16), a3 = _mm512_loadu_pd(row + e + 24);
            for (int64_t j = 0; j < kb; j++) {
                if (i < first[j]) continue;
                const __m512d c = _mm512_set1_pd(ds[j * js + i]);
                const double *y = k + j * d + e;
                a0 = _mm512_fmadd_pd(c, _mm512_loadu_pd(y), a0);
                a1 = _mm512_fmadd_pd(c, _mm512_loadu_pd(y + 8), a1);
                a2 = _mm512_fmadd_pd(c, _mm512_loadu_pd(y + 16), a2);
                a3 = _mm512_fmadd_pd(c, _mm512_loadu_pd(y + 24), a3);
            }
            _mm512_storeu_pd(row + e, a0), _mm512_storeu_pd(row + e + 8, a1);
            _mm512_storeu_pd(row + e + 16, a2), _mm512_storeu_pd(row + e + 24, a3);
        }
        for (; e + 8 <= d; e += 8) {
            __m512d a = _mm512_loadu_pd(row + e);
            for (int64_t j = 0; j < kb; j++)
                if (i >= first[j])
                    a = _mm512_fmadd_pd(_mm512_set1_pd(ds[j * js + i]), _mm512_loadu_pd(k + j * d + e), a);
            _mm512_storeu_pd(row + e, a);
        }
        if (e < d) {
            __m256d a = _mm256_loadu_pd(row + e);
            for (int64_t j = 0; j < kb; j++)
                if (i >= first[j])
                    a = _mm256_fmadd_pd(_mm256_set1_pd(ds[j * js + i]), _mm256_loadu_pd(k + j * d + e), a);
            _mm256_storeu_pd(row + e, a);
        }
    }
}
#endif

static void fa_dq(const double *ds, int64_t js, const int64_t *first, int64_t kb, const double *k, int64_t lo,
                  int64_t n, int64_t d, double *dq) {
#if VG_X86
    if (d % 4 == 0 && fa_avx512()) {
        fa_dq_block_avx512(ds, js, first, kb, k, lo, n, d, dq);
        return;
    }
    if (d % 4 == 0 && has_fma()) {
        fa_dq_block_avx2(ds, js, first, kb, k, lo, n, d, dq);
        return;
    }
#endif
    fa_dq_block(ds, js, first, kb, k, lo, n, d, dq);
}

/* The backward's element-wise steps over a key's n queries, eight at a time on AVX-512 (the same
 * operations on each element, so the same bits as the scalar loops) */
#if VG_X86
FA512 static void fa_shift_avx512(double *s, int64_t n, double scale, const double *m) {
    const __m512d sc = _mm512_set1_pd(scale);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm512_storeu_pd(s + i,
                         _mm512_sub_pd(_mm512_mul_pd(_mm512_loadu_pd(s + i), sc), _mm512_loadu_pd(m + i)));
    for (; i < n; i++) s[i] = s[i] * scale - m[i];
}
FA512 static void fa_ds_avx512(double *ds, const double *p, int64_t n, const double *delta, double scale) {
    const __m512d sc = _mm512_set1_pd(scale);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m512d d = _mm512_sub_pd(_mm512_loadu_pd(ds + i), _mm512_loadu_pd(delta + i));
        _mm512_storeu_pd(ds + i, _mm512_mul_pd(_mm512_mul_pd(_mm512_loadu_pd(p + i), d), sc));
    }
    for (; i < n; i++) ds[i] = p[i] * (ds[i] - delta[i]) * scale;
}
#endif

/* s[i] = s[i] scale - m[i] */
static void fa_shift(double *s, int64_t n, double scale, const double *m) {
#if VG_X86
    if (fa_avx512()) {
        fa_shift_avx512(s, n, scale, m);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) s[i] = s[i] * scale - m[i];
}

/* ds[i] = p[i] (ds[i] - delta[i]) scale */
static void fa_ds(double *ds, const double *p, int64_t n, const double *delta, double scale) {
#if VG_X86
    if (fa_avx512()) {
        fa_ds_avx512(ds, p, n, delta, scale);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) ds[i] = p[i] * (ds[i] - delta[i]) * scale;
}

#if VG_X86
/* fa_load for es 1: eight values a vector (the conversion is exact: the same values) */
FA512 static int fa_load_avx512(const float *src, int64_t rs, int64_t n, int64_t d, double *dst) {
    int ok = 1;
    for (int64_t r = 0; r < n; r++) {
        const float *x = src + r * rs;
        double *y = dst + r * d;
        int64_t e = 0;
        for (; e + 8 <= d; e += 8) {
            const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + e));
            _mm512_storeu_pd(y + e, v);
            ok &= _mm512_cmp_pd_mask(_mm512_sub_pd(v, v), _mm512_setzero_pd(), _CMP_EQ_OQ) == 0xff;
        }
        for (; e < d; e++) {
            const double v = (double)x[e];
            y[e] = v;
            ok &= v - v == 0.0;
        }
    }
    return ok;
}
#endif

/* dst[r d + e] = (double)src[r rs + e es] for r < n, e < d; whether all are finite */
static int fa_load(const float *src, int64_t rs, int64_t es, int64_t n, int64_t d, double *dst) {
#if VG_X86
    if (es == 1 && fa_avx512()) return fa_load_avx512(src, rs, n, d, dst);
#endif
    int ok = 1;
    for (int64_t r = 0; r < n; r++)
        for (int64_t e = 0; e < d; e++) {
            const double x = (double)src[r * rs + e * es];
            dst[r * d + e] = x;
            ok &= x - x == 0.0; /* NaN at an infinity or a NaN */
        }
    return ok;
}

/* one query row's forward over one block of nb keys (kd, vd: the block's rows): the online softmax's step
 * on the row's running max *m, sum *l and unnormalized acc[dv] (s: FA_BLOCK) */
static void fa_row_block(const fa_job *a, const double *qi, const double *kd, const double *vd, int64_t nb,
                         double *s, double *m_io, double *l_io, double *acc) {
    double m = *m_io, l = *l_io;
    fa_dots(qi, kd, nb, a->d, s);
    double bm = m;
#if VG_X86
    if (fa_avx512()) /* finite scores (fa_units checked the inputs) */
        bm = fa_scale_max_avx512(s, nb, a->scale, bm);
    else
#endif
        for (int64_t j = 0; j < nb; j++) {
            s[j] = s[j] * a->scale;
            if (isnan(s[j]) || s[j] > bm) bm = isnan(bm) ? bm : s[j];
        }
    if (bm != m) { /* a larger max (or a NaN): rescale what was summed */
        const double r = m == -INFINITY ? 0.0 : exp(m - bm);
        l = l * r;
        for (int64_t e = 0; e < a->dv; e++) acc[e] = acc[e] * r;
        m = bm;
    }
    if (m != -INFINITY) { /* every score so far -inf: weights 0 until a finite one */
        for (int64_t j = 0; j < nb; j++) s[j] = s[j] - m;
        fa_exps(s, nb);
        for (int64_t j = 0; j < nb; j++) l = l + s[j];
        fa_axpys(s, vd, nb, a->dv, acc);
    }
    *m_io = m, *l_io = l;
}

static void fa_units(void *ctx, int64_t lo, int64_t hi) {
    fa_job *a = (fa_job *)ctx;
    const int64_t t = a->t, S = a->s, d = a->d, dv = a->dv, group = a->h / a->kv, off = S - t;
    const int64_t wide = (d > dv ? d : dv), rows = group * t;
    const int backward = a->which != 0;
    /* kd [S, d], vd [S, dv], qd [G T, d], gd [G T, dv] (the forward's accumulators), dq [G T, d], m, l (or
     * lse), delta [G T],
     * s [max(G T, BLOCK)], ds [KEYS, G T], acc [d + dv] */
    const int64_t sn = rows + FA_BLOCK;
    size_t count = (size_t)(S * d + S * dv + rows * d + rows * dv + (backward ? rows * d : 0) + 3 * rows + sn);
    count += (size_t)(backward ? FA_KEYS * rows : 0);
    count += (size_t)(wide + d + dv + 1 + (backward ? FA_KEYS * (d + dv) : 0));
    double *kd = malloc(sizeof(double) * count);
    if (!kd) {
        a->failed = 1;
        return;
    }
    double *vd = kd + S * d, *qd = vd + S * dv, *gd = qd + rows * d, *dq = gd + rows * dv;
    double *mrow = dq + (backward ? rows * d : 0);
    double *lrow = mrow + rows, *delta = lrow + rows, *s = delta + rows, *dsb = s + sn;
    double *acc = dsb + (backward ? FA_KEYS * rows : 0), *kacc = acc + wide + d + dv + 1; /* [KEYS, d + dv] */
    for (int64_t unit = lo; unit < hi; unit++) { /* unit = (b, kv head) */
        const int64_t b = unit / a->kv, g = unit % a->kv;
        int finite = fa_load(a->k + b * a->ks[0] + g * a->ks[1], a->ks[2], a->ks[3], S, d, kd);
        finite &= fa_load(a->v + b * a->vs[0] + g * a->vs[1], a->vs[2], a->vs[3], S, dv, vd);
        for (int64_t hh = 0; hh < group; hh++) {
            const int64_t h = g * group + hh;
            finite &= fa_load(a->q + b * a->qs[0] + h * a->qs[1], a->qs[2], a->qs[3], t, d, qd + hh * t * d);
            if (!backward) continue;
            finite &= fa_load(a->g + b * a->gs[0] + h * a->gs[1], a->gs[2], a->gs[3], t, dv, gd + hh * t * dv);
            for (int64_t i = 0; i < t; i++) { /* the forward's o_i and lse_i, glse_i: delta_i */
                const int64_t r = hh * t + i;
                const float *o = a->o + b * a->os[0] + h * a->os[1] + i * a->os[2];
                const float *gl = a->g + b * a->gs[0] + h * a->gs[1] + i * a->gs[2] + dv * a->gs[3];
                finite &= fa_load(o, 0, a->os[3], 1, dv + 1, acc);
                finite &= fa_load(gl, 0, 0, 1, 1, acc + dv + 1);
                fa_dots(gd + r * dv, acc, 1, dv, delta + r);
                delta[r] = delta[r] - acc[dv + 1];
                mrow[r] = acc[dv]; /* lse_i */
            }
        }
        if (!finite) { /* the reference's 0 * inf of hidden positions: the caller runs it */
            a->nonfinite = 1;
            break;
        }
        if (!backward) {
            /* the rows' online softmax a block of keys at a time (the block's keys and values stay in
             * cache for every row that sees it), each row's steps in block order */
            double *accs = gd; /* [G T, dv] */
            for (int64_t r = 0; r < rows; r++) mrow[r] = -INFINITY, lrow[r] = 0.0;
            for (int64_t e = 0; e < rows * dv; e++) accs[e] = 0.0;
            for (int64_t j0 = 0; j0 < S; j0 += FA_BLOCK)
                for (int64_t r = 0; r < rows; r++) {
                    const int64_t n = off + r % t + 1 - j0; /* the keys of the block row r sees */
                    if (n <= 0) continue;
                    fa_row_block(a, qd + r * d, kd + j0 * d, vd + j0 * dv, n < FA_BLOCK ? n : FA_BLOCK, s,
                                 mrow + r, lrow + r, accs + r * dv);
                }
            for (int64_t r = 0; r < rows; r++) { /* each row's output and log-sum-exp */
                const int64_t hh = r / t, i = r % t;
                float *o = a->out + ((b * a->h + g * group + hh) * t + i) * (dv + 1);
                for (int64_t e = 0; e < dv; e++) o[e] = (float)(accs[r * dv + e] / lrow[r]);
                o[dv] = (float)(mrow[r] + log(lrow[r]));
            }
            continue;
        }
        /* the gradients, a block of keys at a time, each key over the queries that see it, FA_QUERIES
         * queries at a time for every key of the block (they stay in cache): dk_j and dv_j summed in
         * (head, i) order, each dq_i in j order in dq (double) */
        float *o = a->out + unit * (rows * d + S * (d + dv));
        for (int64_t e = 0; e < rows * d; e++) dq[e] = 0.0;
        for (int64_t j0 = 0; j0 < S; j0 += FA_KEYS) {
            const int64_t kb = S - j0 < FA_KEYS ? S - j0 : FA_KEYS;
            int64_t first[FA_KEYS];
            for (int64_t j = j0; j < j0 + kb; j++) first[j - j0] = j > off ? j - off : 0;
            for (int64_t e = 0; e < kb * (d + dv); e++) kacc[e] = 0.0;
            for (int64_t hh = 0; hh < group; hh++)
                for (int64_t c0 = first[0]; c0 < t; c0 += FA_QUERIES) {
                    const int64_t c1 = t - c0 < FA_QUERIES ? t : c0 + FA_QUERIES;
                    for (int64_t j = j0; j < j0 + kb; j++) {
                        const int64_t lo = first[j - j0] > c0 ? first[j - j0] : c0, n = c1 - lo, r0 = hh * t + lo;
                        if (n <= 0) continue;
                        double *ds = dsb + ((j - j0) * group + hh) * t + lo;
                        double *dk = kacc + (j - j0) * (d + dv), *dvj = dk + d;
                        fa_dots(kd + j * d, qd + r0 * d, n, d, s);
                        fa_shift(s, n, a->scale, mrow + r0); /* s_ij - lse_i */
                        fa_exps(s, n);
                        fa_axpys(s, gd + r0 * dv, n, dv, dvj);
                        fa_dots(vd + j * dv, gd + r0 * dv, n, dv, ds);
                        fa_ds(ds, s, n, delta + r0, a->scale);
                        fa_axpys(ds, qd + r0 * d, n, d, dk);
                    }
                }
            for (int64_t j = j0; j < j0 + kb; j++) {
                const double *dk = kacc + (j - j0) * (d + dv), *dvj = dk + d;
                for (int64_t e = 0; e < d; e++) o[rows * d + j * d + e] = (float)dk[e];
                for (int64_t e = 0; e < dv; e++) o[rows * d + S * d + j * dv + e] = (float)dvj[e];
            }
            for (int64_t hh = 0; hh < group; hh++) /* ds [kb, G, T]: head hh's rows at stride G T */
                fa_dq(dsb + hh * t, group * t, first, kb, kd + j0 * d, first[0], t, d, dq + hh * t * d);
        }
        for (int64_t e = 0; e < rows * d; e++) o[e] = (float)dq[e];
    }
    free(kd);
}

/* sizes: B, H, KV, T, S, D, Dv; which: 0 forward, 1 the gradients (g, o and their strides unused by the
 * forward). Returns 0; 1 where an input holds an infinity or a NaN (a hidden position's then reaches every
 * row through the reference's 0 * inf: the caller runs the reference); -1 when out of memory. */
int vg_flash_attention_f32(const int64_t *sizes, int which, const float *q, const int64_t *qs, const float *k,
                           const int64_t *ks, const float *v, const int64_t *vs, const float *g,
                           const int64_t *gs, const float *o, const int64_t *os, double scale, float *out,
                           int threads) {
    fa_job a = {.b = sizes[0], .h = sizes[1], .kv = sizes[2], .t = sizes[3], .s = sizes[4], .d = sizes[5],
                .dv = sizes[6], .q = q, .k = k, .v = v, .g = g, .o = o, .qs = qs, .ks = ks, .vs = vs, .gs = gs,
                .os = os, .scale = scale, .which = which, .out = out, .failed = 0, .nonfinite = 0};
    vg_parallel_for(a.b * a.kv, 1, threads, fa_units, &a);
    return a.failed ? -1 : a.nonfinite ? 1 : 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * cached_attention with the window in f16 (an f16 KV cache): each thread widens the window of the (batch,
 * key/value head) of its rows into an f32 scratch (exactly: every f16 is an f32), keys as [W, D] and values
 * as [W, Dv], contiguous, then runs attn_rows on it with strides of 0 for the batch and the head. The
 * results are the f32 kernel's on the widened window, bit for bit, so the same for every thread count. */
static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        float v = (float)mant * 0x1p-24f; /* zero or subnormal: exact */
        return sign ? -v : v;
    }
    bits = exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

#if VG_X86
#include <cpuid.h>

/* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports knows no "f16c"; "avx" checks that
 * the OS saves the YMM registers too */
static int has_f16c(void) {
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d;
        known = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) && __builtin_cpu_supports("avx");
    }
    return known;
}

__attribute__((target("avx,f16c"))) static int64_t widen_f16c(const uint16_t *in, int64_t n, float *out) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
    return i;
}
#endif

typedef struct {
    attn_job job; /* kt and pv point at uint16_t */
} attn16_job;

/* out[i] = f16 in[i * stride] for i < n (F16C's conversion where the CPU has it: exact, the same values) */
static void widen(const uint16_t *in, int64_t stride, int64_t n, float *out) {
    int64_t i = 0;
#if VG_X86
    if (stride == 1 && has_f16c()) i = widen_f16c(in, n, out);
#endif
    for (; i < n; i++) out[i] = f16_to_f32(in[i * stride]);
}

static void attn16_rows(void *ctx, int64_t lo, int64_t hi) {
    attn_job *a = &((attn16_job *)ctx)->job;
    const int64_t w = a->w, d = a->d, dv = a->dv;
    float *scratch = malloc(sizeof(float) * (size_t)(w * (d + dv) + 1));
    if (!scratch) {
        a->failed = 1;
        return;
    }
    const int64_t kts[4] = {0, 0, 1, d}, pvs[4] = {0, 0, dv, 1};
    attn_job local = *a;
    local.kt = scratch, local.pv = scratch + w * d, local.kts = kts, local.pvs = pvs, local.failed = 0;
    const uint16_t *kt16 = (const uint16_t *)(const void *)a->kt, *pv16 = (const uint16_t *)(const void *)a->pv;
    int64_t held = -1; /* the (batch, head) whose window the scratch holds */
    for (int64_t row = lo; row < hi && !local.failed; row++) {
        const int64_t bg = row / a->t, g = bg % a->kv, b = bg / a->kv;
        if (bg != held) {
            const uint16_t *kt = kt16 + b * a->kts[0] + g * a->kts[1], *pv = pv16 + b * a->pvs[0] + g * a->pvs[1];
            float *ks = scratch, *vs = scratch + w * d;
            for (int64_t j = 0; j < w; j++) {
                widen(kt + j * a->kts[3], a->kts[2], d, ks + j * d);
                widen(pv + j * a->pvs[2], a->pvs[3], dv, vs + j * dv);
            }
            held = bg;
        }
        attn_rows(&local, row, row + 1);
    }
    if (local.failed) a->failed = 1;
    free(scratch);
}

int vg_cached_attention_f16kv(const int64_t *sizes, const float *q, const int64_t *qs, const float *k,
                              const int64_t *ks, const float *v, const int64_t *vs, const uint16_t *kt,
                              const int64_t *kts, const uint16_t *pv, const int64_t *pvs, const float *bias,
                              const int64_t *bs, double scale, float *out, int threads) {
    attn16_job a = {.job = {.b = sizes[0], .h = sizes[1], .kv = sizes[2], .t = sizes[3], .d = sizes[4],
                            .dv = sizes[5], .w = sizes[6], .q = q, .k = k, .v = v,
                            .kt = (const float *)(const void *)kt, .pv = (const float *)(const void *)pv,
                            .bias = bias, .qs = qs, .ks = ks, .vs = vs, .kts = kts, .pvs = pvs, .bs = bs,
                            .scale = scale, .out = out, .failed = 0}};
    vg_parallel_for(a.job.b * a.job.kv * a.job.t, 1, threads, attn16_rows, &a);
    return a.job.failed ? -1 : 0;
}
