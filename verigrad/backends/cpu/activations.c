/* gelu_grad (ops/unary.py): g * gelu_deriv(x), gelu's backward in one pass over memory where the two ops'
 * kernels take two. A thread's elements go in blocks of GRAD_BLOCK: elementwise.c's gelu_deriv kernel
 * writes a block's derivatives into out (its vector paths or its routine, on the calling thread), then
 * out = g * out in the dtype while the block is in cache: each element the bits of mul(g, gelu_deriv(x))
 * computed by the two kernels, whatever the thread count (the derivative of an element does not depend
 * on the block it is in). */
#include <stdint.h>

#include "vg.h"

/* defined in elementwise.c: gelu_deriv's f32 kernel on the calling thread */
void vg_gelu_deriv_f32_range(const float *x, float *out, int64_t n);

#define GRAD_BLOCK 2048

typedef struct {
    const float *g, *x;
    float *out;
} vg_grad_job;

/* out[i] = g[i] * out[i]: mul's operation in its operands' order, built for each instruction set */
VG_CLONES static void times_f32(const float *restrict g, float *restrict out, int64_t n) {
    for (int64_t i = 0; i < n; i++) out[i] = g[i] * out[i];
}

static void gelu_grad_f32_chunk(void *ctx, int64_t lo, int64_t hi) {
    const vg_grad_job *p = (const vg_grad_job *)ctx;
    for (int64_t b = lo; b < hi; b += GRAD_BLOCK) {
        const int64_t n = hi - b < GRAD_BLOCK ? hi - b : GRAD_BLOCK;
        vg_gelu_deriv_f32_range(p->x + b, p->out + b, n);
        times_f32(p->g + b, p->out + b, n);
    }
}

/* out = g * gelu_deriv(x) over n elements (out may not be g or x) */
void vg_gelu_grad_f32(const float *g, const float *x, float *out, int64_t n, int64_t min_chunk, int threads) {
    vg_grad_job p = {g, x, out};
    vg_parallel_for(n, min_chunk, threads, gelu_grad_f32_chunk, &p);
}
