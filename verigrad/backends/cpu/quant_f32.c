/* f32-activation products with quantized weights (GGML blocks, quant.h's formats): the de-quantization of
 * rows (every path), the decode step's kernels (one activation row, each block de-quantized in registers)
 * and qembedding; quant_f32_tiles.c holds vg_qmatmul_f32 and its tiles of several activation rows.
 *
 * qmatmul's reference (ops/quant.py `lane_dot`), bit for bit: sum_k x[t, k] * w[n, k] with w dequantized
 * to f32 as the reference does, in 32 f32 partial sums (sum j takes k = j mod 32 in order, one fused
 * multiply-add rounded once a step), folded s[j] + s[j + h] for h = 16, 8, 4, 2, 1 (the k-quants' blocks
 * hold 256 values; see ops/quant.py for every layout). Rows are de-quantized (q4_k, q5_k and q6_k 8 values
 * (AVX2) or 16 (AVX-512) at a time, the 32-value formats 8 (AVX2) or 16 (AVX-512), iq4_xs 16 (AVX-512);
 * q2_k and q3_k by the portable code). A decode step on
 * AVX-512 de-quantizes each block in registers and multiplies it at once (no row buffer), 4 weight rows at
 * a time: every format (AVX2: q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k and q6_k, 2 weight rows
 * at a time, each value computed in 8 lanes as the portable path does). The 4-bit formats (q5_0, q5_1, q5_k:
 * 5-bit; q2_k, q3_k: 2- and 3-bit) look their values up in the block's (sub-block's, group's) table of
 * 16 (32, 8), its scale times each value, computed as the portable path computes a value.
 * Every path does the portable path's operations, so the same bits (vg_quant_simd chooses one, for tests).
 */
#include "quant.h"
#include "quant_blocks32.h"


/* ---------------------------------------------------------------- de-quantization, portable */

/* a q4_k (q5_k: qh given) block: 8 sub-blocks of 32 with 6-bit scales and mins; value (d * sc) * q - dmin * m,
 * q the nibbles (and bit j of qh[i] as the fifth bit of value i of sub-block j) */
static void dequantize_k4(const uint8_t *wb, const uint8_t *qh, const uint8_t *qs, float *v) {
    const float d = vg_f16_at(wb), dmin = vg_f16_at(wb + 2);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        k4_scale(wb + 4, j, &sc, &m);
        const float ds = d * (float)sc, dm = dmin * (float)m;
        const uint8_t *q = qs + 32 * (j / 2); /* sub-block 2c: low nibbles of chunk c; 2c + 1: high */
        for (int i = 0; i < 32; i++) {
            int qi = j % 2 ? q[i] >> 4 : q[i] & 15;
            if (qh) qi |= ((qh[i] >> j) & 1) << 4;
            v[32 * j + i] = ds * (float)qi - dm;
        }
    }
}

/* q5_0 (value d * (q - 16)) and q5_1 (d * q + m): the fifth bit of value i is bit i of a little-endian u32 */
static void dequantize_q5(int qtype, const uint8_t *wb, float *v) {
    const float d = vg_f16_at(wb), m = qtype == Q5_1 ? vg_f16_at(wb + 2) : 0.0f;
    const uint8_t *qh = wb + (qtype == Q5_1 ? 4 : 2), *qs = qh + 4;
    const uint32_t high = (uint32_t)qh[0] | ((uint32_t)qh[1] << 8) | ((uint32_t)qh[2] << 16) | ((uint32_t)qh[3] << 24);
    for (int i = 0; i < 32; i++) {
        int q = (i < 16 ? qs[i] & 15 : qs[i - 16] >> 4) | (int)(((high >> i) & 1) << 4);
        v[i] = qtype == Q5_1 ? d * (float)q + m : d * (float)(q - 16);
    }
}

/* q2_k and q3_k: value i of group g (16 groups of 16) has 2 bits at shift 2 * ((g / 2) % 4) of byte
 * qs[32 * (g / 8) + 16 * (g % 2) + i] */
static int crumb(const uint8_t *qs, int g, int i) {
    return (qs[32 * (g / 8) + 16 * (g % 2) + i] >> (2 * ((g / 2) % 4))) & 3;
}

/* q2_k: scales[16] (low nibble scale, high nibble min), qs[64], d, dmin: (d * sc) * q - dmin * m */
static void dequantize_q2_k(const uint8_t *wb, float *v) {
    const float d = vg_f16_at(wb + 80), dmin = vg_f16_at(wb + 82);
    for (int g = 0; g < 16; g++) {
        const float dl = d * (float)(wb[g] & 15), ml = dmin * (float)(wb[g] >> 4);
        for (int i = 0; i < 16; i++) v[16 * g + i] = dl * (float)crumb(wb + 16, g, i) - ml;
    }
}

/* q3_k: hmask[32], qs[64], 12 bytes of 6-bit scales (less 32), d: (d * scale) * (q - 4 if the value's
 * bit of hmask is clear); value 32 s + l's bit is bit s of hmask[l] */
static void dequantize_q3_k(const uint8_t *wb, float *v) {
    const uint8_t *s = wb + 96;
    const float d = vg_f16_at(wb + 108);
    for (int g = 0; g < 16; g++) {
        int low = g < 8 ? s[g] & 15 : s[g - 8] >> 4, high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
        const float dl = d * (float)((low | (high << 4)) - 32);
        for (int i = 0; i < 16; i++) {
            int at = 16 * g + i, q = crumb(wb + 32, g, i) - (((wb[at % 32] >> (at / 32)) & 1) ? 0 : 4);
            v[at] = dl * (float)q;
        }
    }
}

/* iq4_nl (d, 16 bytes of nibbles: values from IQ4_VALUES) and iq4_xs (d, 2 + 4 bytes of 6-bit scales less
 * 32, 8 sub-blocks of 16 bytes): (d * scale) * IQ4_VALUES[q] */
static void dequantize_iq4(int qtype, const uint8_t *wb, float *v) {
    const float d = vg_f16_at(wb);
    if (qtype == IQ4_NL) {
        for (int i = 0; i < 16; i++) {
            v[i] = d * (float)IQ4_VALUES[wb[2 + i] & 15];
            v[i + 16] = d * (float)IQ4_VALUES[wb[2 + i] >> 4];
        }
        return;
    }
    const int high = wb[2] | (wb[3] << 8);
    for (int j = 0; j < 8; j++) {
        int ls = ((wb[4 + j / 2] >> (4 * (j % 2))) & 15) | (((high >> (2 * j)) & 3) << 4);
        const float dl = d * (float)(ls - 32);
        const uint8_t *q = wb + 8 + 16 * j;
        for (int i = 0; i < 16; i++) {
            v[32 * j + i] = dl * (float)IQ4_VALUES[q[i] & 15];
            v[32 * j + i + 16] = dl * (float)IQ4_VALUES[q[i] >> 4];
        }
    }
}

