/* vg_qmatmul_f32: out[t, n] = qmatmul's reference (ops/quant.py `lane_dot`), bit for bit (quant_f32.c gives
 * the summation rule). A decode step (one activation row) takes quant_f32.c's fused kernels where they
 * exist; otherwise rows are de-quantized into a row buffer and multiplied 4 rows at a time on AVX-512, in
 * tiles of up to 3 activation rows by 4 weight rows (fewer weight rows at a band's end: up to 4 activation
 * rows by 2), the partial sums in vector lanes (AVX2: two activation rows by one weight row). Each output
 * is summed as a tile of one sums it: a row's bits do not depend on how many rows there are or what they
 * hold.
 *
 * Threads take bands of weight rows (each reads only its band); every output is computed by one thread
 * in one order, so every thread count gives the same bits.
 */
#include "quant.h"

typedef struct {
    int qtype;
    const uint8_t *w;
    int64_t n, k, t;
    const float *x;
    float *out;
    int avx2, avx512;    /* the vector paths taken (vg_quant_simd) */
    volatile int failed; /* a band could not allocate its row buffer */
} fjob;

#if VG_X86
/* dot_f32 of TN activation rows (x + u xs) with RN de-quantized weight rows (v + j vs), 16 f32 lanes, each
 * output's 32 partial sums in two vectors: s[u RN + j], each as dot_f32 sums it */
