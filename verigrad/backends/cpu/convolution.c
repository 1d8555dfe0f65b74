/* 2-D convolution (groups=1) and its two gradients, f32 and f64, NCHW with OIHW weights or NHWC with
 * HWIO weights: the columns of a block of images in a thread's scratch buffer, then one single-threaded
 * OpenBLAS GEMM per block (matmul.c's vg_blas_call), no transposed copy of the batch:
 *
 * - conv2d, NCHW: W (O x CKK) @ cols (CKK x B*HoWo), written in place for a block of one image, else
 *   copied out image by image; NHWC: cols (B*HoWo x KKC) @ W (KKC x O), in place.
 * - conv2d_input_grad, NCHW: cols = W^T @ g (the block's output gradients side by side); NHWC: cols =
 *   g @ W^T; then each image's columns are added back (col2im) in double, kernel offset by kernel offset
 *   from 0.0, and rounded once, as the reference's col2im does.
 * - conv2d_weight_grad: per block, a partial dW = g @ cols^T (NCHW) or cols^T @ g (NHWC); the partials
 *   are added in block order in double and rounded once.
 *
 * - one-channel images (NCHW, stride and dilation 1: a network's first layer), whose columns would be
 *   only KH*KW rows deep: conv2d and (for rows of at least two vectors) the weight gradient are direct
 *   loops over vectors of output columns instead (see "One-channel images" below);
 * - f32, NCHW, stride 1, on a CPU with AVX2 and FMA: conv2d and its two gradients are an implicit GEMM
 *   (convolution_implicit.c); on AVX-512, conv2d and the input gradient of 16 channels or more put
 *   the channels in the vectors' lanes (the same bits).
 *
 * NCHW columns are copied from a zero-padded copy of the image, so the copies need no bounds tests.
 * Blocks depend on the shape alone (block_of) and each is computed whole by one thread, so the bits do
 * not depend on the thread count. `geo` holds the sizes (the G_ names); the operands are C-contiguous.
 * Each function returns 1, or 0 when the result holds an infinity or a NaN (an f32 partial sum may
 * overflow where the reference's does not: the caller then runs the reference).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convolution.h"

enum { NO_TRANS = 111, TRANS = 112 };

/* A block's columns take about this many elements: conv2d and the input gradient, whose products are
 * written out block by block, keep them in cache; the weight gradient's, summed over the blocks, are
 * larger. And a batch is cut into at least MIN_BLOCKS blocks, if it can be (the threads' work units). */
#define COLS_BUDGET (1 << 16)
#define SUMS_BUDGET (1 << 18)
#define MIN_BLOCKS 8
#define MAX_TAPS 64 /* the direct path's kernels (one-channel images): at most this many taps */

/* Images per block: as many as fit the budget, but at least MIN_BLOCKS blocks (and one image). */
static int64_t block_of(const int64_t *g, int64_t per_image, int64_t budget) {
    int64_t b = budget / (per_image > 0 ? per_image : 1);
    int64_t most = (g[G_N] + MIN_BLOCKS - 1) / MIN_BLOCKS;
    if (b > most) b = most;
    return b > 0 ? b : 1;
}

typedef struct {
    void *fn; /* cblas_?gemm */
    int int64;
    const void *a, *b; /* conv2d: x, w; input grad: g, w; weight grad: g, x */
    void *out;
    void *partial; /* weight grad: one O x CKK partial sum per block */
    const int64_t *g;
    int64_t block;
    int bad;
} conv_job;

PAD_IMAGE(float, f32)
PAD_IMAGE(double, f64)

