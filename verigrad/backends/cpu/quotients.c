/* f32 quotients by one divisor without a division an element: out[i] = (out[i] / s) * g, the quotient
 * correctly rounded as the division rounds it (rows.c's softmax and cross-entropy gradient on rows of 256
 * elements or more, where f32 division is most of the last pass).
 *
 * q = (float)((double)e * (1.0 / (double)s)) is the f32 division's e / s wherever q >= 2^-125: the exact
 * quotient Q of two f32 numbers is never within a relative 2^-49 of a midpoint between two normal f32
 * numbers (with e = m_e 2^(E_e - 23), s = m_s 2^(E_s - 23) and a midpoint M 2^(E - 24), M odd and 25 bits
 * wide, e - M 2^(E - 24) s is a nonzero multiple of 2^(E + E_s - 47): m_e < 2^24 cannot hold the odd
 * factor M; so |Q - mid| > 2^(E - 48) where Q < 2^(E + 1)), and the two double roundings leave q's double
 * within a relative 2^-52 of Q: it rounds to the f32 that Q does (overflow included). Below 2^-125 (where
 * subnormal results and their midpoints are), NaN, or where the divisor is 0, infinite or NaN, the lanes
 * divide. Every path (AVX-512, AVX2, the plain loop, chosen as elementwise.c's f32 exp is) gives the
 * division's bits.
 */
#include <float.h>
#include <stdint.h>

#include "vg.h"

int vg_vector_level(int level); /* elementwise.c: 2 AVX-512, 1 AVX2, 0 neither */

#define LEAST 0x1p-125f /* the smallest quotient kept from the double product */

static void quotients_plain(float *out, int64_t n, float s, float g) {
    for (int64_t i = 0; i < n; i++) out[i] = out[i] / s * g;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define AVX2_Q __attribute__((target("avx2,fma")))
#define AVX512_Q __attribute__((target("avx2,fma,avx512f,avx512dq")))

AVX2_Q static void quotients_avx2(float *out, int64_t n, float s, float g) {
    const __m256d r = _mm256_set1_pd(1.0 / (double)s);
    const __m256 vs = _mm256_set1_ps(s), vg = _mm256_set1_ps(g), least = _mm256_set1_ps(LEAST);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 e = _mm256_loadu_ps(out + i);
        const __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(e)), r));
        const __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)), r));
        __m256 q = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
        const __m256 doubt = _mm256_cmp_ps(q, least, _CMP_NGE_UQ);
        if (_mm256_movemask_ps(doubt)) q = _mm256_blendv_ps(q, _mm256_div_ps(e, vs), doubt);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(q, vg));
    }
    quotients_plain(out + i, n - i, s, g);
}

AVX512_Q static void quotients_avx512(float *out, int64_t n, float s, float g) {
    const __m512d r = _mm512_set1_pd(1.0 / (double)s);
    const __m512 vs = _mm512_set1_ps(s), vg = _mm512_set1_ps(g), least = _mm512_set1_ps(LEAST);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = _mm512_loadu_ps(out + i);
        const __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(e)), r));
        const __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(e, 1)), r));
        __m512 q = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
        const __mmask16 doubt = _mm512_cmp_ps_mask(q, least, _CMP_NGE_UQ);
        if (doubt) q = _mm512_mask_div_ps(q, doubt, e, vs);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(q, vg));
    }
    quotients_plain(out + i, n - i, s, g);
}
#endif

/* out[i] = (out[i] / s) * g for i < n, the division's bits on every path */
void vg_quotients_f32(float *out, int64_t n, float s, float g) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    const int level = vg_vector_level(-1);
    if (level >= 2) {
        quotients_avx512(out, n, s, g);
        return;
    }
    if (level == 1) {
        quotients_avx2(out, n, s, g);
        return;
    }
#endif
    quotients_plain(out, n, s, g);
}
