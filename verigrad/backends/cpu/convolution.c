/* 2-D convolution (groups=1) and its two gradients, f32 and f64, NCHW with OIHW weights or NHWC with
 * HWIO weights: the columns of a block of images in a thread's scratch buffer, then one single-threaded
 * OpenBLAS GEMM per block (gemm.c's vg_blas_call), no transposed copy of the batch:
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
 *   (see "Implicit GEMM" below); on AVX-512, conv2d and the input gradient of 16 channels or more put
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

#include "vg.h"

enum { G_N, G_C, G_H, G_W, G_O, G_KH, G_KW, G_SH, G_SW, G_PH, G_PW, G_DH, G_DW, G_HO, G_WO, G_NHWC, G_LEN };

/* gemm.c */
void vg_blas_call_f32(void *fn, int int64, int ta, int tb, int64_t m, int64_t n, int64_t k, const float *a,
                      int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc);
void vg_blas_call_f64(void *fn, int int64, int ta, int tb, int64_t m, int64_t n, int64_t k, const double *a,
                      int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc);
int vg_all_finite_f32(const float *c, int64_t m, int64_t n, int64_t ldc);
int vg_all_finite_f64(const double *c, int64_t m, int64_t n, int64_t ldc);
void vg_blas_single_begin(void);
void vg_blas_single_end(void);

enum { NO_TRANS = 111, TRANS = 112 };

/* A block's columns take about this many elements: conv2d and the input gradient, whose products are
 * written out block by block, keep them in cache; the weight gradient's, summed over the blocks, are
 * larger. And a batch is cut into at least MIN_BLOCKS blocks, if it can be (the threads' work units). */
#define COLS_BUDGET (1 << 16)
#define SUMS_BUDGET (1 << 18)
#define MIN_BLOCKS 8
#define MAX_TAPS 64 /* the direct path's kernels (one-channel images): at most this many taps */
#define VG_VECTOR 32
#define VG_LANES(T) ((int64_t)(VG_VECTOR / sizeof(T)))

/* Images per block: as many as fit the budget, but at least MIN_BLOCKS blocks (and one image). */
static int64_t block_of(const int64_t *g, int64_t per_image, int64_t budget) {
    int64_t b = budget / (per_image > 0 ? per_image : 1);
    int64_t most = (g[G_N] + MIN_BLOCKS - 1) / MIN_BLOCKS;
    if (b > most) b = most;
    return b > 0 ? b : 1;
}

/* A 64-byte aligned scratch buffer; out of memory aborts (as the other kernels' buffers do). */
static void *scratch(int64_t n, size_t size) {
    size_t bytes = ((size_t)(n > 0 ? n : 1) * size + 63) / 64 * 64;
    void *p = aligned_alloc(64, bytes);
    if (!p) abort();
    return p;
}

static void *zeroed_scratch(int64_t n, size_t size) {
    void *p = scratch(n, size);
    memset(p, 0, (size_t)(n > 0 ? n : 1) * size);
    return p;
}

/* Where each tap (c, i, j), in that order, reads in a padded image, from the start of an output
 * element's window (stride-1 convolutions: the direct and implicit paths). */
static void tap_offsets(const int64_t *g, int64_t *off) {
    const int64_t WP = g[G_W] + 2 * g[G_PW], PLANE = (g[G_H] + 2 * g[G_PH]) * WP;
    for (int64_t c = 0, k = 0; c < g[G_C]; c++)
        for (int64_t i = 0; i < g[G_KH]; i++)
            for (int64_t j = 0; j < g[G_KW]; j++, k++) off[k] = c * PLANE + i * g[G_DH] * WP + j * g[G_DW];
}

/* The taps' offsets in stack_columns' layout. */
static void stack_offsets(const int64_t *g, int64_t *off) {
    const int64_t HP = g[G_H] + 2 * g[G_PH], COLUMN = g[G_C] * HP * 4;
    for (int64_t c = 0, k = 0; c < g[G_C]; c++)
        for (int64_t i = 0; i < g[G_KH]; i++)
            for (int64_t j = 0; j < g[G_KW]; j++, k++) off[k] = j * COLUMN + c * HP * 4 + i * g[G_DH] * 4;
}

/* The copies above are short rows (a few to a few dozen elements): plain loops beat memcpy calls. */
#if defined(__GNUC__) && !defined(__clang__)
#define COPY_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define COPY_LOOPS
#endif

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

