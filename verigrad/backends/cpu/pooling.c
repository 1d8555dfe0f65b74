/* Sliding-window pooling: max_pool2d, avg_pool2d and max_pool2d's gradient, NCHW and NHWC, any stride,
 * padding and dilation (the window geometry of window.h); pooling_tiled.c takes the windows that tile the
 * image first.
 *
 * Every output element is computed by one thread from its inputs alone (rows split by vg_parallel_for),
 * so the bits do not depend on the thread count. Orders follow the references:
 * - max_pool2d folds each window in kernel order, as NumPy's maximum does: a NaN wins (the first), and
 *   on equal operands (0 and -0) the later element;
 * - avg_pool2d adds the window (padding included as 0) in kernel order in double from 0.0, divides by
 *   KH*KW and rounds once (NumPy's order for a reduction over axes that are not the innermost);
 * - max_pool2d_grad sends each window's gradient to its first maximal element (a NaN counts as maximal,
 *   as np.argmax has it) and adds, for each image element, the gradients it receives in kernel order in
 *   double from 0.0 (what col2im does with the gradient columns, whose other entries are 0:
 *   vg_sum_into_image of convolution_im2col.c). Where the windows do not overlap, an element receives at most
 *   one gradient: it is written as g + 0.
 *
 * vg_max_pool_<dtype>(x, out, geo, min_chunk, threads), vg_avg_pool_<dtype>(x, out, geo, ...) and
 * vg_max_pool_grad_<dtype>(x, gy, out, geo, ...), which returns -1 when it cannot allocate its buffer
 * of window maxima (0 otherwise); `out` is C-contiguous, min_chunk counts elements.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "window.h"

/* Whether an image element can lie in two windows (or may: a stride that is a multiple of the
 * dilation can skip the elements two windows would share). */
static int windows_overlap(const int64_t *g) {
    return g[G_SH] < g[G_DH] * (g[G_KH] - 1) + 1 || g[G_SW] < g[G_DW] * (g[G_KW] - 1) + 1;
}

