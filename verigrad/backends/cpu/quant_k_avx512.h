/* q4_k's, q5_k's and q6_k's values on AVX-512, made in registers as the portable code makes them
 * (quant_f32_k.c's dequantize_k4 and dequantize_q6_k), for quant_f32_k.c's decode kernels and
 * quant_f32_k_rows.c's kernels of several activation rows. */
#ifndef VG_QUANT_K_AVX512_H
#define VG_QUANT_K_AVX512_H
#include "quant.h"

#if VG_X86
/* q4_k and q5_k block wb: sub-block j's scale d * sc into ds[j] and offset dmin * m into dm[j], the products
 * dequantize_k4 rounds; the 6-bit scales and mins (k4_scale's) unpacked 4 at a time in 32-bit words: bytes
 * 0..7 of u the scales, 8..15 the mins (scalar k4_scale took a third of the AVX-512 q4_k decode step) */
AVX512_Q __attribute__((always_inline)) static inline void k4_scales8(const uint8_t *wb, float *ds, float *dm) {
    const uint32_t six = 0x3f3f3f3f, low4 = 0x0f0f0f0f, top2 = 0x03030303; /* per byte */
    const uint32_t s0 = (uint32_t)load32(wb + 4), s1 = (uint32_t)load32(wb + 8), s2 = (uint32_t)load32(wb + 12);
    const uint32_t u0 = s0 & six, u1 = (s2 & low4) | (((s0 >> 6) & top2) << 4); /* scales 0..3, 4..7 */
    const uint32_t u2 = s1 & six, u3 = ((s2 >> 4) & low4) | (((s1 >> 6) & top2) << 4); /* mins */
    const __m512 f = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_setr_epi32((int)u0, (int)u1, (int)u2, (int)u3)));
    const __m128 dd = _mm_cvtph_ps(_mm_cvtsi32_si128(load32(wb))); /* d, dmin */
    const __m512 by = _mm512_insertf32x8(_mm512_broadcastss_ps(dd), _mm256_broadcastss_ps(_mm_movehdup_ps(dd)), 1);
    const __m512 v = _mm512_mul_ps(by, f);
    _mm256_storeu_ps(ds, _mm512_castps512_ps256(v));
    _mm256_storeu_ps(dm, _mm512_extractf32x8_ps(v, 1));
}

/* values 64c .. 64c + 63 of q4_k (five = 0) or q5_k block wb, 16 a vector in order, ds and dm its
 * k4_scales8: chunk c of the nibbles (sub-block 2c the low ones, 2c + 1 the high) widened once, and each
 * sub-block's values looked up in its table of 16 (q4_k: ds * n - dm) or 32 (q5_k: n + 16 where the
 * value's bit of qh is set), computed as dequantize_k4 computes a value */
AVX512_Q __attribute__((always_inline)) static inline void k4_chunk_avx512(int five, const uint8_t *wb, int c,
                                                                          const float *ds, const float *dm,
                                                                          __m512 *v) {
    const __m512 nibble = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const uint8_t *qs = wb + (five ? 48 : 16) + 32 * c;
    const __m512i qa = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
    const __m512i qb = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qs + 16)));
    for (int h = 0; h < 2; h++) { /* sub-block j = 2c + h */
        const int j = 2 * c + h;
        const __m512 d = _mm512_set1_ps(ds[j]), m = _mm512_set1_ps(dm[j]);
        const __m512 lo = _mm512_sub_ps(_mm512_mul_ps(d, nibble), m);
        __m512i ia = h ? _mm512_srli_epi32(qa, 4) : qa, ib = h ? _mm512_srli_epi32(qb, 4) : qb;
        if (!five) { /* permutexvar reads the low 4 bits of each index */
            v[2 * h] = _mm512_permutexvar_ps(ia, lo);
            v[2 * h + 1] = _mm512_permutexvar_ps(ib, lo);
            continue;
        }
        const __m512 hi = _mm512_sub_ps(_mm512_mul_ps(d, _mm512_add_ps(nibble, _mm512_set1_ps(16.0f))), m);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb + 16));
        const uint32_t bits = (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(qh, 7 - j));
        const __m512i low4 = _mm512_set1_epi32(15), sixteen = _mm512_set1_epi32(16);
        ia = _mm512_and_si512(ia, low4), ib = _mm512_and_si512(ib, low4);
        ia = _mm512_mask_or_epi32(ia, (__mmask16)(bits & 0xffff), ia, sixteen);
        ib = _mm512_mask_or_epi32(ib, (__mmask16)(bits >> 16), ib, sixteen);
        v[2 * h] = _mm512_permutex2var_ps(lo, ia, hi);
        v[2 * h + 1] = _mm512_permutex2var_ps(lo, ib, hi);
    }
}

/* q6_k block wb's 16 group scales d * sc into dsc (the products dequantize_q6_k rounds) */
AVX512_Q __attribute__((always_inline)) static inline void q6_scales16(const uint8_t *wb, float *dsc) {
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(wb + 192)));
    _mm512_storeu_ps(dsc, _mm512_mul_ps(_mm512_set1_ps(vg_f16_at(wb + 208)), _mm512_cvtepi32_ps(sc)));
}

/* values 128h + 32 quarter .. + 31 of q6_k block wb, 16 in *lo and 16 in *hi, dsc its q6_scales16: q - 32
 * made in bytes from ql's nibble and qh's 2 bits, then (d * sc) * (q - 32) as dequantize_q6_k computes it */
AVX512_Q __attribute__((always_inline)) static inline void q6_quarter_avx512(const uint8_t *wb, int h, int quarter,
                                                                            const float *dsc, __m512 *lo,
                                                                            __m512 *hi) {
    const __m256i low4 = _mm256_set1_epi8(15), low2 = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
    __m256i q = _mm256_loadu_si256((const __m256i *)(wb + 64 * h + 32 * (quarter & 1)));
    q = _mm256_and_si256(quarter < 2 ? q : _mm256_srli_epi16(q, 4), low4);
    __m256i qh = _mm256_loadu_si256((const __m256i *)(wb + 128 + 32 * h));
    qh = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * quarter), low2);
    q = _mm256_sub_epi8(_mm256_or_si256(q, _mm256_slli_epi16(qh, 4)), bias); /* -32..31 */
    const float *d = dsc + 8 * h + 2 * quarter;
    *lo = _mm512_mul_ps(_mm512_set1_ps(d[0]), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q))));
    *hi = _mm512_mul_ps(_mm512_set1_ps(d[1]),
                        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1))));
}
#endif
#endif
