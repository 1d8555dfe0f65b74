/* GEMM, GEMV, dot and axpy for f32 and f64: the exact path, and `vg_gemm`, which runs a product on the
 * exact path or the fast one (matmul_blas.c: tiles of OpenBLAS calls, or on AVX-512, for the f32 shapes
 * where they measured faster, the dot-product and outer-product kernels of matmul_avx512.c).
 *
 * Exact path: every output element is sum_k a[i,k] * b[k,j] accumulated in double in increasing k (a
 * product, then a sum: no fused multiply-add), then alpha * sum + beta * c in double, rounded once to the
 * output type. An element is computed whole by one thread, so any thread count gives the same bits. The
 * AVX2 micro-kernel multiplies and adds separately, so it gives the portable kernel's bits. As in the
 * reference BLAS, c is not read when beta == 0, and a and b are not read when alpha == 0 or k == 0.
 *
 * Operands are given by a base pointer, element strides (any sign; 0 broadcasts) and, for batches, one
 * element offset per batch item and operand.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"
#include "vg.h"

#define MR 6   /* micro-tile rows */
#define NR 8   /* micro-tile columns */
#define MC 48  /* rows of a work unit (a multiple of MR) */
#define NC 64  /* columns of a work unit (a multiple of NR) */
#define KC 256 /* depth of a packed block */
#define MIN_UNIT_WORK 65536 /* multiply-adds a thread is given at least */

/* ---------------------------------------------------------------- micro-kernels (double) */

/* w[MR x NR] (row stride NC) = (first ? 0 : w) + sum over kc of a[k, :MR] (outer) b[k, :NR], in order:
 * a product, then a sum. GCC/Clang vectors of two doubles (SSE2, NEON), four columns at a time. */
typedef double v2d __attribute__((vector_size(16)));

static void tile_portable(int64_t kc, const double *a, const double *b, double *w, int first) {
    for (int h = 0; h < NR; h += 4) {
        v2d acc[MR][2];
        for (int i = 0; i < MR; i++)
            for (int q = 0; q < 2; q++) {
                if (first)
                    acc[i][q] = (v2d){0.0, 0.0};
                else
                    memcpy(&acc[i][q], w + i * NC + h + 2 * q, sizeof(v2d));
            }
        for (int64_t k = 0; k < kc; k++) {
            v2d b0, b1;
            memcpy(&b0, b + k * NR + h, sizeof b0);
            memcpy(&b1, b + k * NR + h + 2, sizeof b1);
            for (int i = 0; i < MR; i++) {
                double ai = a[k * MR + i];
                v2d av = {ai, ai}, p0 = av * b0, p1 = av * b1;
                acc[i][0] = acc[i][0] + p0;
                acc[i][1] = acc[i][1] + p1;
            }
        }
        for (int i = 0; i < MR; i++)
            for (int q = 0; q < 2; q++) memcpy(w + i * NC + h + 2 * q, &acc[i][q], sizeof(v2d));
    }
}

#ifdef VG_X86
#define ROW(i)                                                                                           \
    ai = _mm256_broadcast_sd(ak + (i));                                                                  \
    c##i##0 = _mm256_add_pd(c##i##0, _mm256_mul_pd(ai, b0));                                             \
    c##i##1 = _mm256_add_pd(c##i##1, _mm256_mul_pd(ai, b1));

__attribute__((target("avx2"))) static void tile_avx2(int64_t kc, const double *a, const double *b, double *w,
                                                      int first) {
    __m256d c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
    if (first) {
        c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_pd();
    } else {
        c00 = _mm256_loadu_pd(w + 0 * NC), c01 = _mm256_loadu_pd(w + 0 * NC + 4);
        c10 = _mm256_loadu_pd(w + 1 * NC), c11 = _mm256_loadu_pd(w + 1 * NC + 4);
        c20 = _mm256_loadu_pd(w + 2 * NC), c21 = _mm256_loadu_pd(w + 2 * NC + 4);
        c30 = _mm256_loadu_pd(w + 3 * NC), c31 = _mm256_loadu_pd(w + 3 * NC + 4);
        c40 = _mm256_loadu_pd(w + 4 * NC), c41 = _mm256_loadu_pd(w + 4 * NC + 4);
        c50 = _mm256_loadu_pd(w + 5 * NC), c51 = _mm256_loadu_pd(w + 5 * NC + 4);
    }
    for (int64_t k = 0; k < kc; k++) {
        const double *ak = a + k * MR;
        __m256d b0 = _mm256_loadu_pd(b + k * NR), b1 = _mm256_loadu_pd(b + k * NR + 4), ai;
        ROW(0) ROW(1) ROW(2) ROW(3) ROW(4) ROW(5)
    }
    _mm256_storeu_pd(w + 0 * NC, c00), _mm256_storeu_pd(w + 0 * NC + 4, c01);
    _mm256_storeu_pd(w + 1 * NC, c10), _mm256_storeu_pd(w + 1 * NC + 4, c11);
    _mm256_storeu_pd(w + 2 * NC, c20), _mm256_storeu_pd(w + 2 * NC + 4, c21);
    _mm256_storeu_pd(w + 3 * NC, c30), _mm256_storeu_pd(w + 3 * NC + 4, c31);
    _mm256_storeu_pd(w + 4 * NC, c40), _mm256_storeu_pd(w + 4 * NC + 4, c41);
    _mm256_storeu_pd(w + 5 * NC, c50), _mm256_storeu_pd(w + 5 * NC + 4, c51);
}
#undef ROW
#endif

