/* The fast path's own f32 GEMM kernels for AVX-512; matmul.c decides which products they take.
 *
 * An f32 c = alpha * a b^T + beta * c whose a and b^T are both stored with rows along k (an nn.Linear's
 * x @ W^T), computed as dot products on AVX-512 instead of by OpenBLAS: a block of 4x4 elements of c
 * keeps 16 vectors of partial sums (16 lanes each, one FMA per step of 16 in k), summed across the lanes
 * at the end by a fixed tree; the rows of a and b^T are read in place (nothing is packed), four of each
 * in L1 while their block is computed. Rows left over take blocks of 1-3 rows, columns left over blocks
 * of one column. Work units are a batch item's blocks of DOT_MC rows (fewer for a narrow c) x DOT_NC
 * columns of c. Row blocks start at multiples of 4 whatever the unit, so the shape alone places every
 * element in its block: the bits depend on neither the units nor the thread count.
 *
 * An f32 c = alpha * a @ b (beta 0) or c + a @ b whose b has rows along n, computed on AVX-512 instead of
 * by OpenBLAS: a block of up to 6 rows x 64 columns of c is 24 vectors of sums, to which each step in k
 * adds the outer product of 6 elements of a (a column of a's block, broadcast) and 64 of b (a row of
 * b's block, read in place: nothing is packed). k goes in blocks of OUTER_KC, the sums kept in c between
 * them (exactly: they are f32), so that a block of b stays in cache for all the rows of a work unit (at
 * most OUTER_MC rows, OUTER_NC columns; the rows shared evenly among the units of a column, in multiples
 * of 6: 128 rows are units of 66 and 62, where units of 96 and 32 left the second of two threads a third
 * of the first's work). Each element of c is one chain of FMAs in increasing k, from 0
 * (or c), times alpha at the end: its bits depend on neither the blocks nor the thread count.
 */
#include <stdint.h>

#include "matmul.h"
#include "vg.h"

#ifdef VG_X86 /* matmul.h: x86 with GCC or clang */
#define AVX512_FN __attribute__((target("avx2,fma,avx512f,avx512dq")))
#define AVX512_INLINE __attribute__((target("avx2,fma,avx512f,avx512dq"), always_inline)) static inline

/* A loaded vector kept in a register: GCC would otherwise fold the load into each FMA that reads it,
 * and the loads, not the FMAs, would bound the loop. */
#define KEEP_IN_REGISTER(v) __asm__("" : "+v"(v))
#endif

#define OUTER_KC 256 /* depth of a block of k */
#define OUTER_NC 64  /* columns of c a work unit */
#define OUTER_MC 96  /* rows of c a work unit at most (a multiple of 6) */

/* The rows of an outer-product work unit for a c of m rows: as few units as OUTER_MC allows, their rows
 * as even as multiples of 6 make them (the last unit takes the rest). */
int64_t vg_gemm_outer_rows(int64_t m) {
    int64_t units = cdiv(m, OUTER_MC);
    return imin(OUTER_MC, cdiv(cdiv(m, units), 6) * 6);
}

#define DOT_NC 16 /* columns of c a work unit */
#define DOT_MC 64 /* rows of c a work unit at most (a multiple of 4, as are its halvings down to 16) */

#ifdef VG_X86
/* The 16 sums of acc[0..15] across their lanes in one vector, lane 4 l + s the sum of acc[4 s + l]: sums of
 * halves, of quarters, then within each quarter. */
AVX512_INLINE __m512 dot_sums16(const __m512 *acc) {
    __m512 s[8], t[4];
    for (int i = 0; i < 8; i++)
        s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0x44),
                             _mm512_shuffle_f32x4(acc[2 * i], acc[2 * i + 1], 0xEE));
    for (int i = 0; i < 4; i++)
        t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], 0xDD));
    __m512 u0 = _mm512_add_ps(_mm512_unpacklo_ps(t[0], t[1]), _mm512_unpackhi_ps(t[0], t[1]));
    __m512 u1 = _mm512_add_ps(_mm512_unpacklo_ps(t[2], t[3]), _mm512_unpackhi_ps(t[2], t[3]));
    __m512d d0 = _mm512_castps_pd(u0), d1 = _mm512_castps_pd(u1);
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(d0, d1)), _mm512_castpd_ps(_mm512_unpackhi_pd(d0, d1)));
}