#define CONV_KERNELS(T, NAME)                                                                            \
    /* One image, NCHW, into the interior of C planes of (H + 2PH) x (W + 2PW) whose border is zero   \
     * (`zeroed_scratch`: every image writes the same interior, so the border stays zero). */          \
    COPY_LOOPS static void pad_image_##NAME(const T *x, const int64_t *g, T *dst) {                      \
        const int64_t H = g[G_H], W = g[G_W], WP = W + 2 * g[G_PW];                                      \
        dst += g[G_PH] * WP + g[G_PW];                                                                   \
        for (int64_t c = 0; c < g[G_C]; c++, dst += 2 * g[G_PH] * WP)                                   \
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
    }                                                                                                    \
                                                                                                         \
    /* NCHW columns of one image: rows (c, i, j) of HO*WO elements, `ld` apart, copied from the padded \
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
    /* col2im of one image into dx: its columns (as cols_* lays them out) added in double from 0.0,     \
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
        memset(acc, 0, (size_t)(C * H * W) * sizeof(double));                                           \
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
    /* The output gradients of images n0 .. n0+nb side by side (NCHW): O rows of nb*HO*WO. */          \
    static void gather_##NAME(const T *gy, const int64_t *g, int64_t n0, int64_t nb, T *rows) {          \
        const int64_t O = g[G_O], HOWO = g[G_HO] * g[G_WO], ld = nb * HOWO;                              \
        for (int64_t k = 0; k < nb; k++)                                                                 \
            for (int64_t o = 0; o < O; o++)                                                              \
                memcpy(rows + o * ld + k * HOWO, gy + ((n0 + k) * O + o) * HOWO, (size_t)HOWO * sizeof(T)); \
    }                                                                                                    \
                                                                                                         \
    /* conv2d on blocks of images. NCHW: one product W @ cols for the block, written in place for a     \
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
    /* conv2d_input_grad on blocks of images: one product for the block's columns (NCHW: of its output \
     * gradients side by side, for a block of more than one image), then col2im image by image. */      \
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
    /* The number of blocks (the work units) and the images per block, for a scratch budget. */         \
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
        if (implicit_##NAME(g)) return vg_count_rerun(implicit_forward_##NAME(x, w, out, g, threads));   \
        int64_t units = units_##NAME(g, COLS_BUDGET, &J.block);                                           \
        vg_blas_single_begin();                                                                          \
        vg_parallel_for(units, 1, threads, forward_chunk_##NAME, &J);                                    \
        vg_blas_single_end();                                                                            \
        return vg_count_rerun(!J.bad);                                                                   \
    }                                                                                                    \
                                                                                                         \
    int vg_conv2d_input_grad_##NAME(void *fn, int int64, const T *gy, const T *w, T *dx, const int64_t *g, \
                                    int threads) {                                                       \
        conv_job J = {.fn = fn, .int64 = int64, .a = gy, .b = w, .out = dx, .g = g};                     \
        int done = implicit_input_##NAME(gy, w, dx, g, threads); /* -1: not taken */                     \
        if (done >= 0) return vg_count_rerun(done);                                                      \
        int64_t units = units_##NAME(g, COLS_BUDGET, &J.block);                                           \
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
        int64_t units = units_##NAME(g, SUMS_BUDGET, &J.block);                                                    \
        J.partial = scratch(units * size, sizeof(T));                                                    \
        if (direct_##NAME(g) && g[G_WO] >= 2 * VG_LANES(T)) { /* narrower rows: the GEMM is faster */    \
            vg_parallel_for(units, 1, threads, direct_weight_chunk_##NAME, &J);                          \
        } else if (implicit_##NAME(g)) {                                                                 \
            implicit_weight_##NAME(gy, x, (T *)J.partial, g, J.block, units, threads);                   \
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

/* Implicit GEMM (f32, AVX2 and FMA; NCHW, stride 1): conv2d with no columns in memory. Each output element
 * is one FMA chain over the taps k = (c, i, j) in order from 0 (a sum of depth C*KH*KW, within the bound
 * of the GEMM's other orders), so the bits do not depend on the thread count. A tile is 8 output pixels (a
 * row's run of 8, the last one ending at the row's end; on 4-wide rows, two rows) by 6 output channels,
 * for two tiles of pixels at once: per tap, two vector loads of the padded image at the tap's offset, six
 * weights broadcast, twelve FMAs (4-wide rows read a copy of the padded image with each kernel column's 4
 * columns packed, where a tap's two rows of 4 are neighbours). Weights are repacked k-major, the channels
 * padded to a multiple of 6 with zeros. conv2d_input_grad of such a convolution (padding at most the
 * dilated kernel's extent less one) is conv2d of the output gradient with the kernel flipped and its
 * channel axes swapped, so it takes the same path, and no columns are added back. The weight gradient's
 * partial sum over a block of images (as the GEMM path's) takes the output gradient pixel-major (16
 * channels a vector pair, padded with zeros; transposed in 8x8 blocks) and a tile of 16 output channels by
 * 6 taps: per pixel, two vector loads, six image values broadcast, twelve FMAs; each sum one FMA chain
 * over the block's pixels in order. */
static int implicit_f32(const int64_t *g);
static int implicit_forward_f32(const float *x, const float *w, float *out, const int64_t *g, int threads);
static int implicit_input_f32(const float *gy, const float *w, float *dx, const int64_t *g, int threads);
static void implicit_weight_f32(const float *gy, const float *x, float *partial, const int64_t *g, int64_t block,
                                int64_t units, int threads);
/* f64 keeps the columns and OpenBLAS: no implicit path (never taken; the input gradient says -1) */
static inline int implicit_f64(const int64_t *g) { return (void)g, 0; }
static inline void implicit_weight_f64(const double *gy, const double *x, double *partial, const int64_t *g,
                                       int64_t block, int64_t units, int threads) {
    (void)gy, (void)x, (void)partial, (void)g, (void)block, (void)units, (void)threads;
}
static inline int implicit_forward_f64(const double *x, const double *w, double *out, const int64_t *g,
                                       int threads) {
    return (void)x, (void)w, (void)out, (void)g, (void)threads, 0;
}
static inline int implicit_input_f64(const double *gy, const double *w, double *dx, const int64_t *g,
                                     int threads) {
    return (void)gy, (void)w, (void)dx, (void)g, (void)threads, -1;
}

CONV_KERNELS(float, f32)
CONV_KERNELS(double, f64)

#define IMPLICIT_CH 6     /* output channels of a tile */
#define IMPLICIT_MAX_K 4608 /* taps (C*KH*KW) at most */

static int implicit_cpu(void) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return known;
#else
    return 0;
#endif
}

/* Whether this CPU takes the implicit path (AVX2 and FMA). */
int vg_conv_implicit(void) { return implicit_cpu(); }

/* Whether the implicit path may put the channels in the lanes (on AVX-512); 0 for the tests. */
static int lanes_enabled = 1;
void vg_conv_lanes(int flag) { lanes_enabled = flag; }
static int lanes_cpu(void) { return lanes_enabled && vg_has_avx512(); }

static int implicit_f32(const int64_t *g) {
    const int64_t WO = g[G_WO];
    return !g[G_NHWC] && g[G_SH] == 1 && g[G_SW] == 1 && (WO >= 8 || (WO == 4 && g[G_HO] % 2 == 0)) &&
           g[G_C] * g[G_KH] * g[G_KW] <= IMPLICIT_MAX_K && g[G_O] >= IMPLICIT_CH && implicit_cpu();
}

typedef struct {
    const float *x, *wt; /* the images; the weights, k-major, OP channels a tap */
    float *out;
    const int64_t *g, *off; /* taps' offsets in the padded image */
    const int64_t *seg;     /* tiles of pixels: where each starts in the output plane, then in the padded plane */
    int64_t K, OP, tiles, block; /* block: images per unit of the weight gradient */
    int bad, lanes;              /* lanes: implicit_image_lanes computes the images */
} implicit_job;

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>

/* 4-wide rows: for each kernel column j, the padded image's columns j*DW .. j*DW + 3 of every row, packed
 * (stack[j][c][r][0..3]), so that a tap's two rows of 4 pixels are 8 neighbours (one load, no insert). */
__attribute__((target("avx2,fma"))) static void stack_columns(const int64_t *g, const float *padded, float *stack) {
    const int64_t WP = g[G_W] + 2 * g[G_PW], ROWS = g[G_C] * (g[G_H] + 2 * g[G_PH]);
    for (int64_t j = 0; j < g[G_KW]; j++, stack += ROWS * 4)
        for (int64_t r = 0; r < ROWS; r++) _mm_storeu_ps(stack + r * 4, _mm_loadu_ps(padded + r * WP + j * g[G_DW]));
}

/* stack_columns straight from an image 4 wide whose kernel columns start at most one column off its own
 * (3 wide, padding 1): each row shifted by a lane; the padding rows of `stack` are left as they are
 * (zero). Returns 0 (nothing done) for other images. */
__attribute__((target("avx2,fma"))) static int stack_image(const int64_t *g, const float *x, float *stack) {
    const int64_t C = g[G_C], H = g[G_H], PH = g[G_PH], HP = H + 2 * PH;
    if (g[G_W] != 4) return 0;
    for (int64_t j = 0; j < g[G_KW]; j++) {
        const int64_t shift = j * g[G_DW] - g[G_PW];
        if (shift < -1 || shift > 1) return 0;
    }
    for (int64_t j = 0; j < g[G_KW]; j++) {
        const int64_t shift = j * g[G_DW] - g[G_PW];
        for (int64_t c = 0; c < C; c++) {
            float *dst = stack + ((j * C + c) * HP + PH) * 4;
            const float *src = x + c * H * 4;
            for (int64_t r = 0; r < H; r++) {
                __m128i v = _mm_castps_si128(_mm_loadu_ps(src + r * 4));
                v = shift < 0 ? _mm_slli_si128(v, 4) : shift > 0 ? _mm_srli_si128(v, 4) : v;
                _mm_storeu_ps(dst + r * 4, _mm_castsi128_ps(v));
            }
        }
    }
    return 1;
}

/* `src`: the padded image (rows of 8 or more), or its stack_columns (rows of 4). */
__attribute__((target("avx2,fma"), always_inline)) static inline void implicit_image(const implicit_job *J,
                                                                                     const float *src, float *y) {
    const int64_t *g = J->g, *off = J->off, *seg = J->seg, K = J->K, OP = J->OP, O = g[G_O];
    const int64_t HOWO = g[G_HO] * g[G_WO];
    for (int64_t ch = 0; ch < OP; ch += IMPLICIT_CH) {
        const int64_t m = O - ch < IMPLICIT_CH ? O - ch : IMPLICIT_CH;
        for (int64_t t = 0; t < J->tiles; t += 2) {
            const int64_t t1 = t + 1 < J->tiles ? t + 1 : t;
            const float *p0 = src + seg[2 * t + 1], *p1 = src + seg[2 * t1 + 1];
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
            __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
            const float *w = J->wt + ch;
            for (int64_t k = 0; k < K; k++, w += OP) {
                const __m256 u = _mm256_loadu_ps(p0 + off[k]), v = _mm256_loadu_ps(p1 + off[k]);
                __m256 c = _mm256_broadcast_ss(w);
                a0 = _mm256_fmadd_ps(u, c, a0), b0 = _mm256_fmadd_ps(v, c, b0);
                c = _mm256_broadcast_ss(w + 1);
                a1 = _mm256_fmadd_ps(u, c, a1), b1 = _mm256_fmadd_ps(v, c, b1);
                c = _mm256_broadcast_ss(w + 2);
                a2 = _mm256_fmadd_ps(u, c, a2), b2 = _mm256_fmadd_ps(v, c, b2);
                c = _mm256_broadcast_ss(w + 3);
                a3 = _mm256_fmadd_ps(u, c, a3), b3 = _mm256_fmadd_ps(v, c, b3);
                c = _mm256_broadcast_ss(w + 4);
                a4 = _mm256_fmadd_ps(u, c, a4), b4 = _mm256_fmadd_ps(v, c, b4);
                c = _mm256_broadcast_ss(w + 5);
                a5 = _mm256_fmadd_ps(u, c, a5), b5 = _mm256_fmadd_ps(v, c, b5);
            }
            const __m256 as[IMPLICIT_CH] = {a0, a1, a2, a3, a4, a5}, bs[IMPLICIT_CH] = {b0, b1, b2, b3, b4, b5};
            for (int64_t q = 0; q < m; q++) {
                _mm256_storeu_ps(y + (ch + q) * HOWO + seg[2 * t], as[q]);
                _mm256_storeu_ps(y + (ch + q) * HOWO + seg[2 * t1], bs[q]);
            }
        }
    }
}

/* AVX-512, channels in the lanes: a block of one output row's PB pixels (consecutive) by NV vectors of
 * 16 output channels; per tap, NV vectors of weights (the tap's row of the k-major weights, OP a
 * multiple of 16) and PB pixel values broadcast. Each output element is the same FMA chain over the taps
 * in order from 0 as implicit_image's (a product commutes), so the bits are the same. implicit_image
 * computes rows of 14 pixels as two runs of 8 that overlap (16 pixels for 14) and puts pixels in the
 * lanes; here no lane is wasted on a row of 14: the 28x28 CNN's second layer (64x16x14x14, 32 channels)
 * 1.43 -> 1.17 ms forward and 1.39 -> 1.13 ms for the input gradient on one thread of a Zen 4, 16x64x28x28
 * with 64 channels 1.32x; rows of 8 to 13 pixels gain 2-12% (64x16x8x8). */
#define LANES_BLOCK(PB, NV)                                                                                \
    __attribute__((target("avx2,fma,avx512f,avx512dq"))) static void lanes_##PB##x##NV(                    \
        const float *base, const int64_t *off, const float *w, int64_t K, int64_t OP, float *tmp) {        \
        __m512 acc[PB][NV];                                                                                \
        _Pragma("GCC unroll 32") for (int q = 0; q < PB; q++)                                              \
        _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[q][v] = _mm512_setzero_ps();              \
        for (int64_t k = 0; k < K; k++, w += OP) {                                                         \
            const float *p = base + off[k];                                                                \
            __m512 wv[NV];                                                                                 \
            _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) {                                         \
                wv[v] = _mm512_loadu_ps(w + 16 * v);                                                       \
                __asm__("" : "+v"(wv[v]));                                                                 \
            }                                                                                              \
            _Pragma("GCC unroll 32") for (int q = 0; q < PB; q++) {                                        \
                __m512 x = _mm512_set1_ps(p[q]);                                                           \
                _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) acc[q][v] = _mm512_fmadd_ps(x, wv[v], acc[q][v]); \
            }                                                                                              \
        }                                                                                                  \
        _Pragma("GCC unroll 32") for (int q = 0; q < PB; q++)                                              \
        _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) _mm512_storeu_ps(tmp + q * 32 + 16 * v, acc[q][v]); \
    }
