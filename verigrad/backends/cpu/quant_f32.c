/* f32-activation products with quantized weights (GGML blocks, quant.h's formats): the de-quantization of
 * rows (every path) and the decode step's kernels (one activation row, each block de-quantized in
 * registers), one dispatch for every format (vg_dequantize_f32_row, vg_fused_decode_f32), and qembedding.
 * This file holds the 32-value formats' kernels, quant_f32_k.c the 256-value formats' (q4_k, q5_k, q6_k,
 * q2_k, q3_k, iq4_xs); quant_f32_tiles.c holds vg_qmatmul_f32 and its tiles of several activation rows.
 *
 * qmatmul's reference (ops/quant.py `lane_dot`), bit for bit: sum_k x[t, k] * w[n, k] with w dequantized
 * to f32 as the reference does, in 32 f32 partial sums (sum j takes k = j mod 32 in order, one fused
 * multiply-add rounded once a step), folded s[j] + s[j + h] for h = 16, 8, 4, 2, 1 (see ops/quant.py for
 * every layout). Every format has a vector path on AVX2 and on AVX-512 for both jobs: rows are de-quantized
 * 8 values (AVX2) or 16 (AVX-512) at a time, and a decode step de-quantizes each block in registers and
 * multiplies it at once (no row buffer), 2 (AVX2) or 4 (AVX-512) weight rows at a time. The 4-bit formats
 * (q5_0, q5_1, q5_k: 5-bit; q2_k, q3_k: 2- and 3-bit) look their values up in the block's (sub-block's,
 * group's) table of 16 (32, 8) on AVX-512 (q2_k and q3_k on AVX2 too), its scale times each value, computed
 * as the portable path computes a value; iq4_nl and iq4_xs look IQ4_VALUES up (AVX2: a byte shuffle).
 * Every path does the portable path's operations, so the same bits (vg_quant_simd chooses one, for tests).
 */
#include "quant.h"
#include "quant_blocks32.h"


/* ---------------------------------------------------------------- de-quantization, portable */

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

