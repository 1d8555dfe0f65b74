/* The 256-value formats' f32-activation kernels (q4_k, q5_k, q6_k, q2_k, q3_k and iq4_xs; ops/quant.py has
 * every layout), which quant_f32.c dispatches (vg_dequantize_f32_row, vg_fused_decode_f32): a block
 * de-quantized by the portable code, rows de-quantized on AVX2 and AVX-512, and a decode step's fused
 * products of 2 (AVX2) or 4 (AVX-512) weight rows, each block de-quantized in registers. Each value is
 * computed with the portable code's operations and each output summed by quant_f32.c's rule (vg_dot_f32:
 * 32 partial sums of fused multiply-adds, k = j mod 32 in sum j, folded s[j] + s[j + h]), so every path,
 * level and thread count gives the reference's bits. The AVX-512 decode kernels are quant_f32.c's FUSED_32
 * for these layouts: 4 weight rows, the next 4 fetched meanwhile, each output's sums in two vectors of 16.
 */
#include "quant.h"
#include "quant_k_avx512.h"

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

/* q2_k and q3_k: value i of group g (16 groups of 16) has 2 bits at shift 2 * ((g / 2) % 4) of byte
 * qs[32 * (g / 8) + 16 * (g % 2) + i] */
static int crumb(const uint8_t *qs, int g, int i) {
    return (qs[32 * (g / 8) + 16 * (g % 2) + i] >> (2 * ((g / 2) % 4))) & 3;
}

/* q2_k's (three = 0: scales[16], low nibble scale, high nibble min; qs[64]; d; dmin) and q3_k's (three = 1:
 * hmask[32], qs[64], 12 bytes of 6-bit scales less 32, d) group scales of block wb: dl[g] = d * scale and,
 * for q2_k, ml[g] = dmin * min */
static inline void k2_scales(int three, const uint8_t *wb, float *dl, float *ml) {
    if (three) {
        const uint8_t *s = wb + 96;
        const float d = vg_f16_at(wb + 108);
        for (int g = 0; g < 16; g++) {
            const int low = g < 8 ? s[g] & 15 : s[g - 8] >> 4, high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
            dl[g] = d * (float)((low | (high << 4)) - 32);
        }
        return;
    }
    const float d = vg_f16_at(wb + 80), dmin = vg_f16_at(wb + 82);
    for (int g = 0; g < 16; g++) dl[g] = d * (float)(wb[g] & 15), ml[g] = dmin * (float)(wb[g] >> 4);
}

/* q2_k: dl * q - ml, q the crumb */
static void dequantize_q2_k(const uint8_t *wb, float *v) {
    float dl[16], ml[16];
    k2_scales(0, wb, dl, ml);
    for (int g = 0; g < 16; g++)
        for (int i = 0; i < 16; i++) v[16 * g + i] = dl[g] * (float)crumb(wb + 16, g, i) - ml[g];
}

/* q3_k: dl * (q - 4 if the value's bit of hmask is clear); value 32 s + l's bit is bit s of hmask[l] */
static void dequantize_q3_k(const uint8_t *wb, float *v) {
    float dl[16];
    k2_scales(1, wb, dl, 0);
    for (int g = 0; g < 16; g++)
        for (int i = 0; i < 16; i++) {
            int at = 16 * g + i, q = crumb(wb + 32, g, i) - (((wb[at % 32] >> (at / 32)) & 1) ? 0 : 4);
            v[at] = dl[g] * (float)q;
        }
}

/* iq4_xs block wb's 8 sub-block scales dl[j] = d * (ls - 32) (d, then 2 + 4 bytes of 6-bit scales ls) */
static inline void iq4_xs_scales(const uint8_t *wb, float *dl) {
    const float d = vg_f16_at(wb);
    const int high = wb[2] | (wb[3] << 8);
    for (int j = 0; j < 8; j++) {
        const int ls = ((wb[4 + j / 2] >> (4 * (j % 2))) & 15) | (((high >> (2 * j)) & 3) << 4);
        dl[j] = d * (float)(ls - 32);
    }
}