/* a q6_k block: 16 groups of 16 with int8 scales; value (d * sc) * (q - 32), q from 4 + 2 bits */
static void dequantize_q6_k(const uint8_t *wb, float *v) {
    const float d = vg_f16_at(wb + 208);
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
        float d = vg_f16_at(wb);
        if (qtype == Q8_0) {
            for (int i = 0; i < 32; i++) v[i] = d * (float)((const int8_t *)(wb + 2))[i];
        } else if (qtype == Q4_0) {
            for (int i = 0; i < 16; i++) {
                v[i] = d * (float)((wb[2 + i] & 15) - 8);
                v[i + 16] = d * (float)((wb[2 + i] >> 4) - 8);
            }
        } else if (qtype == Q4_1) {
            float m = vg_f16_at(wb + 2);
            for (int i = 0; i < 16; i++) {
                v[i] = d * (float)(wb[4 + i] & 15) + m;
                v[i + 16] = d * (float)(wb[4 + i] >> 4) + m;
            }
        } else if (qtype == Q4_K) {
            dequantize_k4(wb, 0, wb + 16, v);
        } else if (qtype == Q5_K) {
            dequantize_k4(wb, wb + 16, wb + 48, v);
        } else if (qtype == Q6_K) {
            dequantize_q6_k(wb, v);
        } else if (qtype == Q5_0 || qtype == Q5_1) {
            dequantize_q5(qtype, wb, v);
        } else if (qtype == Q2_K) {
            dequantize_q2_k(wb, v);
        } else if (qtype == Q3_K) {
            dequantize_q3_k(wb, v);
        } else {
            dequantize_iq4(qtype, wb, v);
        }
    }
}

/* qmatmul's f32 sum of x[i] * v[i] (ops/quant.py): partial sum j of 32 takes i = j (mod 32) in order, each
 * step one fused multiply-add rounded once, from +0.0; then s[j] = s[j] + s[j + h] for h = 16, 8, 4, 2, 1 */
static float fold32(float *a) {
    for (int h = 16; h; h >>= 1)
        for (int j = 0; j < h; j++) a[j] = a[j] + a[j + h];
    return a[0];
}

float vg_dot_f32(const float *x, const float *v, int64_t k) {
    float a[32] = {0};
    for (int64_t i = 0; i < k; i += 32)
        for (int j = 0; j < 32; j++) a[j] = fmaf(x[i + j], v[i + j], a[j]);
    return fold32(a);
}

#if VG_X86
/* dot_f32's fold of 32 partial sums held as 4 vectors of 8 (sum j in lane j % 8 of vector j / 8) */
__attribute__((target("avx2"), always_inline)) static inline float fold_avx2(__m256 a0, __m256 a1, __m256 a2,
                                                                              __m256 a3) {
    __m256 e = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3)); /* h = 16, then 8 */
    __m128 f = _mm_add_ps(_mm256_castps256_ps128(e), _mm256_extractf128_ps(e, 1));
    f = _mm_add_ps(f, _mm_movehl_ps(f, f));
    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));
}

/* a block of q8_0, q4_0, q4_1, q5_0 or q5_1 (qt) on AVX2: its 32 values, v[j] values 8j..8j+7, each d * q'
 * (q' = q less 8 or 16, as the format has it), plus m for q4_1 and q5_1: dequantize_row's operations */
__attribute__((target("avx2,f16c"), always_inline)) static inline void block_avx2(int qt, const uint8_t *wb,
                                                                                   __m256 *v) {
    const __m256 d = _mm256_set1_ps(vg_f16_at(wb));
    if (qt == Q8_0) {
        for (int j = 0; j < 4; j++) {
            __m128i q = _mm_loadl_epi64((const __m128i *)(wb + 2 + 8 * j));
            v[j] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
        }
        return;
    }
    const __m128i mask = _mm_set1_epi8(15);
    const int five = qt == Q5_0 || qt == Q5_1, affine = qt == Q4_1 || qt == Q5_1;
    const uint8_t *qh = wb + (affine ? 4 : 2); /* q5: the fifth bits (a u32), then the nibbles */
    __m128i n = _mm_loadu_si128((const __m128i *)(qh + (five ? 4 : 0)));
    __m128i lo = _mm_and_si128(n, mask), hi = _mm_and_si128(_mm_srli_epi16(n, 4), mask);
    __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    const __m256 m = _mm256_set1_ps(affine ? vg_f16_at(wb + 2) : 0.0f);
    const __m256i off = _mm256_set1_epi32(qt == Q4_0 ? 8 : qt == Q5_0 ? 16 : 0);
    const __m256i high = _mm256_set1_epi32(five ? load32(qh) : 0); /* x86 is little-endian */
    for (int j = 0; j < 4; j++) {
        __m256i q = _mm256_cvtepu8_epi32(parts[j]);
        if (five) {
            __m256i shift = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(8 * j));
            __m256i bits = _mm256_and_si256(_mm256_srlv_epi32(high, shift), _mm256_set1_epi32(1));
            q = _mm256_or_si256(q, _mm256_slli_epi32(bits, 4));
        }
        const __m256 x = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(q, off)));
        v[j] = affine ? _mm256_add_ps(x, m) : x;
    }
}

__attribute__((target("avx2,f16c"))) static void dequantize_row_avx2(int qtype, const uint8_t *w, int64_t nb,
                                                                       float *v) {
    for (int64_t b = 0; b < nb; b++, v += 32) {
        __m256 x[4];
        block_avx2(qtype, w + b * BLOCK_BYTES[qtype], x);
        for (int j = 0; j < 4; j++) _mm256_storeu_ps(v + 8 * j, x[j]);
    }
}

/* dot_f32 of x with the 2 rows w, w + stride of a 32-value format (block_avx2's), each block de-quantized
 * in registers and multiplied at once, each output's 32 partial sums in 4 vectors of 8 (named: see
 * FUSED_32), folded as DOTS_AVX2 folds them; the next 2 rows are fetched meanwhile */
