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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "convolution.h"
#include "matmul.h" /* vg_transpose_f32 */

#define IMPLICIT_CH 6     /* output channels of a tile */
#define IMPLICIT_MAX_K 4608 /* taps (C*KH*KW) at most */

/* Whether this CPU takes the implicit path (AVX2 and FMA). */
int vg_conv_implicit(void) { return vg_has_avx2_fma(); }

/* Whether the implicit path may put the channels in the lanes (on AVX-512); 0 for the tests. */
static int lanes_enabled = 1;
void vg_conv_lanes(int flag) { lanes_enabled = flag; }
static int lanes_cpu(void) { return lanes_enabled && vg_has_avx512(); }

int vg_implicit_f32(const int64_t *g) {
    const int64_t WO = g[G_WO];
    return !g[G_NHWC] && g[G_SH] == 1 && g[G_SW] == 1 && (WO >= 8 || (WO == 4 && g[G_HO] % 2 == 0)) &&
           g[G_C] * g[G_KH] * g[G_KW] <= IMPLICIT_MAX_K && g[G_O] >= IMPLICIT_CH && vg_has_avx2_fma();
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

PAD_IMAGE(float, f32) /* the padded image the x86 tiles read */

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
            vg_transpose_f32(J->wt + (n0 + n) * O * HOWO, O, HOWO, HOWO, gt + n * HOWO * OP, OP);
        }
        implicit_wblock(J->off, K, padded, gt, at, nb * HOWO, OP, sums);
        vg_transpose_f32(sums, K, O, OP, J->out + b * O * K, K);
    }
    free(padded);
    free(gt);
    free(sums);
    free(at);
}
#else
static void implicit_chunk(void *ctx, int64_t lo, int64_t hi) { (void)ctx, (void)lo, (void)hi; }
static void implicit_weight_chunk(void *ctx, int64_t lo, int64_t hi) { (void)ctx, (void)lo, (void)hi; }
#endif

int vg_implicit_forward_f32(const float *x, const float *w, float *out, const int64_t *g, int threads) {
    const int64_t O = g[G_O], HO = g[G_HO], WO = g[G_WO], K = g[G_C] * g[G_KH] * g[G_KW];
    const int64_t lanes = WO >= 8 && O >= 16 && lanes_cpu();
    const int64_t OP = lanes ? (O + 15) / 16 * 16 : (O + IMPLICIT_CH - 1) / IMPLICIT_CH * IMPLICIT_CH;
    const int64_t WP = g[G_W] + 2 * g[G_PW];
    const int64_t per_row = WO >= 8 ? (WO + 7) / 8 : 0, tiles = WO >= 8 ? HO * per_row : HO / 2;
    float *wt = (float *)zeroed_scratch(K * OP, sizeof(float));
    int64_t *off = (int64_t *)scratch(K, sizeof(int64_t)), *seg = (int64_t *)scratch(2 * tiles, sizeof(int64_t));
    vg_transpose_f32(w, O, K, K, wt, OP); /* wt[k * OP + o] = w[o * K + k] */
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

void vg_implicit_weight_f32(const float *gy, const float *x, float *partial, const int64_t *g, int64_t block,
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
int vg_implicit_input_f32(const float *gy, const float *w, float *dx, const int64_t *g, int threads) {
    const int64_t O = g[G_O], C = g[G_C], KH = g[G_KH], KW = g[G_KW];
    if (g[G_NHWC] || g[G_SH] != 1 || g[G_SW] != 1 || g[G_PH] > (KH - 1) * g[G_DH] || g[G_PW] > (KW - 1) * g[G_DW])
        return -1;
    int64_t h[G_LEN] = {0};
    h[G_N] = g[G_N], h[G_C] = O, h[G_H] = g[G_HO], h[G_W] = g[G_WO], h[G_O] = C, h[G_KH] = KH, h[G_KW] = KW;
    h[G_SH] = 1, h[G_SW] = 1, h[G_DH] = g[G_DH], h[G_DW] = g[G_DW], h[G_HO] = g[G_H], h[G_WO] = g[G_W];
    h[G_PH] = (KH - 1) * g[G_DH] - g[G_PH], h[G_PW] = (KW - 1) * g[G_DW] - g[G_PW];
    if (!vg_implicit_f32(h)) return -1;
    float *flipped = (float *)scratch(O * C * KH * KW, sizeof(float));
    for (int64_t c = 0; c < C; c++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < KH; i++)
                for (int64_t j = 0; j < KW; j++)
                    flipped[((c * O + o) * KH + i) * KW + j] = w[((o * C + c) * KH + KH - 1 - i) * KW + KW - 1 - j];
    int ok = vg_implicit_forward_f32(gy, flipped, dx, h, threads);
    free(flipped);
    return ok;
}