/* iq4_xs: 8 sub-blocks of 16 bytes after the scales, value dl * IQ4_VALUES[q] (low nibbles: values 0..15 of
 * the sub-block, high: 16..31) */
static void dequantize_iq4_xs(const uint8_t *wb, float *v) {
    float dl[8];
    iq4_xs_scales(wb, dl);
    for (int j = 0; j < 8; j++) {
        const uint8_t *q = wb + 8 + 16 * j;
        for (int i = 0; i < 16; i++) {
            v[32 * j + i] = dl[j] * (float)IQ4_VALUES[q[i] & 15];
            v[32 * j + i + 16] = dl[j] * (float)IQ4_VALUES[q[i] >> 4];
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

/* one block of a 256-value format (qtype) de-quantized to f32 as the reference does */
void vg_dequantize_k_block(int qtype, const uint8_t *wb, float *v) {
    if (qtype == Q4_K)
        dequantize_k4(wb, 0, wb + 16, v);
    else if (qtype == Q5_K)
        dequantize_k4(wb, wb + 16, wb + 48, v);
    else if (qtype == Q6_K)
        dequantize_q6_k(wb, v);
    else if (qtype == Q2_K)
        dequantize_q2_k(wb, v);
    else if (qtype == Q3_K)
        dequantize_q3_k(wb, v);
    else
        dequantize_iq4_xs(wb, v);
}

#if VG_X86

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
#define DEQUANTIZE_K(NAME, ATTR, L, PUT, QT)                                                                \
    ATTR static void NAME(const uint8_t *w, int64_t nb, float *v) {                                         \
        const int qtype = QT;                                                                               \
        for (int64_t b = 0; b < nb; b++, v += 256) {                                                        \
            const uint8_t *wb = w + b * BLOCK_BYTES[qtype];                                                 \
            if (qtype == Q6_K) {                                                                            \
                const float d = vg_f16_at(wb + 208);                                                        \
                const int8_t *sc = (const int8_t *)(wb + 192);                                              \
                for (int h = 0; h < 2; h++)                                                                 \
                    for (int quarter = 0; quarter < 4; quarter++)                                           \
                        for (int l = 0; l < 32; l += L)                                                     \
                            PUT(v + 128 * h + 32 * quarter + l, wb + 64 * h + 32 * (quarter & 1) + l,       \
                                4 * (quarter >> 1), wb + 128 + 32 * h + l, 2 * quarter, 3, 32,              \
                                d * (float)sc[8 * h + 2 * quarter + l / 16], 0.0f, 0);                      \
                continue;                                                                                   \
            }                                                                                               \
            const float d = vg_f16_at(wb), dmin = vg_f16_at(wb + 2);                                        \
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
#define AVX2_Q __attribute__((target("avx2,f16c")))
DEQUANTIZE_K(dequantize_q4_k_avx2, AVX2_Q, 8, k_avx2, Q4_K)
DEQUANTIZE_K(dequantize_q5_k_avx2, AVX2_Q, 8, k_avx2, Q5_K)
DEQUANTIZE_K(dequantize_q6_k_avx2, AVX2_Q, 8, k_avx2, Q6_K)
DEQUANTIZE_K(dequantize_q4_k_avx512, AVX512_Q, 16, k_avx512, Q4_K)
DEQUANTIZE_K(dequantize_q5_k_avx512, AVX512_Q, 16, k_avx512, Q5_K)
DEQUANTIZE_K(dequantize_q6_k_avx512, AVX512_Q, 16, k_avx512, Q6_K)

/* FUSED_32 for q4_k and q5_k: per 64 values each row's values made by k4_chunk_avx512 */
#define FUSED_K4(NAME, QTYPE)                                                                               \
    AVX512_Q static void NAME(const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {     \
        const int five = QTYPE == Q5_K;                                                                     \
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
                    __m512 v[4];                                                                            \
                    k4_chunk_avx512(five, w + r * stride + i * bytes, c, ds[r], dm[r], v);                  \
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

/* FUSED_32 for q6_k: 32 values (a quarter of a half) at a time, made by q6_quarter_avx512 */
AVX512_Q static void fused_q6_k_avx512(const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {
    const int64_t bytes = BLOCK_BYTES[Q6_K];
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
            q6_scales16(wb, dsc[r]);
        }
        for (int h = 0; h < 2; h++)
            for (int quarter = 0; quarter < 4; quarter++) {
                const float *xq = xb + 128 * h + 32 * quarter;
                const __m512 x0 = _mm512_loadu_ps(xq), x1 = _mm512_loadu_ps(xq + 16);
                for (int r = 0; r < 4; r++) {
                    __m512 lo, hi;
                    q6_quarter_avx512(w + r * stride + i * bytes, h, quarter, dsc[r], &lo, &hi);
                    a[r] = _mm512_fmadd_ps(x0, lo, a[r]);
                    b[r] = _mm512_fmadd_ps(x1, hi, b[r]);
                }
            }
    }
    for (int r = 0; r < 4; r++) s[r] = fold_avx512(a[r], b[r]);
}

/* a row of iq4_xs blocks: each sub-block's 32 values looked up in its table of 16 (dequantize_iq4_xs's) */
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
 * with dl = d * (ls - 32) (dequantize_iq4_xs's operations); the sums in named registers (see quant_f32.c's
 * FUSED_32) */
#define FUSED_IQ4_XS_ROW(R, A, B)                                                                           \
    {                                                                                                       \
        const uint8_t *wb = w + R * stride + i * bytes;                                                     \
        const __m512 table = _mm512_mul_ps(_mm512_set1_ps(dl[R][j]), values);                               \
        const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(wb + 8 + 16 * j)));        \
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

/* q2_k and q3_k on AVX2 and AVX-512. Group g (values 16 g .. 16 g + 15) takes the crumbs of bytes
 * 16 (g % 2) + i of qs's chunk g / 8 at shift 2 ((g / 2) % 4) (crumb's layout) and, for q3_k, bit g / 2 of
 * hmask[16 (g % 2) + i]: the bytes are widened once per chunk and half (e = g % 2) and each value looked up
 * in the group's table of 8 (value n: dl * (n & 3) - ml for q2_k; dl * (n - 4) for q3_k, n the crumb plus 4
 * where hmask's bit is set), each entry computed as dequantize_q2_k and dequantize_q3_k compute a value. */
static const float K2_CRUMBS[2][8] = {{0, 1, 2, 3, 0, 1, 2, 3}, {-4, -3, -2, -1, 0, 1, 2, 3}};

/* group g's 16 values on AVX-512 (the table of 8 twice over: permutexvar reads the index's low 4 bits, so
 * q2_k's crumbs need no mask): q the group's bytes of qs widened, h of hmask */
AVX512_Q __attribute__((always_inline)) static inline __m512 k2_group_avx512(int three, int g, float dl, float ml,
                                                                            __m512i q, __m512i h) {
    const __m512 crumbs = _mm512_broadcast_f32x8(_mm256_loadu_ps(K2_CRUMBS[three]));
    __m512 table = _mm512_mul_ps(_mm512_set1_ps(dl), crumbs);
    __m512i idx = _mm512_srli_epi32(q, 2 * ((g / 2) % 4));
    if (three) { /* hmask's bit g / 2 set: the crumb as it is (+4) */
        idx = _mm512_and_si512(idx, _mm512_set1_epi32(3));
        const __mmask16 set = _mm512_test_epi32_mask(h, _mm512_set1_epi32(1 << (g / 2)));
        idx = _mm512_mask_or_epi32(idx, set, idx, _mm512_set1_epi32(4));
    } else {
        table = _mm512_sub_ps(table, _mm512_set1_ps(ml));
    }
    return _mm512_permutexvar_ps(idx, table);
}

/* FUSED_32 for q2_k and q3_k: 4 weight rows at a time, each group's values k2_group_avx512's; even groups go
 * to the sums of lanes 0..15, odd ones to lanes 16..31 */
#define FUSED_K2(NAME, QTYPE)                                                                               \
    AVX512_Q static void NAME(const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {     \
        const int three = QTYPE == Q3_K;                                                                    \
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
                        scale[g] = ((g < 8 ? sc[g] & 15 : sc[g - 8] >> 4) |                                 \
                                    (((sc[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;                    \
                    const __m512 sf = _mm512_cvtepi32_ps(_mm512_loadu_si512(scale));                        \
                    _mm512_storeu_ps(dl[r], _mm512_mul_ps(_mm512_set1_ps(vg_f16_at(wb + 108)), sf));        \
                } else {                                                                                    \
                    const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)wb));          \
                    const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(sc, _mm512_set1_epi32(15)));      \
                    const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(sc, 4));                         \
                    _mm512_storeu_ps(dl[r], _mm512_mul_ps(_mm512_set1_ps(vg_f16_at(wb + 80)), lo));         \
                    _mm512_storeu_ps(ml[r], _mm512_mul_ps(_mm512_set1_ps(vg_f16_at(wb + 82)), hi));         \
                }                                                                                           \
            }                                                                                               \
            for (int c = 0; c < 2; c++)                                                                     \
                for (int r = 0; r < 4; r++) {                                                               \
                    const uint8_t *wb = w + r * stride + i * bytes, *qs = wb + (three ? 32 : 16) + 32 * c;  \
                    const __m512i q0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));          \
                    const __m512i q1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qs + 16)));   \
                    __m512i h0 = q0, h1 = q1;                                                               \
                    if (three) {                                                                            \
                        h0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)wb));                    \
                        h1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(wb + 16)));             \
                    }                                                                                       \
                    for (int sh = 0; sh < 4; sh++)                                                          \
                        for (int e = 0; e < 2; e++) {                                                       \
                            const int g = 8 * c + 2 * sh + e;                                               \
                            const __m512 v = k2_group_avx512(three, g, dl[r][g], three ? 0.0f : ml[r][g],   \
                                                             e ? q1 : q0, e ? h1 : h0);                     \
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
 * fifth bit), the sums folded by vg_fold_avx2 */
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
    for (int r = 0; r < 2; r++) s[r] = vg_fold_avx2(a[r][0], a[r][1], a[r][2], a[r][3]);
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
    for (int r = 0; r < 2; r++) s[r] = vg_fold_avx2(a[r][0], a[r][1], a[r][2], a[r][3]);
}

