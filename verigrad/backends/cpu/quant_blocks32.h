/* The 32-value block formats (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl) de-quantized in AVX-512 registers:
 * quant_f32.c's decode kernels and row de-quantization, quant_f32_tiles.c's products of a few activation
 * rows. */
#ifndef VG_QUANT_BLOCKS32_H
#define VG_QUANT_BLOCKS32_H
#include "quant.h"

#if VG_X86
/* The 32-value formats on AVX-512, de-quantized in registers. Each block's scale d (and q4_1's, q5_1's m)
 * comes from scales16, 16 blocks' at a time (one gather, one conversion), so a block's values cost no
 * conversion and no shuffle of its own: vbroadcastss (or a multiplication's embedded broadcast) reads the
 * f32 from memory. The nibbles are widened once (value i's low nibble and value i + 16's high nibble in lane i) and each value looked up in the
 * block's table of the 16 values a nibble may stand for (permutexvar reads the low 4 bits of each index);
 * q5_0 and q5_1 look up in two tables (32 values, permutex2var reads 5 bits), the fifth bit rotated into
 * place with no shuffle (a masked lookup took a shuffle per mask: 20% slower). Each table entry is computed
 * as dequantize_row computes a value (d * (n - 8), d * n + m, d * (q - 16), d * IQ4_VALUES[n]), so the
 * same bits. The fused kernels keep their sums in named registers: GCC kept an array of them on the
 * stack, a store of each sum per block. */

/* the f16 at byte 0 (affine: and at byte 2) of the cn <= 16 blocks wb + c bytes, as f32: d[c] (m[c]) */
AVX512_Q __attribute__((always_inline)) static inline void scales16(const uint8_t *wb, int64_t bytes, int64_t cn,
                                                                    int affine, float *d, float *m) {
    const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32((int)bytes));
    const __mmask16 take = cn >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cn) - 1); /* none past the row */
    const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), take, at, wb, 1);
    _mm512_storeu_ps(d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
    if (affine) _mm512_storeu_ps(m, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16))));
}

/* block wb's lookup tables (d, m: its scales broadcast): t[0] the 16 values a nibble stands for (q8_0: d),
 * q5's t[1] the values of q = n + 16 */
AVX512_Q __attribute__((always_inline)) static inline void tables32_avx512(int qt, __m512 d, __m512 m, __m512 *t) {
    const __m512 nibble = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    if (qt == Q8_0)
        t[0] = d;
    else if (qt == IQ4_NL)
        t[0] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)IQ4_VALUES))));
    else if (qt == Q4_0)
        t[0] = _mm512_mul_ps(d, _mm512_sub_ps(nibble, _mm512_set1_ps(8.0f)));
    else if (qt == Q5_0) {
        t[0] = _mm512_mul_ps(d, _mm512_sub_ps(nibble, _mm512_set1_ps(16.0f)));
        t[1] = _mm512_mul_ps(d, nibble);
    } else { /* q4_1, q5_1 */
        t[0] = _mm512_add_ps(_mm512_mul_ps(d, nibble), m);
        if (qt == Q5_1) t[1] = _mm512_add_ps(_mm512_mul_ps(d, _mm512_add_ps(nibble, _mm512_set1_ps(16))), m);
    }
}

/* half h of block wb's values (0: values 0..15, 1: 16..31) from its tables t */
AVX512_Q __attribute__((always_inline)) static inline __m512 half32_avx512(int qt, const uint8_t *wb, int h,
                                                                         const __m512 *t) {
    if (qt == Q8_0)
        return _mm512_mul_ps(t[0], _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(wb + 2) + h))));
    const int at = qt == Q5_1 ? 8 : qt == Q5_0 ? 6 : qt == Q4_1 ? 4 : 2;
    const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(wb + at)));
    const __m512i n = h ? _mm512_srli_epi32(q, 4) : q;
    if (qt != Q5_0 && qt != Q5_1) return _mm512_permutexvar_ps(n, t[0]);
    /* q5: a 5-bit index, the nibble and as bit 4 value i's fifth bit (bit i of the u32 before the nibbles),
     * rotated there; ternarylogic takes bits 0..3 from the nibble and the rest from the rotated bits
     * (permutex2var reads bits 0..4) */
    const __m512i bits = _mm512_set1_epi32(load32(wb + (qt == Q5_1 ? 4 : 2)));
    __m512i rot = _mm512_setr_epi32(28, 29, 30, 31, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11); /* i - 4 */
    if (h) rot = _mm512_add_epi32(rot, _mm512_set1_epi32(16));
    const __m512i index = /* C ? A : B */
        _mm512_ternarylogic_epi32(n, _mm512_rorv_epi32(bits, rot), _mm512_set1_epi32(15), 0xE4);
    return _mm512_permutex2var_ps(t[0], index, t[1]);
}

/* block wb's 32 values (d, m: its scales broadcast): lo values 0..15, hi 16..31 */
AVX512_Q __attribute__((always_inline)) static inline void block32_avx512(int qt, const uint8_t *wb, __m512 d,
                                                                          __m512 m, __m512 *lo, __m512 *hi) {
    __m512 t[2];
    tables32_avx512(qt, d, m, t);
    *lo = half32_avx512(qt, wb, 0, t);
    *hi = half32_avx512(qt, wb, 1, t);
}
#endif
#endif