typedef void (*tile_fn)(int64_t, const double *, const double *, double *, int);

static int portable_only = 0; /* for the tests: the portable kernel must give the AVX2 one's bits */

void vg_gemm_portable_only(int flag) { portable_only = flag; }

static tile_fn pick_tile(void) {
#ifdef VG_X86
    if (!portable_only && vg_has_avx2()) return tile_avx2;
#endif
    return tile_portable;
}

/* ---------------------------------------------------------------- GEMM, exact path */

typedef struct {
    int64_t m, n, k, rsa, csa, rsb, csb, rsc, csc;
    const int64_t *offs; /* per batch item: offset of a, of b, of c */
    double alpha, beta;
    const void *a, *b;
    void *c;
    int64_t row_units, col_units;
    tile_fn tile;
} gemm_job;

/* Pack rows [i0, i0+mr) x depth [p0, p0+kc) of a into MR-row panels, k-major, zero-padded. */
#define PACK_A(T)                                                                                        \
    static void pack_a_##T(const gemm_job *g, const T *a, int64_t i0, int64_t rows, int64_t p0,          \
                           int64_t kc, double *out) {                                                    \
        for (int64_t ip = 0; ip < rows; ip += MR) {                                                      \
            double *panel = out + ip * kc;                                                               \
            for (int r = 0; r < MR; r++) {                                                               \
                if (ip + r >= rows) {                                                                    \
                    for (int64_t k = 0; k < kc; k++) panel[k * MR + r] = 0.0;                            \
                    continue;                                                                            \
                }                                                                                        \
                const T *src = a + (i0 + ip + r) * g->rsa + p0 * g->csa;                                 \
                for (int64_t k = 0; k < kc; k++) panel[k * MR + r] = (double)src[k * g->csa];            \
            }                                                                                            \
        }                                                                                                \
    }

/* Pack depth [p0, p0+kc) x columns [j0, j0+cols) of b into NR-column panels, k-major, zero-padded. */
#define PACK_B(T)                                                                                        \
    static void pack_b_##T(const gemm_job *g, const T *b, int64_t j0, int64_t cols, int64_t p0,          \
                           int64_t kc, double *out) {                                                    \
        for (int64_t jp = 0; jp < cols; jp += NR) {                                                      \
            double *panel = out + jp * kc;                                                               \
            int64_t width = imin(NR, cols - jp);                                                         \
            for (int64_t k = 0; k < kc; k++) {                                                           \
                const T *src = b + (p0 + k) * g->rsb + (j0 + jp) * g->csb;                               \
                double *dst = panel + k * NR;                                                            \
                if (width == NR && g->csb == 1) { /* a whole row of the panel, contiguous */             \
                    for (int j = 0; j < NR; j++) dst[j] = (double)src[j];                                \
                    continue;                                                                            \
                }                                                                                        \
                int64_t j = 0;                                                                           \
                for (; j < width; j++) dst[j] = (double)src[j * g->csb];                                 \
                for (; j < NR; j++) dst[j] = 0.0;                                                        \
            }                                                                                            \
        }                                                                                                \
    }