/* group g's values 0..7 (*v0) and 8..15 (*v1) on AVX2: q0, q1 its bytes of qs widened, h0, h1 of hmask */
__attribute__((target("avx2"), always_inline)) static inline void k2_group_avx2(int three, int g, float dl,
                                                                                 float ml, __m256i q0,
                                                                                 __m256i q1, __m256i h0,
                                                                                 __m256i h1, __m256 *v0,
                                                                                 __m256 *v1) {
    __m256 table = _mm256_mul_ps(_mm256_set1_ps(dl), _mm256_loadu_ps(K2_CRUMBS[three]));
    if (!three) table = _mm256_sub_ps(table, _mm256_set1_ps(ml));
    const int sh = 2 * ((g / 2) % 4);
    const __m256i low2 = _mm256_set1_epi32(3);
    __m256i i0 = _mm256_and_si256(_mm256_srli_epi32(q0, sh), low2);
    __m256i i1 = _mm256_and_si256(_mm256_srli_epi32(q1, sh), low2);
    if (three) { /* hmask's bit g / 2 as bit 2 of the index */
        const __m256i four = _mm256_set1_epi32(4);
        i0 = _mm256_or_si256(i0, _mm256_and_si256(_mm256_slli_epi32(_mm256_srli_epi32(h0, g / 2), 2), four));
        i1 = _mm256_or_si256(i1, _mm256_and_si256(_mm256_slli_epi32(_mm256_srli_epi32(h1, g / 2), 2), four));
    }
    *v0 = _mm256_permutevar8x32_ps(table, i0); /* reads the index's low 3 bits */
    *v1 = _mm256_permutevar8x32_ps(table, i1);
}

