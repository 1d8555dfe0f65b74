/* What the quantized products share: the GGML block formats' codes and sizes, small readers of a block's
 * bytes, and the choice of vector path. quant.c holds the 8-bit-activation products of the 32-value
 * formats, quant_k8.c those of the 256-value formats, quant_f32.c the f32-activation decode steps and the
 * de-quantization (qembedding) with quant_f32_k.c's kernels of the 256-value formats, quant_f32_tiles.c the
 * f32 products of several activation rows (quant_f32_k_rows.c the 256-value formats' batched steps). The
 * layouts are those of ops/quant.py. */
#ifndef VG_QUANT_H
#define VG_QUANT_H
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vg.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define VG_X86 1
#else
#define VG_X86 0
#endif

enum { Q8_0 = 0, Q4_0 = 1, Q4_1 = 2, Q4_K = 3, Q6_K = 4, Q5_K = 5, Q5_0 = 6, Q5_1 = 7, Q2_K = 8, Q3_K = 9 };
enum { IQ4_NL = 10, IQ4_XS = 11, NQTYPES = 12 };
static const int64_t BLOCK_BYTES[NQTYPES] = {34, 18, 20, 144, 210, 176, 22, 24, 84, 110, 18, 136};
static const int64_t BLOCK_VALUES[NQTYPES] = {32, 32, 32, 256, 256, 256, 32, 32, 256, 256, 32, 256};
/* iq4_nl's and iq4_xs's values of the 16 nibbles */
static const int8_t IQ4_VALUES[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* level 0, 1 or 2: the most vector path allowed (portable, AVX2, AVX-512); -1 leaves it; returns the path
 * taken now (after the change), capped at what the machine has (quant.c) */
int vg_quant_simd(int level);

/* the little-endian 32 bits at p */
static inline int32_t load32(const uint8_t *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* q4_k/q5_k's 6-bit scale and min of sub-block j from the 12 bytes s */
static inline void k4_scale(const uint8_t *s, int j, int *sc, int *m) {
    *sc = j < 4 ? s[j] & 63 : (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    *m = j < 4 ? s[j + 4] & 63 : (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
}
/* quant_f32.c's f32 products, shared with quant_f32_tiles.c: the f32 sum of x[i] * v[i] by qmatmul's rule;
 * a row of nb blocks de-quantized by the fastest path up to `level`; a decode step's fused products of up
 * to `rows` weight rows (returns how many it took, 0 for none) */
float vg_dot_f32(const float *x, const float *v, int64_t k);
void vg_dequantize_f32_row(int qtype, const uint8_t *row, int64_t nb, float *v, int level);
int vg_fused_decode_f32(int qtype, int level, const uint8_t *w, int64_t stride, int64_t nb, int64_t rows,
                        const float *x, float *s);

/* quant_f32.c's kernels of a format, by code (0: none): a decode step's fused products of x with 2 (AVX2) or
 * 4 (AVX-512) weight rows w + j stride into s[j]; a row of nb blocks de-quantized into v */
typedef void (*vg_fused_fn)(const uint8_t *w, int64_t stride, int64_t nb, const float *x, float *s);
typedef void (*vg_rows_fn)(const uint8_t *w, int64_t nb, float *v);
/* quant_f32_k.c, the 256-value formats': one block de-quantized by the portable code; the vector kernels */
void vg_dequantize_k_block(int qtype, const uint8_t *wb, float *v);
/* quant_f32_k_rows.c's products of t = 2..8 activation rows (x + u k) with a K format's weight rows on
 * AVX-512: a kernel taking rn <= *most weight rows w + j stride into s[u * most + j] (the signature of
 * quant_f32_tiles.c's FEW_ROWS), or 0 where none takes the format and count */
typedef void (*vg_few_fn)(const uint8_t *w, int64_t stride, int64_t nb, int rn, const float *x, int64_t k,
                          float *s);
vg_few_fn vg_few_rows_k_avx512(int qtype, int64_t t, int *most);
/* whether one of them ran since the last call with reset set (for tests) */
int vg_k_rows_taken(int reset);
#if VG_X86
extern const vg_fused_fn VG_FUSED_K_AVX512[NQTYPES], VG_FUSED_K_AVX2[NQTYPES];
extern const vg_rows_fn VG_DEQUANTIZE_K_AVX512[NQTYPES], VG_DEQUANTIZE_K_AVX2[NQTYPES];
#endif

#if VG_X86
/* dot_f32's fold of 32 partial sums held as 4 vectors of 8 (sum j in lane j % 8 of vector j / 8) */
__attribute__((target("avx2"), always_inline)) static inline float vg_fold_avx2(__m256 a0, __m256 a1, __m256 a2,
                                                                                 __m256 a3) {
    __m256 e = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3)); /* h = 16, then 8 */
    __m128 f = _mm_add_ps(_mm256_castps256_ps128(e), _mm256_extractf128_ps(e, 1));
    f = _mm_add_ps(f, _mm_movehl_ps(f, f));
    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));
}
/* iq4_nl's and iq4_xs's 32 values of 16 bytes n (low nibbles: values 0..15, high nibbles: 16..31) with scale
 * d: v[j] values 8j..8j+7, each d * IQ4_VALUES[nibble] (the portable path's operations; a byte shuffle looks
 * the values up) */