/* c[i, j] = alpha * w + beta * c (c not read when beta == 0), rounded once to T. */
#define WRITE_C(T)                                                                                       \
    static void write_c_##T(const gemm_job *g, T *c, int64_t i0, int64_t rows, int64_t j0, int64_t cols, \
                            const double *w) {                                                           \
        for (int64_t i = 0; i < rows; i++) {                                                             \
            T *dst = c + (i0 + i) * g->rsc + j0 * g->csc;                                                \
            const double *src = w + i * NC;                                                              \
            if (g->beta == 0.0 && g->csc == 1) { /* the common case, vectorized */                    \
                for (int64_t j = 0; j < cols; j++) dst[j] = (T)(g->alpha * src[j]);                      \
                continue;                                                                                \
            }                                                                                            \
            for (int64_t j = 0; j < cols; j++) {                                                         \
                double v = g->alpha * src[j];                                                            \
                if (g->beta != 0.0) v = v + g->beta * (double)dst[j * g->csc];                           \
                dst[j * g->csc] = (T)v;                                                                  \
            }                                                                                            \
        }                                                                                                \
    }

/* Work units: (batch item, MC-row block, NC-column block); each computes its block of c over all of k. */
#define GEMM_CHUNK(T)                                                                                    \
    static void gemm_chunk_##T(void *ctx, int64_t lo, int64_t hi) {                                      \
        const gemm_job *g = ctx;                                                                         \
        int64_t kc_max = imin(g->k, KC);                                                                 \
        double *buf = malloc(sizeof(double) * (size_t)((MC + NC) * kc_max + MC * NC));                   \
        if (!buf) abort();                                                                               \
        double *ap = buf, *bp = ap + MC * kc_max, *w = bp + NC * kc_max;                                 \
        int64_t per_batch = g->row_units * g->col_units;                                                 \
        for (int64_t u = lo; u < hi; u++) {                                                              \
            int64_t item = u / per_batch, rest = u % per_batch;                                          \
            int64_t i0 = (rest / g->col_units) * MC, j0 = (rest % g->col_units) * NC;                    \
            int64_t rows = imin(MC, g->m - i0), cols = imin(NC, g->n - j0);                              \
            const T *a = (const T *)g->a + g->offs[3 * item];                                            \
            const T *b = (const T *)g->b + g->offs[3 * item + 1];                                        \
            T *c = (T *)g->c + g->offs[3 * item + 2];                                                    \
            for (int64_t p0 = 0; p0 < g->k; p0 += KC) {                                                  \
                int64_t kc = imin(KC, g->k - p0);                                                        \
                pack_a_##T(g, a, i0, rows, p0, kc, ap);                                                  \
                pack_b_##T(g, b, j0, cols, p0, kc, bp);                                                  \
                /* partial sums live in w (row stride NC, whole tiles) between blocks of k */         \
                for (int64_t jp = 0; jp < cols; jp += NR)                                                \
                    for (int64_t ip = 0; ip < rows; ip += MR)                                            \
                        g->tile(kc, ap + ip * kc, bp + jp * kc, w + ip * NC + jp, p0 == 0);              \
            }                                                                                            \
            write_c_##T(g, c, i0, rows, j0, cols, w);                                                    \
        }                                                                                                \
        free(buf);                                                                                       \
    }

/* c = beta * c (zeros when beta == 0, c not read) for every batch item: alpha == 0 or k == 0. */
#define SCALE_C(T)                                                                                       \
    static void scale_c_##T(const gemm_job *g, int64_t batch) {                                          \
        for (int64_t item = 0; item < batch; item++) {                                                   \
            T *c = (T *)g->c + g->offs[3 * item + 2];                                                    \
            for (int64_t i = 0; i < g->m; i++)                                                           \
                for (int64_t j = 0; j < g->n; j++) {                                                     \
                    T *dst = c + i * g->rsc + j * g->csc;                                                \
                    *dst = g->beta == 0.0 ? (T)0 : (T)(g->beta * (double)*dst);                          \
                }                                                                                        \
        }                                                                                                \
    }