/* the 8 bytes at p widened to 8 lanes of 32 bits */
__attribute__((target("avx2"), always_inline)) static inline __m256i widen8(const uint8_t *p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
}

/* a row of q2_k (three = 0) or q3_k blocks on AVX2 */
__attribute__((target("avx2,f16c"), always_inline)) static inline void dequantize_k2_avx2(int three,
                                                                                           const uint8_t *w,
                                                                                           int64_t nb, float *v) {
    const int64_t bytes = BLOCK_BYTES[three ? Q3_K : Q2_K];
    for (int64_t b = 0; b < nb; b++, v += 256) {
        const uint8_t *wb = w + b * bytes;
        float dl[16], ml[16];
        k2_scales(three, wb, dl, ml);
        for (int c = 0; c < 2; c++)
            for (int e = 0; e < 2; e++) {
                const uint8_t *qs = wb + (three ? 32 : 16) + 32 * c + 16 * e, *hm = three ? wb + 16 * e : qs;
                const __m256i q0 = widen8(qs), q1 = widen8(qs + 8), h0 = widen8(hm), h1 = widen8(hm + 8);
                for (int sh = 0; sh < 4; sh++) {
                    const int g = 8 * c + 2 * sh + e;
                    __m256 v0, v1;
                    k2_group_avx2(three, g, dl[g], three ? 0.0f : ml[g], q0, q1, h0, h1, &v0, &v1);
                    _mm256_storeu_ps(v + 16 * g, v0);
                    _mm256_storeu_ps(v + 16 * g + 8, v1);
                }
            }
    }
}
__attribute__((target("avx2,f16c"))) static void dequantize_q2_k_avx2(const uint8_t *w, int64_t nb, float *v) {
    dequantize_k2_avx2(0, w, nb, v);
}
__attribute__((target("avx2,f16c"))) static void dequantize_q3_k_avx2(const uint8_t *w, int64_t nb, float *v) {
    dequantize_k2_avx2(1, w, nb, v);
}