LANES_BLOCK(14, 2)
LANES_BLOCK(14, 1)
LANES_BLOCK(8, 2)
LANES_BLOCK(8, 1)

/* One image in lanes blocks: rows of WO >= 8 pixels in runs of 14 (the last one ending at the row's end,
 * as implicit_image's runs of 8), or of 8 where WO < 14; each block's sums transposed into the NCHW
 * output through `tmp`. */
__attribute__((target("avx2,fma,avx512f,avx512dq"))) static void implicit_image_lanes(const implicit_job *J,
                                                                                       const float *src, float *y) {
    const int64_t *g = J->g, K = J->K, OP = J->OP, O = g[G_O], HO = g[G_HO], WO = g[G_WO];
    const int64_t WP = g[G_W] + 2 * g[G_PW], HOWO = HO * WO, PB = WO >= 14 ? 14 : 8;
    float tmp[14 * 32];
    for (int64_t o0 = 0; o0 < O; o0 += 32) {
        const int64_t nv = O - o0 > 16 ? 2 : 1, m = O - o0 < 32 ? O - o0 : 32;
        for (int64_t r = 0; r < HO; r++)
            for (int64_t c0 = 0; c0 < WO; c0 += PB) {
                const int64_t c = c0 + PB <= WO ? c0 : WO - PB;
                const float *base = src + r * WP + c;
                if (PB == 14)
                    (nv == 2 ? lanes_14x2 : lanes_14x1)(base, J->off, J->wt + o0, K, OP, tmp);
                else
                    (nv == 2 ? lanes_8x2 : lanes_8x1)(base, J->off, J->wt + o0, K, OP, tmp);
                for (int64_t o = 0; o < m; o++)
                    for (int64_t q = 0; q < PB; q++) y[(o0 + o) * HOWO + r * WO + c + q] = tmp[q * 32 + o];
            }
    }
}

