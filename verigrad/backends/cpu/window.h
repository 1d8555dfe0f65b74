/* What the sliding-window kernels share: convolution_im2col.c's (im2col, col2im) and pooling.c's (max_pool2d,
 * avg_pool2d, max_pool2d_grad). `geo` describes the windows (int64, see the G_ names): the image's sizes,
 * the kernel, stride, padding and dilation, the output sizes, the layout (0 NCHW, 1 NHWC), the image's
 * strides in elements in the logical order (n, c, h, w) whatever the layout, and a second operand's
 * strides: the columns' six strides in their layout's order (col2im), or the output gradient's in the
 * order (n, c, oh, ow). Window (oh, ow) reads image row oh*SH - PH + i*DH and column ow*SW - PW + j*DW at
 * kernel offset (i, j). */
#ifndef VG_WINDOW_H
#define VG_WINDOW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vg.h"

enum {
    G_N, G_C, G_H, G_W, G_KH, G_KW, G_SH, G_SW, G_PH, G_PW, G_DH, G_DW, G_HO, G_WO, G_LAYOUT,
    G_XS, /* 4 image strides: n, c, h, w */
    G_YS = G_XS + 4, /* 6 strides of the second operand */
    G_LEN = G_YS + 6
};

typedef struct {
    const void *x;
    const void *y; /* the columns (col2im) or the output gradient (max_pool2d_grad) */
    void *out;
    int32_t *arg; /* max_pool2d_grad: each window's first maximum (kernel offset i*KW + j) */
    int64_t arg_base; /* the output row whose maxima arg[0] starts with */
    const int64_t *g;
    double pad;
} vg_wargs;

static inline int64_t rows_per_chunk(int64_t min_chunk, int64_t row) {
    int64_t r = row > 0 ? min_chunk / row : min_chunk;
    return r > 0 ? r : 1;
}

static inline int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* The windows o in [lo, hi) of `n` whose position o*stride + off lies in [0, size). */
static inline void inside(int64_t off, int64_t stride, int64_t size, int64_t n, int64_t *lo, int64_t *hi) {
    int64_t a = -floor_div(off, stride); /* ceil(-off / stride) */
    int64_t b = floor_div(size - 1 - off, stride) + 1;
    *lo = a < 0 ? 0 : (a > n ? n : a);
    *hi = b > n ? n : b;
    if (*hi < *lo) *hi = *lo;
}

/* The window along an axis that puts kernel offset k at image position p, or -1. */
static inline int64_t window_at(int64_t p, int64_t pad, int64_t k, int64_t dil, int64_t stride, int64_t n) {
    int64_t t = p + pad - k * dil;
    if (t < 0 || t % stride) return -1;
    t /= stride;
    return t < n ? t : -1;
}

/* A thread's small work buffer (a row or a plane); out of memory there aborts. */
static inline void *scratch(int64_t n, size_t size) {
    void *p = malloc((size_t)(n > 0 ? n : 1) * size);
    if (!p) abort();
    return p;
}

/* Kernel column j's windows: those in [lo, hi) read inside the image, window ow at element
 * first + ow*SW*sw of the image row. */
typedef struct {
    int64_t lo, hi, first;
} vg_span;

static inline vg_span *column_spans(const int64_t *g) {
    vg_span *sp = (vg_span *)scratch(g[G_KW], sizeof(vg_span));
    for (int64_t j = 0; j < g[G_KW]; j++) {
        int64_t off = j * g[G_DW] - g[G_PW];
        inside(off, g[G_SW], g[G_W], g[G_WO], &sp[j].lo, &sp[j].hi);
        sp[j].first = off * g[G_XS + 3];
    }
    return sp;
}

/* A window row's values, and the image row a window row reads (WINDOW_ROWS(T, NAME) defines them). */
#define WINDOW_ROWS(T, NAME)                                                                            \
    /* One window row at kernel column j (its span sp): dst[ow] = image row `src` at column             \
     * ow*SW - PW + j*DW, or pad outside. */                                                            \
    static inline void fill_row_##NAME(T *dst, const T *src, const int64_t *g, const vg_span *sp,       \
                                       T pad) {                                                         \
        const int64_t WO = g[G_WO], step = g[G_SW] * g[G_XS + 3], lo = sp->lo, hi = sp->hi;             \
        if (!src) {                                                                                     \
            for (int64_t o = 0; o < WO; o++) dst[o] = pad;                                              \
            return;                                                                                     \
        }                                                                                               \
        for (int64_t o = 0; o < lo; o++) dst[o] = pad;                                                  \
        const T *s = src + sp->first;                                                                   \
        if (step == 1) {                                                                                \
            memcpy(dst + lo, s + lo, (size_t)(hi - lo) * sizeof(T));                                    \
        } else {                                                                                        \
            for (int64_t o = lo; o < hi; o++) dst[o] = s[o * step];                                     \
        }                                                                                               \
        for (int64_t o = hi; o < WO; o++) dst[o] = pad;                                                 \
    }                                                                                                   \
                                                                                                        \
    /* The image row of (n, c) at window row oh and kernel row i, or NULL (padding). */                 \
    static inline const T *image_row_##NAME(const T *x, const int64_t *g, int64_t n, int64_t c,         \
                                            int64_t oh, int64_t i) {                                    \
        int64_t ih = oh * g[G_SH] - g[G_PH] + i * g[G_DH];                                              \
        if (ih < 0 || ih >= g[G_H]) return 0;                                                           \
        return x + n * g[G_XS] + c * g[G_XS + 1] + ih * g[G_XS + 2];                                    \
    }

/* Sums into the image, in kernel order, in double (convolution_im2col.c): the columns (col2im), or with
 * `a->arg` set, the output gradient of each window whose first maximum the element is (max_pool2d_grad,
 * pooling.c). */
void vg_sum_into_image_f32(vg_wargs *a, int64_t min_chunk, int threads);
void vg_sum_into_image_f64(vg_wargs *a, int64_t min_chunk, int threads);

#endif
