/* Whole-vector optimizer updates on contiguous f32 and f64 parameters, with the formulas and order of
 * operations of verigrad/optim/adam.py and sgd.py, so the results are those updates' bits. Parameters
 * and state are updated in place; the settings arrive already computed in double and rounded to the
 * dtype, as the op-based updates round their scalars.
 *
 * Adam: mode 0: no weight decay; 1: g += p * wd (Adam); 2: p *= decay before the step (AdamW).
 * s = {decay, wd, 1 - beta1, beta2, 1 - beta2, sqrt(1 - beta2^t), eps, -lr / (1 - beta1^t)}
 * vg_adam_<dtype>(p, g, m, v, s, mode, n, min_chunk, threads).
 * vg_adam_all_<dtype>(arrays, offsets, count, s, mode, min_chunk, threads): the same update of `count`
 * parameters with the same settings in one parallel pass over all their elements: `arrays` holds the
 * addresses of the count p's, then the g's, the m's and the v's; parameter k's elements are
 * [offsets[k], offsets[k + 1]) of the whole. Each element's operations are vg_adam's, so the bits are too.
 *
 * SGD: flags SGD_DECAY (g += p * wd), SGD_MOMENTUM (b = momentum b + (1 - dampening) g, or g at the first
 * step, SGD_FIRST; then g = b), SGD_NESTEROV (g += momentum b instead); p += g * (-lr).
 * s = {wd, momentum, 1 - dampening, -lr}; b is not read without SGD_MOMENTUM.
 * vg_sgd_<dtype>(p, g, b, s, flags, n, min_chunk, threads).
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

typedef struct {
    const int64_t *arrays, *offsets;
    int64_t count;
    const void *s;
    int mode;
} vg_adam_all_args;

/* the parameter holding element `i` of the whole: the last k with offsets[k] <= i */
static int64_t adam_holder(const int64_t *offsets, int64_t count, int64_t i) {
    int64_t lo = 0, hi = count - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (offsets[mid] <= i)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

#define ADAM_ALL(T, SUF)                                                                      \
    static void adam_all_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                   \
        const vg_adam_all_args *a = (const vg_adam_all_args *)ctx;                            \
        const int64_t *at = a->arrays, *off = a->offsets, count = a->count;                  \
        for (int64_t k = adam_holder(off, count, lo); lo < hi && k < count; k++) {            \
            int64_t end = off[k + 1] < hi ? off[k + 1] : hi;                                  \
            vg_adam_args one = {(void *)at[k], (const void *)at[count + k], (void *)at[2 * count + k], \
                                (void *)at[3 * count + k], a->s, a->mode};                    \
            if (end > lo) adam_##SUF##_chunk(&one, lo - off[k], end - off[k]);                \
            lo = end;                                                                         \
        }                                                                                     \
    }                                                                                         \
    void vg_adam_all_##SUF(const int64_t *arrays, const int64_t *offsets, int64_t count, const T *s, \
                           int mode, int64_t min_chunk, int threads) {                        \
        vg_adam_all_args a = {arrays, offsets, count, s, mode};                               \
        if (count > 0) vg_parallel_for(offsets[count], min_chunk, threads, adam_all_##SUF##_chunk, &a); \
    }

ADAM_ALL(float, f32)
ADAM_ALL(double, f64)

enum { SGD_DECAY = 1, SGD_MOMENTUM = 2, SGD_FIRST = 4, SGD_NESTEROV = 8 };

typedef struct {
    void *p;
    const void *g;
    void *b;
    const void *s;
    int flags;
} vg_sgd_args;

#define SGD(T, SUF)                                                                           \
    VG_CLONES static void sgd_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {              \
        const vg_sgd_args *a = (const vg_sgd_args *)ctx;                                      \
        T *restrict p = (T *)a->p;                                                            \
        const T *restrict g = (const T *)a->g;                                                \
        T *restrict b = (T *)a->b;                                                            \
        const T *s = (const T *)a->s;                                                         \
        const T wd = s[0], momentum = s[1], damp = s[2], nlr = s[3];                          \
        const int flags = a->flags;                                                           \
        for (int64_t i = lo; i < hi; i++) {                                                   \
            T gi = g[i];                                                                      \
            if (flags & SGD_DECAY) gi = gi + p[i] * wd;                                       \
            if (flags & SGD_MOMENTUM) {                                                       \
                T bi = (flags & SGD_FIRST) ? gi : b[i] * momentum + gi * damp;                \
                b[i] = bi;                                                                    \
                gi = (flags & SGD_NESTEROV) ? gi + bi * momentum : bi;                        \
            }                                                                                 \
            p[i] = p[i] + gi * nlr;                                                           \
        }                                                                                     \
    }                                                                                         \
    void vg_sgd_##SUF(T *p, const T *g, T *b, const T *s, int flags, int64_t n, int64_t min_chunk, \
                      int threads) {                                                          \
        vg_sgd_args a = {p, g, b, s, flags};                                                  \
        vg_parallel_for(n, min_chunk, threads, sgd_##SUF##_chunk, &a);                        \
    }

SGD(float, f32)
SGD(double, f64)
