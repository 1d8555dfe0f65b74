/* What convolution.c (the columns path and the one-channel images' direct loops) shares with convolution_implicit.c (the
 * implicit GEMM): the geometry array (the G_ names), aligned scratch buffers, the taps' offsets in a
 * padded image, the padded copy of an image, the matmul.c functions they call, and the implicit path's
 * entry points (f32; convolution.c's f64 stubs decline every case). */
#ifndef VG_CONV_H
#define VG_CONV_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vg.h"

enum { G_N, G_C, G_H, G_W, G_O, G_KH, G_KW, G_SH, G_SW, G_PH, G_PW, G_DH, G_DW, G_HO, G_WO, G_NHWC, G_LEN };

/* matmul.c */
void vg_blas_call_f32(void *fn, int int64, int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void vg_blas_call_f64(void *fn, int int64, int ta, int tb, int64_t m, int64_t n, int64_t k, const double *a,
                      int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc);
int vg_all_finite_f32(const float *c, int64_t m, int64_t n, int64_t ldc);
int vg_all_finite_f64(const double *c, int64_t m, int64_t n, int64_t ldc);
void vg_blas_single_begin(void);
void vg_blas_single_end(void);

#define VG_VECTOR 32
#define VG_LANES(T) ((int64_t)(VG_VECTOR / sizeof(T)))

/* A 64-byte aligned scratch buffer; out of memory aborts (as the other kernels' buffers do). */
static inline void *scratch(int64_t n, size_t size) {
    size_t bytes = ((size_t)(n > 0 ? n : 1) * size + 63) / 64 * 64;
    void *p = aligned_alloc(64, bytes);
    if (!p) abort();
    return p;
}

static inline void *zeroed_scratch(int64_t n, size_t size) {
    void *p = scratch(n, size);
    memset(p, 0, (size_t)(n > 0 ? n : 1) * size);
    return p;
}

/* Where each tap (c, i, j), in that order, reads in a padded image, from the start of an output
 * element's window (stride-1 convolutions: the direct and implicit paths). */
static inline void tap_offsets(const int64_t *g, int64_t *off) {
    const int64_t WP = g[G_W] + 2 * g[G_PW], PLANE = (g[G_H] + 2 * g[G_PH]) * WP;
    for (int64_t c = 0, k = 0; c < g[G_C]; c++)
        for (int64_t i = 0; i < g[G_KH]; i++)
            for (int64_t j = 0; j < g[G_KW]; j++, k++) off[k] = c * PLANE + i * g[G_DH] * WP + j * g[G_DW];
}

/* The taps' offsets in stack_columns' layout. */
static inline void stack_offsets(const int64_t *g, int64_t *off) {
    const int64_t HP = g[G_H] + 2 * g[G_PH], COLUMN = g[G_C] * HP * 4;
    for (int64_t c = 0, k = 0; c < g[G_C]; c++)
        for (int64_t i = 0; i < g[G_KH]; i++)
            for (int64_t j = 0; j < g[G_KW]; j++, k++) off[k] = j * COLUMN + c * HP * 4 + i * g[G_DH] * 4;
}

/* The image copies (PAD_IMAGE, convolution.c's columns) are short rows (a few to a few dozen elements): plain
 * loops beat memcpy calls. */
#if defined(__GNUC__) && !defined(__clang__)
#define COPY_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define COPY_LOOPS
#endif

/* One image, NCHW, into the interior of C planes of (H + 2PH) x (W + 2PW) whose border is zero
 * (`zeroed_scratch`: every image writes the same interior, so the border stays zero). */
#define PAD_IMAGE(T, NAME)                                                                               \
    COPY_LOOPS static void pad_image_##NAME(const T *x, const int64_t *g, T *dst) {                      \
        const int64_t H = g[G_H], W = g[G_W], WP = W + 2 * g[G_PW];                                      \
        dst += g[G_PH] * WP + g[G_PW];                                                                   \
        for (int64_t c = 0; c < g[G_C]; c++, dst += 2 * g[G_PH] * WP)                                    \
            for (int64_t r = 0; r < H; r++, dst += WP, x += W) {                                         \
                if (W == 4)                                                                              \
                    for (int64_t e = 0; e < 4; e++) dst[e] = x[e];                                       \
                else if (W >= VG_LANES(T)) /* vectors, the last one ending at the row's end */           \
                    for (int64_t c0 = 0; c0 < W; c0 += VG_LANES(T)) {                                    \
                        const int64_t c = c0 + VG_LANES(T) <= W ? c0 : W - VG_LANES(T);                  \
                        memcpy(dst + c, x + c, VG_VECTOR);                                               \
                    }                                                                                    \
                else                                                                                     \
                    for (int64_t e = 0; e < W; e++) dst[e] = x[e];                                       \
            }                                                                                            \
    }

/* The implicit GEMM (convolution_implicit.c): whether it takes a convolution, and conv2d, its input gradient
 * (-1: not taken) and a block's weight-gradient partial sums on it. */
int vg_implicit_f32(const int64_t *g);
int vg_implicit_forward_f32(const float *x, const float *w, float *out, const int64_t *g, int threads);
int vg_implicit_input_f32(const float *gy, const float *w, float *dx, const int64_t *g, int threads);
void vg_implicit_weight_f32(const float *gy, const float *x, float *partial, const int64_t *g, int64_t block,
                            int64_t units, int threads);

#endif
