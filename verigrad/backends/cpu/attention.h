/* What attention.c (cached_attention: the decode step and the prompt) and attention_flash.c (attention_lse
 * and attention_grad: training) share: VG_X86, and exp of non-positive doubles four at a time. */
#ifndef VG_ATTENTION_H
#define VG_ATTENTION_H
#include <math.h>
#include <stdint.h>

#include "vg.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define VG_X86 1
#else
#define VG_X86 0
#endif

#if VG_X86
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
__attribute__((target("avx2"))) static inline void exps_avx2(double *s, int64_t n, double m) {
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
#endif
#endif