/* acc[R C] = the products of R rows of a (row stride lda) with C rows of b^T (ldb), over k: 16 lanes of
 * partial sums each, the last step's lanes past k zero. */
#define DOT_STEP(R, C, LOAD)                                                                                \
    for (int r = 0; r < C; r++) {                                                                           \
        bv[r] = LOAD(b + r * ldb + p);                                                                      \
        KEEP_IN_REGISTER(bv[r]);                                                                                    \
    }                                                                                                       \
    for (int q = 0; q < R; q++) {                                                                           \
        __m512 av = LOAD(a + q * lda + p);                                                                  \
        KEEP_IN_REGISTER(av);                                                                                       \
        for (int r = 0; r < C; r++) acc[q * C + r] = _mm512_fmadd_ps(av, bv[r], acc[q * C + r]);            \
    }
#define DOT_TAIL_LOAD(x) _mm512_maskz_loadu_ps(tail, x)
#define DOT_BLOCK(R, C)                                                                                     \
    AVX512_INLINE void dot_##R##x##C(const float *a, int64_t lda, const float *b, int64_t ldb, int64_t k,      \
                                  __m512 *acc) {                                                            \
        int64_t p = 0;                                                                                      \
        __m512 bv[C];                                                                                       \
        for (int q = 0; q < R * C; q++) acc[q] = _mm512_setzero_ps();                                       \
        for (; p + 16 <= k; p += 16) {                                                                      \
            DOT_STEP(R, C, _mm512_loadu_ps)                                                                 \
        }                                                                                                   \
        if (p < k) { /* the lanes past k zero */                                                            \
            __mmask16 tail = (__mmask16)((1u << (k - p)) - 1);                                              \
            DOT_STEP(R, C, DOT_TAIL_LOAD)                                                                   \
        }                                                                                                   \
    }
DOT_BLOCK(4, 4)
DOT_BLOCK(3, 4)
DOT_BLOCK(2, 4)
DOT_BLOCK(1, 4)
DOT_BLOCK(4, 1)
DOT_BLOCK(1, 1)

/* c = alpha * s + beta * c, c not read when beta == 0 (a product, then a sum) */
static inline float dot_out(float s, float alpha, float beta, const float *c) {
    return beta == 0.0f ? alpha * s : alpha * s + beta * *c;
}

/* Rows [i0, i1) (i0 a multiple of 4) x columns [j0, j1) of c. */
AVX512_FN static void dot_tile(const blas_job *g, const float *a, const float *b, float *c, int64_t i0,
                                int64_t i1, int64_t j0, int64_t j1) {
    int64_t lda = g->lda, ldb = g->ldb, ldc = g->ldc, k = g->k;
    float alpha = (float)g->alpha, beta = (float)g->beta;
    __m512 acc[16], rows[16];
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) {
        int64_t i = i0;
        for (; i + 4 <= i1; i += 4) {
            dot_4x4(a + i * lda, lda, b + j * ldb, ldb, k, acc);
            for (int q = 0; q < 4; q++) /* lane 4 q + l of the sums: row q, column l */
                for (int l = 0; l < 4; l++) rows[4 * l + q] = acc[4 * q + l];
            __m512 v = _mm512_mul_ps(dot_sums16(rows), _mm512_set1_ps(alpha));
            __m128 row[4] = {_mm512_castps512_ps128(v), _mm512_extractf32x4_ps(v, 1),
                             _mm512_extractf32x4_ps(v, 2), _mm512_extractf32x4_ps(v, 3)};
            for (int q = 0; q < 4; q++) {
                float *o = c + (i + q) * ldc + j;
                if (beta != 0.0f) row[q] = _mm_add_ps(row[q], _mm_mul_ps(_mm_set1_ps(beta), _mm_loadu_ps(o)));
                _mm_storeu_ps(o, row[q]);
            }
        }
        int64_t rest = i1 - i;
        if (rest == 3) dot_3x4(a + i * lda, lda, b + j * ldb, ldb, k, acc);
        if (rest == 2) dot_2x4(a + i * lda, lda, b + j * ldb, ldb, k, acc);
        if (rest == 1) dot_1x4(a + i * lda, lda, b + j * ldb, ldb, k, acc);
        for (int q = 0; q < rest; q++)
            for (int l = 0; l < 4; l++) {
                float *o = c + (i + q) * ldc + j + l;
                *o = dot_out(_mm512_reduce_add_ps(acc[4 * q + l]), alpha, beta, o);
            }
    }
    for (; j < j1; j++) {
        int64_t i = i0;
        for (; i + 4 <= i1; i += 4) {
            dot_4x1(a + i * lda, lda, b + j * ldb, ldb, k, acc);
            for (int q = 0; q < 4; q++) {
                float *o = c + (i + q) * ldc + j;
                *o = dot_out(_mm512_reduce_add_ps(acc[q]), alpha, beta, o);
            }
        }
        for (; i < i1; i++) {
            dot_1x1(a + i * lda, lda, b + j * ldb, ldb, k, acc);
            float *o = c + i * ldc + j;
            *o = dot_out(_mm512_reduce_add_ps(acc[0]), alpha, beta, o);
        }
    }
}