/* a row of q2_k (three = 0) or q3_k blocks on AVX-512: a group's 16 values in one lookup (the table of 8
 * twice over: permutexvar reads the index's low 4 bits) */
AVX512_Q __attribute__((always_inline)) static inline void dequantize_k2_avx512(int three, const uint8_t *w,
                                                                               int64_t nb, float *v) {
    const int64_t bytes = BLOCK_BYTES[three ? Q3_K : Q2_K];
    for (int64_t b = 0; b < nb; b++, v += 256) {
        const uint8_t *wb = w + b * bytes;
        float dl[16], ml[16];
        k2_scales(three, wb, dl, ml);
        for (int c = 0; c < 2; c++)
            for (int e = 0; e < 2; e++) {
                const uint8_t *qs = wb + (three ? 32 : 16) + 32 * c + 16 * e;
                const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)qs));
                const __m512i h = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(wb + 16 * e)));
                for (int sh = 0; sh < 4; sh++) {
                    const int g = 8 * c + 2 * sh + e;
                    _mm512_storeu_ps(v + 16 * g, k2_group_avx512(three, g, dl[g], three ? 0.0f : ml[g], q, h));
                }
            }
    }
}
AVX512_Q static void dequantize_q2_k_avx512(const uint8_t *w, int64_t nb, float *v) {
    dequantize_k2_avx512(0, w, nb, v);
}
AVX512_Q static void dequantize_q3_k_avx512(const uint8_t *w, int64_t nb, float *v) {
    dequantize_k2_avx512(1, w, nb, v);
}