#define GEMM_EXACT(T, NAME)                                                                              \
    PACK_A(T)                                                                                            \
    PACK_B(T)                                                                                            \
    WRITE_C(T)                                                                                           \
    GEMM_CHUNK(T)                                                                                        \
    SCALE_C(T)                                                                                           \
    void vg_gemm_exact_##NAME(int64_t batch, const int64_t *offs, int64_t m, int64_t n, int64_t k,       \
                              double alpha, const T *a, int64_t rsa, int64_t csa, const T *b, int64_t rsb,  \
                              int64_t csb, double beta, T *c, int64_t rsc, int64_t csc, int threads) {   \
        gemm_job g = {m, n, k, rsa, csa, rsb, csb, rsc, csc, offs, alpha, beta, a, b, c,                 \
                      cdiv(m, MC), cdiv(n, NC), pick_tile()};                                            \
        if (batch <= 0 || m <= 0 || n <= 0) return;                                                      \
        if (alpha == 0.0 || k <= 0) {                                                                    \
            scale_c_##T(&g, batch);                                                                      \
            return;                                                                                      \
        }                                                                                                \
        int64_t units = batch * g.row_units * g.col_units;                                               \
        int64_t unit_work = imin(m, MC) * imin(n, NC) * k;                                               \
        vg_parallel_for(units, cdiv(MIN_UNIT_WORK, unit_work), threads, gemm_chunk_##T, &g);             \
    }

GEMM_EXACT(float, f32)
GEMM_EXACT(double, f64)

/* ---------------------------------------------------------------- GEMV, exact path */

#define GEMV_ROWS 128

typedef struct {
    int64_t m, k, rsa, csa, incx, incy;
    double alpha, beta;
    const void *a, *x;
    void *y;
} gemv_job;

/* y[i] = alpha * sum_k a[i, k] x[k] + beta * y[i], blocks of GEMV_ROWS rows, k outermost. */
#define GEMV(T, NAME)                                                                                    \
    static void gemv_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                   \
        const gemv_job *g = ctx;                                                                         \
        const T *a = g->a, *x = g->x;                                                                    \
        T *y = g->y;                                                                                     \
        double acc[GEMV_ROWS];                                                                           \
        for (int64_t blk = lo; blk < hi; blk++) {                                                        \
            int64_t i0 = blk * GEMV_ROWS, rows = imin(GEMV_ROWS, g->m - i0);                             \
            for (int64_t i = 0; i < rows; i++) acc[i] = 0.0;                                             \
            for (int64_t k = 0; k < g->k; k++) {                                                         \
                double xk = (double)x[k * g->incx];                                              \
                const T *col = a + i0 * g->rsa + k * g->csa;                                             \
                if (g->rsa == 1)                                                                         \
                    for (int64_t i = 0; i < rows; i++) acc[i] = acc[i] + (double)col[i] * xk;            \
                else                                                                                     \
                    for (int64_t i = 0; i < rows; i++) acc[i] = acc[i] + (double)col[i * g->rsa] * xk;   \
            }                                                                                            \
            for (int64_t i = 0; i < rows; i++) {                                                         \
                T *dst = y + (i0 + i) * g->incy;                                                         \
                double v = g->alpha * acc[i];                                                            \
                if (g->beta != 0.0) v = v + g->beta * (double)*dst;                                      \
                *dst = (T)v;                                                                             \
            }                                                                                            \
        }                                                                                                \
    }                                                                                                    \
    void vg_gemv_exact_##NAME(int64_t m, int64_t k, double alpha, const T *a, int64_t rsa, int64_t csa,  \
                              const T *x, int64_t incx, double beta, T *y, int64_t incy, int threads) {  \
        if (m <= 0) return;                                                                              \
        if (alpha == 0.0 || k <= 0) {                                                                    \
            for (int64_t i = 0; i < m; i++)                                                              \
                y[i * incy] = beta == 0.0 ? (T)0 : (T)(beta * (double)y[i * incy]);                      \
            return;                                                                                      \
        }                                                                                                \
        gemv_job g = {m, k, rsa, csa, incx, incy, alpha, beta, a, x, y};                                 \
        int64_t blocks = cdiv(m, GEMV_ROWS);                                                             \
        vg_parallel_for(blocks, cdiv(MIN_UNIT_WORK, imin(m, GEMV_ROWS) * k), threads, gemv_chunk_##NAME, \
                        &g);                                                                             \
    }

GEMV(float, f32)
GEMV(double, f64)

/* ---------------------------------------------------------------- dot and axpy, exact path */

/* sum_k x[k] y[k] in double, increasing k (one thread: a single element). */
#define DOT(T, NAME)                                                                                     \
    double vg_dot_exact_##NAME(int64_t n, const T *x, int64_t incx, const T *y, int64_t incy) {          \
        double acc = 0.0;                                                                                \
        for (int64_t k = 0; k < n; k++) acc = acc + (double)x[k * incx] * (double)y[k * incy];           \
        return acc;                                                                                      \
    }

typedef struct {
    double alpha;
    const void *x;
    void *y;
    int64_t incx, incy;
} axpy_job;