/* iq4_nl (d, 16 bytes of nibbles): d * IQ4_VALUES[q] */
static void dequantize_iq4_nl(const uint8_t *wb, float *v) {
    const float d = vg_f16_at(wb);
    for (int i = 0; i < 16; i++) {
        v[i] = d * (float)IQ4_VALUES[wb[2 + i] & 15];
        v[i + 16] = d * (float)IQ4_VALUES[wb[2 + i] >> 4];
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
        } else if (qtype == Q5_0 || qtype == Q5_1) {
            dequantize_q5(qtype, wb, v);
        } else if (qtype == IQ4_NL) {
            dequantize_iq4_nl(wb, v);
        } else {
            vg_dequantize_k_block(qtype, wb, v);
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
/* a block of q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl (qt) on AVX2: its 32 values, v[j] values 8j..8j+7, each
 * d * q' (q' = q less 8 or 16, as the format has it; iq4_nl: IQ4_VALUES[q]), plus m for q4_1 and q5_1:
 * dequantize_row's operations */
__attribute__((target("avx2,f16c"), always_inline)) static inline void block_avx2(int qt, const uint8_t *wb,
                                                                                   __m256 *v) {
    const __m256 d = _mm256_set1_ps(vg_f16_at(wb));
    if (qt == IQ4_NL) {
        vg_iq4_avx2(_mm_loadu_si128((const __m128i *)(wb + 2)), d, v);
        return;
    }
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

/* a row of a 32-value format's blocks on AVX2: block_avx2's values */
#define DEQUANTIZE_32_AVX2(NAME, QTYPE)                                                                     \
    __attribute__((target("avx2,f16c"))) static void NAME(const uint8_t *w, int64_t nb, float *v) {         \
        for (int64_t b = 0; b < nb; b++, v += 32) {                                                         \
            __m256 x[4];                                                                                    \
            block_avx2(QTYPE, w + b * BLOCK_BYTES[QTYPE], x);                                               \
            for (int j = 0; j < 4; j++) _mm256_storeu_ps(v + 8 * j, x[j]);                                  \
        }                                                                                                   \
    }
DEQUANTIZE_32_AVX2(dequantize_q8_0_avx2, Q8_0)
DEQUANTIZE_32_AVX2(dequantize_q4_0_avx2, Q4_0)
DEQUANTIZE_32_AVX2(dequantize_q4_1_avx2, Q4_1)
DEQUANTIZE_32_AVX2(dequantize_q5_0_avx2, Q5_0)
DEQUANTIZE_32_AVX2(dequantize_q5_1_avx2, Q5_1)
DEQUANTIZE_32_AVX2(dequantize_iq4_nl_avx2, IQ4_NL)

/* dot_f32 of x with the 2 rows w, w + stride of a 32-value format (block_avx2's), each block de-quantized
 * in registers and multiplied at once, each output's 32 partial sums in 4 vectors of 8 (named: see
 * FUSED_32), folded by vg_fold_avx2; the next 2 rows are fetched meanwhile */
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
        s[0] = vg_fold_avx2(a0, a1, a2, a3), s[1] = vg_fold_avx2(b0, b1, b2, b3);                           \
    }
FUSED_32_AVX2(fused_q8_0_avx2, Q8_0)
FUSED_32_AVX2(fused_q4_0_avx2, Q4_0)
FUSED_32_AVX2(fused_q4_1_avx2, Q4_1)
FUSED_32_AVX2(fused_q5_0_avx2, Q5_0)
FUSED_32_AVX2(fused_q5_1_avx2, Q5_1)
FUSED_32_AVX2(fused_iq4_nl_avx2, IQ4_NL)

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
                const __m512 d = _mm512_set1_ps(dd[c]), m = _mm512_set1_ps(mm[c]);                          \
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

/* the 32-value formats' kernels by code (0: none); quant_f32_k.c's VG_*_K_* tables hold the others' */
static const vg_fused_fn FUSED_AVX512[NQTYPES] = {
    [Q8_0] = fused_q8_0_avx512, [Q4_0] = fused_q4_0_avx512, [Q4_1] = fused_q4_1_avx512,
    [Q5_0] = fused_q5_0_avx512, [Q5_1] = fused_q5_1_avx512, [IQ4_NL] = fused_iq4_nl_avx512};
static const vg_fused_fn FUSED_AVX2[NQTYPES] = {
    [Q8_0] = fused_q8_0_avx2, [Q4_0] = fused_q4_0_avx2, [Q4_1] = fused_q4_1_avx2,
    [Q5_0] = fused_q5_0_avx2, [Q5_1] = fused_q5_1_avx2, [IQ4_NL] = fused_iq4_nl_avx2};
static const vg_rows_fn DEQUANTIZE_AVX512[NQTYPES] = {
    [Q8_0] = dequantize_q8_0_avx512, [Q4_0] = dequantize_q4_0_avx512, [Q4_1] = dequantize_q4_1_avx512,
    [Q5_0] = dequantize_q5_0_avx512, [Q5_1] = dequantize_q5_1_avx512, [IQ4_NL] = dequantize_iq4_nl_avx512};
static const vg_rows_fn DEQUANTIZE_AVX2[NQTYPES] = {
    [Q8_0] = dequantize_q8_0_avx2, [Q4_0] = dequantize_q4_0_avx2, [Q4_1] = dequantize_q4_1_avx2,
    [Q5_0] = dequantize_q5_0_avx2, [Q5_1] = dequantize_q5_1_avx2, [IQ4_NL] = dequantize_iq4_nl_avx2};
#endif

/* the format's kernels on exactly `level` (0: none; the portable code has no table) */
static vg_fused_fn fused_at(int qtype, int level) {
#if VG_X86
    const int k = BLOCK_VALUES[qtype] == 256;
    if (level == 2) return (k ? VG_FUSED_K_AVX512 : FUSED_AVX512)[qtype];
    if (level == 1) return (k ? VG_FUSED_K_AVX2 : FUSED_AVX2)[qtype];
#else
    (void)qtype, (void)level;
#endif
    return 0;
}
static vg_rows_fn rows_at(int qtype, int level) {
#if VG_X86
    const int k = BLOCK_VALUES[qtype] == 256;
    if (level == 2) return (k ? VG_DEQUANTIZE_K_AVX512 : DEQUANTIZE_AVX512)[qtype];
    if (level == 1) return (k ? VG_DEQUANTIZE_K_AVX2 : DEQUANTIZE_AVX2)[qtype];
#else
    (void)qtype, (void)level;
#endif
    return 0;
}

/* row `row` (nb blocks) de-quantized into v by the fastest path allowed (level: vg_quant_simd's; a level
 * without code for the format takes a lower one's), the portable path's values */
void vg_dequantize_f32_row(int qtype, const uint8_t *row, int64_t nb, float *v, int level) {
    for (int l = level < 2 ? level : 2; l >= 1; l--) {
        const vg_rows_fn f = rows_at(qtype, l);
        if (f) {
            f(row, nb, v);
            return;
        }
    }
    dequantize_row(qtype, row, nb, v);
}

/* a decode step's products of x with weight rows w + j stride (j < rows, rows >= 1) when a fused kernel
 * takes them (each block de-quantized in registers; AVX2's only on level 1, AVX-512's from 2): s[j] for the
 * rows it took; returns how many (0: none, the caller de-quantizes rows and multiplies them) */
int vg_fused_decode_f32(int qtype, int level, const uint8_t *w, int64_t stride, int64_t nb, int64_t rows,
                        const float *x, float *s) {
    const int take = level >= 2 ? 4 : 2;
    const vg_fused_fn f = fused_at(qtype, level >= 2 ? 2 : level);
    if (!f || rows < take) return 0;
    f(w, stride, nb, x, s);
    return take;
}

/* which jobs have code of their own on `level` (1: AVX2, 2: AVX-512) for the format (for tests and
 * benchmarks): bit 0 a decode step's fused kernel, bit 1 the de-quantization of rows */
int vg_quant_f32_kernels(int qtype, int level) {
    return (fused_at(qtype, level) ? 1 : 0) | (rows_at(qtype, level) ? 2 : 0);
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
