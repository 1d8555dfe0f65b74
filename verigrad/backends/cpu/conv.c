/* Sliding-window kernels: im2col, col2im, max_pool2d, avg_pool2d and max_pool2d's gradient.
 *
 * `geo` describes the windows (int64, see the G_ names): the image's sizes, the kernel, stride, padding
 * and dilation, the output sizes, the layout (0 NCHW, 1 NHWC), the image's strides in elements in the
 * logical order (n, c, h, w) whatever the layout, and a second operand's strides: the columns' six
 * strides in their layout's order (col2im), or the output gradient's in the order (n, c, oh, ow).
 * Window (oh, ow) reads image row oh*SH - PH + i*DH and column ow*SW - PW + j*DW at kernel offset (i, j).
 *
 * Every output element is computed by one thread from its inputs alone (rows split by vg_parallel_for),
 * so the bits do not depend on the thread count. Orders follow the references:
 * - col2im adds, for each image element, the windows covering it in kernel order (i, then j), in double
 *   from 0.0, and rounds once (the reference adds kernel offset by kernel offset into a zeroed f64 image);
 * - max_pool2d folds each window in kernel order, as NumPy's maximum does: a NaN wins (the first), and
 *   on equal operands (0 and -0) the later element;
 * - avg_pool2d adds the window (padding included as 0) in kernel order in double from 0.0, divides by
 *   KH*KW and rounds once (NumPy's order for a reduction over axes that are not the innermost);
 * - max_pool2d_grad sends each window's gradient to its first maximal element (a NaN counts as maximal,
 *   as np.argmax has it) and adds, for each image element, the gradients it receives in kernel order in
 *   double from 0.0 (what col2im does with the gradient columns, whose other entries are 0). Where the
 *   windows do not overlap, an element receives at most one gradient: it is written as g + 0.
 *
 * vg_im2col_<dtype>(x, out, geo, pad_value, min_chunk, threads), vg_col2im_<dtype>(cols, out, geo, ...),
 * vg_max_pool_<dtype>(x, out, geo, ...), vg_avg_pool_<dtype>(x, out, geo, ...) and
 * vg_max_pool_grad_<dtype>(x, gy, out, geo, ...), which returns -1 when it cannot allocate its buffer
 * of window maxima (0 otherwise); `out` is C-contiguous, min_chunk counts elements.
 */
#include <math.h>
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

