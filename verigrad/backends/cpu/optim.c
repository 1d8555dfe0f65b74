/* Whole-vector optimizer updates: Adam and AdamW on contiguous f32 and f64 parameters, with the formula
 * and order of operations of verigrad/optim/adam.py, so the results are that update's bits. p, m and v
 * are updated in place; the settings arrive already computed in double and rounded to the dtype, as the
 * op-based update rounds its scalars.
 *
 * mode 0: no weight decay; 1: g += p * wd (Adam); 2: p *= decay before the step (AdamW).
 * s = {decay, wd, 1 - beta1, beta2, 1 - beta2, sqrt(1 - beta2^t), eps, -lr / (1 - beta1^t)}
 *
 * vg_adam_<dtype>(p, g, m, v, s, mode, n, min_chunk, threads).
 */
#include <math.h>
#include <stdint.h>

#include "vg.h"

typedef struct {
    void *p;
    const void *g;
    void *m;
    void *v;
    const void *s;
    int mode;
} vg_adam_args;

#define ADAM(T, SUF, SQRT)                                                                    \
    VG_CLONES static void adam_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {             \
        const vg_adam_args *a = (const vg_adam_args *)ctx;                                    \
        T *restrict p = (T *)a->p;                                                            \
        const T *restrict g = (const T *)a->g;                                                \
        T *restrict m = (T *)a->m;                                                            \
        T *restrict v = (T *)a->v;                                                            \
        const T *s = (const T *)a->s;                                                         \
        const T decay = s[0], wd = s[1], omb1 = s[2], b2 = s[3], omb2 = s[4];                 \
        const T bc2 = s[5], eps = s[6], nstep = s[7];                                         \
        const int mode = a->mode;                                                             \
        for (int64_t i = lo; i < hi; i++) {                                                   \
            T pi = p[i], gi = g[i];                                                           \
            if (mode == 2)                                                                    \
                pi = pi * decay;                                                              \
            else if (mode == 1)                                                               \
                gi = gi + pi * wd;                                                            \
            T mi = m[i] + (gi - m[i]) * omb1;                                                 \
            T vi = v[i] * b2 + gi * gi * omb2;                                                \
            T denom = SQRT(vi) / bc2 + eps;                                                   \
            p[i] = pi + (mi / denom) * nstep;                                                 \
            m[i] = mi;                                                                        \
            v[i] = vi;                                                                        \
        }                                                                                     \
    }                                                                                         \
    void vg_adam_##SUF(T *p, const T *g, T *m, T *v, const T *s, int mode, int64_t n,         \
                       int64_t min_chunk, int threads) {                                      \
        vg_adam_args a = {p, g, m, v, s, mode};                                               \
        vg_parallel_for(n, min_chunk, threads, adam_##SUF##_chunk, &a);                       \
    }

ADAM(float, f32, sqrtf)
ADAM(double, f64, sqrt)
