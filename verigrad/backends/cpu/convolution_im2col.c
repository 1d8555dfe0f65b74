/* The convolution's columns: im2col and col2im, NCHW and NHWC, any stride, padding and dilation (the window
 * geometry of window.h).
 *
 * Every output element is computed by one thread from its inputs alone (rows split by vg_parallel_for),
 * so the bits do not depend on the thread count. col2im adds, for each image element, the windows
 * covering it in kernel order (i, then j), in double from 0.0, and rounds once (the reference adds kernel
 * offset by kernel offset into a zeroed f64 image); vg_sum_into_image does that sum for col2im and for
 * pooling.c's max_pool2d_grad.
 *
 * vg_im2col_<dtype>(x, out, geo, pad_value, min_chunk, threads) and vg_col2im_<dtype>(cols, out, geo,
 * min_chunk, threads); `out` is C-contiguous, min_chunk counts elements.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "window.h"

#define COLUMN_KERNELS(T, NAME)                                                                         \
    WINDOW_ROWS(T, NAME)                                                                                \
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
                    fill_row_##NAME(o + oh * WO, image_row_##NAME(x, g, n, c, oh, i), g, sp + j, pad);  \
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
    void vg_sum_into_image_##NAME(vg_wargs *a, int64_t min_chunk, int threads) {                        \
        const int64_t *g = a->g;                                                                        \
        int64_t units = g[G_N] * (g[G_LAYOUT] ? g[G_H] : g[G_C]);                                       \
        int64_t size = g[G_W] * (g[G_LAYOUT] ? g[G_C] : g[G_H]) * g[G_KH] * g[G_KW];                    \
        vg_parallel_for(units, rows_per_chunk(min_chunk, size), threads, sum_chunk_##NAME, a);          \
    }                                                                                                   \
                                                                                                        \
    void vg_col2im_##NAME(const T *cols, T *out, const int64_t *g, int64_t min_chunk, int threads) {    \
        vg_wargs a = {.y = cols, .out = out, .g = g};                                                   \
        vg_sum_into_image_##NAME(&a, min_chunk, threads);                                               \
    }

COLUMN_KERNELS(float, f32)
COLUMN_KERNELS(double, f64)
