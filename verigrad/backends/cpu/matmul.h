/* What matmul.c (the exact path), matmul_blas.c (the fast path's OpenBLAS tiles) and matmul_avx512.c (its
 * AVX-512 kernels) share: a fast-path product's job, and the paths' entry points. */
#ifndef VG_GEMM_H
#define VG_GEMM_H

#include <stdint.h>

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define VG_X86 1
#define X86_ONLY(code) code /* code only x86 compiles */
#else
#define X86_ONLY(code)
#endif

#define BLAS_THREAD_WORK 262144 /* multiply-adds a thread is given at least (waking one costs microseconds) */

static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* Whether the m x n values at c (row stride ldc) are all finite. */
typedef int (*finite_fn)(const void *, int64_t, int64_t, int64_t);

/* The product OpenBLAS computes: c = alpha * a @ b + beta * c, or with `out`, c = a @ b into a buffer
 * (batch items of m x n, row-major) whose tiles are transposed into out: the caller's product was
 * out = b^T @ a^T, and a, b are the caller's b, a (offsets oa, ob of offs). */
typedef struct {
    void *fn, *gemv; /* cblas_?gemm, and cblas_?gemv for a c of one row or column (or NULL) */
    int int64, ta, tb, check, bad, oa, ob;
    int64_t m, n, k, lda, ldb, ldc, mb, nb, row_tiles, col_tiles;
    int64_t kb;  /* k-split: the depth of a block (0: tiles of c) */
    void *parts; /* k-split: each block's m x n product, row-major, in block order */
    const int64_t *offs;
    double alpha, beta;
    const void *a, *b;
    void *c;
    void *out; /* the caller's c when c is a buffer of c^T (else NULL) */
    int64_t ldo;
    finite_fn finite;
} blas_job;

/* The f32 product of job g (batch items; a and b^T both read along k, or b read along n) as dot
 * products, or as outer products; 1: done, 0: done, and c holds an infinity or a NaN (checked where
 * g->check). Only where matmul.c's rules take them (AVX-512). */
int vg_gemm_dot_product(blas_job *g, int64_t batch, int threads);
int vg_gemm_outer_product(blas_job *g, int64_t batch, int threads);
int64_t vg_gemm_outer_rows(int64_t m); /* the rows of an outer-product work unit (for the tests too) */

/* The f32 product of job g (beta 0, or alpha 1 and beta 1; any layout BLAS takes) by matmul_packed.c's
 * packed GEMM: 1: done; 0: done, and c holds an infinity or a NaN (checked where g->check); BLAS_NOT_USED:
 * nothing done (no memory for the packed b). Only where matmul_blas.c's rules take it (AVX-512). */
int vg_gemm_packed(blas_job *g, int64_t batch, int threads);

/* Where the packed GEMM takes an f32 product c = a @ b of this shape (beta 0; matmul_blas.c's rule). */
int vg_gemm_packed_takes(int64_t m, int64_t n, int64_t k);

/* b's panels made by `pack` where b is not f32 in memory (matmul_dequant.c: quantized blocks): panels
 * [q0, q1) of depth [p0, p0 + kc) written as the packed GEMM packs an f32 b (kc rows of VG_PACKED_PANEL
 * floats, the columns past n zero; panel q at dst + (q - q0) * stride); p0 is a multiple of `depth`. */
#define VG_PACKED_PANEL 64
typedef struct vg_panel_source vg_panel_source;
struct vg_panel_source {
    void (*pack)(const vg_panel_source *src, int64_t q0, int64_t q1, int64_t p0, int64_t kc, float *dst,
                 int64_t stride);
    int64_t depth;
};
/* vg_gemm_packed's product of one batch item whose b is made by `src` (g->b unused): the same bits as
 * with the f32 b it packs. */
int vg_gemm_packed_from(blas_job *g, const vg_panel_source *src, int threads);

/* plain[p, j] = bt[j, p] for j < n, p < k (bt: n rows, row stride ldb; plain: row stride ldp). */
void vg_transpose_f32(const float *bt, int64_t n, int64_t k, int64_t ldb, float *plain, int64_t ldp);

/* The fast path (matmul_blas.c): 1: done; 0: done, and `check` found an infinity or a NaN in c;
 * BLAS_NOT_USED: alpha == 0 or k == 0; BLAS_A, BLAS_B, BLAS_C: that operand has a layout BLAS cannot take
 * (nothing done). */
enum { BLAS_NOT_USED = -4, BLAS_A = -1, BLAS_B = -2, BLAS_C = -3 };
int vg_gemm_blas_f32(void *fn, void *gemv, int int64, int check, int64_t batch, const int64_t *offs, int64_t m,
                     int64_t n, int64_t k, double alpha, const float *a, int64_t rsa, int64_t csa, const float *b,
                     int64_t rsb, int64_t csb, double beta, float *c, int64_t rsc, int64_t csc, int threads);
int vg_gemm_blas_f64(void *fn, void *gemv, int int64, int check, int64_t batch, const int64_t *offs, int64_t m,
                     int64_t n, int64_t k, double alpha, const double *a, int64_t rsa, int64_t csa,
                     const double *b, int64_t rsb, int64_t csb, double beta, double *c, int64_t rsc, int64_t csc,
                     int threads);

/* The exact path (matmul.c). */
void vg_gemm_exact_f32(int64_t batch, const int64_t *offs, int64_t m, int64_t n, int64_t k, double alpha,
                       const float *a, int64_t rsa, int64_t csa, const float *b, int64_t rsb, int64_t csb,
                       double beta, float *c, int64_t rsc, int64_t csc, int threads);
void vg_gemm_exact_f64(int64_t batch, const int64_t *offs, int64_t m, int64_t n, int64_t k, double alpha,
                       const double *a, int64_t rsa, int64_t csa, const double *b, int64_t rsb, int64_t csb,
                       double beta, double *c, int64_t rsc, int64_t csc, int threads);

#endif
