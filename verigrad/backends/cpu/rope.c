/* rope (ops/composite/rope.py) in f32 and f64: x as N x T rows of D elements (the last axis contiguous,
 * the rows at any strides), the tables cos and sin [Tmax, D/2] contiguous, their rows offset .. offset+T-1
 * used (the caller checks that they exist). Each pair (a, b), adjacent (interleaved) or D/2 apart
 * (halves), becomes (a*cos - b*sin, a*sin + b*cos), each product and each sum rounded to the dtype as the
 * decomposition's ops round them (no contraction): the reference's bits. The result goes to a contiguous
 * array, which may be x itself (in place: each pair is read before either element is written); threads
 * take bands of rows.
 *
 * g: n, t, d, the strides of n and of t (elements), offset, interleaved.
 */
#include <stdint.h>

#include "vg.h"

typedef struct {
    const void *x, *cos, *sin;
    void *out;
    const int64_t *g;
} rope_job;

/* One row: pairs read from X and written to O, which are one restrict pointer in place, so that the loop
 * vectorizes either way. */
#define ROPE_ROW(T, X, O)                                                                               \
    if (interleaved)                                                                                    \
        for (int64_t j = 0; j < half; j++) {                                                            \
            const T a = X[2 * j], b = X[2 * j + 1];                                                     \
            O[2 * j] = a * c[j] - b * s[j];                                                             \
            O[2 * j + 1] = a * s[j] + b * c[j];                                                         \
        }                                                                                               \
    else                                                                                                \
        for (int64_t j = 0; j < half; j++) {                                                            \
            const T a = X[j], b = X[j + half];                                                          \
            O[j] = a * c[j] - b * s[j];                                                                 \
            O[j + half] = a * s[j] + b * c[j];                                                          \
        }

#define ROPE(T, SUF)                                                                                    \
    static inline void rope_row_##SUF(const T *x, T *o, const T *restrict c, const T *restrict s,      \
                                      int64_t half, int64_t interleaved) {                              \
        if (x == o) {                                                                                   \
            T *restrict p = o;                                                                          \
            ROPE_ROW(T, p, p)                                                                           \
        } else {                                                                                        \
            const T *restrict in = x;                                                                   \
            T *restrict to = o;                                                                         \
            ROPE_ROW(T, in, to)                                                                         \
        }                                                                                               \
    }                                                                                                   \
                                                                                                        \
    VG_CLONES static void rope_rows_##SUF(void *ctx, int64_t lo, int64_t hi) {                         \
        const rope_job *J = (const rope_job *)ctx;                                                      \
        const int64_t *g = J->g;                                                                        \
        const int64_t t = g[1], d = g[2], sn = g[3], st = g[4], offset = g[5], half = d / 2;            \
        for (int64_t row = lo; row < hi; row++) {                                                       \
            const int64_t n = row / t, i = row - n * t;                                                 \
            rope_row_##SUF((const T *)J->x + n * sn + i * st, (T *)J->out + row * d,                    \
                           (const T *)J->cos + (offset + i) * half, (const T *)J->sin + (offset + i) * half, \
                           half, g[6]);                                                                 \
        }                                                                                               \
    }                                                                                                   \
                                                                                                        \
    void vg_rope_##SUF(const T *x, const T *cos, const T *sin, T *out, const int64_t *g, int64_t min_rows, \
                       int threads) {                                                                   \
        rope_job job = {x, cos, sin, out, g};                                                           \
        vg_parallel_for(g[0] * g[1], min_rows, threads, rope_rows_##SUF, &job);                         \
    }

ROPE(float, f32)
ROPE(double, f64)