#define FUSED_32_AVX2(NAME, QTYPE)                                                                          \
    __attribute__((target("avx2,fma,f16c"))) static void NAME(const uint8_t *w, int64_t stride, int64_t nb, \
                                                              const float *x, float *s) {                   \
        const int64_t bytes = BLOCK_BYTES[QTYPE];                                                           \
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;     \
        for (int64_t i = 0; i < nb; i++) {                                                                  \
            const uint8_t *wb = w + i * bytes;                                                              \
            _mm_prefetch((const char *)(wb + 2 * stride), _MM_HINT_T0);                                     \
            _mm_prefetch((const char *)(wb + 3 * stride), _MM_HINT_T0);                                     \
            __m256 u[4], v[4];                                                                              \
            block_avx2(QTYPE, wb, u);                                                                       \
            block_avx2(QTYPE, wb + stride, v);                                                              \
            const float *xb = x + 32 * i;                                                                   \
            __m256 x0 = _mm256_loadu_ps(xb), x1 = _mm256_loadu_ps(xb + 8);                                  \
            __m256 x2 = _mm256_loadu_ps(xb + 16), x3 = _mm256_loadu_ps(xb + 24);                            \
            a0 = _mm256_fmadd_ps(x0, u[0], a0), a1 = _mm256_fmadd_ps(x1, u[1], a1);                         \
            a2 = _mm256_fmadd_ps(x2, u[2], a2), a3 = _mm256_fmadd_ps(x3, u[3], a3);                         \
            b0 = _mm256_fmadd_ps(x0, v[0], b0), b1 = _mm256_fmadd_ps(x1, v[1], b1);                         \
            b2 = _mm256_fmadd_ps(x2, v[2], b2), b3 = _mm256_fmadd_ps(x3, v[3], b3);                         \
        }                                                                                                   \
        s[0] = fold_avx2(a0, a1, a2, a3), s[1] = fold_avx2(b0, b1, b2, b3);                                 \
    }
FUSED_32_AVX2(fused_q8_0_avx2, Q8_0)
FUSED_32_AVX2(fused_q4_0_avx2, Q4_0)
FUSED_32_AVX2(fused_q4_1_avx2, Q4_1)
FUSED_32_AVX2(fused_q5_0_avx2, Q5_0)
FUSED_32_AVX2(fused_q5_1_avx2, Q5_1)

/* 8 (AVX2) or 16 (AVX-512) k-quant values: q = ((lo[i] >> ls) & lm) | (((hi[i] >> hs) & hm) << 4) - off
 * (no hi: the first term alone), then ds * q (less dm where has_m): the portable paths' operations */
__attribute__((target("avx2"), always_inline)) static inline void k_avx2(float *v, const uint8_t *lo, int ls,
                                                                           const uint8_t *hi, int hs, int hm,
                                                                           int off, float ds, float dm,
                                                                           int has_m) {
    __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)lo));
    q = _mm256_and_si256(_mm256_srl_epi32(q, _mm_cvtsi32_si128(ls)), _mm256_set1_epi32(15));
    if (hi) {
        __m256i h = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)hi));
        h = _mm256_and_si256(_mm256_srl_epi32(h, _mm_cvtsi32_si128(hs)), _mm256_set1_epi32(hm));
        q = _mm256_or_si256(q, _mm256_slli_epi32(h, 4));
    }
    __m256 x = _mm256_mul_ps(_mm256_set1_ps(ds), _mm256_cvtepi32_ps(_mm256_sub_epi32(q, _mm256_set1_epi32(off))));
    _mm256_storeu_ps(v, has_m ? _mm256_sub_ps(x, _mm256_set1_ps(dm)) : x);
}

AVX512_Q __attribute__((always_inline)) static inline void k_avx512(float *v, const uint8_t *lo, int ls,
                                                                    const uint8_t *hi, int hs, int hm, int off,
                                                                    float ds, float dm, int has_m) {
    __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)lo));
    q = _mm512_and_si512(_mm512_srl_epi32(q, _mm_cvtsi32_si128(ls)), _mm512_set1_epi32(15));
    if (hi) {
        __m512i h = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)hi));
        h = _mm512_and_si512(_mm512_srl_epi32(h, _mm_cvtsi32_si128(hs)), _mm512_set1_epi32(hm));
        q = _mm512_or_si512(q, _mm512_slli_epi32(h, 4));
    }
    __m512 x = _mm512_mul_ps(_mm512_set1_ps(ds), _mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(off))));
    _mm512_storeu_ps(v, has_m ? _mm512_sub_ps(x, _mm512_set1_ps(dm)) : x);
}

/* rows of q4_k, q5_k or q6_k blocks, L values a step, with PUT (k_avx2 or k_avx512); the layouts are those
 * of dequantize_k4 and dequantize_q6_k */
#define DEQUANTIZE_K(NAME, ATTR, L, PUT)                                                                    \
    ATTR static void NAME(int qtype, const uint8_t *w, int64_t nb, float *v) {                              \
        for (int64_t b = 0; b < nb; b++, v += 256) {                                                        \
            const uint8_t *wb = w + b * BLOCK_BYTES[qtype];                                                 \
            if (qtype == Q6_K) {                                                                            \
                const float d = vg_f16_at(wb + 208);                                                    \
                const int8_t *sc = (const int8_t *)(wb + 192);                                              \
                for (int h = 0; h < 2; h++)                                                                 \
                    for (int quarter = 0; quarter < 4; quarter++)                                           \
                        for (int l = 0; l < 32; l += L)                                                     \
                            PUT(v + 128 * h + 32 * quarter + l, wb + 64 * h + 32 * (quarter & 1) + l,        \
                                4 * (quarter >> 1), wb + 128 + 32 * h + l, 2 * quarter, 3, 32,              \
                                d * (float)sc[8 * h + 2 * quarter + l / 16], 0.0f, 0);                      \
                continue;                                                                                   \
            }                                                                                               \
            const float d = vg_f16_at(wb), dmin = vg_f16_at(wb + 2);                                \
            const uint8_t *qh = qtype == Q5_K ? wb + 16 : 0, *qs = wb + (qtype == Q5_K ? 48 : 16);          \
            for (int j = 0; j < 8; j++) {                                                                   \
                int sc, m;                                                                                  \
                k4_scale(wb + 4, j, &sc, &m);                                                               \
                const float ds = d * (float)sc, dm = dmin * (float)m;                                       \
                for (int l = 0; l < 32; l += L)                                                             \
                    PUT(v + 32 * j + l, qs + 32 * (j / 2) + l, 4 * (j % 2), qh ? qh + l : 0, j, 1, 0, ds, dm, 1); \
            }                                                                                               \
        }                                                                                                   \
    }