static void dot_chunk(void *ctx, int64_t lo, int64_t hi) {
    blas_job *g = ctx;
    int64_t row_units = cdiv(g->m, g->mb), col_units = cdiv(g->n, DOT_NC);
    for (int64_t u = lo; u < hi; u++) {
        int64_t item = u / (row_units * col_units), rest = u % (row_units * col_units);
        int64_t i0 = rest / col_units * g->mb, j0 = rest % col_units * DOT_NC;
        int64_t i1 = imin(i0 + g->mb, g->m), j1 = imin(j0 + DOT_NC, g->n);
        float *c = (float *)g->c + g->offs[3 * item + 2];
        dot_tile(g, (const float *)g->a + g->offs[3 * item], (const float *)g->b + g->offs[3 * item + 1], c, i0,
                 i1, j0, j1);
        if (g->check && !g->finite(c + i0 * g->ldc + j0, i1 - i0, j1 - j0, g->ldc))
            __atomic_store_n(&g->bad, 1, __ATOMIC_RELAXED);
    }
}

int vg_gemm_dot_product(blas_job *g, int64_t batch, int threads) {
    /* rows a unit: DOT_MC, halved down to 16 while there are fewer than 4 units (a narrow c) */
    g->mb = DOT_MC;
    while (g->mb > 16 && batch * cdiv(g->m, g->mb) * cdiv(g->n, DOT_NC) < 4) g->mb /= 2;
    int64_t units = batch * cdiv(g->m, g->mb) * cdiv(g->n, DOT_NC);
    vg_parallel_for(units, cdiv(BLAS_THREAD_WORK, g->mb * DOT_NC * g->k), threads, dot_chunk, g);
    return !g->bad;
}


/* c[R rows x V vectors, the last one's lanes `last`] = (from_c ? c : 0) + a's R rows (element (q, p) at
 * a[q rsa + p csa]) @ b's kc rows (row stride ldb), times scale */
#define OUTER_BLOCK(R, V)                                                                                   \
    AVX512_FN static void outer_##R##x##V(const float *a, int64_t rsa, int64_t csa, const float *b,       \
                                           int64_t ldb, int64_t kc, float *c, int64_t ldc, int from_c,      \
                                           float scale, __mmask16 last) {                                   \
        __m512 acc[R][V];                                                                                   \
        _Pragma("GCC unroll 8") for (int q = 0; q < R; q++)                                                 \
        _Pragma("GCC unroll 8") for (int v = 0; v < V; v++)                                                 \
            acc[q][v] = from_c ? _mm512_maskz_loadu_ps(v == V - 1 ? last : 0xFFFF, c + q * ldc + 16 * v)    \
                               : _mm512_setzero_ps();                                                       \
        for (int64_t p = 0; p < kc; p++) {                                                                  \
            __m512 bv[V];                                                                                   \
            _Pragma("GCC unroll 8") for (int v = 0; v < V; v++) {                                           \
                bv[v] = _mm512_maskz_loadu_ps(v == V - 1 ? last : 0xFFFF, b + p * ldb + 16 * v);            \
                KEEP_IN_REGISTER(bv[v]);                                                                            \
            }                                                                                               \
            _Pragma("GCC unroll 8") for (int q = 0; q < R; q++) {                                           \
                __m512 av = _mm512_set1_ps(a[q * rsa + p * csa]);                                           \
                _Pragma("GCC unroll 8") for (int v = 0; v < V; v++)                                         \
                    acc[q][v] = _mm512_fmadd_ps(av, bv[v], acc[q][v]);                                      \
            }                                                                                               \
        }                                                                                                   \
        _Pragma("GCC unroll 8") for (int q = 0; q < R; q++)                                                 \
        _Pragma("GCC unroll 8") for (int v = 0; v < V; v++) {                                               \
            __m512 out = scale == 1.0f ? acc[q][v] : _mm512_mul_ps(acc[q][v], _mm512_set1_ps(scale));       \
            _mm512_mask_storeu_ps(c + q * ldc + 16 * v, v == V - 1 ? last : 0xFFFF, out);                   \
        }                                                                                                   \
    }