/* a decode step's q2_k (three = 0) or q3_k products on AVX2: 2 weight rows at a time, each output's 32
 * partial sums in 4 vectors of 8; group g's values go to the sums of k = 16 (g % 2) + i (mod 32): vectors
 * 2 (g % 2) and 2 (g % 2) + 1, folded by vg_fold_avx2 */
__attribute__((target("avx2,fma,f16c"), always_inline)) static inline void fused_k2_avx2(
    int three, const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s) {
    const int64_t bytes = BLOCK_BYTES[three ? Q3_K : Q2_K];
    __m256 a[2][4];
    for (int r = 0; r < 2; r++)
        for (int l = 0; l < 4; l++) a[r][l] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const float *xb = x + 256 * i;
        float dl[2][16], ml[2][16];
        for (int r = 0; r < 2; r++) {
            const uint8_t *wb = w + r * stride + i * bytes;
            for (int64_t off = 0; off < bytes; off += 64)
                _mm_prefetch((const char *)(wb + 2 * stride + off), _MM_HINT_T0);
            k2_scales(three, wb, dl[r], ml[r]);
        }
        for (int c = 0; c < 2; c++)
            for (int e = 0; e < 2; e++) {
                __m256i q[2][4];
                for (int r = 0; r < 2; r++) {
                    const uint8_t *wb = w + r * stride + i * bytes;
                    const uint8_t *qs = wb + (three ? 32 : 16) + 32 * c + 16 * e;
                    const uint8_t *hm = three ? wb + 16 * e : qs; /* q2_k: unused */
                    q[r][0] = widen8(qs), q[r][1] = widen8(qs + 8);
                    q[r][2] = widen8(hm), q[r][3] = widen8(hm + 8);
                }
                for (int sh = 0; sh < 4; sh++) {
                    const int g = 8 * c + 2 * sh + e;
                    const __m256 x0 = _mm256_loadu_ps(xb + 16 * g), x1 = _mm256_loadu_ps(xb + 16 * g + 8);
                    for (int r = 0; r < 2; r++) {
                        __m256 v0, v1;
                        k2_group_avx2(three, g, dl[r][g], three ? 0.0f : ml[r][g], q[r][0], q[r][1], q[r][2],
                                      q[r][3], &v0, &v1);
                        a[r][2 * e] = _mm256_fmadd_ps(x0, v0, a[r][2 * e]);
                        a[r][2 * e + 1] = _mm256_fmadd_ps(x1, v1, a[r][2 * e + 1]);
                    }
                }
            }
    }
    for (int r = 0; r < 2; r++) s[r] = vg_fold_avx2(a[r][0], a[r][1], a[r][2], a[r][3]);
}
__attribute__((target("avx2,fma,f16c"))) static void fused_q2_k_avx2(const uint8_t *w, int64_t stride, int64_t nb,
                                                                      const float *x, float *s) {
    fused_k2_avx2(0, w, stride, nb, x, s);
}
__attribute__((target("avx2,fma,f16c"))) static void fused_q3_k_avx2(const uint8_t *w, int64_t stride, int64_t nb,
                                                                      const float *x, float *s) {
    fused_k2_avx2(1, w, stride, nb, x, s);
}

/* iq4_xs on AVX2: a row of blocks, and a decode step's products of 2 weight rows at a time; sub-block j's 32
 * values are vg_iq4_avx2's (dl * IQ4_VALUES[n], dequantize_iq4_xs's operations) and fill an output's 4
 * vectors of partial sums in order */