DEQUANTIZE_K(dequantize_k_avx2, __attribute__((target("avx2,f16c"))), 8, k_avx2)
DEQUANTIZE_K(dequantize_k_avx512, AVX512_Q, 16, k_avx512)

/* The 32-value formats are de-quantized in registers by quant_blocks32.h (shared with quant_f32_tiles.c). */

/* a row of q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl blocks: dequantize_row's values */
#define DEQUANTIZE_32(NAME, QTYPE)                                                                          \
    AVX512_Q static void NAME(const uint8_t *w, int64_t nb, float *v) {                                     \
        const int qt = QTYPE; /* an int: the codes are two enums */                                         \
        const int64_t bytes = BLOCK_BYTES[qt];                                                              \
        float dd[16], mm[16];                                                                               \
        for (int64_t i0 = 0; i0 < nb; i0 += 16) {                                                           \
            const int64_t cn = nb - i0 < 16 ? nb - i0 : 16;                                                 \
            scales16(w + i0 * bytes, bytes, cn, qt == Q4_1 || qt == Q5_1, dd, mm);                          \
            for (int64_t c = 0; c < cn; c++, v += 32) {                                                     \
                __m512 lo, hi;                                                                              \
                const __m512 d = _mm512_set1_ps(dd[c]), m = _mm512_set1_ps(mm[c]);                         \
                block32_avx512(qt, w + (i0 + c) * bytes, d, m, &lo, &hi);                                   \
                _mm512_storeu_ps(v, lo);                                                                    \
                _mm512_storeu_ps(v + 16, hi);                                                               \
            }                                                                                               \
        }                                                                                                   \
    }
DEQUANTIZE_32(dequantize_q8_0_avx512, Q8_0)
DEQUANTIZE_32(dequantize_q4_0_avx512, Q4_0)
DEQUANTIZE_32(dequantize_q4_1_avx512, Q4_1)
DEQUANTIZE_32(dequantize_q5_0_avx512, Q5_0)
DEQUANTIZE_32(dequantize_q5_1_avx512, Q5_1)
DEQUANTIZE_32(dequantize_iq4_nl_avx512, IQ4_NL)

/* dot_f32 of one activation row x with the 4 rows w + j stride (j = 0..3) of a 32-value block format, each
 * block de-quantized in registers (DEQUANTIZE_32's values) and multiplied at once: s[j], as dot_f32 sums
 * it (a decode step: no row buffer written and read back); the next 4 rows are fetched meanwhile */
#define FUSED_32(NAME, QTYPE)                                                                               \
    AVX512_Q static void NAME(const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {     \
        const int qt = QTYPE, affine = qt == Q4_1 || qt == Q5_1;                                            \
        /* named sums, not an array: with an array GCC stored every sum to the stack each block */          \
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;     \
        const int64_t bytes = BLOCK_BYTES[qt];                                                              \
        const uint8_t *next = w + 4 * stride;                                                               \
        float dd[4][16], mm[4][16];                                                                         \
        for (int64_t i = 0; i < nb; i++) {                                                                  \
            const int64_t c = i & 15;                                                                       \
            if (!c)                                                                                         \
                for (int j = 0; j < 4; j++)                                                                 \
                    scales16(w + j * stride + i * bytes, bytes, nb - i, affine, dd[j], mm[j]);              \
            const __m512 x0 = _mm512_loadu_ps(x + 32 * i), x1 = _mm512_loadu_ps(x + 32 * i + 16);           \
            const uint8_t *wb = w + i * bytes;                                                              \
            FUSED_32_ROW(0, a0, b0)                                                                         \
            FUSED_32_ROW(1, a1, b1)                                                                         \
            FUSED_32_ROW(2, a2, b2)                                                                         \
            FUSED_32_ROW(3, a3, b3)                                                                         \
        }                                                                                                   \
        s[0] = fold_avx512(a0, b0), s[1] = fold_avx512(a1, b1);                                             \
        s[2] = fold_avx512(a2, b2), s[3] = fold_avx512(a3, b3);                                             \
    }
/* FUSED_32's row j: block i de-quantized and multiplied into the sums A (values 0..15) and B (16..31) */
#define FUSED_32_ROW(J, A, B)                                                                               \
    {                                                                                                       \
        _mm_prefetch((const char *)(next + J * stride + i * bytes), _MM_HINT_T0);                           \
        __m512 lo, hi;                                                                                      \
        block32_avx512(qt, wb + J * stride, _mm512_set1_ps(dd[J][c]), _mm512_set1_ps(mm[J][c]), &lo, &hi);  \
        A = _mm512_fmadd_ps(x0, lo, A);                                                                     \
        B = _mm512_fmadd_ps(x1, hi, B);                                                                     \
    }
FUSED_32(fused_q8_0_avx512, Q8_0)
FUSED_32(fused_q4_0_avx512, Q4_0)
FUSED_32(fused_q4_1_avx512, Q4_1)
FUSED_32(fused_q5_0_avx512, Q5_0)
FUSED_32(fused_q5_1_avx512, Q5_1)
FUSED_32(fused_iq4_nl_avx512, IQ4_NL)

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

/* FUSED_32 for q4_k and q5_k: per 64 values (chunk c of the nibbles: sub-blocks 2c low, 2c + 1 high) each
 * row's bytes are widened once, and each sub-block's values looked up in its table of 16 (q4_k: ds * n - dm)
 * or 32 (q5_k: n + 16 where the value's bit of qh is set), computed as dequantize_k4 computes a value */
#define FUSED_K4(NAME, QTYPE)                                                                               \
    AVX512_Q static void NAME(const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {     \
        const int five = QTYPE == Q5_K;                                                                     \
        const __m512 nibble = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);        \
        const __m512 nibble16 = _mm512_add_ps(nibble, _mm512_set1_ps(16.0f));                               \
        const __m512i low4 = _mm512_set1_epi32(15), sixteen = _mm512_set1_epi32(16);                        \
        const int64_t bytes = BLOCK_BYTES[QTYPE];                                                           \
        __m512 a[4], b[4];                                                                                  \
        for (int r = 0; r < 4; r++) a[r] = b[r] = _mm512_setzero_ps();                                      \
        const uint8_t *next = w + 4 * stride;                                                               \
        for (int64_t i = 0; i < nb; i++) {                                                                  \
            const float *xb = x + 256 * i;                                                                  \
            float ds[4][8], dm[4][8];                                                                       \
            for (int r = 0; r < 4; r++) {                                                                   \
                for (int64_t off = 0; off < bytes; off += 64)                                               \
                    _mm_prefetch((const char *)(next + r * stride + i * bytes + off), _MM_HINT_T0);         \
                k4_scales8(w + r * stride + i * bytes, ds[r], dm[r]);                                       \
            }                                                                                               \
            for (int c = 0; c < 4; c++) {                                                                   \
                const __m512 x0 = _mm512_loadu_ps(xb + 64 * c), x1 = _mm512_loadu_ps(xb + 64 * c + 16);     \
                const __m512 x2 = _mm512_loadu_ps(xb + 64 * c + 32), x3 = _mm512_loadu_ps(xb + 64 * c + 48); \
                for (int r = 0; r < 4; r++) {                                                               \
                    const uint8_t *wb = w + r * stride + i * bytes, *qs = wb + (five ? 48 : 16) + 32 * c;  \
                    const __m512i qa = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));        \
                    const __m512i qb = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qs + 16))); \
                    __m512 v[4];                                                                            \
                    for (int h = 0; h < 2; h++) { /* sub-block j = 2c + h */                                \
                        const int j = 2 * c + h;                                                            \
                        const __m512 d = _mm512_set1_ps(ds[r][j]), m = _mm512_set1_ps(dm[r][j]);            \
                        const __m512 lo = _mm512_sub_ps(_mm512_mul_ps(d, nibble), m);                       \
                        __m512i ia = h ? _mm512_srli_epi32(qa, 4) : qa, ib = h ? _mm512_srli_epi32(qb, 4) : qb; \
                        if (!five) { /* permutexvar reads the low 4 bits of each index */                   \
                            v[2 * h] = _mm512_permutexvar_ps(ia, lo);                                       \
                            v[2 * h + 1] = _mm512_permutexvar_ps(ib, lo);                                   \
                            continue;                                                                       \
                        }                                                                                   \
                        const __m512 hi = _mm512_sub_ps(_mm512_mul_ps(d, nibble16), m);                     \
                        const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb + 16));                  \
                        const uint32_t bits = (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(qh, 7 - j)); \
                        ia = _mm512_and_si512(ia, low4), ib = _mm512_and_si512(ib, low4);                   \
                        ia = _mm512_mask_or_epi32(ia, (__mmask16)(bits & 0xffff), ia, sixteen);             \
                        ib = _mm512_mask_or_epi32(ib, (__mmask16)(bits >> 16), ib, sixteen);                \
                        v[2 * h] = _mm512_permutex2var_ps(lo, ia, hi);                                      \
                        v[2 * h + 1] = _mm512_permutex2var_ps(lo, ib, hi);                                  \
                    }                                                                                       \
                    a[r] = _mm512_fmadd_ps(x0, v[0], a[r]);                                                 \
                    b[r] = _mm512_fmadd_ps(x1, v[1], b[r]);                                                 \
                    a[r] = _mm512_fmadd_ps(x2, v[2], a[r]);                                                 \
                    b[r] = _mm512_fmadd_ps(x3, v[3], b[r]);                                                 \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
        for (int r = 0; r < 4; r++) s[r] = fold_avx512(a[r], b[r]);                                         \
    }