__attribute__((target("avx2"), always_inline)) static inline void vg_iq4_avx2(__m128i n, __m256 d, __m256 *v) {
    const __m128i values = _mm_loadu_si128((const __m128i *)IQ4_VALUES), low4 = _mm_set1_epi8(15);
    const __m128i lo = _mm_shuffle_epi8(values, _mm_and_si128(n, low4));
    const __m128i hi = _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(n, 4), low4));
    const __m128i parts[4] = {lo, _mm_srli_si128(lo, 8), hi, _mm_srli_si128(hi, 8)};
    for (int j = 0; j < 4; j++) v[j] = _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(parts[j])));
}
#define AVX512_Q __attribute__((target("avx2,f16c,avx512f,avx512dq")))
/* The tiles' multiply-adds of TN activation rows by RN de-quantized weight vectors v[j]: a[u][j] += x_u v[j],
 * x_u loaded once from X (an expression of u: row u's vector) for its RN products (the empty asm keeps GCC
 * from loading it again for each), then (VG_TILE_KEEP) the accumulators kept in sums[u RN + j] */
#define VG_TILE_FMAS(a, v, TN, RN, X)                                                                      \
    for (int u = 0; u < (TN); u++) {                                                                       \
        __m512 xv = _mm512_loadu_ps(X);                                                                    \
        __asm__("" : "+v"(xv));                                                                            \
        for (int j = 0; j < (RN); j++) a[u][j] = _mm512_fmadd_ps(xv, v[j], a[u][j]);                       \
    }
#define VG_TILE_KEEP(a, sums, TN, RN)                                                                      \
    for (int u = 0; u < (TN); u++)                                                                         \
        for (int j = 0; j < (RN); j++) (sums)[u * (RN) + j] = a[u][j];
/* dot_f32's fold of its 32 partial sums: a holds sums 0..15, b 16..31 */
AVX512_Q __attribute__((always_inline)) static inline float fold_avx512(__m512 a, __m512 b) {
    __m512 s = _mm512_add_ps(a, b);                                                                 /* h = 16 */
    __m256 e = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));           /* 8 */
    __m128 f = _mm_add_ps(_mm256_castps256_ps128(e), _mm256_extractf128_ps(e, 1));                /* 4 */
    f = _mm_add_ps(f, _mm_movehl_ps(f, f));                                                         /* 2 */
    return _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));                                        /* 1 */
}
#endif

/* x's 8-bit activations: quant.c's blocks of 32 (q8, d, d * sum(q), sum(q) per block) and quant_k8.c's
 * llama.cpp q8_K (q8, d per 256, bsums per 16); quant_k8.c's quantization (0, or -1 when out of memory),
 * its free (of a zeroed or quantized k8_acts) and product (out[i, r], rows out_stride apart) */
typedef struct {
    int8_t *qx;
    double *dx, *dxs;
    int32_t *sx;
} q8_acts;
typedef struct {
    int8_t *qx;
    double *dx;
    int16_t *bsums;
} k8_acts;
int vg_k8_quantize(const float *x, int64_t t, int64_t k, k8_acts *a);
void vg_k8_free(k8_acts *a);
void vg_k8_product(int qtype, const uint8_t *w, int64_t n, int64_t k, int64_t t, const k8_acts *a, float *out,
                   int64_t out_stride, int64_t min_rows, int threads);
/* defined in rows.c: rms_norm's kernel (the reference's bits) */
void vg_rms_norm_f32(const float *x, const float *w, float *out, int64_t rows, int64_t n, double eps,
                     int64_t block, int64_t min_rows, int threads);

/* q8vnni: quant_vnni.c's AVX-512 VNNI products of the 32-value formats (vg_quant_simd level 3). Whether
 * it takes the format; rows r.. of a band (before hi) 8 at a time against the t activation rows of
 * quant.c's qmatmul_q8 (out f32[t, n]), returning the first row left (fewer than 8 before hi). */
int vg_q8_vnni_takes(int qtype);
int64_t vg_q8_rows8_vnni(int qtype, const uint8_t *w, int64_t r, int64_t hi, int64_t n, int64_t k, int64_t t,
                         const int8_t *qx, const double *dx, const double *dxs, const int32_t *sx, float *out);
/* quant_amx.c's AMX products of q8_0 on 5 or more activation rows, taken on the VNNI level where the CPU
 * and the OS allow the tiles: whether they are taken now (allow: 1 allows them, 0 forbids them, -1 leaves
 * it); whether they take the format on t rows; rows r.. of a band 16 at a time (as vg_q8_rows8_vnni,
 * returning the first row left) */
int vg_q8_amx(int allow);
int vg_q8_amx_takes(int qtype, int64_t t);
int64_t vg_q8_rows16_amx(int qtype, const uint8_t *w, int64_t r, int64_t hi, int64_t n, int64_t k, int64_t t,
                         const int8_t *qx, const double *dx, float *out);
#endif