__attribute__((target("avx2,fma"))) static void implicit_chunk(void *ctx, int64_t lo, int64_t hi) {
    implicit_job *J = (implicit_job *)ctx;
    const int64_t *g = J->g;
    const int64_t PADDED = g[G_C] * (g[G_H] + 2 * g[G_PH]) * (g[G_W] + 2 * g[G_PW]);
    const int64_t IMG = g[G_C] * g[G_H] * g[G_W], OUT = g[G_O] * g[G_HO] * g[G_WO];
    float *padded = (float *)zeroed_scratch(PADDED, sizeof(float));
    const int64_t STACK = g[G_KW] * (PADDED / (g[G_W] + 2 * g[G_PW])) * 4; /* rows of 4, each kernel column's */
    float *stack = g[G_WO] == 4 ? (float *)zeroed_scratch(STACK, sizeof(float)) : 0;
    int ok = 1;
    for (int64_t n = lo; n < hi; n++) {
        float *y = J->out + n * OUT;
        if (stack) {
            if (!stack_image(g, J->x + n * IMG, stack)) {
                pad_image_f32(J->x + n * IMG, g, padded);
                stack_columns(g, padded, stack);
            }
            implicit_image(J, stack, y);
        } else {
            pad_image_f32(J->x + n * IMG, g, padded);
            if (J->lanes)
                implicit_image_lanes(J, padded, y);
            else
                implicit_image(J, padded, y);
        }
        ok &= vg_all_finite_f32(y, 1, OUT, OUT);
    }
    free(padded);
    free(stack);
    if (!ok) __atomic_store_n(&J->bad, 1, __ATOMIC_RELAXED);
}