#define DOTS_AVX512(NAME, TN, RN)                                                                          \
    AVX512_Q static void NAME(const float *x, int64_t xs, const float *v, int64_t vs, int64_t k, float *s) { \
        __m512 a[TN][RN], b[TN][RN];                                                                       \
        for (int u = 0; u < TN; u++)                                                                       \
            for (int j = 0; j < RN; j++) a[u][j] = b[u][j] = _mm512_setzero_ps();                          \
        for (int64_t i = 0; i < k; i += 32) {                                                              \
            for (int u = 0; u < TN; u++) {                                                                 \
                __m512 x0 = _mm512_loadu_ps(x + u * xs + i), x1 = _mm512_loadu_ps(x + u * xs + i + 16);    \
                for (int j = 0; j < RN; j++) {                                                             \
                    a[u][j] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(v + j * vs + i), a[u][j]);               \
                    b[u][j] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(v + j * vs + i + 16), b[u][j]);          \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        for (int u = 0; u < TN; u++)                                                                       \
            for (int j = 0; j < RN; j++) s[u * RN + j] = fold_avx512(a[u][j], b[u][j]);                    \
    }
DOTS_AVX512(dot1x1_avx512, 1, 1)
DOTS_AVX512(dot2x1_avx512, 2, 1)
DOTS_AVX512(dot3x1_avx512, 3, 1)
DOTS_AVX512(dot4x1_avx512, 4, 1)
DOTS_AVX512(dot1x2_avx512, 1, 2)
DOTS_AVX512(dot2x2_avx512, 2, 2)
DOTS_AVX512(dot3x2_avx512, 3, 2)
DOTS_AVX512(dot4x2_avx512, 4, 2)
DOTS_AVX512(dot1x3_avx512, 1, 3)
DOTS_AVX512(dot1x4_avx512, 1, 4)
DOTS_AVX512(dot2x4_avx512, 2, 4)
DOTS_AVX512(dot3x4_avx512, 3, 4)
typedef void (*dots_fn)(const float *, int64_t, const float *, int64_t, int64_t, float *);
/* DOTS4[TN - 1]: tiles of up to 3 activation rows by 4 weight rows (24 accumulators: each activation
 * vector, read from L2 in a long prompt, serves 4 weight rows; 4 by 2 took 30% longer on a 64-token prompt,
 * 4 by 4 spilled), DOTS[RN - 1][TN - 1] the 1 to 3 weight rows at a band's end, in tiles of up to 4
 * activation rows, and ROW_DOTS[RN - 1] one activation row by up to 4 weight rows (8 chains of fused
 * multiply-adds in flight). Every tile sums each output as dot1x1 does, so a row's bits do not depend on
 * the tile it falls in (how many activation rows there are). */
static const dots_fn DOTS[2][4] = {{dot1x1_avx512, dot2x1_avx512, dot3x1_avx512, dot4x1_avx512},
                                   {dot1x2_avx512, dot2x2_avx512, dot3x2_avx512, dot4x2_avx512}};
static const dots_fn ROW_DOTS[4] = {dot1x1_avx512, dot1x2_avx512, dot1x3_avx512, dot1x4_avx512};
static const dots_fn DOTS4[3] = {dot1x4_avx512, dot2x4_avx512, dot3x4_avx512};

/* dot_f32 of TN (1 or 2) activation rows (x, x + xs) with one weight row v, 8 lanes (each output's 32 partial
 * sums in 4 vectors): s[u] */
#define DOTS_AVX2(NAME, TN)                                                                                \
    __attribute__((target("avx2,fma"))) static void NAME(const float *x, int64_t xs, const float *v, int64_t k, \
                                                         float *s) {                                       \
        __m256 a[TN][4];                                                                                   \
        for (int u = 0; u < TN; u++)                                                                       \
            for (int j = 0; j < 4; j++) a[u][j] = _mm256_setzero_ps();                                     \
        for (int64_t i = 0; i < k; i += 32)                                                                \
            for (int j = 0; j < 4; j++) {                                                                  \
                __m256 w = _mm256_loadu_ps(v + i + 8 * j);                                                 \
                for (int u = 0; u < TN; u++)                                                               \
                    a[u][j] = _mm256_fmadd_ps(_mm256_loadu_ps(x + u * xs + i + 8 * j), w, a[u][j]);        \
            }                                                                                              \
        for (int u = 0; u < TN; u++) {                                                                     \
            __m256 e = _mm256_add_ps(_mm256_add_ps(a[u][0], a[u][2]), _mm256_add_ps(a[u][1], a[u][3]));    \
            __m128 f = _mm_add_ps(_mm256_castps256_ps128(e), _mm256_extractf128_ps(e, 1));                \
            f = _mm_add_ps(f, _mm_movehl_ps(f, f));                                                         \
            s[u] = _mm_cvtss_f32(_mm_add_ss(f, _mm_movehdup_ps(f)));                                       \
        }                                                                                                  \
    }
DOTS_AVX2(dot1_avx2, 1)
DOTS_AVX2(dot2_avx2, 2)
#endif


/* row r of w de-quantized into v (the vector path's way, the same values) */
static void dequantize_into(const fjob *p, int avx2, int avx512, int64_t r, int64_t nb, int64_t stride, float *v) {
    const uint8_t *row = p->w + r * stride;
#if VG_X86
    for (int64_t off = 0; off < stride; off += 64) /* the next row */
        _mm_prefetch((const char *)(row + stride + off), _MM_HINT_T0);
#endif
    vg_dequantize_f32_row(p->qtype, row, nb, v, avx512 ? 2 : avx2);
}

static void f32_band(void *ctx, int64_t lo, int64_t hi) {
    fjob *p = (fjob *)ctx;
    const int64_t nb = p->k / BLOCK_VALUES[p->qtype], stride = nb * BLOCK_BYTES[p->qtype], k = p->k;
    const int avx2 = p->avx2, avx512 = p->avx512;
    float stack[8192];
    float *v = 4 * k <= 8192 ? stack : malloc(sizeof(float) * (size_t)(4 * k));
    if (!v) {
        p->failed = 1;
        return;
    }
    for (int64_t r = lo; r < hi;) {
        /* AVX-512 de-quantizes up to 4 weight rows, then multiplies them with one activation row, or in
         * tiles (DOTS4, DOTS: each weight and activation vector loaded once for the tile) */
        const int rn = avx512 ? (hi - r < 4 ? (int)(hi - r) : 4) : 1;
#if VG_X86
        float s[12];
#endif
        if (p->t == 1) { /* a decode step: no row buffer where a fused kernel takes the rows */
            float f[4];
            const int done = vg_fused_decode_f32(p->qtype, avx512 ? 2 : avx2, p->w + r * stride, stride, nb,
                                                 hi - r, p->x, f);
            for (int j = 0; j < done; j++) p->out[r + j] = f[j];
            if (done) {
                r += done;
                continue;
            }
        }
        for (int j = 0; j < rn; j++) dequantize_into(p, avx2, avx512, r + j, nb, stride, v + j * k);
        int64_t t = 0;
#if VG_X86
        if (avx512 && p->t == 1) {
            ROW_DOTS[rn - 1](p->x, k, v, k, k, s);
            for (int j = 0; j < rn; j++) p->out[r + j] = s[j];
            t = 1;
        } else if (avx512 && rn == 4) {
            for (t = 0; t < p->t; t += 3) {
                const int tn = p->t - t < 3 ? (int)(p->t - t) : 3;
                DOTS4[tn - 1](p->x + t * k, k, v, k, k, s);
                for (int u = 0; u < tn; u++)
                    for (int j = 0; j < 4; j++) p->out[(t + u) * p->n + r + j] = s[u * 4 + j];
            }
        } else if (avx512) {
            for (int j0 = 0; j0 < rn; j0 += 2) {
                const int rj = rn - j0 < 2 ? rn - j0 : 2;
                for (t = 0; t < p->t; t += 4) {
                    const int tn = p->t - t < 4 ? (int)(p->t - t) : 4;
                    DOTS[rj - 1][tn - 1](p->x + t * k, k, v + j0 * k, k, k, s);
                    for (int u = 0; u < tn; u++)
                        for (int j = 0; j < rj; j++) p->out[(t + u) * p->n + r + j0 + j] = s[u * rj + j];
                }
            }
        } else if (avx2) {
            for (; t + 2 <= p->t; t += 2) { /* two activation rows share each weight vector */
                dot2_avx2(p->x + t * k, k, v, k, s);
                for (int u = 0; u < 2; u++) p->out[(t + u) * p->n + r] = s[u];
            }
            if (t < p->t) dot1_avx2(p->x + t * k, k, v, k, s), p->out[t * p->n + r] = s[0], t++;
        }
#endif
        for (; t < p->t; t++) p->out[t * p->n + r] = vg_dot_f32(p->x + t * k, v, k);
        r += rn;
    }
    if (v != stack) free(v);
}

/* out f32[t, n] = x f32[t, k] @ dequantize(w)^T, each output as dot_f32 sums it; returns 0, or -1 when out
 * of memory */
int vg_qmatmul_f32(int qtype, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t, float *out,
                   int64_t min_rows, int threads) {
    const int level = vg_quant_simd(-1);
    fjob p = {.qtype = qtype, .w = w, .n = n, .k = k, .t = t, .x = x, .out = out, .avx2 = level >= 1,
              .avx512 = level >= 2, .failed = 0};
    vg_parallel_for(n, min_rows, threads, f32_band, &p);
    return p.failed ? -1 : 0;
}