/* y = alpha * x + y in double, rounded once; y untouched when alpha == 0. */
#define AXPY(T, NAME)                                                                                    \
    static void axpy_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                   \
        const axpy_job *g = ctx;                                                                         \
        const T *x = g->x;                                                                               \
        T *y = g->y;                                                                                     \
        if (g->incx == 1 && g->incy == 1)                                                                \
            for (int64_t i = lo; i < hi; i++) y[i] = (T)(g->alpha * (double)x[i] + (double)y[i]);        \
        else                                                                                             \
            for (int64_t i = lo; i < hi; i++) {                                                          \
                T *dst = y + i * g->incy;                                                                \
                *dst = (T)(g->alpha * (double)x[i * g->incx] + (double)*dst);                            \
            }                                                                                            \
    }                                                                                                    \
    void vg_axpy_exact_##NAME(int64_t n, double alpha, const T *x, int64_t incx, T *y, int64_t incy,     \
                              int64_t min_chunk, int threads) {                                          \
        if (alpha == 0.0) return;                                                                        \
        axpy_job g = {alpha, x, y, incx, incy};                                                          \
        vg_parallel_for(n, min_chunk, threads, axpy_chunk_##NAME, &g);                                   \
    }

DOT(float, f32)
DOT(double, f64)
AXPY(float, f32)
AXPY(double, f64)

/* ---------------------------------------------------------------- one call per product */

/* A product's description, prepared once per layout (matmul.py keeps one per shape and strides): with
 * the data pointers, all a call needs. Every field is 8 bytes wide. */
typedef struct {
    int64_t f64;   /* 0: f32, 1: f64 */
    int64_t exact; /* the exact path; else the fast one (fn) */
    int64_t int64; /* fn takes 64-bit integers */
    void *fn;      /* cblas_?gemm */
    void *gemv;    /* cblas_?gemv, or NULL */
    int64_t batch, m, n, k, rsa, csa, rsb, csb, rsc, csc;
    const int64_t *offs; /* per batch item: offset of a, of b, of c */
    double alpha, beta;
} vg_gemm_args;

/* c = alpha * a @ b + beta * c on the path `p` names. The fast path takes the exact one where BLAS does
 * not apply (alpha == 0, k == 0) or gave an infinity or a NaN with beta == 0 (c was not an input, so it
 * can be computed again). Returns 1 when done, else BLAS_A, BLAS_B or BLAS_C: that operand must be given
 * in another layout (BLAS cannot take it, or its data is not aligned to its element), nothing done. */
static int64_t reruns;

int vg_count_rerun(int done) {
    if (!done) __atomic_add_fetch(&reruns, 1, __ATOMIC_RELAXED);
    return done;
}

int64_t vg_reruns(void) { return __atomic_load_n(&reruns, __ATOMIC_RELAXED); }

int vg_gemm(const vg_gemm_args *p, const void *a, const void *b, void *c, int threads) {
    uintptr_t align = p->f64 ? 8 : 4;
    if ((uintptr_t)a % align) return BLAS_A;
    if ((uintptr_t)b % align) return BLAS_B;
    if ((uintptr_t)c % align) return BLAS_C;
    if (!p->exact) {
        int done = p->f64 ? vg_gemm_blas_f64(p->fn, p->gemv, (int)p->int64, p->beta == 0.0, p->batch, p->offs,
                                             p->m, p->n, p->k, p->alpha, a, p->rsa, p->csa, b, p->rsb, p->csb,
                                             p->beta, c, p->rsc, p->csc, threads)
                          : vg_gemm_blas_f32(p->fn, p->gemv, (int)p->int64, p->beta == 0.0, p->batch, p->offs,
                                             p->m, p->n, p->k, p->alpha, a, p->rsa, p->csa, b, p->rsb, p->csb,
                                             p->beta, c, p->rsc, p->csc, threads);
        if (done == 1 || (done == 0 && p->beta != 0.0)) return 1;
        if (done != 0 && done != BLAS_NOT_USED) return done;
        if (done == 0) vg_count_rerun(0); /* on the exact path, below */
    }
    if (p->f64)
        vg_gemm_exact_f64(p->batch, p->offs, p->m, p->n, p->k, p->alpha, a, p->rsa, p->csa, b, p->rsb, p->csb,
                          p->beta, c, p->rsc, p->csc, threads);
    else
        vg_gemm_exact_f32(p->batch, p->offs, p->m, p->n, p->k, p->alpha, a, p->rsa, p->csa, b, p->rsb, p->csb,
                          p->beta, c, p->rsc, p->csc, threads);
    return 1;
}