FUSED_K4(fused_q4_k_avx512, Q4_K)
FUSED_K4(fused_q5_k_avx512, Q5_K)

/* FUSED_32 for q6_k: 32 values (a quarter of a half) at a time, q - 32 made in bytes from ql's nibble and
 * qh's 2 bits, then (d * sc) * (q - 32) per 16 as dequantize_q6_k computes it */
AVX512_Q static void fused_q6_k_avx512(const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {
    const int64_t bytes = BLOCK_BYTES[Q6_K];
    const __m256i low4 = _mm256_set1_epi8(15), low2 = _mm256_set1_epi8(3), bias = _mm256_set1_epi8(32);
    __m512 a[4], b[4];
    for (int r = 0; r < 4; r++) a[r] = b[r] = _mm512_setzero_ps();
    const uint8_t *next = w + 4 * stride;
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + 256 * i;
        float dsc[4][16];
        for (int r = 0; r < 4; r++) {
            const uint8_t *wb = w + r * stride + i * bytes;
            for (int64_t off = 0; off < bytes; off += 64)
                _mm_prefetch((const char *)(next + r * stride + i * bytes + off), _MM_HINT_T0);
            const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(wb + 192)));
            _mm512_storeu_ps(dsc[r], _mm512_mul_ps(_mm512_set1_ps(vg_f16_at(wb + 208)), _mm512_cvtepi32_ps(sc)));
        }
        for (int h = 0; h < 2; h++)
            for (int quarter = 0; quarter < 4; quarter++) {
                const float *xq = xb + 128 * h + 32 * quarter;
                const __m512 x0 = _mm512_loadu_ps(xq), x1 = _mm512_loadu_ps(xq + 16);
                for (int r = 0; r < 4; r++) {
                    const uint8_t *wb = w + r * stride + i * bytes;
                    __m256i q = _mm256_loadu_si256((const __m256i *)(wb + 64 * h + 32 * (quarter & 1)));
                    q = _mm256_and_si256(quarter < 2 ? q : _mm256_srli_epi16(q, 4), low4);
                    __m256i qh = _mm256_loadu_si256((const __m256i *)(wb + 128 + 32 * h));
                    qh = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * quarter), low2);
                    q = _mm256_sub_epi8(_mm256_or_si256(q, _mm256_slli_epi16(qh, 4)), bias); /* -32..31 */
                    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
                    const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
                    const float *d = dsc[r] + 8 * h + 2 * quarter;
                    a[r] = _mm512_fmadd_ps(x0, _mm512_mul_ps(_mm512_set1_ps(d[0]), lo), a[r]);
                    b[r] = _mm512_fmadd_ps(x1, _mm512_mul_ps(_mm512_set1_ps(d[1]), hi), b[r]);
                }
            }
    }
    for (int r = 0; r < 4; r++) s[r] = fold_avx512(a[r], b[r]);
}

