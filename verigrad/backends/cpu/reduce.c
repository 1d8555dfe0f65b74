/* Reductions over the last axis of a C-contiguous [rows, cols] array: out[r] = reduce(x[r, :]).
 *
 * The dispatcher splits the rows; one thread computes each row, in index order, so the result does not
 * depend on the thread count.
 *
 * sum: the pairwise summation NumPy's add.reduce does, in double (f32 elements widened exactly): under
 * 8 elements a plain loop from 0; up to 128, eight accumulators over the multiple of 8, combined as
 * ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest in order; above 128, the two halves
 * (the first a multiple of 8) summed apart and added. The row's sum is 0 + that, in blocks of `block`
 * elements (NumPy's buffer for a cast, the whole row otherwise) added in order. f32 rounds once at the end.
 *
 * max/min: NumPy's maximum/minimum folded left to right: a NaN wins (the first one), and on equal
 * operands (0 and -0) the later element.
 *
 * vg_sum_<dtype>(x, out, rows, cols, block, min_rows, threads), vg_max_<dtype>(x, out, rows, cols,
 * min_rows, threads), likewise min.
 */
#include <math.h>
#include <stdint.h>

#include "vg.h"

#define PW_BLOCK 128

#define PAIRWISE(T, SUF)                                                                      \
    static double pairwise_##SUF(const T *a, int64_t n) {                                     \
        if (n < 8) {                                                                          \
            double res = 0.0;                                                                 \
            for (int64_t i = 0; i < n; i++) res += (double)a[i];                              \
            return res;                                                                       \
        } else if (n <= PW_BLOCK) {                                                           \
            double r[8];                                                                      \
            for (int j = 0; j < 8; j++) r[j] = (double)a[j];                                  \
            int64_t i;                                                                        \
            for (i = 8; i < n - (n % 8); i += 8)                                              \
                for (int j = 0; j < 8; j++) r[j] += (double)a[i + j];                         \
            double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));   \
            for (; i < n; i++) res += (double)a[i];                                           \
            return res;                                                                       \
        } else {                                                                              \
            int64_t n2 = n / 2;                                                               \
            n2 -= n2 % 8;                                                                     \
            return pairwise_##SUF(a, n2) + pairwise_##SUF(a + n2, n - n2);                    \
        }                                                                                     \
    }

typedef struct {
    const void *x;
    void *out;
    int64_t cols;
    int64_t block;
} vg_rargs;

#define SUM(T, SUF)                                                                           \
    PAIRWISE(T, SUF)                                                                          \
    static void sum_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                        \
        const vg_rargs *p = (const vg_rargs *)ctx;                                            \
        const T *xs = (const T *)p->x;                                                        \
        T *ys = (T *)p->out;                                                                  \
        int64_t cols = p->cols, block = p->block;                                             \
        for (int64_t r = lo; r < hi; r++) {                                                   \
            const T *row = xs + r * cols;                                                     \
            double acc = 0.0;                                                                 \
            for (int64_t s = 0; s < cols; s += block)                                         \
                acc += pairwise_##SUF(row + s, cols - s < block ? cols - s : block);          \
            ys[r] = (T)acc;                                                                   \
        }                                                                                     \
    }                                                                                         \
    void vg_sum_##SUF(const T *x, T *out, int64_t rows, int64_t cols, int64_t block,          \
                      int64_t min_rows, int threads) {                                        \
        vg_rargs p = {x, out, cols, block < 1 ? cols : block};                                \
        vg_parallel_for(rows, min_rows, threads, sum_##SUF##_chunk, &p);                      \
    }

#define EXTREME(NAME, T, SUF, EXPR)                                                           \
    static void NAME##_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                     \
        const vg_rargs *p = (const vg_rargs *)ctx;                                            \
        const T *xs = (const T *)p->x;                                                        \
        T *ys = (T *)p->out;                                                                  \
        int64_t cols = p->cols;                                                               \
        for (int64_t r = lo; r < hi; r++) {                                                   \
            const T *row = xs + r * cols;                                                     \
            T a = row[0];                                                                     \
            for (int64_t i = 1; i < cols; i++) {                                              \
                T b = row[i];                                                                 \
                a = (EXPR);                                                                   \
            }                                                                                 \
            ys[r] = a;                                                                        \
        }                                                                                     \
    }                                                                                         \
    void vg_##NAME##_##SUF(const T *x, T *out, int64_t rows, int64_t cols, int64_t min_rows,  \
                           int threads) {                                                     \
        vg_rargs p = {x, out, cols, cols};                                                    \
        vg_parallel_for(rows, min_rows, threads, NAME##_##SUF##_chunk, &p);                   \
    }

SUM(float, f32)
SUM(double, f64)
EXTREME(max, float, f32, (a > b || isnan(a)) ? a : b)
EXTREME(max, double, f64, (a > b || isnan(a)) ? a : b)
EXTREME(min, float, f32, (a < b || isnan(a)) ? a : b)
EXTREME(min, double, f64, (a < b || isnan(a)) ? a : b)