static int64_t rows_per_chunk(int64_t min_chunk, int64_t row) {
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

/* Whether an image element can lie in two windows (or may: a stride that is a multiple of the
 * dilation can skip the elements two windows would share). */
static int windows_overlap(const int64_t *g) {
    return g[G_SH] < g[G_DH] * (g[G_KH] - 1) + 1 || g[G_SW] < g[G_DW] * (g[G_KW] - 1) + 1;
}

/* Kernel column j's windows: those in [lo, hi) read inside the image, window ow at element
 * first + ow*SW*sw of the image row. */
typedef struct {
    int64_t lo, hi, first;
} vg_span;

static vg_span *column_spans(const int64_t *g) {
    vg_span *sp = (vg_span *)scratch(g[G_KW], sizeof(vg_span));
    for (int64_t j = 0; j < g[G_KW]; j++) {
        int64_t off = j * g[G_DW] - g[G_PW];
        inside(off, g[G_SW], g[G_W], g[G_WO], &sp[j].lo, &sp[j].hi);
        sp[j].first = off * g[G_XS + 3];
    }
    return sp;
}

#define WINDOW_KERNELS(T, NAME)                                                                         \
    /* One window row at kernel column j (its span sp): dst[ow] = image row `src` at column          \
     * ow*SW - PW + j*DW, or pad outside. */  \
    static inline void fill_row_##NAME(T *dst, const T *src, const int64_t *g, const vg_span *sp,     \
                                       T pad) {                                                        \
        const int64_t WO = g[G_WO], step = g[G_SW] * g[G_XS + 3], lo = sp->lo, hi = sp->hi;            \
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
    }                                                                                                   \
                                                                                                        \
    /* im2col NCHW: rows (n, c, i, j) of HO*WO elements; NHWC: rows (n, oh) of WO*KH*KW*C elements */   \
    static void im2col_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                \
        const vg_wargs *a = (const vg_wargs *)ctx;                                                      \
        const int64_t *g = a->g;                                                                        \
        const T *x = (const T *)a->x;                                                                   \
        T *out = (T *)a->out;                                                                           \
        const T pad = (T)a->pad;                                                                        \
        const int64_t C = g[G_C], KH = g[G_KH], KW = g[G_KW], HO = g[G_HO], WO = g[G_WO];               \
        vg_span *sp = column_spans(g);                                                                  \
        for (int64_t r = lo; r < hi; r++) {                                                             \
            if (g[G_LAYOUT] == 0) {                                                                     \
                int64_t j = r % KW, i = (r / KW) % KH, c = (r / (KW * KH)) % C, n = r / (KW * KH * C);  \
                T *o = out + r * HO * WO;                                                               \
                for (int64_t oh = 0; oh < HO; oh++)                                                     \
                    fill_row_##NAME(o + oh * WO, image_row_##NAME(x, g, n, c, oh, i), g, sp + j, pad);       \
            } else {                                                                                    \
                const int64_t W = g[G_W], sc = g[G_XS + 1], sw = g[G_XS + 3];                           \
                int64_t oh = r % HO, n = r / HO;                                                        \
                T *o = out + r * WO * KH * KW * C;                                                      \
                for (int64_t ow = 0; ow < WO; ow++)                                                     \
                    for (int64_t i = 0; i < KH; i++) {                                                  \
                        const T *row = image_row_##NAME(x, g, n, 0, oh, i);                             \
                        for (int64_t j = 0; j < KW; j++, o += C) {                                      \
                            int64_t iw = ow * g[G_SW] - g[G_PW] + j * g[G_DW];                          \
                            if (!row || iw < 0 || iw >= W) {                                            \
                                for (int64_t c = 0; c < C; c++) o[c] = pad;                             \
                            } else if (sc == 1) {                                                       \
                                const T *s = row + iw * sw;                                             \
                                for (int64_t c = 0; c < C; c++) o[c] = s[c];                            \
                            } else {                                                                    \
                                const T *s = row + iw * sw;                                             \
                                for (int64_t c = 0; c < C; c++) o[c] = s[c * sc];                       \
                            }                                                                           \
                        }                                                                               \
                    }                                                                                   \
            }                                                                                           \
        }                                                                                               \
        free(sp);                                                                                       \
    }                                                                                                   \
                                                                                                        \
    void vg_im2col_##NAME(const T *x, T *out, const int64_t *g, double pad, int64_t min_chunk,          \
                          int threads) {                                                                \
        vg_wargs a = {.x = x, .out = out, .g = g, .pad = pad};                                          \
        int64_t rows, row;                                                                              \
        if (g[G_LAYOUT] == 0)                                                                           \
            rows = g[G_N] * g[G_C] * g[G_KH] * g[G_KW], row = g[G_HO] * g[G_WO];                        \
        else                                                                                            \
            rows = g[G_N] * g[G_HO], row = g[G_WO] * g[G_KH] * g[G_KW] * g[G_C];                        \
        vg_parallel_for(rows, rows_per_chunk(min_chunk, row), threads, im2col_chunk_##NAME, &a);        \
    }                                                                                                   \
                                                                                                        \
    /* Sums into the image, in kernel order, in double: NCHW planes (n, c) of H*W elements, NHWC rows   \
     * (n, h) of W*C. col2im adds the columns; max_pool2d_grad (arg set) adds the output gradient of    \
     * each window whose first maximum the element is. */                                               \
    static void sum_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                   \
        const vg_wargs *a = (const vg_wargs *)ctx;                                                      \
        const int64_t *g = a->g, *ys = g + G_YS;                                                        \
        const T *y = (const T *)a->y;                                                                   \
        const int32_t *arg = a->arg;                                                                    \
        T *out = (T *)a->out;                                                                           \
        const int64_t C = g[G_C], H = g[G_H], W = g[G_W], KH = g[G_KH], KW = g[G_KW];                   \
        const int64_t HO = g[G_HO], WO = g[G_WO], SH = g[G_SH], SW = g[G_SW], nhwc = g[G_LAYOUT];       \
        const int64_t size = nhwc ? W * C : H * W;                                                      \
        double *acc = (double *)scratch(size, sizeof(double));                                          \
        for (int64_t r = lo; r < hi; r++) {                                                             \
            for (int64_t e = 0; e < size; e++) acc[e] = 0.0;                                            \
            for (int64_t i = 0; i < KH; i++) {                                                          \
                int64_t offh = i * g[G_DH] - g[G_PH], h0, h1;                                           \
                inside(offh, SH, H, HO, &h0, &h1);                                                      \
                for (int64_t j = 0; j < KW; j++) {                                                      \
                    int32_t k = (int32_t)(i * KW + j);                                                  \
                    int64_t offw = j * g[G_DW] - g[G_PW], w0, w1;                                       \
                    inside(offw, SW, W, WO, &w0, &w1);                                                  \
                    if (!nhwc) {                                                                        \
                        int64_t n = r / C, c = r % C;                                                   \
                        for (int64_t oh = h0; oh < h1; oh++) {                                          \
                            double *d = acc + (oh * SH + offh) * W + offw;                              \
                            if (arg) {                                                                  \
                                const int32_t *wa = arg + (r * HO + oh) * WO;                           \
                                const T *s = y + n * ys[0] + c * ys[1] + oh * ys[2];                    \
                                for (int64_t ow = w0; ow < w1; ow++)                                    \
                                    if (wa[ow] == k) d[ow * SW] += (double)s[ow * ys[3]];               \
                            } else { /* columns [n, c, i, j, oh, ow] */                                 \
                                const T *s =                                                            \
                                    y + n * ys[0] + c * ys[1] + i * ys[2] + j * ys[3] + oh * ys[4];     \
                                for (int64_t ow = w0; ow < w1; ow++)                                    \
                                    d[ow * SW] += (double)s[ow * ys[5]];                                \
                            }                                                                           \
                        }                                                                               \
                        continue;                                                                       \
                    }                                                                                   \
                    int64_t n = r / H, oh = window_at(r % H, g[G_PH], i, g[G_DH], SH, HO);              \
                    if (oh < 0) break;                                                                  \
                    for (int64_t ow = w0; ow < w1; ow++) {                                              \
                        double *d = acc + (ow * SW + offw) * C;                                         \
                        if (arg) {                                                                      \
                            const int32_t *wa = arg + ((n * HO + oh) * WO + ow) * C;                    \
                            const T *s = y + n * ys[0] + oh * ys[2] + ow * ys[3];                       \
                            for (int64_t c = 0; c < C; c++)                                             \
                                if (wa[c] == k) d[c] += (double)s[c * ys[1]];                           \
                        } else { /* columns [n, oh, ow, i, j, c] */                                     \
                            const T *s =                                                                \
                                y + n * ys[0] + oh * ys[1] + ow * ys[2] + i * ys[3] + j * ys[4];        \
                            for (int64_t c = 0; c < C; c++) d[c] += (double)s[c * ys[5]];               \
                        }                                                                               \
                    }                                                                                   \
                }                                                                                       \
            }                                                                                           \
            T *o = out + r * size;                                                                      \
            for (int64_t e = 0; e < size; e++) o[e] = (T)acc[e];                                        \
        }                                                                                               \
        free(acc);                                                                                      \
    }                                                                                                   \
                                                                                                        \
    static void sum_into_image_##NAME(vg_wargs *a, int64_t min_chunk, int threads) {                    \
        const int64_t *g = a->g;                                                                        \
        int64_t units = g[G_N] * (g[G_LAYOUT] ? g[G_H] : g[G_C]);                                       \
        int64_t size = g[G_W] * (g[G_LAYOUT] ? g[G_C] : g[G_H]) * g[G_KH] * g[G_KW];                    \
        vg_parallel_for(units, rows_per_chunk(min_chunk, size), threads, sum_chunk_##NAME, a);          \
    }                                                                                                   \
                                                                                                        \
    void vg_col2im_##NAME(const T *cols, T *out, const int64_t *g, int64_t min_chunk, int threads) {    \
        vg_wargs a = {.y = cols, .out = out, .g = g};                                                   \
        sum_into_image_##NAME(&a, min_chunk, threads);                                                  \
    }                                                                                                   \
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
                        fill_row_##NAME(p.vals, row, g, sp + j, pad);                                        \
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
        sum_into_image_##NAME(&a, min_chunk, threads);                                                  \
        free(a.arg);                                                                                    \
        return 0;                                                                                       \
    }


WINDOW_KERNELS(float, f32)
WINDOW_KERNELS(double, f64)