/* iq4_xs block wb's 8 sub-block scales dl[j] = d * (ls - 32), as dequantize_iq4 computes them */
static inline void iq4_xs_scales(const uint8_t *wb, float *dl) {
    const float d = vg_f16_at(wb);
    const int high = wb[2] | (wb[3] << 8);
    for (int j = 0; j < 8; j++) {
        const int ls = ((wb[4 + j / 2] >> (4 * (j % 2))) & 15) | (((high >> (2 * j)) & 3) << 4);
        dl[j] = d * (float)(ls - 32);
    }
}

/* a row of iq4_xs blocks: each sub-block's 32 values looked up in its table of 16 (dequantize_iq4's) */
AVX512_Q static void dequantize_iq4_xs_avx512(const uint8_t *w, int64_t nb, float *v) {
    const __m512 values = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)IQ4_VALUES)));
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *wb = w + i * BLOCK_BYTES[IQ4_XS];
        float dl[8];
        iq4_xs_scales(wb, dl);
        for (int j = 0; j < 8; j++, v += 32) {
            const __m512 table = _mm512_mul_ps(_mm512_set1_ps(dl[j]), values);
            const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(wb + 8 + 16 * j)));
            _mm512_storeu_ps(v, _mm512_permutexvar_ps(q, table));
            _mm512_storeu_ps(v + 16, _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table));
        }
    }
}

/* FUSED_32 for iq4_xs: 8 sub-blocks of 32 values, each looked up in its table of 16, dl * IQ4_VALUES[n]
 * with dl = d * (ls - 32) (dequantize_iq4's operations); the sums in named registers (see FUSED_32) */
#define FUSED_IQ4_XS_ROW(R, A, B)                                                                           \
    {                                                                                                       \
        const uint8_t *wb = w + R * stride + i * bytes;                                                     \
        const __m512 table = _mm512_mul_ps(_mm512_set1_ps(dl[R][j]), values);                               \
        const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(wb + 8 + 16 * j)));      \
        A = _mm512_fmadd_ps(x0, _mm512_permutexvar_ps(q, table), A);                                        \
        B = _mm512_fmadd_ps(x1, _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), table), B);                  \
    }
AVX512_Q static void fused_iq4_xs_avx512(const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {
    const int64_t bytes = BLOCK_BYTES[IQ4_XS];
    const __m512 values = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const void *)IQ4_VALUES)));
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t i = 0; i < nb; i++) {
        float dl[4][8];
        for (int r = 0; r < 4; r++) {
            const uint8_t *wb = w + r * stride + i * bytes;
            for (int64_t off = 0; off < bytes; off += 64)
                _mm_prefetch((const char *)(wb + 4 * stride + off), _MM_HINT_T0);
            iq4_xs_scales(wb, dl[r]);
        }
        for (int j = 0; j < 8; j++) {
            const float *xj = x + 256 * i + 32 * j;
            const __m512 x0 = _mm512_loadu_ps(xj), x1 = _mm512_loadu_ps(xj + 16);
            FUSED_IQ4_XS_ROW(0, a0, b0)
            FUSED_IQ4_XS_ROW(1, a1, b1)
            FUSED_IQ4_XS_ROW(2, a2, b2)
            FUSED_IQ4_XS_ROW(3, a3, b3)
        }
    }
    s[0] = fold_avx512(a0, b0), s[1] = fold_avx512(a1, b1), s[2] = fold_avx512(a2, b2), s[3] = fold_avx512(a3, b3);
}

/* FUSED_32 for q2_k and q3_k: 16 groups of 16 values; group g's bytes are those of crumb (16 (g % 2) + i of
 * the chunk g / 8, at shift 2 ((g / 2) % 4)), widened once per chunk and half, and its values looked up in
 * the group's table of 8 (twice over: permutexvar reads 4 bits of the index), computed as dequantize_q2_k
 * (dl * q - ml, q = the crumb) and dequantize_q3_k (dl * q, q = the crumb less 4 where hmask's bit is clear)
 * compute a value. Even groups go to the sums of lanes 0..15, odd ones to lanes 16..31. */
#define FUSED_K2(NAME, QTYPE)                                                                               \
    AVX512_Q static void NAME(const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {     \
        const int three = QTYPE == Q3_K;                                                                    \
        /* value n of a table: the crumb n & 3, less 4 for q3_k where n's bit 2 (hmask's) is clear */       \
        const __m512 crumbs = three ? _mm512_setr_ps(-4, -3, -2, -1, 0, 1, 2, 3, -4, -3, -2, -1, 0, 1, 2, 3) \
                                    : _mm512_setr_ps(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);       \
        const __m512i low2 = _mm512_set1_epi32(3), four = _mm512_set1_epi32(4);                              \
        const int64_t bytes = BLOCK_BYTES[QTYPE];                                                           \
        __m512 a[4], b[4];                                                                                  \
        for (int r = 0; r < 4; r++) a[r] = b[r] = _mm512_setzero_ps();                                      \
        const uint8_t *next = w + 4 * stride;                                                               \
        for (int64_t i = 0; i < nb; i++) {                                                                  \
            const float *xb = x + 256 * i;                                                                  \
            float dl[4][16], ml[4][16];                                                                     \
            for (int r = 0; r < 4; r++) {                                                                   \
                const uint8_t *wb = w + r * stride + i * bytes;                                             \
                for (int64_t off = 0; off < bytes; off += 64)                                               \
                    _mm_prefetch((const char *)(next + r * stride + i * bytes + off), _MM_HINT_T0);         \
                if (three) {                                                                                \
                    const uint8_t *sc = wb + 96;                                                            \
                    int32_t scale[16];                                                                      \
                    for (int g = 0; g < 16; g++)                                                            \
                        scale[g] = ((g < 8 ? sc[g] & 15 : sc[g - 8] >> 4) |                                  \
                                    (((sc[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;                     \
                    const __m512 sf = _mm512_cvtepi32_ps(_mm512_loadu_si512(scale));                        \
                    _mm512_storeu_ps(dl[r], _mm512_mul_ps(_mm512_set1_ps(vg_f16_at(wb + 108)), sf));      \
                } else {                                                                                    \
                    const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)wb));         \
                    const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(sc, _mm512_set1_epi32(15)));      \
                    const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4));                         \
                    _mm512_storeu_ps(dl[r], _mm512_mul_ps(_mm512_set1_ps(vg_f16_at(wb + 80)), lo));        \
                    _mm512_storeu_ps(ml[r], _mm512_mul_ps(_mm512_set1_ps(vg_f16_at(wb + 82)), hi));        \
                }                                                                                           \
            }                                                                                               \
            for (int c = 0; c < 2; c++)                                                                     \
                for (int r = 0; r < 4; r++) {                                                               \
                    const uint8_t *wb = w + r * stride + i * bytes, *qs = wb + (three ? 32 : 16) + 32 * c;  \
                    const __m512i q0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));        \
                    const __m512i q1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qs + 16))); \
                    __m512i h0 = q0, h1 = q1;                                                               \
                    if (three) {                                                                            \
                        h0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)wb));                   \
                        h1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(wb + 16)));            \
                    }                                                                                       \
                    for (int sh = 0; sh < 4; sh++)                                                          \
                        for (int e = 0; e < 2; e++) {                                                       \
                            const int g = 8 * c + 2 * sh + e;                                               \
                            __m512 table = _mm512_mul_ps(_mm512_set1_ps(dl[r][g]), crumbs);                 \
                            __m512i idx = _mm512_srli_epi32(e ? q1 : q0, 2 * sh);                           \
                            if (three) { /* bit g / 2 of hmask[16 e + i]: the crumb as it is (+4) */        \
                                const __mmask16 set = _mm512_test_epi32_mask(e ? h1 : h0,                   \
                                                                             _mm512_set1_epi32(1 << (g / 2))); \
                                idx = _mm512_mask_or_epi32(_mm512_and_si512(idx, low2), set,                \
                                                           _mm512_and_si512(idx, low2), four);              \
                            } else {                                                                        \
                                table = _mm512_sub_ps(table, _mm512_set1_ps(ml[r][g]));                     \
                            }                                                                               \
                            const __m512 v = _mm512_permutexvar_ps(idx, table);                             \
                            const __m512 xv = _mm512_loadu_ps(xb + 16 * g);                                 \
                            if (e)                                                                          \
                                b[r] = _mm512_fmadd_ps(xv, v, b[r]);                                        \
                            else                                                                            \
                                a[r] = _mm512_fmadd_ps(xv, v, a[r]);                                        \
                        }                                                                                   \
                }                                                                                           \
        }                                                                                                   \
        for (int r = 0; r < 4; r++) s[r] = fold_avx512(a[r], b[r]);                                         \
    }