#define OUTER_BLOCKS(R) OUTER_BLOCK(R, 1) OUTER_BLOCK(R, 2) OUTER_BLOCK(R, 3) OUTER_BLOCK(R, 4)
OUTER_BLOCKS(1)
OUTER_BLOCKS(2)
OUTER_BLOCKS(3)
OUTER_BLOCKS(4)
OUTER_BLOCKS(5)
OUTER_BLOCKS(6)

typedef void (*outer_fn)(const float *, int64_t, int64_t, const float *, int64_t, int64_t, float *, int64_t, int,
                         float, __mmask16);
#define OUTER_ROW(R) {outer_##R##x1, outer_##R##x2, outer_##R##x3, outer_##R##x4}
static const outer_fn outer_blocks[6][4] = {OUTER_ROW(1), OUTER_ROW(2), OUTER_ROW(3),
                                            OUTER_ROW(4), OUTER_ROW(5), OUTER_ROW(6)};

static void outer_chunk(void *ctx, int64_t lo, int64_t hi) {
    blas_job *g = ctx;
    int64_t row_units = cdiv(g->m, g->mb), col_units = cdiv(g->n, OUTER_NC);
    int64_t rsa = g->ta == 111 ? g->lda : 1, csa = g->ta == 111 ? 1 : g->lda;
    int beta_one = g->beta != 0.0;
    for (int64_t u = lo; u < hi; u++) {
        int64_t item = u / (row_units * col_units), rest = u % (row_units * col_units);
        int64_t i0 = rest / col_units * g->mb, j0 = rest % col_units * OUTER_NC;
        int64_t i1 = imin(i0 + g->mb, g->m), cols = imin(OUTER_NC, g->n - j0), vectors = cdiv(cols, 16);
        __mmask16 last = (__mmask16)(cols % 16 ? (1u << (cols % 16)) - 1 : 0xFFFF);
        const float *a = (const float *)g->a + g->offs[3 * item];
        const float *b = (const float *)g->b + g->offs[3 * item + 1] + j0;
        float *c = (float *)g->c + g->offs[3 * item + 2] + j0;
        for (int64_t p0 = 0; p0 < g->k; p0 += OUTER_KC) {
            int64_t kc = imin(OUTER_KC, g->k - p0);
            float scale = p0 + kc == g->k ? (float)g->alpha : 1.0f;
            for (int64_t i = i0; i < i1; i += 6)
                outer_blocks[imin(6, i1 - i) - 1][vectors - 1](a + i * rsa + p0 * csa, rsa, csa, b + p0 * g->ldb,
                                                                g->ldb, kc, c + i * g->ldc, g->ldc,
                                                                p0 > 0 || beta_one, scale, last);
        }
        if (g->check && !g->finite(c + i0 * g->ldc, i1 - i0, cols, g->ldc))
            __atomic_store_n(&g->bad, 1, __ATOMIC_RELAXED);
    }
}

int vg_gemm_outer_product(blas_job *g, int64_t batch, int threads) {
    g->mb = vg_gemm_outer_rows(g->m);
    int64_t units = batch * cdiv(g->m, g->mb) * cdiv(g->n, OUTER_NC);
    vg_parallel_for(units, cdiv(BLAS_THREAD_WORK, g->mb * OUTER_NC * g->k), threads, outer_chunk, g);
    return !g->bad;
}
#else /* matmul.c never calls these here (vg_has_avx512 is 0) */
#define NOT_HERE(NAME)                                                                        \
    int NAME(blas_job *g, int64_t batch, int threads) {                                       \
        (void)g, (void)batch, (void)threads;                                                  \
        return 1;                                                                             \
    }
NOT_HERE(vg_gemm_dot_product)
NOT_HERE(vg_gemm_outer_product)
#endif