#define POOL_KERNELS(T, NAME)                                                                           \
    WINDOW_ROWS(T, NAME)                                                                                \
                                                                                                        \
    /* Pooling over output rows: (n, c, oh) of WO elements (NCHW) or (n, oh, ow) of C (NHWC). Each      \
     * kernel offset's values (a row of WO, or the C channels of one pixel) are folded in turn. */      \
    typedef struct {                                                                                    \
        T *vals;       /* one kernel offset's values */                                                 \
        T *best;       /* max, argmax */                                                                \
        double *sum;   /* avg */                                                                        \
        int32_t *arg;  /* argmax: the kernel offset of `best` */                                        \
    } pool_acc_##NAME;                                                                                  \
                                                                                                        \
    /* mode 0: max into best; 1: sum; 2: first maximum's offset into arg (best alongside). */           \
    static inline void fold_##NAME(pool_acc_##NAME *p, int64_t len, int32_t k, int mode) {              \
        const T *v = p->vals;                                                                           \
        if (mode == 1) {                                                                                \
            for (int64_t e = 0; e < len; e++) p->sum[e] += (double)v[e];                                \
        } else if (k == 0) {                                                                            \
            for (int64_t e = 0; e < len; e++) p->best[e] = v[e];                                        \
            if (mode == 2)                                                                              \
                for (int64_t e = 0; e < len; e++) p->arg[e] = 0;                                        \
        } else if (mode == 0) {                                                                         \
            for (int64_t e = 0; e < len; e++) {                                                         \
                T b = p->best[e];                                                                       \
                p->best[e] = (b > v[e] || isnan(b)) ? b : v[e];                                         \
            }                                                                                           \
        } else {                                                                                        \
            for (int64_t e = 0; e < len; e++) {                                                         \
                T b = p->best[e];                                                                       \
                int take = (!isnan(b)) & ((v[e] > b) | isnan(v[e])); /* no branch: unpredictable */     \
                p->best[e] = take ? v[e] : b;                                                           \
                p->arg[e] = take ? k : p->arg[e];                                                       \
            }                                                                                           \
        }                                                                                               \
    }                                                                                                   \
                                                                                                        \
    static void pool_rows_##NAME(const vg_wargs *a, int64_t lo, int64_t hi, int mode) {                 \
        const int64_t *g = a->g;                                                                        \
        const T *x = (const T *)a->x;                                                                   \
        const int64_t C = g[G_C], W = g[G_W], KH = g[G_KH], KW = g[G_KW], HO = g[G_HO], WO = g[G_WO];   \
        const int64_t nhwc = g[G_LAYOUT], len = nhwc ? C : WO, sc = g[G_XS + 1], sw = g[G_XS + 3];      \
        const T pad = mode == 1 ? (T)0 : (T)-INFINITY;                                                  \
        pool_acc_##NAME p;                                                                              \
        p.vals = (T *)scratch(len, sizeof(T));                                                          \
        T *own = (T *)scratch(len, sizeof(T));                                                          \
        p.best = own;                                                                                   \
        p.sum = (double *)scratch(len, sizeof(double));                                                 \
        p.arg = 0;                                                                                      \
        vg_span *sp = column_spans(g);                                                                  \
        for (int64_t r = lo; r < hi; r++) {                                                             \
            int64_t n, c = 0, oh, ow = 0;                                                               \
            if (nhwc)                                                                                   \
                ow = r % WO, oh = (r / WO) % HO, n = r / (WO * HO);                                     \
            else                                                                                        \
                oh = r % HO, c = (r / HO) % C, n = r / (HO * C);                                        \
            if (mode == 2) p.arg = a->arg + (r - a->arg_base) * len;                                    \
            if (mode == 0) p.best = (T *)a->out + r * len;                                              \
            if (mode == 1)                                                                              \
                for (int64_t e = 0; e < len; e++) p.sum[e] = 0.0;                                       \
            for (int64_t i = 0; i < KH; i++) {                                                          \
                const T *row = image_row_##NAME(x, g, n, c, oh, i);                                     \
                for (int64_t j = 0; j < KW; j++) {                                                      \
                    if (!nhwc) {                                                                        \
                        fill_row_##NAME(p.vals, row, g, sp + j, pad);                                   \
                    } else {                                                                            \
                        int64_t iw = ow * g[G_SW] - g[G_PW] + j * g[G_DW];                              \
                        if (!row || iw < 0 || iw >= W) {                                                \
                            for (int64_t e = 0; e < C; e++) p.vals[e] = pad;                            \
                        } else {                                                                        \
                            const T *s = row + iw * sw;                                                 \
                            for (int64_t e = 0; e < C; e++) p.vals[e] = s[e * sc];                      \
                        }                                                                               \
                    }                                                                                   \
                    fold_##NAME(&p, len, (int32_t)(i * KW + j), mode);                                  \
                }                                                                                       \
            }                                                                                           \
            if (mode == 1) {                                                                            \
                T *o = (T *)a->out + r * len;                                                           \
                const double count = (double)(KH * KW);                                                 \
                for (int64_t e = 0; e < len; e++) o[e] = (T)(p.sum[e] / count);                         \
            }                                                                                           \
        }                                                                                               \
        free(p.vals);                                                                                   \
        free(own);                                                                                      \
        free(p.sum);                                                                                    \
        free(sp);                                                                                       \
    }                                                                                                   \
    static void max_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                   \
        pool_rows_##NAME((const vg_wargs *)ctx, lo, hi, 0);                                             \
    }                                                                                                   \
    static void avg_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                   \
        pool_rows_##NAME((const vg_wargs *)ctx, lo, hi, 1);                                             \
    }                                                                                                   \
    static void argmax_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                \
        pool_rows_##NAME((const vg_wargs *)ctx, lo, hi, 2);                                             \
    }                                                                                                   \
                                                                                                        \
    static void pool_##NAME(vg_wargs *a, vg_chunk_fn fn, int64_t min_chunk, int threads) {              \
        const int64_t *g = a->g;                                                                        \
        int64_t rows = g[G_N] * g[G_HO] * (g[G_LAYOUT] ? g[G_WO] : g[G_C]);                             \
        int64_t row = (g[G_LAYOUT] ? g[G_C] : g[G_WO]) * g[G_KH] * g[G_KW];                             \
        vg_parallel_for(rows, rows_per_chunk(min_chunk, row), threads, fn, a);                          \
    }                                                                                                   \
                                                                                                        \
    void vg_max_pool_##NAME(const T *x, T *out, const int64_t *g, int64_t min_chunk, int threads) {     \
        vg_wargs a = {.x = x, .out = out, .g = g};                                                      \
        pool_##NAME(&a, max_chunk_##NAME, min_chunk, threads);                                          \
    }                                                                                                   \
                                                                                                        \
    void vg_avg_pool_##NAME(const T *x, T *out, const int64_t *g, int64_t min_chunk, int threads) {     \
        vg_wargs a = {.x = x, .out = out, .g = g};                                                      \
        pool_##NAME(&a, avg_chunk_##NAME, min_chunk, threads);                                          \
    }                                                                                                   \
                                                                                                        \
    /* max_pool2d_grad, windows that do not overlap: output rows as in pooling, a block at a time (their \
     * first maxima found first); each window writes its gradient (+ 0, as the sum from 0 gives) at its \
     * first maximum, into an image of zeros. */                                                        \
    static void put_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                   \
        const vg_wargs *a = (const vg_wargs *)ctx;                                                      \
        const int64_t *g = a->g, *gs = g + G_YS;                                                        \
        const T *gy = (const T *)a->y;                                                                  \
        T *out = (T *)a->out;                                                                           \
        const int64_t C = g[G_C], H = g[G_H], W = g[G_W], KH = g[G_KH], KW = g[G_KW];                   \
        const int64_t HO = g[G_HO], WO = g[G_WO], nhwc = g[G_LAYOUT], len = nhwc ? C : WO;              \
        const int64_t block = 64;                                                                       \
        int64_t *at = (int64_t *)scratch(2 * KH * KW, sizeof(int64_t)); /* k: (i*DH, j*DW) */           \
        for (int64_t k = 0; k < KH * KW; k++) {                                                         \
            at[2 * k] = (k / KW) * g[G_DH];                                                             \
            at[2 * k + 1] = (k % KW) * g[G_DW];                                                         \
        }                                                                                               \
        vg_wargs b = *a;                                                                                \
        b.arg = (int32_t *)scratch(block * len, sizeof(int32_t));                                       \
        for (int64_t start = lo; start < hi; start += block) {                                          \
            int64_t end = hi - start < block ? hi : start + block;                                      \
            b.arg_base = start;                                                                         \
            pool_rows_##NAME(&b, start, end, 2);                                                        \
            for (int64_t r = start; r < end; r++) {                                                     \
                int64_t n, c = 0, oh, ow = 0;                                                           \
                if (nhwc)                                                                               \
                    ow = r % WO, oh = (r / WO) % HO, n = r / (WO * HO);                                 \
                else                                                                                    \
                    oh = r % HO, c = (r / HO) % C, n = r / (HO * C);                                    \
                const int32_t *wa = b.arg + (r - start) * len;                                          \
                const int64_t h0 = oh * g[G_SH] - g[G_PH];                                              \
                for (int64_t e = 0; e < len; e++) {                                                     \
                    int64_t cc = nhwc ? e : c, oo = nhwc ? ow : e;                                      \
                    int64_t ih = h0 + at[2 * wa[e]], iw = oo * g[G_SW] - g[G_PW] + at[2 * wa[e] + 1];   \
                    if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue; /* a padding element */       \
                    T v = gy[n * gs[0] + cc * gs[1] + oh * gs[2] + oo * gs[3]] + (T)0;                  \
                    out[nhwc ? ((n * H + ih) * W + iw) * C + cc : ((n * C + cc) * H + ih) * W + iw] = v; \
                }                                                                                       \
            }                                                                                           \
        }                                                                                               \
        free(b.arg);                                                                                    \
        free(at);                                                                                       \
    }                                                                                                   \
                                                                                                        \
    /* 0 on success, -1 when the windows' maximum offsets cannot be allocated. */                       \
    int vg_max_pool_grad_##NAME(const T *x, const T *gy, T *out, const int64_t *g, int64_t min_chunk,   \
                                int threads) {                                                          \
        vg_wargs a = {.x = x, .y = gy, .out = out, .g = g};                                             \
        if (!windows_overlap(g)) {                                                                      \
            memset(out, 0, (size_t)(g[G_N] * g[G_C] * g[G_H] * g[G_W]) * sizeof(T));                    \
            pool_##NAME(&a, put_chunk_##NAME, min_chunk, threads);                                      \
            return 0;                                                                                   \
        }                                                                                               \
        int64_t outs = g[G_N] * g[G_C] * g[G_HO] * g[G_WO];                                             \
        a.arg = (int32_t *)malloc((size_t)(outs > 0 ? outs : 1) * sizeof(int32_t));                     \
        if (!a.arg) return -1;                                                                          \
        pool_##NAME(&a, argmax_chunk_##NAME, min_chunk, threads);                                       \
        vg_sum_into_image_##NAME(&a, min_chunk, threads);                                               \
        free(a.arg);                                                                                    \
        return 0;                                                                                       \
    }

POOL_KERNELS(float, f32)
POOL_KERNELS(double, f64)