FUSED_K2(fused_q2_k_avx512, Q2_K)
FUSED_K2(fused_q3_k_avx512, Q3_K)

/* FUSED_K4's q4_k and q5_k on AVX2: 2 weight rows at a time, each output's 32 partial sums in 4 vectors of
 * 8; each value computed as dequantize_k4 computes it (ds * q - dm, q5_k's q with bit j of qh[i] as its
 * fifth bit), the sums folded as DOTS_AVX2 folds them */
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void fused_k4_avx2(
    int five, const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {
    const int64_t bytes = BLOCK_BYTES[five ? Q5_K : Q4_K];
    const __m256i low4 = _mm256_set1_epi32(15);
    __m256 a[2][4];
    for (int r = 0; r < 2; r++)
        for (int l = 0; l < 4; l++) a[r][l] = _mm256_setzero_ps();
    const uint8_t *next = w + 2 * stride;
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + 256 * i;
        float ds[2][8], dm[2][8];
        for (int r = 0; r < 2; r++) {
            const uint8_t *wb = w + r * stride + i * bytes;
            for (int64_t off = 0; off < bytes; off += 64)
                _mm_prefetch((const char *)(next + r * stride + i * bytes + off), _MM_HINT_T0);
            const float d = vg_f16_at(wb), dmin = vg_f16_at(wb + 2);
            for (int j = 0; j < 8; j++) {
                int sc, m;
                k4_scale(wb + 4, j, &sc, &m);
                ds[r][j] = d * (float)sc, dm[r][j] = dmin * (float)m;
            }
        }
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 4; l++) {
                const __m256 xv = _mm256_loadu_ps(xb + 32 * j + 8 * l);
                for (int r = 0; r < 2; r++) {
                    const uint8_t *wb = w + r * stride + i * bytes;
                    const uint8_t *qs = wb + (five ? 48 : 16) + 32 * (j / 2) + 8 * l;
                    __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)qs));
                    q = j % 2 ? _mm256_srli_epi32(q, 4) : _mm256_and_si256(q, low4);
                    if (five) {
                        __m256i h = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(wb + 16 + 8 * l)));
                        h = _mm256_and_si256(_mm256_srli_epi32(h, j), _mm256_set1_epi32(1));
                        q = _mm256_or_si256(q, _mm256_slli_epi32(h, 4));
                    }
                    const __m256 v = _mm256_sub_ps(_mm256_mul_ps(_mm256_set1_ps(ds[r][j]), _mm256_cvtepi32_ps(q)),
                                                   _mm256_set1_ps(dm[r][j]));
                    a[r][l] = _mm256_fmadd_ps(xv, v, a[r][l]);
                }
            }
    }
    for (int r = 0; r < 2; r++) s[r] = fold_avx2(a[r][0], a[r][1], a[r][2], a[r][3]);
}
__attribute__((target("avx2,fma,f16c"))) static void fused_q4_k_avx2(const uint8_t *w, int64_t stride, int64_t nb,
                                                                      const float *x, float *s) {
    fused_k4_avx2(0, w, stride, nb, x, s);
}
__attribute__((target("avx2,fma,f16c"))) static void fused_q5_k_avx2(const uint8_t *w, int64_t stride, int64_t nb,
                                                                      const float *x, float *s) {
    fused_k4_avx2(1, w, stride, nb, x, s);
}
/* q6_k on AVX2: 2 weight rows at a time, 8 values a step computed as dequantize_q6_k computes them
 * ((d * sc) * (q - 32), q from ql's nibble and qh's 2 bits, as k_avx2 makes it), each output's 32 partial
 * sums in 4 vectors of 8 */