#define CONV_KERNELS(T, NAME)                                                                            \
    /* NCHW columns of one image: rows (c, i, j) of HO*WO elements, `ld` apart, copied from the padded   \
     * image (`padded`, a scratch buffer of C*(H+2PH)*(W+2PW) elements) without bounds tests. */         \
    COPY_LOOPS VG_CLONES static void cols_nchw_##NAME(const T *x, const int64_t *g, T *dst, int64_t ld,  \
                                                      T *padded) {                                       \
        const int64_t KH = g[G_KH], KW = g[G_KW], HO = g[G_HO], WO = g[G_WO], SW = g[G_SW];              \
        const int64_t WP = g[G_W] + 2 * g[G_PW], PLANE = (g[G_H] + 2 * g[G_PH]) * WP;                    \
        const int64_t ROW = g[G_SH] * WP;                                                                \
        pad_image_##NAME(x, g, padded);                                                                  \
        for (int64_t c = 0; c < g[G_C]; c++)                                                             \
            for (int64_t i = 0; i < KH; i++)                                                             \
                for (int64_t j = 0; j < KW; j++) {                                                       \
                    T *o = dst + ((c * KH + i) * KW + j) * ld;                                           \
                    const T *s = padded + c * PLANE + i * g[G_DH] * WP + j * g[G_DW];                    \
                    if (SW == 1 && WO == 4) /* small images: rows of a fixed length, one move each */    \
                        for (int64_t oh = 0; oh < HO; oh++, o += 4, s += ROW)                            \
                            for (int64_t ow = 0; ow < 4; ow++) o[ow] = s[ow];                            \
                    else if (SW == 1 && WO == 8)                                                         \
                        for (int64_t oh = 0; oh < HO; oh++, o += 8, s += ROW)                            \
                            for (int64_t ow = 0; ow < 8; ow++) o[ow] = s[ow];                            \
                    else if (SW == 1 && WO >= VG_LANES(T)) /* vectors, the last one ending at WO */      \
                        for (int64_t oh = 0; oh < HO; oh++, o += WO, s += ROW)                           \
                            for (int64_t c0 = 0; c0 < WO; c0 += VG_LANES(T)) {                           \
                                const int64_t c = c0 + VG_LANES(T) <= WO ? c0 : WO - VG_LANES(T);        \
                                memcpy(o + c, s + c, VG_VECTOR);                                         \
                            }                                                                            \
                    else                                                                                 \
                        for (int64_t oh = 0; oh < HO; oh++, o += WO, s += ROW) {                         \
                            if (SW == 1)                                                                 \
                                for (int64_t ow = 0; ow < WO; ow++) o[ow] = s[ow];                       \
                            else                                                                         \
                                for (int64_t ow = 0; ow < WO; ow++) o[ow] = s[ow * SW];                  \
                        }                                                                                \
                }                                                                                        \
    }                                                                                                    \
                                                                                                         \
    /* NHWC columns of one image: rows (oh, ow) of KH*KW*C elements in the order (i, j, c). */           \
    COPY_LOOPS static void cols_nhwc_##NAME(const T *x, const int64_t *g, T *dst) {                      \
        const int64_t C = g[G_C], H = g[G_H], W = g[G_W], KH = g[G_KH], KW = g[G_KW];                    \
        for (int64_t oh = 0; oh < g[G_HO]; oh++)                                                         \
            for (int64_t ow = 0; ow < g[G_WO]; ow++)                                                     \
                for (int64_t i = 0; i < KH; i++) {                                                       \
                    int64_t ih = oh * g[G_SH] - g[G_PH] + i * g[G_DH];                                   \
                    for (int64_t j = 0; j < KW; j++, dst += C) {                                         \
                        int64_t iw = ow * g[G_SW] - g[G_PW] + j * g[G_DW];                               \
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) {                                    \
                            for (int64_t c = 0; c < C; c++) dst[c] = 0;                                  \
                        } else {                                                                         \
                            const T *src = x + (ih * W + iw) * C;                                        \
                            for (int64_t c = 0; c < C; c++) dst[c] = src[c];                             \
                        }                                                                                \
                    }                                                                                    \
                }                                                                                        \
    }                                                                                                    \
                                                                                                         \
    /* col2im of one image into dx: its columns (as cols_* lays them out) added in double from 0.0,      \
     * kernel offset by kernel offset, and rounded once. NCHW adds into the padded image (`acc` holds    \
     * C*(H+2PH)*(W+2PW) doubles) without bounds tests, then drops the padding. */                       \
    VG_CLONES static void add_back_##NAME(const T *cols, int64_t ld, const int64_t *g, double *acc, T *dx) { \
        const int64_t C = g[G_C], H = g[G_H], W = g[G_W], KH = g[G_KH], KW = g[G_KW];                    \
        const int64_t HO = g[G_HO], WO = g[G_WO], SW = g[G_SW];                                          \
        if (!g[G_NHWC]) {                                                                                \
            const int64_t HP = H + 2 * g[G_PH], WP = W + 2 * g[G_PW], ROW = g[G_SH] * WP;                \
            memset(acc, 0, (size_t)(C * HP * WP) * sizeof(double));                                      \
            for (int64_t c = 0; c < C; c++)                                                              \
                for (int64_t i = 0; i < KH; i++)                                                         \
                    for (int64_t j = 0; j < KW; j++) {                                                   \
                        const T *r = cols + ((c * KH + i) * KW + j) * ld;                                \
                        double *a = acc + c * HP * WP + i * g[G_DH] * WP + j * g[G_DW];                  \
                        if (SW == 1 && WO == 4) /* small images: rows of a fixed length */               \
                            for (int64_t oh = 0; oh < HO; oh++, r += 4, a += ROW)                        \
                                for (int64_t ow = 0; ow < 4; ow++) a[ow] += (double)r[ow];               \
                        else if (SW == 1 && WO == 8)                                                     \
                            for (int64_t oh = 0; oh < HO; oh++, r += 8, a += ROW)                        \
                                for (int64_t ow = 0; ow < 8; ow++) a[ow] += (double)r[ow];               \
                        else                                                                             \
                            for (int64_t oh = 0; oh < HO; oh++, r += WO, a += ROW) {                     \
                                if (SW == 1)                                                             \
                                    for (int64_t ow = 0; ow < WO; ow++) a[ow] += (double)r[ow];          \
                                else                                                                     \
                                    for (int64_t ow = 0; ow < WO; ow++) a[ow * SW] += (double)r[ow];     \
                            }                                                                            \
                    }                                                                                    \
            for (int64_t c = 0; c < C; c++)                                                              \
                for (int64_t h = 0; h < H; h++) {                                                        \
                    const double *a = acc + (c * HP + h + g[G_PH]) * WP + g[G_PW];                       \
                    T *d = dx + (c * H + h) * W;                                                         \
                    for (int64_t w = 0; w < W; w++) d[w] = (T)a[w];                                      \
                }                                                                                        \
            return;                                                                                      \
        }                                                                                                \
        const int64_t KKC = KH * KW * C;                                                                 \
        memset(acc, 0, (size_t)(C * H * W) * sizeof(double));                                            \
        for (int64_t i = 0; i < KH; i++)                                                                 \
            for (int64_t j = 0; j < KW; j++)                                                             \
                for (int64_t oh = 0; oh < HO; oh++) {                                                    \
                    int64_t ih = oh * g[G_SH] - g[G_PH] + i * g[G_DH];                                   \
                    if (ih < 0 || ih >= H) continue;                                                     \
                    for (int64_t ow = 0; ow < WO; ow++) {                                                \
                        int64_t iw = ow * SW - g[G_PW] + j * g[G_DW];                                    \
                        if (iw < 0 || iw >= W) continue;                                                 \
                        double *a = acc + (ih * W + iw) * C;                                             \
                        const T *r = cols + (oh * WO + ow) * KKC + (i * KW + j) * C;                     \
                        for (int64_t c = 0; c < C; c++) a[c] += (double)r[c];                            \
                    }                                                                                    \
                }                                                                                        \
        for (int64_t e = 0; e < C * H * W; e++) dx[e] = (T)acc[e];                                       \
    }                                                                                                    \
                                                                                                         \
    /* The output gradients of images n0 .. n0+nb side by side (NCHW): O rows of nb*HO*WO. */            \
    static void gather_##NAME(const T *gy, const int64_t *g, int64_t n0, int64_t nb, T *rows) {          \
        const int64_t O = g[G_O], HOWO = g[G_HO] * g[G_WO], ld = nb * HOWO;                              \
        for (int64_t k = 0; k < nb; k++)                                                                 \
            for (int64_t o = 0; o < O; o++)                                                              \
                memcpy(rows + o * ld + k * HOWO, gy + ((n0 + k) * O + o) * HOWO, (size_t)HOWO * sizeof(T)); \
    }                                                                                                    \
                                                                                                         \
    /* conv2d on blocks of images. NCHW: one product W @ cols for the block, written in place for a      \
     * block of one image, else into `res` and copied out image by image. */                             \
    static void forward_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                \
        conv_job *J = (conv_job *)ctx;                                                                   \
        const int64_t *g = J->g;                                                                         \
        const int64_t N = g[G_N], O = g[G_O], HOWO = g[G_HO] * g[G_WO];                                  \
        const int64_t IMG = g[G_C] * g[G_H] * g[G_W], CKK = g[G_C] * g[G_KH] * g[G_KW];                  \
        const int64_t PADDED = g[G_C] * (g[G_H] + 2 * g[G_PH]) * (g[G_W] + 2 * g[G_PW]);                 \
        const T *x = (const T *)J->a, *w = (const T *)J->b;                                              \
        T *out = (T *)J->out;                                                                            \
        T *cols = (T *)scratch(J->block * HOWO * CKK, sizeof(T));                                        \
        T *padded = g[G_NHWC] ? 0 : (T *)zeroed_scratch(PADDED, sizeof(T));                              \
        T *res = g[G_NHWC] || J->block == 1 ? 0 : (T *)scratch(J->block * HOWO * O, sizeof(T));          \
        int ok = 1;                                                                                      \
        for (int64_t b = lo; b < hi; b++) {                                                              \
            int64_t n0 = b * J->block, nb = N - n0 < J->block ? N - n0 : J->block, ld = nb * HOWO;       \
            T *o = out + n0 * HOWO * O;                                                                  \
            if (!g[G_NHWC]) {                                                                            \
                T *dst = nb == 1 ? o : res;                                                              \
                for (int64_t k = 0; k < nb; k++)                                                         \
                    cols_nchw_##NAME(x + (n0 + k) * IMG, g, cols + k * HOWO, ld, padded);                \
                vg_blas_call_##NAME(J->fn, J->int64, NO_TRANS, NO_TRANS, O, ld, CKK, w, CKK, cols, ld,   \
                                    (T)0, dst, ld);                                                      \
                if (dst == res)                                                                          \
                    for (int64_t k = 0; k < nb; k++)                                                     \
                        for (int64_t r = 0; r < O; r++)                                                  \
                            memcpy(o + (k * O + r) * HOWO, res + r * ld + k * HOWO, (size_t)HOWO * sizeof(T)); \
            } else {                                                                                     \
                for (int64_t k = 0; k < nb; k++) cols_nhwc_##NAME(x + (n0 + k) * IMG, g, cols + k * HOWO * CKK); \
                vg_blas_call_##NAME(J->fn, J->int64, NO_TRANS, NO_TRANS, ld, O, CKK, cols, CKK, w, O,    \
                                    (T)0, o, O);                                                         \
            }                                                                                            \
            ok &= vg_all_finite_##NAME(o, 1, nb * HOWO * O, nb * HOWO * O);                              \
        }                                                                                                \
        free(cols);                                                                                      \
        free(padded);                                                                                    \
        free(res);                                                                                       \
        if (!ok) __atomic_store_n(&J->bad, 1, __ATOMIC_RELAXED);                                         \
    }                                                                                                    \
                                                                                                         \
    /* conv2d_input_grad on blocks of images: one product for the block's columns (NCHW: of its output   \
     * gradients side by side, for a block of more than one image), then col2im image by image. */       \
    static void input_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                  \
        conv_job *J = (conv_job *)ctx;                                                                   \
        const int64_t *g = J->g;                                                                         \
        const int64_t N = g[G_N], O = g[G_O], HOWO = g[G_HO] * g[G_WO];                                  \
        const int64_t IMG = g[G_C] * g[G_H] * g[G_W], CKK = g[G_C] * g[G_KH] * g[G_KW];                  \
        const int64_t PADDED = g[G_C] * (g[G_H] + 2 * g[G_PH]) * (g[G_W] + 2 * g[G_PW]);                 \
        const T *gy = (const T *)J->a, *w = (const T *)J->b;                                             \
        T *dx = (T *)J->out;                                                                             \
        double *acc = (double *)scratch(PADDED, sizeof(double));                                         \
        T *cols = (T *)scratch(J->block * HOWO * CKK, sizeof(T));                                        \
        T *rows = g[G_NHWC] || J->block == 1 ? 0 : (T *)scratch(J->block * HOWO * O, sizeof(T));         \
        int ok = 1;                                                                                      \
        for (int64_t b = lo; b < hi; b++) {                                                              \
            int64_t n0 = b * J->block, nb = N - n0 < J->block ? N - n0 : J->block, ld = nb * HOWO;       \
            if (!g[G_NHWC]) {                                                                            \
                const T *src = gy + n0 * O * HOWO;                                                       \
                if (nb > 1) {                                                                            \
                    gather_##NAME(gy, g, n0, nb, rows);                                                  \
                    src = rows;                                                                          \
                }                                                                                        \
                vg_blas_call_##NAME(J->fn, J->int64, TRANS, NO_TRANS, CKK, ld, O, w, CKK, src, ld, (T)0, \
                                    cols, ld);                                                           \
                for (int64_t k = 0; k < nb; k++)                                                         \
                    add_back_##NAME(cols + k * HOWO, ld, g, acc, dx + (n0 + k) * IMG);                   \
            } else {                                                                                     \
                vg_blas_call_##NAME(J->fn, J->int64, NO_TRANS, TRANS, ld, CKK, O, gy + n0 * HOWO * O, O, \
                                    w, O, (T)0, cols, CKK);                                              \
                for (int64_t k = 0; k < nb; k++)                                                         \
                    add_back_##NAME(cols + k * HOWO * CKK, 0, g, acc, dx + (n0 + k) * IMG);              \
            }                                                                                            \
            ok &= vg_all_finite_##NAME(dx + n0 * IMG, 1, nb * IMG, nb * IMG);                            \
        }                                                                                                \
        free(acc);                                                                                       \
        free(cols);                                                                                      \
        free(rows);                                                                                      \
        if (!ok) __atomic_store_n(&J->bad, 1, __ATOMIC_RELAXED);                                         \
    }                                                                                                    \
                                                                                                         \
    /* conv2d_weight_grad: units are blocks; each writes its partial sum. */                             \
    static void weight_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                 \
        conv_job *J = (conv_job *)ctx;                                                                   \
        const int64_t *g = J->g;                                                                         \
        const int64_t N = g[G_N], O = g[G_O], HOWO = g[G_HO] * g[G_WO];                                  \
        const int64_t IMG = g[G_C] * g[G_H] * g[G_W], CKK = g[G_C] * g[G_KH] * g[G_KW];                  \
        const int64_t PADDED = g[G_C] * (g[G_H] + 2 * g[G_PH]) * (g[G_W] + 2 * g[G_PW]);                 \
        const T *gy = (const T *)J->a, *x = (const T *)J->b;                                             \
        T *cols = (T *)scratch(J->block * HOWO * CKK, sizeof(T));                                        \
        T *rows = g[G_NHWC] ? 0 : (T *)scratch(J->block * HOWO * O, sizeof(T));                          \
        T *padded = g[G_NHWC] ? 0 : (T *)zeroed_scratch(PADDED, sizeof(T));                              \
        for (int64_t b = lo; b < hi; b++) {                                                              \
            int64_t n0 = b * J->block, nb = N - n0 < J->block ? N - n0 : J->block, ld = nb * HOWO;       \
            T *part = (T *)J->partial + b * O * CKK;                                                     \
            if (!g[G_NHWC]) {                                                                            \
                for (int64_t k = 0; k < nb; k++)                                                         \
                    cols_nchw_##NAME(x + (n0 + k) * IMG, g, cols + k * HOWO, ld, padded);                \
                gather_##NAME(gy, g, n0, nb, rows);                                                      \
                vg_blas_call_##NAME(J->fn, J->int64, NO_TRANS, TRANS, O, CKK, ld, rows, ld, cols, ld,    \
                                    (T)0, part, CKK);                                                    \
            } else {                                                                                     \
                for (int64_t k = 0; k < nb; k++) cols_nhwc_##NAME(x + (n0 + k) * IMG, g, cols + k * HOWO * CKK); \
                vg_blas_call_##NAME(J->fn, J->int64, TRANS, NO_TRANS, CKK, O, ld, cols, CKK,             \
                                    gy + n0 * HOWO * O, O, (T)0, part, O);                               \
            }                                                                                            \
        }                                                                                                \
        free(cols);                                                                                      \
        free(rows);                                                                                      \
        free(padded);                                                                                    \
    }                                                                                                    \
                                                                                                         \
    /* One-channel images (NCHW, C = 1, stride and dilation 1, at most MAX_TAPS taps, output rows of at  \
     * least a vector): a direct convolution, where im2col's columns would be only KH*KW rows deep for the \
     * GEMM. Output rows go in vectors of VG_LANES(T) columns (GCC's vector extension: AVX2 or SSE2      \
     * registers, the same operations either way), the last vector of a row ending at its end (it repeats \
     * some columns of the one before, with the same sums); the forward pass computes two rows of four   \
     * output channels at once, each element the sum of its KH*KW products in tap order from 0; the weight \
     * gradient (for rows of at least two vectors: on narrower ones the GEMM is faster) sums a block's   \
     * products per tap in a vector over the block's rows, its lanes then added in order in double. Sums of \
     * the depths the module docstring states (KH*KW; N*HO*WO) in other orders than the GEMM's: within the \
     * same bound, and fixed by the shape, so the same bits for any thread count. */                     \
    typedef T vec_##NAME __attribute__((vector_size(VG_VECTOR)));                                        \
                                                                                                         \
    static int direct_##NAME(const int64_t *g) {                                                         \
        return !g[G_NHWC] && g[G_C] == 1 && g[G_SH] == 1 && g[G_SW] == 1 && g[G_DH] == 1 && g[G_DW] == 1 && \
               g[G_KH] * g[G_KW] <= MAX_TAPS && g[G_WO] >= VG_LANES(T);                                  \
    }                                                                                                    \
                                                                                                         \
    VG_CLONES COPY_LOOPS static void direct_forward_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {    \
        conv_job *J = (conv_job *)ctx;                                                                   \
        const int64_t *g = J->g;                                                                         \
        const int64_t H = g[G_H], W = g[G_W], O = g[G_O], TAPS = g[G_KH] * g[G_KW], PLANE = g[G_HO] * g[G_WO]; \
        const int64_t HO = g[G_HO], WO = g[G_WO], WP = W + 2 * g[G_PW], L = VG_LANES(T);                 \
        const T *x = (const T *)J->a, *w = (const T *)J->b;                                              \
        T *padded = (T *)zeroed_scratch((H + 2 * g[G_PH]) * WP, sizeof(T));                              \
        T wq[4 * MAX_TAPS]; /* four output channels' weights, zeros past the last channel */             \
        int64_t off[MAX_TAPS];                                                                           \
        tap_offsets(g, off);                                                                             \
        int ok = 1;                                                                                      \
        for (int64_t n = lo; n < hi; n++) {                                                              \
            pad_image_##NAME(x + n * H * W, g, padded);                                                  \
            T *y = (T *)J->out + n * O * PLANE;                                                          \
            for (int64_t o = 0; o < O; o += 4) {                                                         \
                const int64_t m = O - o < 4 ? O - o : 4;                                                 \
                for (int64_t k = 0; k < 4 * TAPS; k++) wq[k] = k < m * TAPS ? w[o * TAPS + k] : (T)0;    \
                for (int64_t oh = 0; oh < HO; oh += 2) { /* rows oh and oh1: eight sums in flight */     \
                    const int64_t oh1 = oh + 1 < HO ? oh + 1 : oh;                                       \
                    const T *r0 = padded + oh * WP, *r1 = padded + oh1 * WP;                             \
                    T *y0 = y + o * PLANE + oh * WO, *y1 = y + o * PLANE + oh1 * WO;                     \
                    for (int64_t c0 = 0; c0 < WO; c0 += L) {                                             \
                        const int64_t c = c0 + L <= WO ? c0 : WO - L;                                    \
                        vec_##NAME a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0}; \
                        for (int64_t t = 0; t < TAPS; t++) {                                             \
                            vec_##NAME u, v;                                                             \
                            memcpy(&u, r0 + off[t] + c, sizeof u);                                       \
                            memcpy(&v, r1 + off[t] + c, sizeof v);                                       \
                            const T w0 = wq[t], w1 = wq[TAPS + t], w2 = wq[2 * TAPS + t], w3 = wq[3 * TAPS + t]; \
                            a0 += u * w0;                                                                \
                            a1 += u * w1;                                                                \
                            a2 += u * w2;                                                                \
                            a3 += u * w3;                                                                \
                            b0 += v * w0;                                                                \
                            b1 += v * w1;                                                                \
                            b2 += v * w2;                                                                \
                            b3 += v * w3;                                                                \
                        }                                                                                \
                        memcpy(y0 + c, &a0, sizeof a0);                                                  \
                        memcpy(y1 + c, &b0, sizeof b0);                                                  \
                        if (m > 1) {                                                                     \
                            memcpy(y0 + PLANE + c, &a1, sizeof a1);                                      \
                            memcpy(y1 + PLANE + c, &b1, sizeof b1);                                      \
                        }                                                                                \
                        if (m > 2) {                                                                     \
                            memcpy(y0 + 2 * PLANE + c, &a2, sizeof a2);                                  \
                            memcpy(y1 + 2 * PLANE + c, &b2, sizeof b2);                                  \
                        }                                                                                \
                        if (m > 3) {                                                                     \
                            memcpy(y0 + 3 * PLANE + c, &a3, sizeof a3);                                  \
                            memcpy(y1 + 3 * PLANE + c, &b3, sizeof b3);                                  \
                        }                                                                                \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
            ok &= vg_all_finite_##NAME(y, 1, O * PLANE, O * PLANE);                                      \
        }                                                                                                \
        free(padded);                                                                                    \
        if (!ok) __atomic_store_n(&J->bad, 1, __ATOMIC_RELAXED);                                         \
    }                                                                                                    \
                                                                                                         \
    /* The weight gradient of output channel o over images n0 .. n0+nb (`padded`: their padded images, one \
     * after the other) into sums[TAPS]; inlined with TAPS a constant 9, its vectors stay in registers. */ \
    static inline __attribute__((always_inline)) void direct_sums_##NAME(const T *gy, const T *padded,   \
        const int64_t *g, const int64_t *off, int64_t n0, int64_t nb, int64_t o, int64_t TAPS, double *sums) { \
        const int64_t HO = g[G_HO], WO = g[G_WO], WP = g[G_W] + 2 * g[G_PW], L = VG_LANES(T);            \
        const int64_t PADDED = (g[G_H] + 2 * g[G_PH]) * WP;                                              \
        vec_##NAME acc[MAX_TAPS], keep, u, v;                                                            \
        for (int64_t e = 0; e < L; e++) /* the last vector's lanes that repeat columns: off */           \
            keep[e] = e < L - (WO % L ? WO % L : L) ? (T)0 : (T)1;                                       \
        for (int64_t t = 0; t < TAPS; t++) acc[t] = (vec_##NAME){0};                                     \
        for (int64_t k = 0; k < nb; k++)                                                                 \
            for (int64_t oh = 0; oh < HO; oh++) {                                                        \
                const T *gr = gy + ((n0 + k) * g[G_O] + o) * HO * WO + oh * WO;                          \
                const T *row = padded + k * PADDED + oh * WP;                                            \
                for (int64_t c0 = 0; c0 < WO; c0 += L) {                                                 \
                    const int64_t c = c0 + L <= WO ? c0 : WO - L;                                        \
                    memcpy(&u, gr + c, sizeof u);                                                        \
                    if (c != c0) u *= keep;                                                              \
                    for (int64_t t = 0; t < TAPS; t++) {                                                 \
                        memcpy(&v, row + off[t] + c, sizeof v);                                          \
                        acc[t] += u * v;                                                                 \
                    }                                                                                    \
                }                                                                                        \
            }                                                                                            \
        for (int64_t t = 0; t < TAPS; t++) {                                                             \
            double sum = 0.0;                                                                            \
            for (int64_t e = 0; e < L; e++) sum += (double)acc[t][e];                                    \
            sums[t] = sum;                                                                               \
        }                                                                                                \
    }                                                                                                    \
                                                                                                         \
    VG_CLONES COPY_LOOPS static void direct_weight_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {     \
        conv_job *J = (conv_job *)ctx;                                                                   \
        const int64_t *g = J->g;                                                                         \
        const int64_t N = g[G_N], IMG = g[G_H] * g[G_W], O = g[G_O], TAPS = g[G_KH] * g[G_KW];           \
        const int64_t PADDED = (g[G_H] + 2 * g[G_PH]) * (g[G_W] + 2 * g[G_PW]);                          \
        const T *gy = (const T *)J->a, *x = (const T *)J->b;                                             \
        T *padded = (T *)zeroed_scratch(J->block * PADDED, sizeof(T));                                   \
        int64_t off[MAX_TAPS];                                                                           \
        double sums[MAX_TAPS];                                                                           \
        tap_offsets(g, off);                                                                             \
        for (int64_t b = lo; b < hi; b++) {                                                              \
            const int64_t n0 = b * J->block, nb = N - n0 < J->block ? N - n0 : J->block;                 \
            T *part = (T *)J->partial + b * O * TAPS;                                                    \
            for (int64_t k = 0; k < nb; k++) pad_image_##NAME(x + (n0 + k) * IMG, g, padded + k * PADDED); \
            for (int64_t o = 0; o < O; o++) {                                                            \
                if (TAPS == 9)                                                                           \
                    direct_sums_##NAME(gy, padded, g, off, n0, nb, o, 9, sums);                          \
                else                                                                                     \
                    direct_sums_##NAME(gy, padded, g, off, n0, nb, o, TAPS, sums);                       \
                for (int64_t t = 0; t < TAPS; t++) part[o * TAPS + t] = (T)sums[t];                      \
            }                                                                                            \
        }                                                                                                \
        free(padded);                                                                                    \
    }                                                                                                    \
                                                                                                         \
    /* The number of blocks (the work units) and the images per block, for a scratch budget. */          \
    static int64_t units_##NAME(const int64_t *g, int64_t budget, int64_t *block) {                      \
        *block = block_of(g, g[G_HO] * g[G_WO] * g[G_C] * g[G_KH] * g[G_KW], budget);                    \
        return (g[G_N] + *block - 1) / *block;                                                           \
    }                                                                                                    \
                                                                                                         \
    int vg_conv2d_##NAME(void *fn, int int64, const T *x, const T *w, T *out, const int64_t *g, int threads) { \
        conv_job J = {.fn = fn, .int64 = int64, .a = x, .b = w, .out = out, .g = g};                     \
        if (direct_##NAME(g)) {                                                                          \
            vg_parallel_for(g[G_N], 1, threads, direct_forward_chunk_##NAME, &J);                        \
            return vg_count_rerun(!J.bad);                                                               \
        }                                                                                                \
        if (vg_implicit_##NAME(g)) return vg_count_rerun(vg_implicit_forward_##NAME(x, w, out, g, threads)); \
        int64_t units = units_##NAME(g, COLS_BUDGET, &J.block);                                          \
        vg_blas_single_begin();                                                                          \
        vg_parallel_for(units, 1, threads, forward_chunk_##NAME, &J);                                    \
        vg_blas_single_end();                                                                            \
        return vg_count_rerun(!J.bad);                                                                   \
    }                                                                                                    \
                                                                                                         \
    int vg_conv2d_input_grad_##NAME(void *fn, int int64, const T *gy, const T *w, T *dx, const int64_t *g, \
                                    int threads) {                                                       \
        conv_job J = {.fn = fn, .int64 = int64, .a = gy, .b = w, .out = dx, .g = g};                     \
        int done = vg_implicit_input_##NAME(gy, w, dx, g, threads); /* -1: not taken */                  \
        if (done >= 0) return vg_count_rerun(done);                                                      \
        int64_t units = units_##NAME(g, COLS_BUDGET, &J.block);                                          \
        vg_blas_single_begin();                                                                          \
        vg_parallel_for(units, 1, threads, input_chunk_##NAME, &J);                                      \
        vg_blas_single_end();                                                                            \
        return vg_count_rerun(!J.bad);                                                                   \
    }                                                                                                    \
                                                                                                         \
    int vg_conv2d_weight_grad_##NAME(void *fn, int int64, const T *gy, const T *x, T *dw, const int64_t *g, \
                                     int threads) {                                                      \
        conv_job J = {.fn = fn, .int64 = int64, .a = gy, .b = x, .out = dw, .g = g};                     \
        const int64_t size = g[G_O] * g[G_C] * g[G_KH] * g[G_KW];                                        \
        int64_t units = units_##NAME(g, SUMS_BUDGET, &J.block);                                          \
        J.partial = scratch(units * size, sizeof(T));                                                    \
        if (direct_##NAME(g) && g[G_WO] >= 2 * VG_LANES(T)) { /* narrower rows: the GEMM is faster */    \
            vg_parallel_for(units, 1, threads, direct_weight_chunk_##NAME, &J);                          \
        } else if (vg_implicit_##NAME(g)) {                                                              \
            vg_implicit_weight_##NAME(gy, x, (T *)J.partial, g, J.block, units, threads);                \
        } else {                                                                                         \
            vg_blas_single_begin();                                                                      \
            vg_parallel_for(units, 1, threads, weight_chunk_##NAME, &J);                                 \
            vg_blas_single_end();                                                                        \
        }                                                                                                \
        const T *part = (const T *)J.partial;                                                            \
        double *sum = (double *)zeroed_scratch(size, sizeof(double)); /* block by block, in order */     \
        for (int64_t b = 0; b < units; b++)                                                              \
            for (int64_t e = 0; e < size; e++) sum[e] += (double)part[b * size + e];                     \
        for (int64_t e = 0; e < size; e++) dw[e] = (T)sum[e];                                            \
        free(sum);                                                                                       \
        free(J.partial);                                                                                 \
        return vg_count_rerun(vg_all_finite_##NAME(dw, 1, size, size));                                  \
    }

/* f64 keeps the columns and OpenBLAS: no implicit path (never taken; the input gradient says -1) */
static inline int vg_implicit_f64(const int64_t *g) { return (void)g, 0; }
static inline void vg_implicit_weight_f64(const double *gy, const double *x, double *partial, const int64_t *g,
                                       int64_t block, int64_t units, int threads) {
    (void)gy, (void)x, (void)partial, (void)g, (void)block, (void)units, (void)threads;
}
static inline int vg_implicit_forward_f64(const double *x, const double *w, double *out, const int64_t *g,
                                       int threads) {
    return (void)x, (void)w, (void)out, (void)g, (void)threads, 0;
}
static inline int vg_implicit_input_f64(const double *gy, const double *w, double *dx, const int64_t *g,
                                     int threads) {
    return (void)gy, (void)w, (void)dx, (void)g, (void)threads, -1;
}

CONV_KERNELS(float, f32)
CONV_KERNELS(double, f64)
