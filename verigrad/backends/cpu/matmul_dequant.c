/* The products of a training step with a frozen quantized weight W (nn/dequantized_product.py): c = a W^T
 * (a forward's x W^T, W's rows along k) and c = a W (its VJP g W, W's rows along n), by matmul_packed.c's
 * packed GEMM with W's panels de-quantized straight from its blocks, where the GEMM packs an f32 b: no f32
 * copy of W is written to memory and read back (W's blocks are read once, a fraction of its f32 bytes).
 * The values are the `dequantize` kernel's (vg_dequantize_f32_row, the reference's bits) and the GEMM
 * sums each element as one f32 FMA chain in increasing k whatever its blocking, so c has the bits of the
 * packed GEMM on the de-quantized W, on every thread count. */
#include <stdint.h>
#include <string.h>

#include "matmul.h"
#include "quant.h"

#define PANEL VG_PACKED_PANEL
#define SPAN_K 128 /* the depth de-quantized at a time for a W^T panel (at least a block) */

typedef struct {
    vg_panel_source base;
    int qtype, level, transposed; /* transposed: W is b^T (n rows of k) */
    const uint8_t *w;
    int64_t row_bytes, n;
} dequant_source;

/* W's blocks [b0, b0 + nb) of row r de-quantized into v. */
static void row_blocks(const dequant_source *s, int64_t r, int64_t b0, int64_t nb, float *v) {
    vg_dequantize_f32_row(s->qtype, s->w + r * s->row_bytes + b0 * BLOCK_BYTES[s->qtype], nb, v, s->level);
}

/* Panels of b = W (k rows of n): row p of a panel is 64 values of W's row p0 + p, de-quantized a span of
 * whole panels and whole blocks at a time (a 256-value block covers four panels). */
static void pack_rows(const dequant_source *s, int64_t q0, int64_t q1, int64_t p0, int64_t kc, float *dst,
                      int64_t stride) {
    const int64_t block = BLOCK_VALUES[s->qtype], span = imax(block, PANEL);
    const int64_t j0 = q0 * PANEL, j1 = imin(q1 * PANEL, s->n);
    float values[256] __attribute__((aligned(64)));
    for (int64_t c0 = j0 / span * span; c0 < j1; c0 += span) {
        int64_t c1 = imin(c0 + span, s->n), lo = imax(c0, j0), hi = imin(c1, j1);
        for (int64_t p = 0; p < kc; p++) {
            if (span == PANEL) { /* one panel's row: straight into it */
                row_blocks(s, p0 + p, c0 / block, (c1 - c0) / block, dst + (c0 / PANEL - q0) * stride + p * PANEL);
                continue;
            }
            row_blocks(s, p0 + p, c0 / block, (c1 - c0) / block, values);
            for (int64_t j = lo; j < hi; j += PANEL)
                memcpy(dst + (j / PANEL - q0) * stride + p * PANEL, values + (j - c0),
                       sizeof(float) * (size_t)imin(PANEL, hi - j));
        }
    }
    int64_t width = j1 - (q1 - 1) * PANEL; /* the last panel's columns past n: zero */
    if (width < PANEL)
        for (int64_t p = 0; p < kc; p++)
            memset(dst + (q1 - 1 - q0) * stride + p * PANEL + width, 0, sizeof(float) * (size_t)(PANEL - width));
}

/* Panels of b = W^T (W: n rows of k): a panel's rows of W de-quantized a span of k at a time into an L1
 * block, then transposed into the panel (k-major). */
static void pack_columns(const dequant_source *s, int64_t q0, int64_t q1, int64_t p0, int64_t kc, float *dst,
                         int64_t stride) {
    const int64_t block = BLOCK_VALUES[s->qtype], span = imax(block, SPAN_K);
    float values[PANEL * 256] __attribute__((aligned(64)));
    for (int64_t q = q0; q < q1; q++, dst += stride) {
        int64_t j = q * PANEL, width = imin(PANEL, s->n - j);
        for (int64_t pc = 0; pc < kc; pc += span) {
            int64_t depth = imin(span, kc - pc); /* whole blocks: p0 + pc and k are multiples of block */
            for (int64_t r = 0; r < width; r++)
                row_blocks(s, j + r, (p0 + pc) / block, depth / block, values + r * span);
            vg_transpose_f32(values, width, depth, span, dst + pc * PANEL, PANEL);
            if (width < PANEL)
                for (int64_t p = pc; p < pc + depth; p++)
                    memset(dst + p * PANEL + width, 0, sizeof(float) * (size_t)(PANEL - width));
        }
    }
}

static void pack(const vg_panel_source *src, int64_t q0, int64_t q1, int64_t p0, int64_t kc, float *dst,
                 int64_t stride) {
    const dequant_source *s = (const dequant_source *)src;
    (s->transposed ? pack_columns : pack_rows)(s, q0, q1, p0, kc, dst, stride);
}

/* c [m, n] (row-major) = a [m, k] (rows lda apart) @ (transposed ? W^T : W) for W's blocks w (rows of
 * row_bytes: n rows of k values, or k rows of n values). 1: done; 0: done, and c holds an infinity or a
 * NaN (the caller computes it again its own way); BLAS_NOT_USED: the packed GEMM does not take this
 * product (nothing done). */
int vg_dequant_gemm(int qtype, int transposed, const uint8_t *w, int64_t row_bytes, const float *a, int64_t lda,
                    float *c, int64_t m, int64_t n, int64_t k, int threads) {
    if (qtype < 0 || qtype >= NQTYPES || m <= 0 || !vg_gemm_packed_takes(m, n, k)) return BLAS_NOT_USED;
    const int64_t block = BLOCK_VALUES[qtype], values = transposed ? k : n;
    if (values % block || row_bytes != values / block * BLOCK_BYTES[qtype]) return BLAS_NOT_USED;
    dequant_source s = {.base = {.pack = pack, .depth = transposed ? block : 1}, .qtype = qtype,
                        .level = vg_quant_simd(-1), .transposed = transposed, .w = w, .row_bytes = row_bytes,
                        .n = n};
    static const int64_t offs[3] = {0, 0, 0};
    blas_job g = {.ta = 111, .tb = transposed ? 112 : 111, .check = 1, .m = m, .n = n, .k = k, .lda = lda,
                  .ldc = n, .offs = offs, .alpha = 1.0, .beta = 0.0, .a = a, .c = c};
    return vg_gemm_packed_from(&g, &s.base, threads);
}
