/* softmax_grad (ops/composite/softmax.py) in f32 over the last axis: for each row of n elements,
 * r = out * (g - s), s = sum(g * out), all in double and rounded once to float. s is the reference's
 * (`lane_sum`): product j (exact in double) added to lane j mod 16 in row order, each lane from +0, the
 * lanes folded k + k+8, k + k+4, k + k+2, k + k+1. The AVX-512 path keeps the 16 lanes in two vectors,
 * the AVX2 path in four, the portable one in an array: the same additions in the same order, so the same
 * bits; out * (g - s) is a product of doubles rounded to float each way. Rows are C-contiguous; threads
 * take bands of whole rows, so every thread count gives the same bits.
 *
 * vg_softmax_grad_f32(g, out, r, rows, n, min_rows, threads); the path is elementwise.c's
 * (vg_vector_level: 2 AVX-512, 1 AVX2, 0 portable).
 */
#include <stdint.h>

#include "vg.h"

#if defined(__GNUC__) && defined(__x86_64__)
#define SG_X86 1
#include <immintrin.h>
#endif

#define LANES 16

int vg_vector_level(int level);

/* The tail of a row (elements from j) into their lanes, then the lanes folded. */
static double finish(double lanes[LANES], const float *g, const float *o, int64_t j, int64_t n) {
    for (int k = 0; j < n; j++, k++) lanes[k] += (double)g[j] * (double)o[j];
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) lanes[k] = lanes[k] + lanes[k + w];
    return lanes[0];
}

static void row_portable(const float *g, const float *o, float *r, int64_t n) {
    double lanes[LANES] = {0};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int k = 0; k < LANES; k++) lanes[k] += (double)g[j + k] * (double)o[j + k];
    const double s = finish(lanes, g, o, j, n);
    for (j = 0; j < n; j++) r[j] = (float)((double)o[j] * ((double)g[j] - s));
}

#ifdef SG_X86
__attribute__((target("avx2"))) static void row_avx2(const float *g, const float *o, float *r, int64_t n) {
    __m256d a[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int q = 0; q < 4; q++) {
            const __m256d gv = _mm256_cvtps_pd(_mm_loadu_ps(g + j + 4 * q));
            const __m256d ov = _mm256_cvtps_pd(_mm_loadu_ps(o + j + 4 * q));
            a[q] = _mm256_add_pd(a[q], _mm256_mul_pd(gv, ov));
        }
    double lanes[LANES];
    for (int q = 0; q < 4; q++) _mm256_storeu_pd(lanes + 4 * q, a[q]);
    const double s = finish(lanes, g, o, j, n);
    const __m256d sv = _mm256_set1_pd(s);
    for (j = 0; j + 4 <= n; j += 4) {
        const __m256d gv = _mm256_cvtps_pd(_mm_loadu_ps(g + j)), ov = _mm256_cvtps_pd(_mm_loadu_ps(o + j));
        _mm_storeu_ps(r + j, _mm256_cvtpd_ps(_mm256_mul_pd(ov, _mm256_sub_pd(gv, sv))));
    }
    for (; j < n; j++) r[j] = (float)((double)o[j] * ((double)g[j] - s));
}

__attribute__((target("avx512f"))) static void row_avx512(const float *g, const float *o, float *r, int64_t n) {
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int64_t j = 0;
    for (; j + LANES <= n; j += LANES) {
        const __m512d g0 = _mm512_cvtps_pd(_mm256_loadu_ps(g + j)), o0 = _mm512_cvtps_pd(_mm256_loadu_ps(o + j));
        const __m512d g1 = _mm512_cvtps_pd(_mm256_loadu_ps(g + j + 8));
        const __m512d o1 = _mm512_cvtps_pd(_mm256_loadu_ps(o + j + 8));
        a0 = _mm512_add_pd(a0, _mm512_mul_pd(g0, o0));
        a1 = _mm512_add_pd(a1, _mm512_mul_pd(g1, o1));
    }
    double lanes[LANES];
    _mm512_storeu_pd(lanes, a0);
    _mm512_storeu_pd(lanes + 8, a1);
    const double s = finish(lanes, g, o, j, n);
    const __m512d sv = _mm512_set1_pd(s);
    for (j = 0; j + 8 <= n; j += 8) {
        const __m512d gv = _mm512_cvtps_pd(_mm256_loadu_ps(g + j)), ov = _mm512_cvtps_pd(_mm256_loadu_ps(o + j));
        _mm256_storeu_ps(r + j, _mm512_cvtpd_ps(_mm512_mul_pd(ov, _mm512_sub_pd(gv, sv))));
    }
    for (; j < n; j++) r[j] = (float)((double)o[j] * ((double)g[j] - s));
}
#endif

typedef struct {
    const float *g, *o;
    float *r;
    int64_t n;
    int level;
} sg_job;

static void sg_rows(void *ctx, int64_t lo, int64_t hi) {
    const sg_job *J = (const sg_job *)ctx;
    const int64_t n = J->n;
    for (int64_t i = lo; i < hi; i++) {
        const float *g = J->g + i * n, *o = J->o + i * n;
        float *r = J->r + i * n;
#ifdef SG_X86
        if (J->level >= 2) {
            row_avx512(g, o, r, n);
            continue;
        }
        if (J->level == 1) {
            row_avx2(g, o, r, n);
            continue;
        }
#endif
        row_portable(g, o, r, n);
    }
}

void vg_softmax_grad_f32(const float *g, const float *o, float *r, int64_t rows, int64_t n, int64_t min_rows,
                         int threads) {
    sg_job job = {g, o, r, n, vg_vector_level(-1)};
    vg_parallel_for(rows, min_rows, threads, sg_rows, &job);
}