__attribute__((target("avx2,fma,f16c"))) static void fused_q6_k_avx2(const uint8_t *w, int64_t stride, int64_t nb,
                                                                      const float *x, float *s) {
    const int64_t bytes = BLOCK_BYTES[Q6_K];
    const __m256i low4 = _mm256_set1_epi32(15), low2 = _mm256_set1_epi32(3), bias = _mm256_set1_epi32(32);
    __m256 a[2][4];
    for (int r = 0; r < 2; r++)
        for (int l = 0; l < 4; l++) a[r][l] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + 256 * i;
        float dsc[2][16];
        for (int r = 0; r < 2; r++) {
            const uint8_t *wb = w + r * stride + i * bytes;
            for (int64_t off = 0; off < bytes; off += 64)
                _mm_prefetch((const char *)(wb + 2 * stride + off), _MM_HINT_T0);
            const float d = vg_f16_at(wb + 208);
            for (int g = 0; g < 16; g++) dsc[r][g] = d * (float)((const int8_t *)(wb + 192))[g];
        }
        for (int h = 0; h < 2; h++)
            for (int quarter = 0; quarter < 4; quarter++)
                for (int l = 0; l < 32; l += 8) {
                    const __m256 xv = _mm256_loadu_ps(xb + 128 * h + 32 * quarter + l);
                    for (int r = 0; r < 2; r++) {
                        const uint8_t *wb = w + r * stride + i * bytes;
                        const uint8_t *lo = wb + 64 * h + 32 * (quarter & 1) + l, *hi = wb + 128 + 32 * h + l;
                        __m256i q = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)lo));
                        __m256i qh = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)hi));
                        q = _mm256_and_si256(_mm256_srli_epi32(q, 4 * (quarter >> 1)), low4);
                        qh = _mm256_and_si256(_mm256_srli_epi32(qh, 2 * quarter), low2);
                        q = _mm256_sub_epi32(_mm256_or_si256(q, _mm256_slli_epi32(qh, 4)), bias);
                        const __m256 ds = _mm256_set1_ps(dsc[r][8 * h + 2 * quarter + l / 16]);
                        a[r][l / 8] = _mm256_fmadd_ps(xv, _mm256_mul_ps(ds, _mm256_cvtepi32_ps(q)), a[r][l / 8]);
                    }
                }
    }
    for (int r = 0; r < 2; r++) s[r] = fold_avx2(a[r][0], a[r][1], a[r][2], a[r][3]);
}
typedef void (*fused_fn)(const uint8_t *, int64_t, int64_t, const float *, float *);
static const fused_fn FUSED_AVX512[NQTYPES] = {
    [Q8_0] = fused_q8_0_avx512, [Q4_0] = fused_q4_0_avx512, [Q4_1] = fused_q4_1_avx512,
    [Q5_0] = fused_q5_0_avx512, [Q5_1] = fused_q5_1_avx512, [IQ4_NL] = fused_iq4_nl_avx512,
    [Q4_K] = fused_q4_k_avx512, [Q5_K] = fused_q5_k_avx512, [Q6_K] = fused_q6_k_avx512,
    [Q2_K] = fused_q2_k_avx512, [Q3_K] = fused_q3_k_avx512, [IQ4_XS] = fused_iq4_xs_avx512};

static const fused_fn FUSED_AVX2[NQTYPES] = {
    [Q8_0] = fused_q8_0_avx2, [Q4_0] = fused_q4_0_avx2, [Q4_1] = fused_q4_1_avx2,
    [Q5_0] = fused_q5_0_avx2, [Q5_1] = fused_q5_1_avx2, [Q4_K] = fused_q4_k_avx2, [Q6_K] = fused_q6_k_avx2,
    [Q5_K] = fused_q5_k_avx2};
typedef void (*dequantize_fn)(const uint8_t *, int64_t, float *);
/* the formats other than the k-quants' q4_k, q5_k, q6_k with an AVX-512 de-quantization, by code (0: none) */
static const dequantize_fn DEQUANTIZE_AVX512[NQTYPES] = {
    [Q8_0] = dequantize_q8_0_avx512, [Q4_0] = dequantize_q4_0_avx512, [Q4_1] = dequantize_q4_1_avx512,
    [Q5_0] = dequantize_q5_0_avx512, [Q5_1] = dequantize_q5_1_avx512, [IQ4_NL] = dequantize_iq4_nl_avx512,
    [IQ4_XS] = dequantize_iq4_xs_avx512};

#endif

/* row `row` (nb blocks) de-quantized into v by the fastest path allowed (level: vg_quant_simd's), the
 * portable path's values */
void vg_dequantize_f32_row(int qtype, const uint8_t *row, int64_t nb, float *v, int level) {
#if VG_X86
    const int k_quant = qtype == Q4_K || qtype == Q5_K || qtype == Q6_K;
    if (level >= 2 && k_quant)
        dequantize_k_avx512(qtype, row, nb, v);
    else if (level >= 2 && DEQUANTIZE_AVX512[qtype])
        DEQUANTIZE_AVX512[qtype](row, nb, v);
    else if (level >= 1 && k_quant)
        dequantize_k_avx2(qtype, row, nb, v);
    else if (level >= 1 && (qtype <= Q4_1 || qtype == Q5_0 || qtype == Q5_1))
        dequantize_row_avx2(qtype, row, nb, v);
    else
#else
    (void)level;
#endif
        dequantize_row(qtype, row, nb, v);
}

/* a decode step's products of x with weight rows w + j stride (j < rows, rows >= 1) when a fused kernel
 * takes them (each block de-quantized in registers): s[j] for the rows it took; returns how many (0: none,
 * the caller de-quantizes rows and multiplies them) */
int vg_fused_decode_f32(int qtype, int level, const uint8_t *w, int64_t stride, int64_t nb, int64_t rows,
                        const float *x, float *s) {
#if VG_X86
    if (level >= 2 && rows >= 4 && FUSED_AVX512[qtype]) {
        FUSED_AVX512[qtype](w, stride, nb, x, s);
        return 4;
    }
    if (level == 1 && rows >= 2 && FUSED_AVX2[qtype]) {
        FUSED_AVX2[qtype](w, stride, nb, x, s);
        return 2;
    }
#else
    (void)qtype, (void)level, (void)w, (void)stride, (void)nb, (void)rows, (void)x, (void)s;
#endif
    return 0;
}

/* ---------------------------------------------------------------- qembedding */
typedef struct {
    int qtype;
    const uint8_t *w;
    int64_t vocab, row_bytes, k;
    const int64_t *ids;
    float *out;
    int level; /* vg_quant_simd's */
} embed_job;

static void embed_rows(void *ctx, int64_t lo, int64_t hi) {
    const embed_job *p = (const embed_job *)ctx;
    const int64_t nb = p->k / BLOCK_VALUES[p->qtype];
    for (int64_t i = lo; i < hi; i++) {
        vg_dequantize_f32_row(p->qtype, p->w + p->ids[i] * p->row_bytes, nb, p->out + i * p->k, p->level);
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
                   .out = out, .level = vg_quant_simd(-1)};
    vg_parallel_for(count, min_rows, threads, embed_rows, &p);
    return 0;
}
