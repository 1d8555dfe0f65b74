/* cached_attention (ops/composite/attention.py) for f32: T new queries over a window of W cached
 * positions and the T new keys and values, with an additive bias [T, W+T].
 *
 * As the reference, in double: scores s_j = (q . key_j) * scale + bias_j, p = exp(s - max) / sum, out =
 * sum_{j<W} p_j past_v_j + sum_{j>=W} p_j v_j, rounded once to f32. Only the summation order of the dot
 * products and sums differs (the reference's is BLAS's), so the results are within an f32 rounding
 * (attention.py states the bound). Any strides (the window is a view of the cache, keys transposed);
 * query heads h = g G .. g G + G - 1 share key/value head g and are computed by one thread. Threads take
 * bands of (batch, key/value head, token) rows; each output is computed by one thread in one order.
 * With AVX2 and contiguous head dims, the dot products take four keys at once and the weighted sums
 * sixteen columns; a hidden position (score -inf, finite maximum) gets exp's value 0 without the call.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

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
    const int64_t *qs, *ks, *vs, *kts, *pvs, *bs; /* element strides: 4 each, bias 2 */
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

static int has_avx2(void) {
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx2");
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

static void attn_rows(void *ctx, int64_t lo, int64_t hi) {
    attn_job *a = (attn_job *)ctx;
    const int64_t n = a->w + a->t, group = a->h / a->kv;
    double *s = malloc(sizeof(double) * (size_t)(n + 2 * a->dv + 4));
    if (!s) {
        a->failed = 1;
        return;
    }
    double *acc1 = s + n, *acc2 = acc1 + a->dv;
    for (int64_t row = lo; row < hi; row++) { /* row = (b, g, t) */
        const int64_t t = row % a->t, g = (row / a->t) % a->kv, b = row / (a->t * a->kv);
        const float *kt = a->kt + b * a->kts[0] + g * a->kts[1];
        const float *pv = a->pv + b * a->pvs[0] + g * a->pvs[1];
        const float *k = a->k + b * a->ks[0] + g * a->ks[1];
        const float *v = a->v + b * a->vs[0] + g * a->vs[1];
        const float *bias = a->bias + t * a->bs[0];
        for (int64_t hh = 0; hh < group; hh++) {
            const int64_t h = g * group + hh;
            const float *q = a->q + b * a->qs[0] + h * a->qs[1] + t * a->qs[2];
            int64_t j = 0;
#if VG_X86
            if (a->qs[3] == 1 && a->kts[2] == 1 && has_avx2()) {
                if (a->d % 4 == 0 && a->d <= 256) {
                    double qd[256];
                    for (int64_t i = 0; i < a->d; i++) qd[i] = (double)q[i];
                    for (; j + 4 <= a->w; j += 4) dots4_avx2(qd, kt + j * a->kts[3], a->kts[3], a->d, s + j);
                }
                for (; j < a->w; j++) s[j] = dot_avx2(q, kt + j * a->kts[3], a->d);
            }
#endif
            for (; j + 4 <= a->w; j += 4)
                dots4(q, a->qs[3], kt + j * a->kts[3], a->kts[2], a->kts[3], a->d, s + j);
            for (; j < a->w; j++) s[j] = dot1(q, a->qs[3], kt + j * a->kts[3], a->kts[2], a->d);
            for (int64_t i = 0; i < a->t; i++) {
#if VG_X86
                if (a->qs[3] == 1 && a->ks[3] == 1 && has_avx2()) {
                    s[a->w + i] = dot_avx2(q, k + i * a->ks[2], a->d);
                    continue;
                }
#endif
                s[a->w + i] = dot1(q, a->qs[3], k + i * a->ks[2], a->ks[3], a->d);
            }
            double m = -INFINITY;
            for (j = 0; j < n; j++) {
                s[j] = s[j] * a->scale + (double)bias[j * a->bs[1]];
                if (isnan(s[j]) || s[j] > m) m = isnan(m) ? m : s[j];
            }
            double sum = 0.0;
            for (j = 0; j < n; j++) {
                s[j] = s[j] == -INFINITY && m > -INFINITY ? 0.0 : exp(s[j] - m); /* exp(-inf) = 0 */
                sum = sum + s[j];
            }
            for (j = 0; j < n; j++) s[j] = s[j] / sum;
            weighted_rows(s, pv, a->pvs[2], a->pvs[3], a->w, a->dv, acc1);
            weighted_rows(s + a->w, v, a->vs[2], a->vs[3], a->t, a->dv, acc2);
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
