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
 * rows of about equal work (a batch's rows may differ in length: parallel_rows); each output is computed
 * by one thread in one order.
 *
 * With AVX2 and FMA and contiguous head dims, the G heads of a key/value head are computed together
 * (group_dots, group_weighted: each key and value is converted to double once for all of them); with AVX2
 * alone, the dot products take four keys at once and the weighted sums sixteen columns; exp is evaluated
 * four at a time (exps_avx2). A hidden position (score -inf, finite maximum) gets exp's value 0 without
 * the call, and the hidden positions at the end of the window (a cache's unused slots) are skipped when
 * their keys and values are finite: their weight is then exactly 0 and adds nothing (a NaN or an infinity
 * there is counted, as the reference counts it; the check reads 64 floats a step on AVX-512).
 *
 * The training attention (attention_lse, attention_grad) is attention_flash.c's; what both use, attention.h.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attention.h"

#define VG_MAX_BANDS 64 /* the thread pool's most threads */

typedef struct {
    int64_t b, h, kv, t, d, dv, w;
    const float *q, *k, *v, *kt, *pv, *bias;
    const int64_t *qs, *ks, *vs, *kts, *pvs, *bs; /* element strides: 4 each, bias 3 (batch, row, column) */
    double scale;
    float *out;     /* [B, H, T, Dv], each row of Dv contiguous */
    int64_t os[3];  /* its element strides (batch, head, token) */
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

/* s[h s_step + j] = q_h . key_j for the HN heads q_h = qd + h d (in double) and the keys j < w at
 * key + j kj (contiguous), two keys at a time: each key is converted once for all the heads. Each dot is
 * 4 partial sums of fused multiply-adds in d order, then a fixed tree. The values (dv floats each, rows
 * at vals + j vj) are fetched meanwhile, as far ahead as the keys. */
__attribute__((target("avx2,fma"), always_inline)) static inline void group_dots(const double *qd, int hn,
                                                                                  int64_t d, const float *key,
                                                                                  int64_t kj, int64_t w,
                                                                                  double *s, int64_t s_step,
                                                                                  const float *vals, int64_t vj,
                                                                                  int64_t dv) {
    int64_t j = 0;
    for (; j + 2 <= w; j += 2) {
        __m256d a[4][2];
        for (int h = 0; h < hn; h++) a[h][0] = a[h][1] = _mm256_setzero_pd();
        const float *k0 = key + j * kj, *k1 = k0 + kj;
        /* the two keys eight further on (the window is likely not cached); no division by d here: its
         * latency took half the dots' time */
        for (int64_t i = 0; i < d; i += 16) {
            _mm_prefetch((const char *)(k0 + 8 * kj + i), _MM_HINT_T0);
            _mm_prefetch((const char *)(k1 + 8 * kj + i), _MM_HINT_T0);
        }
        /* and their values into L2: the weighted sums then read them from there, not from memory (their
         * own prefetches, 8 rows ahead of one pass of 8 columns, did not hide the latency: 5.3 GB/s) */
        for (int64_t e = 0; e < dv; e += 16) {
            _mm_prefetch((const char *)(vals + (j + 8) * vj + e), _MM_HINT_T1);
            _mm_prefetch((const char *)(vals + (j + 9) * vj + e), _MM_HINT_T1);
        }
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
                                                               double *s, int64_t s_step, const float *vals,
                                                               int64_t vj, int64_t dv) {
    for (int64_t h = 0; h < g; h += 4) {
        const double *q = qd + h * d;
        double *o = s + h * s_step;
        switch (g - h >= 4 ? 4 : (int)(g - h)) {
        case 4: group_dots(q, 4, d, key, kj, w, o, s_step, vals, vj, dv); break;
        case 3: group_dots(q, 3, d, key, kj, w, o, s_step, vals, vj, dv); break;
        case 2: group_dots(q, 2, d, key, kj, w, o, s_step, vals, vj, dv); break;
        default: group_dots(q, 1, d, key, kj, w, o, s_step, vals, vj, dv);
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
#endif

/* acc[0..dv) += p_j * rows j of vals (rows at stride vj, elements at stride vd), j < n */
static void weighted_rows(const double *p, const float *vals, int64_t vj, int64_t vd, int64_t n, int64_t dv,
                          double *acc) {
#if VG_X86
    if (vd == 1 && dv % 4 == 0 && vg_has_avx2()) {
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
    if (isfinite(m) && vg_has_avx2()) {
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

#if VG_X86
/* any_nonfinite's answer for x[0 .. n - n % 64), 64 floats a step (an exponent of all ones: 4 vectors
 * tested, their masks or-ed): a batch's short rows read a long hidden tail of the window, which the
 * 4-float loop GCC made of the portable one took 5% of SmolLM2's decode step at 8 sequences */
__attribute__((target("avx512f"))) static int any_nonfinite_avx512(const float *x, int64_t n) {
    const __m512i e = _mm512_set1_epi32(0x7f800000);
    __mmask16 found = 0;
    for (int64_t i = 0; i + 64 <= n; i += 64)
        for (int u = 0; u < 4; u++)
            found |= _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_loadu_si512(x + i + 16 * u), e), e);
    return found != 0;
}
#endif

/* whether any of the n floats at x (stride 1) is an infinity or a NaN */
static int any_nonfinite(const float *x, int64_t n) {
    uint32_t found = 0;
    int64_t i = 0;
#if VG_X86
    if (vg_has_avx512()) {
        if (any_nonfinite_avx512(x, n)) return 1;
        i = n - n % 64;
    }
#endif
    for (; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, x + i, 4);
        found |= (bits & 0x7f800000u) == 0x7f800000u;
    }
    return (int)found;
}

/* The window positions before the hidden tail of a bias row (the last visible one's index + 1). */
static int64_t bias_end(const attn_job *a, const float *bias) {
    int64_t end = a->w;
    while (end > 0 && bias[(end - 1) * a->bs[2]] == -INFINITY) end--;
    return end;
}

/* Whether the keys and values of window positions end .. W-1 are all finite. */
static int tail_finite(const attn_job *a, int64_t end, const float *kt, const float *pv) {
    const int64_t *ks = a->kts, *vs = a->pvs;
    if (ks[2] == 1 && ks[3] == a->d && vs[3] == 1 && vs[2] == a->dv) { /* whole rows of a cache */
        int64_t n = a->w - end;
        return !any_nonfinite(kt + end * a->d, n * a->d) && !any_nonfinite(pv + end * a->dv, n * a->dv);
    }
    for (int64_t j = end; j < a->w; j++) {
        for (int64_t i = 0; i < a->d; i++)
            if (!isfinite(kt[i * ks[2] + j * ks[3]])) return 0;
        for (int64_t e = 0; e < a->dv; e++)
            if (!isfinite(pv[j * vs[2] + e * vs[3]])) return 0;
    }
    return 1;
}

/* The window positions a row must visit: up to the last one its bias leaves visible, when the hidden ones
 * after it have finite keys and values (their weights are then exactly 0); else all W. The rows of one
 * (batch, key/value head) that a thread takes one after the other (a prompt's T tokens) mostly hide the
 * same tail: `seen` keeps the last answer (its window and end), so the tail is read once for them. */
typedef struct {
    const float *kt, *pv;
    int64_t end, visible;
} tail_seen;

static int64_t visible_end(const attn_job *a, const float *bias, const float *kt, const float *pv,
                           tail_seen *seen) {
    const int64_t end = bias_end(a, bias);
    if (end == a->w) return end;
    if (seen->kt != kt || seen->pv != pv || seen->end != end) {
        seen->kt = kt, seen->pv = pv, seen->end = end;
        seen->visible = tail_finite(a, end, kt, pv) ? end : a->w;
    }
    return seen->visible;
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
    const int grouped = vg_has_avx2_fma() && a->qs[3] == 1 && a->kts[2] == 1 && a->pvs[3] == 1 &&
                        a->d % 4 == 0 && a->dv % 8 == 0;
#else
    const int grouped = 0;
    (void)grouped, (void)qd; /* the grouped path is for x86 */
#endif
    tail_seen seen = {.kt = NULL, .pv = NULL, .end = -1, .visible = 0};
    for (int64_t row = lo; row < hi; row++) { /* row = (b, g, t) */
        const int64_t t = row % a->t, g = (row / a->t) % a->kv, b = row / (a->t * a->kv);
        const float *kt = a->kt + b * a->kts[0] + g * a->kts[1];
        const float *pv = a->pv + b * a->pvs[0] + g * a->pvs[1];
        const float *k = a->k + b * a->ks[0] + g * a->ks[1];
        const float *v = a->v + b * a->vs[0] + g * a->vs[1];
        const float *bias = a->bias + b * a->bs[0] + t * a->bs[1];
        const int64_t w = visible_end(a, bias, kt, pv, &seen), m_all = w + a->t; /* w window scores, then t */
        (void)m_all;
#if VG_X86
        if (grouped) {
            /* the first keys and values of the window, fetched while the queries are widened and the dots
             * run: each (row, head) starts two short streams the prefetches in the loops reach only 8 in */
            for (int64_t j = 0; j < 8 && j < w; j++) {
                for (int64_t i = 0; i < a->d; i += 16) _mm_prefetch((const char *)(kt + j * a->kts[3] + i), _MM_HINT_T0);
                for (int64_t e = 0; e < a->dv; e += 16) _mm_prefetch((const char *)(pv + j * a->pvs[2] + e), _MM_HINT_T0);
            }
            for (int64_t hh = 0; hh < group; hh++) {
                const float *q = a->q + b * a->qs[0] + (g * group + hh) * a->qs[1] + t * a->qs[2];
                for (int64_t i = 0; i < a->d; i++) qd[hh * a->d + i] = (double)q[i];
            }
            group_dots_all(qd, group, a->d, kt, a->kts[3], w, s, m_all, pv, a->pvs[2], a->dv);
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
                float *o = a->out + b * a->os[0] + h * a->os[1] + t * a->os[2];
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
            if (a->qs[3] == 1 && a->kts[2] == 1 && vg_has_avx2()) {
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
                if (a->qs[3] == 1 && a->ks[3] == 1 && vg_has_avx2()) {
                    s[w + i] = dot_avx2(q, k + i * a->ks[2], a->d);
                    continue;
                }
#endif
                s[w + i] = dot1(q, a->qs[3], k + i * a->ks[2], a->ks[3], a->d);
            }
            softmax_row(s, bias, a, w);
            weighted_rows(s, pv, a->pvs[2], a->pvs[3], w, a->dv, acc1);
            weighted_rows(s + w, v, a->vs[2], a->vs[3], a->t, a->dv, acc2);
            float *o = a->out + b * a->os[0] + h * a->os[1] + t * a->os[2];
            for (int64_t e = 0; e < a->dv; e++) o[e] = (float)(acc1[e] + acc2[e]);
        }
    }
    free(s);
}

/* Bands of rows of about equal work, one per thread. A row's work is its visible positions (the bias's,
 * before its hidden tail) and new tokens, plus half the hidden tail (visible_end reads it for a NaN or an
 * infinity: on a cache too large for the CPU's caches that costs about half a visible position's dots and
 * sums); rows of one batch differ in length (a server's sequences), so bands of equal row counts left a
 * thread idle while another did the long rows. Each row is computed by one thread in one order whatever
 * band holds it, so the bands change no bit. */
typedef struct {
    vg_chunk_fn rows;
    void *ctx;
    int64_t bounds[VG_MAX_BANDS + 1]; /* band i: rows bounds[i] .. bounds[i + 1] - 1 */
} banded_job;

static void run_band(void *ctx, int64_t lo, int64_t hi) {
    banded_job *j = (banded_job *)ctx;
    for (int64_t i = lo; i < hi; i++)
        if (j->bounds[i] < j->bounds[i + 1]) j->rows(j->ctx, j->bounds[i], j->bounds[i + 1]);
}

static double row_work(const void *ctx, int64_t row) {
    const attn_job *a = (const attn_job *)ctx;
    const int64_t t = row % a->t, b = row / (a->t * a->kv);
    const int64_t end = bias_end(a, a->bias + b * a->bs[0] + t * a->bs[1]);
    return (double)(end + a->t) + 0.5 * (double)(a->w - end) + 4.0;
}

/* The bands (bounds[0] = 0 <= ... <= bounds[parts] = n, parts <= VG_MAX_BANDS) of n rows whose work
 * work(ctx, row) says, for `threads` threads; returns parts */
static int64_t bands_of(int64_t n, double (*work)(const void *, int64_t), const void *ctx, int threads,
                        int64_t *bounds) {
    int64_t parts = threads < n ? threads : n;
    if (parts > VG_MAX_BANDS) parts = VG_MAX_BANDS;
    if (parts < 1) parts = 1;
    double total = 0.0, done = 0.0;
    for (int64_t row = 0; row < n; row++) total += work(ctx, row);
    int64_t part = 1;
    bounds[0] = 0;
    for (int64_t row = 0; row < n && part < parts; row++) {
        done += work(ctx, row);
        while (part < parts && done >= total * (double)part / (double)parts) bounds[part++] = row + 1;
    }
    while (part <= parts) bounds[part++] = n;
    return parts;
}

static int64_t bands(const attn_job *a, int threads, int64_t *bounds) {
    return bands_of(a->b * a->kv * a->t, row_work, a, threads, bounds);
}

/* fn over the a->b * a->kv * a->t rows, in bands of about equal work for `threads` threads */
static void parallel_rows(const attn_job *a, int threads, vg_chunk_fn fn, void *ctx) {
    const int64_t n = a->b * a->kv * a->t;
    if (threads <= 1 || n <= 1) {
        vg_parallel_for(n, 1, threads, fn, ctx);
        return;
    }
    banded_job j = {.rows = fn, .ctx = ctx};
    vg_parallel_for(bands(a, threads, j.bounds), 1, threads, run_band, &j);
}

/* the bands parallel_rows gives the rows of cached_attention's sizes and bias (for tests) */
int64_t vg_cached_attention_bands(const int64_t *sizes, const float *bias, const int64_t *bs, int threads,
                                  int64_t *bounds) {
    attn_job a = {.b = sizes[0], .h = sizes[1], .kv = sizes[2], .t = sizes[3], .d = sizes[4], .dv = sizes[5],
                  .w = sizes[6], .bias = bias, .bs = bs};
    return bands(&a, threads, bounds);
}

/* returns 0, or -1 when out of memory */
int vg_cached_attention_f32(const int64_t *sizes, const float *q, const int64_t *qs, const float *k,
                            const int64_t *ks, const float *v, const int64_t *vs, const float *kt,
                            const int64_t *kts, const float *pv, const int64_t *pvs, const float *bias,
                            const int64_t *bs, double scale, float *out, int threads) {
    attn_job a = {.b = sizes[0], .h = sizes[1], .kv = sizes[2], .t = sizes[3], .d = sizes[4], .dv = sizes[5],
                  .w = sizes[6], .q = q, .k = k, .v = v, .kt = kt, .pv = pv, .bias = bias, .qs = qs, .ks = ks,
                  .vs = vs, .kts = kts, .pvs = pvs, .bs = bs, .scale = scale, .out = out,
                  .os = {sizes[1] * sizes[3] * sizes[5], sizes[3] * sizes[5], sizes[5]}, .failed = 0};
    parallel_rows(&a, threads, attn_rows, &a);
    return a.failed ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * cached_attention with the window in f16 (an f16 KV cache): each thread widens the window of the (batch,
 * key/value head) of its rows into an f32 scratch (exactly: every f16 is an f32), keys as [W, D] and values
 * as [W, Dv], contiguous, then runs attn_rows on it with strides of 0 for the batch and the head. The
 * results are the f32 kernel's on the widened window, bit for bit, so the same for every thread count. */
#if VG_X86
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
    if (stride == 1 && vg_has_f16c()) i = widen_f16c(in, n, out);
#endif
    for (; i < n; i++) out[i] = vg_f16_to_f32(in[i * stride]);
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
                            .scale = scale, .out = out,
                            .os = {sizes[1] * sizes[3] * sizes[5], sizes[3] * sizes[5], sizes[5]}, .failed = 0}};
    parallel_rows(&a.job, threads, attn16_rows, &a);
    return a.job.failed ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------------------------
 * ragged_attention (ops/composite/attention_ragged.py): N new tokens in runs, run (row, start, count, length)
 * being `count` tokens of the sequence in row `row` of the windows, which holds `length` positions. A unit of
 * work is (key/value head g, token i); token i = start + t of its run is row t of cached_attention's
 * computation (attn_rows) on its sequence alone: b = 1, the row's first `length` positions as the window and
 * the run's tokens as the new ones, under a bias that hides the run's future (a view of `causal`: zeros,
 * then -infinities). That is what cached_attention computes for it with the row's wider window, whose bias
 * also hides the window past `length` (finite there, those positions are skipped): the same bits. Threads
 * take bands of units of equal work; each unit is computed by one thread in one order. */
typedef struct {
    attn_job a;          /* b = the windows' rows, t = N tokens, w = W; q, k, v [1, ...] */
    const int64_t *runs; /* [S, 4] */
    int64_t *run_of;     /* token -> its run */
    const float *causal; /* W + N zeros, then N -infinities */
    int f16;             /* the windows hold f16 */
} ragged_job;

static const int64_t ROW_BIAS[3] = {0, 0, 1}; /* one bias row for every row of a job */

/* token i's job: its run's sequence alone (`kt` and `pv` its row's window: the cache's, or the widened f16
 * scratch, with strides kts and pvs), the bias row of token i: 0 up to it, -infinity past it */
static attn_job ragged_unit(const ragged_job *r, int64_t i, const float *kt, const int64_t *kts,
                            const float *pv, const int64_t *pvs) {
    const attn_job *a = &r->a;
    const int64_t *run = r->runs + 4 * r->run_of[i];
    const int64_t start = run[1], length = run[3];
    attn_job l = *a;
    l.b = 1, l.t = run[2], l.w = length;
    l.q = a->q + start * a->qs[2], l.k = a->k + start * a->ks[2], l.v = a->v + start * a->vs[2];
    l.kt = kt, l.kts = kts, l.pv = pv, l.pvs = pvs;
    l.bias = r->causal + (a->w + a->t) - (length + i - start + 1), l.bs = ROW_BIAS;
    l.out = a->out + start * a->os[2];
    l.failed = 0;
    return l;
}

static void ragged_units(void *ctx, int64_t lo, int64_t hi) {
    ragged_job *r = (ragged_job *)ctx;
    attn_job *a = &r->a;
    const int64_t n = a->t;
    float *scratch = NULL; /* f16: the widened window of (run, head) `held` */
    if (r->f16 && !(scratch = malloc(sizeof(float) * (size_t)(a->w * (a->d + a->dv) + 1)))) {
        a->failed = 1;
        return;
    }
    const int64_t kts16[4] = {0, 0, 1, a->d}, pvs16[4] = {0, 0, a->dv, 1};
    int64_t held = -1;
    for (int64_t unit = lo; unit < hi && !a->failed; unit++) { /* unit = (g, i) */
        const int64_t g = unit / n, i = unit % n, s = r->run_of[i], row = r->runs[4 * s];
        const int64_t length = r->runs[4 * s + 3];
        attn_job l;
        if (r->f16) {
            if (s * a->kv + g != held) {
                const uint16_t *kt = (const uint16_t *)(const void *)a->kt + row * a->kts[0] + g * a->kts[1];
                const uint16_t *pv = (const uint16_t *)(const void *)a->pv + row * a->pvs[0] + g * a->pvs[1];
                for (int64_t j = 0; j < length; j++) {
                    widen(kt + j * a->kts[3], a->kts[2], a->d, scratch + j * a->d);
                    widen(pv + j * a->pvs[2], a->pvs[3], a->dv, scratch + a->w * a->d + j * a->dv);
                }
                held = s * a->kv + g;
            }
            /* the head's offset (g kts[1]) is 0 in the scratch */
            l = ragged_unit(r, i, scratch, kts16, scratch + a->w * a->d, pvs16);
        } else {
            l = ragged_unit(r, i, a->kt + row * a->kts[0], a->kts, a->pv + row * a->pvs[0], a->pvs);
        }
        const int64_t t = i - r->runs[4 * s + 1];
        attn_rows(&l, g * l.t + t, g * l.t + t + 1);
        if (l.failed) a->failed = 1;
    }
    free(scratch);
}

static double ragged_work(const void *ctx, int64_t unit) {
    const ragged_job *r = (const ragged_job *)ctx;
    const int64_t i = unit % r->a.t, *run = r->runs + 4 * r->run_of[i];
    return (double)(run[3] + run[2]) + 4.0;
}

/* W + N zeros, then N -infinities (a token's bias row: a view of it); NULL when out of memory */
float *vg_ragged_causal(int64_t w, int64_t n) {
    float *causal = calloc((size_t)(w + 2 * n + 1), sizeof(float));
    if (causal)
        for (int64_t j = w + n; j < w + 2 * n; j++) causal[j] = -INFINITY;
    return causal;
}

/* token -> run for runs that cover the n tokens in order (counts >= 0: an empty run is padding; rows < rows,
 * lengths <= w); 0, or -2 where they do not */
int vg_ragged_runs(const int64_t *runs, int64_t s, int64_t n, int64_t rows, int64_t w, int64_t *run_of) {
    int64_t at = 0;
    for (int64_t i = 0; i < s; i++) {
        const int64_t *r = runs + 4 * i;
        if (r[1] != at || r[2] < 0 || r[0] < 0 || r[0] >= rows || r[3] < 0 || r[3] > w || at + r[2] > n) return -2;
        for (int64_t j = 0; j < r[2]; j++) run_of[at + j] = i;
        at += r[2];
    }
    return at == n ? 0 : -2;
}

/* sizes: r (the windows' rows), h, kv, n (tokens), d, dv, w, s (runs); the strides as cached_attention's (q,
 * k, v, kt, pv: 4 each); `f16`: the windows hold f16. Returns 0, -1 when out of memory, -2 for runs that do
 * not cover the tokens in order (or name a row or length the windows do not hold). */
int vg_ragged_attention(const int64_t *sizes, const float *q, const int64_t *qs, const float *k,
                        const int64_t *ks, const float *v, const int64_t *vs, const void *kt, const int64_t *kts,
                        const void *pv, const int64_t *pvs, const int64_t *runs, int f16, double scale,
                        float *out, int threads) {
    const int64_t n = sizes[3], w = sizes[6];
    ragged_job r = {.a = {.b = sizes[0], .h = sizes[1], .kv = sizes[2], .t = n, .d = sizes[4], .dv = sizes[5],
                          .w = w, .q = q, .k = k, .v = v, .kt = (const float *)kt, .pv = (const float *)pv,
                          .qs = qs, .ks = ks, .vs = vs, .kts = kts, .pvs = pvs, .scale = scale, .out = out,
                          .os = {0, n * sizes[5], sizes[5]}, .failed = 0},
                    .runs = runs, .f16 = f16};
    int64_t *run_of = malloc(sizeof(int64_t) * (size_t)(n + 1));
    float *causal = vg_ragged_causal(w, n);
    int rc = run_of && causal ? vg_ragged_runs(runs, sizes[7], n, sizes[0], w, run_of) : -1;
    if (rc == 0) {
        r.run_of = run_of, r.causal = causal;
        const int64_t units = r.a.kv * n;
        if (threads <= 1 || units <= 1) {
            vg_parallel_for(units, 1, threads, ragged_units, &r);
        } else {
            banded_job j = {.rows = ragged_units, .ctx = &r};
            vg_parallel_for(bands_of(units, ragged_work, &r, threads, j.bounds), 1, threads, run_band, &j);
        }
        rc = r.a.failed ? -1 : 0;
    }
    free(run_of);
    free(causal);
    return rc;
}