__attribute__((target("avx2,f16c"))) static void dequantize_iq4_xs_avx2(const uint8_t *w, int64_t nb, float *v) {
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *wb = w + i * BLOCK_BYTES[IQ4_XS];
        float dl[8];
        iq4_xs_scales(wb, dl);
        for (int j = 0; j < 8; j++, v += 32) {
            __m256 u[4];
            vg_iq4_avx2(_mm_loadu_si128((const __m128i *)(wb + 8 + 16 * j)), _mm256_set1_ps(dl[j]), u);
            for (int l = 0; l < 4; l++) _mm256_storeu_ps(v + 8 * l, u[l]);
        }
    }
}
__attribute__((target("avx2,fma,f16c"))) static void fused_iq4_xs_avx2(const uint8_t *w, int64_t stride,
                                                                        int64_t nb, const float *x, float *s) {
    const int64_t bytes = BLOCK_BYTES[IQ4_XS];
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *wa = w + i * bytes, *wb = wa + stride;
        float da[8], db[8];
        for (int64_t off = 0; off < bytes; off += 64) {
            _mm_prefetch((const char *)(wa + 2 * stride + off), _MM_HINT_T0);
            _mm_prefetch((const char *)(wa + 3 * stride + off), _MM_HINT_T0);
        }
        iq4_xs_scales(wa, da);
        iq4_xs_scales(wb, db);
        for (int j = 0; j < 8; j++) {
            const float *xj = x + 256 * i + 32 * j;
            const __m256 x0 = _mm256_loadu_ps(xj), x1 = _mm256_loadu_ps(xj + 8);
            const __m256 x2 = _mm256_loadu_ps(xj + 16), x3 = _mm256_loadu_ps(xj + 24);
            __m256 u[4], v[4];
            vg_iq4_avx2(_mm_loadu_si128((const __m128i *)(wa + 8 + 16 * j)), _mm256_set1_ps(da[j]), u);
            vg_iq4_avx2(_mm_loadu_si128((const __m128i *)(wb + 8 + 16 * j)), _mm256_set1_ps(db[j]), v);
            a0 = _mm256_fmadd_ps(x0, u[0], a0), a1 = _mm256_fmadd_ps(x1, u[1], a1);
            a2 = _mm256_fmadd_ps(x2, u[2], a2), a3 = _mm256_fmadd_ps(x3, u[3], a3);
            b0 = _mm256_fmadd_ps(x0, v[0], b0), b1 = _mm256_fmadd_ps(x1, v[1], b1);
            b2 = _mm256_fmadd_ps(x2, v[2], b2), b3 = _mm256_fmadd_ps(x3, v[3], b3);
        }
    }
    s[0] = vg_fold_avx2(a0, a1, a2, a3), s[1] = vg_fold_avx2(b0, b1, b2, b3);
}

/* the kernels by format code (0: none), which quant_f32.c's dispatch reads */
const vg_fused_fn VG_FUSED_K_AVX512[NQTYPES] = {
    [Q4_K] = fused_q4_k_avx512, [Q5_K] = fused_q5_k_avx512, [Q6_K] = fused_q6_k_avx512,
    [Q2_K] = fused_q2_k_avx512, [Q3_K] = fused_q3_k_avx512, [IQ4_XS] = fused_iq4_xs_avx512};
const vg_fused_fn VG_FUSED_K_AVX2[NQTYPES] = {
    [Q4_K] = fused_q4_k_avx2, [Q5_K] = fused_q5_k_avx2, [Q6_K] = fused_q6_k_avx2,
    [Q2_K] = fused_q2_k_avx2, [Q3_K] = fused_q3_k_avx2, [IQ4_XS] = fused_iq4_xs_avx2};
const vg_rows_fn VG_DEQUANTIZE_K_AVX512[NQTYPES] = {
    [Q4_K] = dequantize_q4_k_avx512, [Q5_K] = dequantize_q5_k_avx512, [Q6_K] = dequantize_q6_k_avx512,
    [Q2_K] = dequantize_q2_k_avx512, [Q3_K] = dequantize_q3_k_avx512, [IQ4_XS] = dequantize_iq4_xs_avx512};
const vg_rows_fn VG_DEQUANTIZE_K_AVX2[NQTYPES] = {
    [Q4_K] = dequantize_q4_k_avx2, [Q5_K] = dequantize_q5_k_avx2, [Q6_K] = dequantize_q6_k_avx2,
    [Q2_K] = dequantize_q2_k_avx2, [Q3_K] = dequantize_q3_k_avx2, [IQ4_XS] = dequantize_iq4_xs_avx2};
#endif