/* dst[c * ds + r] = src[r * ss + c] for r < R, c < C (an image's output gradient pixel-major, a block's
 * sums back weight-major): 8x8 blocks transposed in registers. */
__attribute__((target("avx2,fma"))) static void transpose(const float *src, int64_t R, int64_t C, int64_t ss,
                                                          float *dst, int64_t ds) {
    int64_t r = 0;
    for (; r + 8 <= R; r += 8) {
        int64_t c = 0;
        for (; c + 8 <= C; c += 8) {
            const float *s = src + r * ss + c;
            __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ss), r2 = _mm256_loadu_ps(s + 2 * ss),
                   r3 = _mm256_loadu_ps(s + 3 * ss), r4 = _mm256_loadu_ps(s + 4 * ss),
                   r5 = _mm256_loadu_ps(s + 5 * ss), r6 = _mm256_loadu_ps(s + 6 * ss),
                   r7 = _mm256_loadu_ps(s + 7 * ss);
            __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
            __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
            __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
            __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
            float *d = dst + c * ds + r;
            _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(d + ds, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(d + 2 * ds, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(d + 3 * ds, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(d + 4 * ds, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(d + 5 * ds, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(d + 6 * ds, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(d + 7 * ds, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
        for (; c < C; c++)
            for (int64_t e = 0; e < 8; e++) dst[c * ds + r + e] = src[(r + e) * ss + c];
    }
    for (; r < R; r++)
        for (int64_t c = 0; c < C; c++) dst[c * ds + r] = src[r * ss + c];
}

/* The weight gradient's partial sum over the nb images of a block, tap-major into sums[K6 x OP] (K6: K
 * rounded up to a multiple of 6; rows past K unspecified): `padded` holds their padded images one after
 * the other, `gt` their output gradient pixel-major (OP channels a pixel), and pixel p of the block
 * reads the images from padded + at[p]. */
__attribute__((target("avx2,fma"))) static void implicit_wblock(const int64_t *off, int64_t K, const float *padded,
                                                                const float *gt, const int64_t *at, int64_t pixels,
                                                                int64_t OP, float *sums) {
    for (int64_t k = 0; k < K; k += IMPLICIT_CH) {
        const float *x[IMPLICIT_CH]; /* past the last tap: the last one again (its sums are not kept) */
        for (int64_t q = 0; q < IMPLICIT_CH; q++) x[q] = padded + off[k + q < K ? k + q : K - 1];
        const float *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3], *x4 = x[4], *x5 = x[5];
        for (int64_t o = 0; o < OP; o += 16) {
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0;
            __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;
            const float *gp = gt + o;
            for (int64_t p = 0; p < pixels; p++, gp += OP) {
                const int64_t i = at[p];
                const __m256 u = _mm256_loadu_ps(gp), v = _mm256_loadu_ps(gp + 8);
                __m256 c = _mm256_broadcast_ss(x0 + i);
                a0 = _mm256_fmadd_ps(u, c, a0), b0 = _mm256_fmadd_ps(v, c, b0);
                c = _mm256_broadcast_ss(x1 + i);
                a1 = _mm256_fmadd_ps(u, c, a1), b1 = _mm256_fmadd_ps(v, c, b1);
                c = _mm256_broadcast_ss(x2 + i);
                a2 = _mm256_fmadd_ps(u, c, a2), b2 = _mm256_fmadd_ps(v, c, b2);
                c = _mm256_broadcast_ss(x3 + i);
                a3 = _mm256_fmadd_ps(u, c, a3), b3 = _mm256_fmadd_ps(v, c, b3);
                c = _mm256_broadcast_ss(x4 + i);
                a4 = _mm256_fmadd_ps(u, c, a4), b4 = _mm256_fmadd_ps(v, c, b4);
                c = _mm256_broadcast_ss(x5 + i);
                a5 = _mm256_fmadd_ps(u, c, a5), b5 = _mm256_fmadd_ps(v, c, b5);
            }
            float *row = sums + k * OP + o;
            _mm256_storeu_ps(row, a0), _mm256_storeu_ps(row + 8, b0);
            _mm256_storeu_ps(row + OP, a1), _mm256_storeu_ps(row + OP + 8, b1);
            _mm256_storeu_ps(row + 2 * OP, a2), _mm256_storeu_ps(row + 2 * OP + 8, b2);
            _mm256_storeu_ps(row + 3 * OP, a3), _mm256_storeu_ps(row + 3 * OP + 8, b3);
            _mm256_storeu_ps(row + 4 * OP, a4), _mm256_storeu_ps(row + 4 * OP + 8, b4);
            _mm256_storeu_ps(row + 5 * OP, a5), _mm256_storeu_ps(row + 5 * OP + 8, b5);
        }
    }
}

__attribute__((target("avx2,fma"))) static void implicit_weight_chunk(void *ctx, int64_t lo, int64_t hi) {
    implicit_job *J = (implicit_job *)ctx;
    const int64_t *g = J->g, N = g[G_N], K = J->K, O = g[G_O], OP = J->OP, HO = g[G_HO], WO = g[G_WO];
    const int64_t WP = g[G_W] + 2 * g[G_PW], PADDED = g[G_C] * (g[G_H] + 2 * g[G_PH]) * WP;
    const int64_t IMG = g[G_C] * g[G_H] * g[G_W], HOWO = HO * WO;
    const int64_t K6 = (K + IMPLICIT_CH - 1) / IMPLICIT_CH * IMPLICIT_CH;
    float *padded = (float *)zeroed_scratch(J->block * PADDED, sizeof(float));
    float *gt = (float *)zeroed_scratch(J->block * HOWO * OP, sizeof(float));
    float *sums = (float *)scratch(K6 * OP, sizeof(float));
    int64_t *at = (int64_t *)scratch(J->block * HOWO, sizeof(int64_t));
    for (int64_t n = 0, p = 0; n < J->block; n++)
        for (int64_t oh = 0; oh < HO; oh++)
            for (int64_t ow = 0; ow < WO; ow++) at[p++] = n * PADDED + oh * WP + ow;
    for (int64_t b = lo; b < hi; b++) {
        const int64_t n0 = b * J->block, nb = N - n0 < J->block ? N - n0 : J->block;
        for (int64_t n = 0; n < nb; n++) {
            pad_image_f32(J->x + (n0 + n) * IMG, g, padded + n * PADDED);
            transpose(J->wt + (n0 + n) * O * HOWO, O, HOWO, HOWO, gt + n * HOWO * OP, OP);
        }
        implicit_wblock(J->off, K, padded, gt, at, nb * HOWO, OP, sums);
        transpose(sums, K, O, OP, J->out + b * O * K, K);
    }
    free(padded);
    free(gt);
    free(sums);
    free(at);
}
#else
static void transpose(const float *src, int64_t R, int64_t C, int64_t ss, float *dst, int64_t ds) {
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) dst[c * ds + r] = src[r * ss + c];
}
static void implicit_chunk(void *ctx, int64_t lo, int64_t hi) { (void)ctx, (void)lo, (void)hi; }
static void implicit_weight_chunk(void *ctx, int64_t lo, int64_t hi) { (void)ctx, (void)lo, (void)hi; }
#endif

static int implicit_forward_f32(const float *x, const float *w, float *out, const int64_t *g, int threads) {
    const int64_t O = g[G_O], HO = g[G_HO], WO = g[G_WO], K = g[G_C] * g[G_KH] * g[G_KW];
    const int64_t lanes = WO >= 8 && O >= 16 && lanes_cpu();
    const int64_t OP = lanes ? (O + 15) / 16 * 16 : (O + IMPLICIT_CH - 1) / IMPLICIT_CH * IMPLICIT_CH;
    const int64_t WP = g[G_W] + 2 * g[G_PW];
    const int64_t per_row = WO >= 8 ? (WO + 7) / 8 : 0, tiles = WO >= 8 ? HO * per_row : HO / 2;
    float *wt = (float *)zeroed_scratch(K * OP, sizeof(float));
    int64_t *off = (int64_t *)scratch(K, sizeof(int64_t)), *seg = (int64_t *)scratch(2 * tiles, sizeof(int64_t));
    transpose(w, O, K, K, wt, OP);
    if (WO >= 8)
        tap_offsets(g, off);
    else
        stack_offsets(g, off);
    for (int64_t t = 0; t < tiles; t++) {
        int64_t oh = WO >= 8 ? t / per_row : 2 * t, c0 = WO >= 8 ? (t % per_row) * 8 : 0;
        int64_t c = c0 + 8 <= WO || WO < 8 ? c0 : WO - 8;
        seg[2 * t] = oh * WO + c, seg[2 * t + 1] = WO >= 8 ? oh * WP + c : oh * 4;
    }
    implicit_job J = {.x = x, .wt = wt, .out = out, .g = g, .off = off, .seg = seg, .K = K, .OP = OP, .tiles = tiles,
                      .lanes = (int)lanes};
    vg_parallel_for(g[G_N], 1, threads, implicit_chunk, &J);
    free(wt);
    free(off);
    free(seg);
    return !J.bad;
}

static void implicit_weight_f32(const float *gy, const float *x, float *partial, const int64_t *g, int64_t block,
                                int64_t units, int threads) {
    const int64_t K = g[G_C] * g[G_KH] * g[G_KW];
    int64_t *off = (int64_t *)scratch(K, sizeof(int64_t));
    tap_offsets(g, off);
    implicit_job J = {.x = x, .wt = gy, .out = partial, .g = g, .off = off, .K = K,
                      .OP = (g[G_O] + 15) / 16 * 16, .block = block};
    vg_parallel_for(units, 1, threads, implicit_weight_chunk, &J);
    free(off);
}

/* conv2d_input_grad as conv2d (see above); -1 where the path does not take it. */
static int implicit_input_f32(const float *gy, const float *w, float *dx, const int64_t *g, int threads) {
    const int64_t O = g[G_O], C = g[G_C], KH = g[G_KH], KW = g[G_KW];
    if (g[G_NHWC] || g[G_SH] != 1 || g[G_SW] != 1 || g[G_PH] > (KH - 1) * g[G_DH] || g[G_PW] > (KW - 1) * g[G_DW])
        return -1;
    int64_t h[G_LEN] = {0};
    h[G_N] = g[G_N], h[G_C] = O, h[G_H] = g[G_HO], h[G_W] = g[G_WO], h[G_O] = C, h[G_KH] = KH, h[G_KW] = KW;
    h[G_SH] = 1, h[G_SW] = 1, h[G_DH] = g[G_DH], h[G_DW] = g[G_DW], h[G_HO] = g[G_H], h[G_WO] = g[G_W];
    h[G_PH] = (KH - 1) * g[G_DH] - g[G_PH], h[G_PW] = (KW - 1) * g[G_DW] - g[G_PW];
    if (!implicit_f32(h)) return -1;
    float *flipped = (float *)scratch(O * C * KH * KW, sizeof(float));
    for (int64_t c = 0; c < C; c++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < KH; i++)
                for (int64_t j = 0; j < KW; j++)
                    flipped[((c * O + o) * KH + i) * KW + j] = w[((o * C + c) * KH + KH - 1 - i) * KW + KW - 1 - j];
    int ok = implicit_forward_f32(gy, flipped, dx, h, threads);
    free(flipped);
    return ok;
}
