/* Reductions of a C-contiguous array over any set of axes, in NumPy's order: sum, mean, max, min, argmax.
 *
 * The Python side drops size-1 axes and merges neighbouring axes that are both reduced or both kept, and
 * describes the rest (`vg_red`): the last group, contiguous, of length `inner`, reduced or kept; before it
 * the kept groups (sizes ks, element strides kst) and the reduced groups (rs, rst), in axis order.
 * Each output element is computed by one thread, over its elements in C order, so the result does not
 * depend on the thread count. Each vg_<op>_<dtype> returns 1, its outputs then unspecified, when an
 * output is one whose bits depend on the order NumPy takes (a NaN's sign, which zero): the caller then
 * runs the reference.
 *
 * sum (f32 elements widened exactly; the accumulator is a double starting at +0):
 *  - last group reduced (NumPy's inner loop is a reduction): for each index of the other reduced groups
 *    in C order, the run of `inner` elements is cut in blocks of `block` (NumPy's 8192-element cast
 *    buffer for f32, the whole run otherwise), and each block's pairwise sum is added to the accumulator.
 *    The pairwise sum is NumPy's: under 8 elements a plain loop from 0; up to 128, eight accumulators over
 *    the multiple of 8, combined as ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then the rest in
 *    order; above 128, the two halves (the first a multiple of 8) summed apart and added.
 *  - last group kept (NumPy adds whole slices, element by element): the elements are added one by one,
 *    in C order of the reduced groups. Outputs are done in tiles of TILE neighbours, which read memory in
 *    order and give the same bits.
 * mean: that sum divided by the count, in double. f32 results round once at the end.
 * Threads take blocks of whole outputs; a sum with fewer outputs than threads (a whole array's sum) and
 * runs of at least LEAF elements is split inside the outputs instead (`split_sum`): pairwise_ splits a
 * run above PW_BLOCK elements in two (the first part a multiple of 8) and adds the two parts' sums, so
 * the subtrees of at most LEAF elements (the leaves) are summed by the threads, and each output's sum is
 * then formed from them with the same tree and the same additions in the same order: the same bits.
 * max and min split such outputs at the same leaves (`<op>_split`): the threads take the leaves' fast
 * passes, whose results any order combines to the same bits where there is no NaN or infinity (else
 * the exact fold runs, on one thread) and the result is not a zero beside the other zero (the reference).
 * A NaN result asks for the reference: which NaN an addition of two gives depends on the order of its
 * operands, which C compilers and NumPy's SIMD loops swap freely.
 *
 * max/min: NumPy's maximum/minimum. Unless the result is a NaN or a zero, every order gives the same
 * bits: a vectorized pass runs first, and where an element is a NaN or infinite the exact fold (in C
 * order, a NaN wins) then. A NaN result, or a zero one where the elements hold both 0 and -0, asks for
 * the reference: which NaN (its SIMD reductions give a fresh +NaN) and which zero NumPy keeps depend on
 * its SIMD paths, chosen per machine (e.g. an inner run of exactly one AVX2 vector is reduced by lanes
 * then across them, a shorter one element after element, the later of two equal ones kept).
 *
 * argmax (one axis: the groups are [outer, axis, inner]): NumPy's rule, the first largest element, or
 * the first NaN.
 *
 * f32 sums on AVX-512 take the leaves of a run (or a batch of short rows) eight at a time, side by side
 * (see "f32 sums with AVX-512" below): the same additions in the same order, so the same bits.
 *
 * rows.c uses vg_pairwise_<dtype> (one run's sum), vg_pairwise_rows_f32 (a batch of rows' sums) and
 * vg_rowmax_<dtype> (one row's max); vg_total_<dtype> is
 * one vector's sum or mean (rows.py: cross-entropy's reduction of its per-row losses).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vg.h"

#define PW_BLOCK 128
#define LEAF 8192 /* at least PW_BLOCK */
#define VG_RMAX 8
#define TILE 256

/* What the Python side passes, as int64s in this order. */
typedef struct {
    int64_t nk, nr, inner, inner_reduced, block, count;
    int64_t ks[VG_RMAX], kst[VG_RMAX], rs[VG_RMAX], rst[VG_RMAX];
} vg_red;

typedef struct {
    const void *x;
    void *out;
    const vg_red *d;
    int ref; /* set when the reference must give the result */
} vg_rjob;

static inline void ask_reference(vg_rjob *p) { __atomic_store_n(&p->ref, 1, __ATOMIC_RELAXED); }

/* The element offset of kept index k (over the kept groups before the last). */
static int64_t kept_offset(const vg_red *d, int64_t k) {
    int64_t off = 0;
    for (int64_t i = d->nk - 1; i >= 0; i--) {
        off += (k % d->ks[i]) * d->kst[i];
        k /= d->ks[i];
    }
    return off;
}

static int64_t outputs(const vg_red *d) {
    int64_t n = d->inner_reduced ? 1 : d->inner;
    for (int64_t i = 0; i < d->nk; i++) n *= d->ks[i];
    return n;
}

static int64_t reduced_count(const vg_red *d) {
    int64_t n = 1;
    for (int64_t i = 0; i < d->nr; i++) n *= d->rs[i];
    return n;
}

/* The offset of the next reduced index after the one `idx` holds, in C order. */
static inline int64_t next_offset(const vg_red *d, int64_t *idx, int64_t off) {
    for (int64_t i = d->nr - 1; i >= 0; i--) {
        if (++idx[i] < d->rs[i]) return off + d->rst[i];
        off -= (d->rs[i] - 1) * d->rst[i];
        idx[i] = 0;
    }
    return off;
}

/* The fewest outputs a thread is given, for `min_elems` elements (the Python side's thread chunk). */
static int64_t min_outputs(const vg_red *d, int64_t min_elems) {
    int64_t per_output = reduced_count(d) * (d->inner_reduced ? d->inner : 1);
    int64_t m = per_output > 0 ? min_elems / per_output : 1;
    return m < 1 ? 1 : m;
}

/* split_sum's leaves: a subtree of pairwise_'s sum of a run, `n` elements from element `off` */
typedef struct {
    int64_t off, n;
} vg_leaf;

/* Appends the leaves (subtrees of at most `leaf` elements, leaf >= PW_BLOCK) of pairwise_(x + off, n)
 * from leaves[k] on (leaves NULL: counts them); returns the next k. */
static int64_t tree_leaves(int64_t off, int64_t n, int64_t leaf, vg_leaf *leaves, int64_t k) {
    if (n <= leaf) {
        if (leaves) leaves[k] = (vg_leaf){off, n};
        return k + 1;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    k = tree_leaves(off, n2, leaf, leaves, k);
    return tree_leaves(off + n2, n - n2, leaf, leaves, k);
}

/* pairwise_'s sum of a run of n elements from the sums of its leaves of at most `leaf` elements,
 * sums[*k] on (as pairwise_ adds them). */
static double from_leaves(int64_t n, int64_t leaf, const double *sums, int64_t *k) {
    if (n <= leaf) return sums[(*k)++];
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    double first = from_leaves(n2, leaf, sums, k);
    return first + from_leaves(n - n2, leaf, sums, k);
}

/* The leaves of every output's sum, in the order the sums take them (leaves NULL: counts them). */
static int64_t all_leaves(const vg_red *d, vg_leaf *leaves) {
    int64_t outs = outputs(d), nred = reduced_count(d), inner = d->inner, block = d->block, k = 0;
    int64_t idx[VG_RMAX];
    for (int64_t o = 0; o < outs; o++) {
        int64_t base = kept_offset(d, o), off = 0;
        memset(idx, 0, sizeof idx);
        for (int64_t j = 0; j < nred; j++) {
            for (int64_t s = 0; s < inner; s += block)
                k = tree_leaves(base + off + s, inner - s < block ? inner - s : block, LEAF, leaves, k);
            off = next_offset(d, idx, off);
        }
    }
    return k;
}

typedef struct {
    const void *x;
    const vg_leaf *leaves;
    double *sums;
} vg_leafjob;

/* pairwise_'s sum of a[0..n) (run_sum_f32: its leaves summed side by side, below) */
static double run_sum_f32(const float *a, int64_t n);
static double run_sum_f64(const double *a, int64_t n);
void vg_pairwise_rows_f32(const float *a, int64_t rows, int64_t n, int64_t block, double *sums);

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
    }                                                                                         \
    /* pairwise_ for a run of at most PW_BLOCK elements, inlined (a bias gradient sums short      \
     * runs: 16 or 64 pixels), its eight accumulators in locals (vectors, where built for them) */ \
    static inline double short_run_##SUF(const T *a, int64_t n) {                            \
        if (n < 8) {                                                                          \
            double res = 0.0;                                                                 \
            for (int64_t i = 0; i < n; i++) res += (double)a[i];                              \
            return res;                                                                       \
        }                                                                                     \
        double r0 = a[0], r1 = a[1], r2 = a[2], r3 = a[3], r4 = a[4], r5 = a[5], r6 = a[6], r7 = a[7]; \
        int64_t i;                                                                            \
        for (i = 8; i < n - (n % 8); i += 8) {                                                \
            r0 += (double)a[i], r1 += (double)a[i + 1], r2 += (double)a[i + 2], r3 += (double)a[i + 3]; \
            r4 += (double)a[i + 4], r5 += (double)a[i + 5], r6 += (double)a[i + 6], r7 += (double)a[i + 7]; \
        }                                                                                     \
        double res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7));                       \
        for (; i < n; i++) res += (double)a[i];                                               \
        return res;                                                                           \
    }                                                                                         \
    /* The sum of n elements as NumPy's add.reduce gives it: pairwise within blocks. */       \
    double vg_pairwise_##SUF(const T *a, int64_t n, int64_t block) {                          \
        double acc = 0.0;                                                                     \
        for (int64_t s = 0; s < n; s += block) acc += run_sum_##SUF(a + s, n - s < block ? n - s : block); \
        return acc;                                                                           \
    }                                                                                         \
    /* out[0] = that sum (or, with `mean`, it divided by n), rounded once to T */             \
    void vg_total_##SUF(const T *a, int64_t n, int64_t block, int mean, T *out) {             \
        double s = vg_pairwise_##SUF(a, n, block);                                            \
        out[0] = (T)(mean ? s / (double)n : s);                                               \
    }

/* sum and mean: SCALE(acc) is the result before the cast to T. */
#define SUM(T, SUF)                                                                           \
    VG_CLONES static void sum_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {              \
        vg_rjob *p = (vg_rjob *)ctx;                                                          \
        const vg_red *d = p->d;                                                               \
        const T *xs = (const T *)p->x;                                                        \
        T *ys = (T *)p->out;                                                                  \
        int64_t nred = reduced_count(d), inner = d->inner, idx[VG_RMAX];                      \
        double count = (double)d->count;                                                      \
        if (d->inner_reduced) {                                                               \
            const int short_runs = inner <= PW_BLOCK && inner <= d->block;                    \
            if (ROW_SUMS_##SUF && short_runs && nred == 1 && (d->nk == 0 || d->kst[d->nk - 1] == inner)) { \
                /* each output one run of the rows xs[o * inner ..]: summed side by side */       \
                double sums[TILE];                                                            \
                for (int64_t o = lo; o < hi; o += TILE) {                                     \
                    int64_t m = hi - o < TILE ? hi - o : TILE;                                \
                    vg_pairwise_rows_f32((const float *)(const void *)(xs + o * inner), m, inner, d->block, sums); \
                    for (int64_t t = 0; t < m; t++) {                                         \
                        double acc = 0.0 + sums[t]; /* as the loop below starts it */         \
                        ys[o + t] = (T)(count > 0 ? acc / count : acc);                       \
                        if (acc != acc) { ask_reference(p); return; }                        \
                    }                                                                         \
                }                                                                             \
                return;                                                                       \
            }                                                                                 \
            for (int64_t o = lo; o < hi; o++) {                                               \
                const T *base = xs + kept_offset(d, o);                                       \
                double acc = 0.0;                                                             \
                int64_t off = 0;                                                              \
                memset(idx, 0, sizeof idx);                                                   \
                for (int64_t j = 0; j < nred; j++) {                                          \
                    acc += short_runs ? short_run_##SUF(base + off, inner)                    \
                                      : vg_pairwise_##SUF(base + off, inner, d->block);       \
                    off = next_offset(d, idx, off);                                           \
                }                                                                             \
                ys[o] = (T)(count > 0 ? acc / count : acc);                                   \
                if (acc != acc) { ask_reference(p); return; }                                \
            }                                                                                 \
            return;                                                                           \
        }                                                                                     \
        double acc[TILE];                                                                     \
        for (int64_t o = lo; o < hi;) {                                                       \
            int64_t c0 = o % inner, n = inner - c0;                                           \
            if (n > hi - o) n = hi - o;                                                       \
            if (n > TILE) n = TILE;                                                           \
            const T *base = xs + kept_offset(d, o / inner) + c0;                              \
            for (int64_t t = 0; t < n; t++) acc[t] = 0.0;                                     \
            int64_t off = 0;                                                                  \
            memset(idx, 0, sizeof idx);                                                       \
            for (int64_t j = 0; j < nred; j++) {                                              \
                const T *row = base + off;                                                    \
                for (int64_t t = 0; t < n; t++) acc[t] += (double)row[t];                     \
                off = next_offset(d, idx, off);                                               \
            }                                                                                 \
            for (int64_t t = 0; t < n; t++) {                                                 \
                if (acc[t] != acc[t]) { ask_reference(p); return; }                          \
                ys[o + t] = (T)(count > 0 ? acc[t] / count : acc[t]);                         \
            }                                                                                 \
            o += n;                                                                           \
        }                                                                                     \
    }                                                                                         \
    static void leaf_sums_##SUF(void *ctx, int64_t lo, int64_t hi) {                         \
        vg_leafjob *p = (vg_leafjob *)ctx;                                                    \
        const T *xs = (const T *)p->x;                                                        \
        for (int64_t i = lo; i < hi; i++)                                                     \
            p->sums[i] = run_sum_##SUF(xs + p->leaves[i].off, p->leaves[i].n);                \
    }                                                                                         \
    /* sum_chunk's outputs from the leaves' sums (see the top); -1 without memory for them */ \
    static int split_sum_##SUF(const T *x, T *out, const vg_red *d, int64_t min_elems, int threads) { \
        int64_t count = all_leaves(d, 0), outs = outputs(d), nred = reduced_count(d), k = 0;  \
        int64_t inner = d->inner, block = d->block;                                           \
        vg_leaf *leaves = malloc(sizeof *leaves * (size_t)count);                             \
        double *sums = malloc(sizeof *sums * (size_t)count), scale = (double)d->count;        \
        if (!leaves || !sums) {                                                               \
            free(leaves), free(sums);                                                         \
            return -1;                                                                        \
        }                                                                                     \
        all_leaves(d, leaves);                                                                \
        vg_leafjob p = {x, leaves, sums};                                                     \
        vg_parallel_for(count, (min_elems + LEAF - 1) / LEAF, threads, leaf_sums_##SUF, &p);  \
        int ref = 0;                                                                          \
        for (int64_t o = 0; o < outs; o++) {                                                  \
            double acc = 0.0;                                                                 \
            for (int64_t j = 0; j < nred; j++) {                                              \
                double run = 0.0; /* vg_pairwise_'s sum of the run's blocks */                \
                for (int64_t s = 0; s < inner; s += block)                                    \
                    run += from_leaves(inner - s < block ? inner - s : block, LEAF, sums, &k); \
                acc += run;                                                                   \
            }                                                                                 \
            out[o] = (T)(scale > 0 ? acc / scale : acc);                                      \
            ref |= acc != acc;                                                                \
        }                                                                                     \
        free(leaves), free(sums);                                                             \
        return ref;                                                                           \
    }                                                                                         \
    int vg_sum_##SUF(const T *x, T *out, const vg_red *d, int64_t min_elems, int threads) {   \
        if (threads > 1 && d->inner_reduced && d->inner >= LEAF && outputs(d) < threads) {    \
            int ref = split_sum_##SUF(x, out, d, min_elems, threads);                         \
            if (ref >= 0) return ref;                                                         \
        }                                                                                     \
        vg_rjob p = {x, out, d, 0};                                                           \
        vg_parallel_for(outputs(d), min_outputs(d, min_elems), threads, sum_##SUF##_chunk, &p); \
        return p.ref;                                                                         \
    }

/* The largest (CMP >) or smallest (CMP <) of m and a[0..n) by plain comparisons, in independent
 * lanes (SSE2 on x86-64: MAXPS is "v > l ? v : l"); adds x - x of every element to *chk, which is then
 * NaN if an element is NaN or infinite. Without those, any order gives the same bits unless the result
 * is 0 (0 and -0 are equal). */
#define FAST_TAIL(T, CMP)                                                                     \
    for (; i < n; i++) {                                                                      \
        r = a[i] CMP r ? a[i] : r;                                                            \
        s += a[i] - a[i];                                                                     \
    }                                                                                         \
    *chk += s;                                                                                \
    return r;

#define STEP_TAIL(CMP)                                                                        \
    for (; t < n; t++) {                                                                      \
        acc[t] = row[t] CMP acc[t] ? row[t] : acc[t];                                         \
        chk[t] += row[t] - row[t];                                                            \
    }

#if defined(__SSE2__)
#include <emmintrin.h>
#define FAST(NAME, T, SUF, CMP, V, W, X)                                                      \
    static T NAME##_##SUF##_fast(const T *a, int64_t n, T m, T *chk) {                        \
        V l0 = _mm_set1_##X(m), l1 = l0, l2 = l0, l3 = l0;                                    \
        V c0 = _mm_setzero_##X(), c1 = c0, c2 = c0, c3 = c0;                                  \
        int64_t i = 0;                                                                        \
        for (; i + 4 * W <= n; i += 4 * W) {                                                  \
            V v0 = _mm_loadu_##X(a + i), v1 = _mm_loadu_##X(a + i + W);                       \
            V v2 = _mm_loadu_##X(a + i + 2 * W), v3 = _mm_loadu_##X(a + i + 3 * W);           \
            l0 = _mm_##NAME##_##X(v0, l0), l1 = _mm_##NAME##_##X(v1, l1);                     \
            l2 = _mm_##NAME##_##X(v2, l2), l3 = _mm_##NAME##_##X(v3, l3);                     \
            c0 = _mm_add_##X(c0, _mm_sub_##X(v0, v0)), c1 = _mm_add_##X(c1, _mm_sub_##X(v1, v1)); \
            c2 = _mm_add_##X(c2, _mm_sub_##X(v2, v2)), c3 = _mm_add_##X(c3, _mm_sub_##X(v3, v3)); \
        }                                                                                     \
        T lanes[4 * W], checks[4 * W], r = m, s = 0;                                          \
        _mm_storeu_##X(lanes, l0), _mm_storeu_##X(lanes + W, l1);                             \
        _mm_storeu_##X(lanes + 2 * W, l2), _mm_storeu_##X(lanes + 3 * W, l3);                 \
        c0 = _mm_add_##X(_mm_add_##X(c0, c1), _mm_add_##X(c2, c3));                           \
        _mm_storeu_##X(checks, c0);                                                           \
        for (int j = 0; j < 4 * W; j++) r = lanes[j] CMP r ? lanes[j] : r;                    \
        for (int j = 0; j < W; j++) s += checks[j];                                           \
        FAST_TAIL(T, CMP)                                                                     \
    }
/* acc[t] = the larger (smaller) of acc[t] and row[t], and chk[t] += row[t] - row[t], for t < n */
#define STEP(NAME, T, SUF, CMP, V, W, X)                                                      \
    static void NAME##_##SUF##_step(T *acc, T *chk, const T *row, int64_t n) {                \
        int64_t t = 0;                                                                        \
        for (; t + W <= n; t += W) {                                                          \
            V v = _mm_loadu_##X(row + t);                                                     \
            _mm_storeu_##X(acc + t, _mm_##NAME##_##X(v, _mm_loadu_##X(acc + t)));             \
            _mm_storeu_##X(chk + t, _mm_add_##X(_mm_loadu_##X(chk + t), _mm_sub_##X(v, v)));  \
        }                                                                                     \
        STEP_TAIL(CMP)                                                                        \
    }
/* the first i with a[i] == m (there is one) */
#define FIRST(T, SUF, V, W, X)                                                                \
    static int64_t first_##SUF(const T *a, int64_t n, T m) {                                  \
        V mv = _mm_set1_##X(m);                                                               \
        int64_t i = 0;                                                                        \
        for (; i + W <= n; i += W) {                                                          \
            int mask = _mm_movemask_##X(_mm_cmpeq_##X(_mm_loadu_##X(a + i), mv));             \
            if (mask) return i + __builtin_ctz(mask);                                         \
        }                                                                                     \
        while (a[i] != m) i++;                                                                \
        return i;                                                                             \
    }
FIRST(float, f32, __m128, 4, ps)
FIRST(double, f64, __m128d, 2, pd)
#define FAST_F32(NAME, CMP)                                                                   \
    FAST(NAME, float, f32, CMP, __m128, 4, ps)                                                \
    STEP(NAME, float, f32, CMP, __m128, 4, ps)
#define FAST_F64(NAME, CMP)                                                                   \
    FAST(NAME, double, f64, CMP, __m128d, 2, pd)                                              \
    STEP(NAME, double, f64, CMP, __m128d, 2, pd)
#else
#define FAST(NAME, T, SUF, CMP)                                                               \
    static T NAME##_##SUF##_fast(const T *a, int64_t n, T m, T *chk) {                        \
        T r = m, s = 0;                                                                       \
        int64_t i = 0;                                                                        \
        FAST_TAIL(T, CMP)                                                                     \
    }
#define STEP(NAME, T, SUF, CMP)                                                               \
    static void NAME##_##SUF##_step(T *acc, T *chk, const T *row, int64_t n) {                \
        int64_t t = 0;                                                                        \
        STEP_TAIL(CMP)                                                                        \
    }
#define FIRST(T, SUF)                                                                         \
    static int64_t first_##SUF(const T *a, int64_t n, T m) {                                  \
        int64_t i = 0;                                                                        \
        (void)n; /* m is in a */                                                              \
        while (a[i] != m) i++;                                                                \
        return i;                                                                             \
    }
FIRST(float, f32)
FIRST(double, f64)
#define FAST_F32(NAME, CMP) FAST(NAME, float, f32, CMP) STEP(NAME, float, f32, CMP)
#define FAST_F64(NAME, CMP) FAST(NAME, double, f64, CMP) STEP(NAME, double, f64, CMP)
#endif

/* Whether a zero result depends on the order: whether the output's elements hold the other zero than
 * the result (compared as bits, which vectorizes). other_zero: one output, its runs of `len` elements at
 * base + each reduced offset; other_zeros: the tile of n outputs base[t] whose results are acc[t]. */
typedef uint32_t vg_u32 __attribute__((may_alias));
typedef uint64_t vg_u64 __attribute__((may_alias));
#define OTHER_ZERO(T, U, SUF)                                                                 \
    static int other_zero_##SUF(const vg_red *d, const T *base, int64_t nred, int64_t len, T z) { \
        int64_t off = 0, idx[VG_RMAX];                                                        \
        T nz = -z;                                                                            \
        U want, hit = 0;                                                                      \
        memcpy(&want, &nz, sizeof want);                                                      \
        memset(idx, 0, sizeof idx);                                                           \
        for (int64_t j = 0; j < nred && !hit; j++) {                                          \
            const U *run = (const U *)(base + off);                                           \
            for (int64_t i = 0; i < len; i++) hit |= run[i] == want;                          \
            off = next_offset(d, idx, off);                                                   \
        }                                                                                     \
        return hit != 0;                                                                      \
    }                                                                                         \
    static int other_zeros_##SUF(const vg_red *d, const T *base, int64_t nred, int64_t n, const T *acc) { \
        int64_t off = 0, idx[VG_RMAX];                                                        \
        U want[TILE], hit[TILE];                                                              \
        int zero = 0;                                                                         \
        for (int64_t t = 0; t < n; t++) {                                                     \
            T nz = -acc[t];                                                                   \
            memcpy(&want[t], &nz, sizeof want[t]);                                            \
            hit[t] = 0;                                                                       \
            zero |= acc[t] == 0;                                                              \
        }                                                                                     \
        if (!zero) return 0;                                                                  \
        memset(idx, 0, sizeof idx);                                                           \
        for (int64_t j = 0; j < nred; j++) {                                                  \
            const U *row = (const U *)(base + off);                                           \
            for (int64_t t = 0; t < n; t++) hit[t] |= row[t] == want[t];                      \
            off = next_offset(d, idx, off);                                                   \
        }                                                                                     \
        for (int64_t t = 0; t < n; t++)                                                       \
            if (acc[t] == 0 && hit[t]) return 1;                                              \
        return 0;                                                                             \
    }

#define EXTREME(NAME, T, SUF, CMP, EXPR)                                                      \
    static inline T NAME##_##SUF##_op(T a, T b) { return (EXPR); }                            \
    /* the exact fold of one output's elements (inner_reduced) */                             \
    static T NAME##_##SUF##_fold(const vg_red *d, const T *base, int64_t nred, int fast) {    \
        int64_t off = 0, idx[VG_RMAX];                                                        \
        T a = base[0], chk = 0;                                                               \
        memset(idx, 0, sizeof idx);                                                           \
        for (int64_t j = 0; j < nred; j++) {                                                  \
            const T *row = base + off;                                                        \
            if (fast)                                                                         \
                a = NAME##_##SUF##_fast(row, d->inner, a, &chk);                              \
            else                                                                              \
                for (int64_t i = 0; i < d->inner; i++) a = NAME##_##SUF##_op(a, row[i]);      \
            off = next_offset(d, idx, off);                                                   \
        }                                                                                     \
        return fast && chk != chk ? NAME##_##SUF##_fold(d, base, nred, 0) : a;                \
    }                                                                                         \
    static void NAME##_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                     \
        vg_rjob *p = (vg_rjob *)ctx;                                                          \
        const vg_red *d = p->d;                                                               \
        const T *xs = (const T *)p->x;                                                        \
        T *ys = (T *)p->out;                                                                  \
        int64_t nred = reduced_count(d), inner = d->inner, idx[VG_RMAX];                      \
        if (d->inner_reduced) {                                                               \
            for (int64_t o = lo; o < hi; o++) {                                               \
                const T *base = xs + kept_offset(d, o);                                       \
                T r = NAME##_##SUF##_fold(d, base, nred, 1);                                  \
                if (r != r || (r == 0 && other_zero_##SUF(d, base, nred, inner, r))) {        \
                    ask_reference(p);                                                         \
                    return;                                                                   \
                }                                                                             \
                ys[o] = r;                                                                    \
            }                                                                                 \
            return;                                                                           \
        }                                                                                     \
        T acc[TILE], chk[TILE];                                                               \
        for (int64_t o = lo; o < hi;) {                                                       \
            int64_t c0 = o % inner, n = inner - c0;                                           \
            if (n > hi - o) n = hi - o;                                                       \
            if (n > TILE) n = TILE;                                                           \
            const T *base = xs + kept_offset(d, o / inner) + c0;                              \
            for (int pass = 0; pass < 2; pass++) { /* fast, then exact if need be */          \
                for (int64_t t = 0; t < n; t++) acc[t] = base[t], chk[t] = 0;                 \
                int64_t off = 0;                                                              \
                memset(idx, 0, sizeof idx);                                                   \
                for (int64_t j = 0; j < nred; j++) {                                          \
                    const T *row = base + off;                                                \
                    if (pass == 0)                                                            \
                        NAME##_##SUF##_step(acc, chk, row, n);                                \
                    else                                                                      \
                        for (int64_t t = 0; t < n; t++) acc[t] = NAME##_##SUF##_op(acc[t], row[t]); \
                    off = next_offset(d, idx, off);                                           \
                }                                                                             \
                int exact = 1;                                                                \
                for (int64_t t = 0; t < n; t++) exact &= chk[t] == chk[t];                    \
                if (pass == 1 || exact) break;                                                \
            }                                                                                 \
            int ref = other_zeros_##SUF(d, base, nred, n, acc);                               \
            for (int64_t t = 0; t < n; t++) ref |= acc[t] != acc[t];                          \
            if (ref) {                                                                        \
                ask_reference(p);                                                             \
                return;                                                                       \
            }                                                                                 \
            for (int64_t t = 0; t < n; t++) ys[o + t] = acc[t];                               \
            o += n;                                                                           \
        }                                                                                     \
    }                                                                                         \
    typedef struct {                                                                          \
        const T *x;                                                                           \
        const vg_leaf *leaves;                                                                \
        T *vals, *chks;                                                                       \
    } NAME##_##SUF##_pieces;                                                                  \
    static void NAME##_##SUF##_piece(void *ctx, int64_t lo, int64_t hi) {                     \
        NAME##_##SUF##_pieces *p = (NAME##_##SUF##_pieces *)ctx;                              \
        for (int64_t i = lo; i < hi; i++) {                                                   \
            const T *a = p->x + p->leaves[i].off;                                             \
            p->chks[i] = 0;                                                                   \
            p->vals[i] = NAME##_##SUF##_fast(a, p->leaves[i].n, a[0], &p->chks[i]);            \
        }                                                                                     \
    }                                                                                         \
    /* fold's outputs from pieces of their runs folded by the threads (see the top); -1 without \
     * memory for them */                                                                     \
    static int NAME##_##SUF##_split(const T *x, T *out, const vg_red *d, int64_t min_elems, int threads) { \
        int64_t count = all_leaves(d, 0), outs = outputs(d), k = 0;                           \
        vg_leaf *leaves = malloc(sizeof *leaves * (size_t)count);                             \
        T *vals = malloc(sizeof *vals * (size_t)count), *chks = malloc(sizeof *chks * (size_t)count); \
        if (!leaves || !vals || !chks) {                                                      \
            free(leaves), free(vals), free(chks);                                             \
            return -1;                                                                        \
        }                                                                                     \
        all_leaves(d, leaves);                                                                \
        NAME##_##SUF##_pieces p = {x, leaves, vals, chks};                                    \
        vg_parallel_for(count, (min_elems + LEAF - 1) / LEAF, threads, NAME##_##SUF##_piece, &p); \
        int64_t per_output = count / outs, nred = reduced_count(d);                           \
        int ref = 0;                                                                          \
        for (int64_t o = 0; o < outs; o++, k += per_output) {                                 \
            const T *base = x + kept_offset(d, o);                                            \
            T r = vals[k], chk = 0;                                                           \
            for (int64_t i = k; i < k + per_output; i++) {                                    \
                r = vals[i] CMP r ? vals[i] : r;                                              \
                chk += chks[i];                                                               \
            }                                                                                 \
            if (chk != chk) r = NAME##_##SUF##_fold(d, base, nred, 0); /* a NaN or an infinity */ \
            ref |= r != r || (r == 0 && other_zero_##SUF(d, base, nred, d->inner, r));        \
            out[o] = r;                                                                       \
        }                                                                                     \
        free(leaves), free(vals), free(chks);                                                 \
        return ref;                                                                           \
    }                                                                                         \
    int vg_##NAME##_##SUF(const T *x, T *out, const vg_red *d, int64_t min_elems, int threads) { \
        if (threads > 1 && d->inner_reduced && d->inner >= LEAF && outputs(d) < threads) {    \
            int ref = NAME##_##SUF##_split(x, out, d, min_elems, threads);                    \
            if (ref >= 0) return ref;                                                         \
        }                                                                                     \
        vg_rjob p = {x, out, d, 0};                                                           \
        vg_parallel_for(outputs(d), min_outputs(d, min_elems), threads, NAME##_##SUF##_chunk, &p); \
        return p.ref;                                                                         \
    }

/* argmax over the middle axis of [outer, n, inner]: out[o * inner + i]. */
typedef struct {
    const void *x;
    int64_t *out;
    int64_t n, inner;
} vg_argjob;

#define ARGMAX(T, SUF)                                                                        \
    static void argmax_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                     \
        const vg_argjob *p = (const vg_argjob *)ctx;                                          \
        const T *xs = (const T *)p->x;                                                        \
        int64_t n = p->n, inner = p->inner;                                                   \
        T best[TILE];                                                                         \
        int64_t at[TILE];                                                                     \
        if (inner == 1) { /* rows: the first element equal to the maximum, if no NaN or inf */ \
            for (int64_t o = lo; o < hi; o++) {                                               \
                const T *row = xs + o * n;                                                    \
                T chk = 0, m = max_##SUF##_fast(row, n, row[0], &chk);                        \
                int64_t i = 0;                                                                \
                if (chk == chk)                                                               \
                    i = first_##SUF(row, n, m);                                               \
                else                                                                          \
                    for (int64_t j = 1; j < n && !isnan(row[i]); j++)                         \
                        if (!(row[j] <= row[i])) i = j;                                       \
                p->out[o] = i;                                                                \
            }                                                                                 \
            return;                                                                           \
        }                                                                                     \
        for (int64_t o = lo; o < hi;) {                                                       \
            int64_t c0 = o % inner, m = inner - c0;                                           \
            if (m > hi - o) m = hi - o;                                                       \
            if (m > TILE) m = TILE;                                                           \
            const T *base = xs + (o / inner) * n * inner + c0;                                \
            for (int64_t t = 0; t < m; t++) {                                                 \
                best[t] = base[t];                                                            \
                at[t] = 0;                                                                    \
            }                                                                                 \
            for (int64_t j = 1; j < n; j++) {                                                 \
                const T *row = base + j * inner;                                              \
                for (int64_t t = 0; t < m; t++)                                               \
                    if (!isnan(best[t]) && !(row[t] <= best[t])) {                            \
                        best[t] = row[t];                                                     \
                        at[t] = j;                                                            \
                    }                                                                         \
            }                                                                                 \
            for (int64_t t = 0; t < m; t++) p->out[o + t] = at[t];                            \
            o += m;                                                                           \
        }                                                                                     \
    }                                                                                         \
    void vg_argmax_##SUF(const T *x, int64_t *out, int64_t outer, int64_t n, int64_t inner,   \
                         int64_t min_out, int threads) {                                      \
        vg_argjob p = {x, out, n, inner};                                                     \
        vg_parallel_for(outer * inner, min_out, threads, argmax_##SUF##_chunk, &p);           \
    }

PAIRWISE(float, f32)
PAIRWISE(double, f64)

/* ---- f32 sums with AVX-512: leaves side by side ---------------------------------------------------------
 *
 * pairwise_'s sum of a run above PW_BLOCK elements is a tree whose leaves (runs of at most PW_BLOCK) each
 * take eight accumulators through a chain of dependent additions: one leaf at a time, the adder waits on
 * that chain. Here the leaves of a run (or the rows of a batch, each one leaf) are summed eight at a time,
 * each in one vector of eight doubles (its r0..r7), combined as pairwise_ combines them, the rest added in
 * order, and the tree then formed from the leaves' sums by the same additions: the same bits. */
#define ROW_SUMS_f32 1
#define ROW_SUMS_f64 0
#define SIDE 8              /* leaves summed side by side */
#define FAST_RUN LEAF       /* run_sum_f32 gathers the leaves of runs up to this long (at most 256 leaves) */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SUM512 __attribute__((target("avx2,fma,avx512f,avx512dq")))
/* r0..r7 of a leaf of n >= 8 elements from i = 8 on, added into acc */
SUM512 static inline __m512d leaf_lanes(const float *a, int64_t from, int64_t to, __m512d acc) {
    for (int64_t i = from; i < to; i += 8) acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_loadu_ps(a + i)));
    return acc;
}
/* ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7)), then a[8 (n / 8)..n) in order */
SUM512 static inline double leaf_total(__m512d r, const float *a, int64_t n) {
    __m512d s1 = _mm512_add_pd(r, _mm512_permute_pd(r, 0x55));                       /* lane 2j: r2j + r2j+1 */
    __m512d s2 = _mm512_add_pd(s1, _mm512_permutex_pd(s1, 0xEE));                    /* lanes 0, 4 */
    double res = _mm512_cvtsd_f64(s2) + _mm256_cvtsd_f64(_mm512_extractf64x4_pd(s2, 1));
    for (int64_t i = n - n % 8; i < n; i++) res += (double)a[i];
    return res;
}
/* sums[k] = pairwise_f32(a + leaves[k].off, leaves[k].n) for k < count, each n in [8, PW_BLOCK] */
SUM512 static void leaf_sums_avx512(const float *a, const vg_leaf *leaves, int64_t count, double *sums) {
    int64_t k = 0;
    for (; k + SIDE <= count; k += SIDE) {
        __m512d r[SIDE];
        int64_t common = PW_BLOCK;
        for (int j = 0; j < SIDE; j++) {
            const vg_leaf l = leaves[k + j];
            r[j] = _mm512_cvtps_pd(_mm256_loadu_ps(a + l.off));
            if (l.n - l.n % 8 < common) common = l.n - l.n % 8;
        }
        for (int64_t i = 8; i < common; i += 8)
            for (int j = 0; j < SIDE; j++)
                r[j] = _mm512_add_pd(r[j], _mm512_cvtps_pd(_mm256_loadu_ps(a + leaves[k + j].off + i)));
        for (int j = 0; j < SIDE; j++) {
            const vg_leaf l = leaves[k + j];
            const float *x = a + l.off;
            sums[k + j] = leaf_total(leaf_lanes(x, common, l.n - l.n % 8, r[j]), x, l.n);
        }
    }
    for (; k < count; k++) {
        const float *x = a + leaves[k].off;
        int64_t n = leaves[k].n;
        sums[k] = leaf_total(leaf_lanes(x, 8, n - n % 8, _mm512_cvtps_pd(_mm256_loadu_ps(x))), x, n);
    }
}
static int side_by_side(void) {
    static int has = -1;
    if (has < 0) has = vg_has_avx512();
    return has;
}
#else
static int side_by_side(void) { return 0; }
static void leaf_sums_avx512(const float *a, const vg_leaf *leaves, int64_t count, double *sums) {
    for (int64_t k = 0; k < count; k++) sums[k] = pairwise_f32(a + leaves[k].off, leaves[k].n);
}
#endif

static double run_sum_f64(const double *a, int64_t n) { return pairwise_f64(a, n); }
static double run_sum_f32(const float *a, int64_t n) {
    if (n <= PW_BLOCK || !side_by_side()) return pairwise_f32(a, n);
    if (n > FAST_RUN) { /* pairwise_'s split, down to runs whose leaves fit below */
        int64_t n2 = n / 2;
        n2 -= n2 % 8;
        return run_sum_f32(a, n2) + run_sum_f32(a + n2, n - n2);
    }
    vg_leaf leaves[256];
    double sums[256];
    int64_t count = tree_leaves(0, n, PW_BLOCK, leaves, 0), k = 0; /* leaves above PW_BLOCK / 2 - 8 */
    leaf_sums_avx512(a, leaves, count, sums);
    return from_leaves(n, PW_BLOCK, sums, &k);
}

/* sums[r] = vg_pairwise_f32(a + r n, n, block) for r < rows (rows.c's softmax; sum over the last axis) */
void vg_pairwise_rows_f32(const float *a, int64_t rows, int64_t n, int64_t block, double *sums) {
    if (n < 8 || n > PW_BLOCK || n > block || !side_by_side()) {
        for (int64_t r = 0; r < rows; r++) sums[r] = vg_pairwise_f32(a + r * n, n, block);
        return;
    }
    vg_leaf leaves[256];
    for (int64_t r0 = 0; r0 < rows; r0 += 256) {
        int64_t m = rows - r0 < 256 ? rows - r0 : 256;
        for (int64_t r = 0; r < m; r++) leaves[r] = (vg_leaf){(r0 + r) * n, n};
        leaf_sums_avx512(a, leaves, m, sums + r0);
    }
}
SUM(float, f32)
SUM(double, f64)
OTHER_ZERO(float, vg_u32, f32)
OTHER_ZERO(double, vg_u64, f64)
FAST_F32(max, >)
FAST_F64(max, >)
FAST_F32(min, <)
FAST_F64(min, <)
EXTREME(max, float, f32, >, (a > b || isnan(a)) ? a : b)
EXTREME(max, double, f64, >, (a > b || isnan(a)) ? a : b)
EXTREME(min, float, f32, <, (a < b || isnan(a)) ? a : b)
EXTREME(min, double, f64, <, (a < b || isnan(a)) ? a : b)

/* The largest of a[0..n), n > 0, as NumPy's maximum.reduce gives it (the row kernels' max) */
#define ROWMAX(T, SUF)                                                                        \
    T vg_rowmax_##SUF(const T *a, int64_t n) {                                                \
        T chk = 0, m = ROWMAX_FAST_##SUF(a, n, a[0], &chk);                                   \
        if (chk == chk && m != 0) return m;                                                   \
        m = a[0];                                                                             \
        for (int64_t i = 1; i < n; i++) m = max_##SUF##_op(m, a[i]);                          \
        return m;                                                                             \
    }
#ifdef SUM512
/* max_f32_fast (largest of m and a[0..n), *chk += x - x of each) in vectors of sixteen: the same result
 * wherever *chk stays finite and the result is not 0 (rowmax's use of it) */
SUM512 static float max_f32_fast512(const float *a, int64_t n, float m, float *chk) {
    __m512 l0 = _mm512_set1_ps(m), l1 = l0, c0 = _mm512_setzero_ps(), c1 = c0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 v0 = _mm512_loadu_ps(a + i), v1 = _mm512_loadu_ps(a + i + 16);
        l0 = _mm512_max_ps(v0, l0), l1 = _mm512_max_ps(v1, l1);
        c0 = _mm512_add_ps(c0, _mm512_sub_ps(v0, v0)), c1 = _mm512_add_ps(c1, _mm512_sub_ps(v1, v1));
    }
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(a + i);
        l0 = _mm512_max_ps(v, l0), c0 = _mm512_add_ps(c0, _mm512_sub_ps(v, v));
    }
    float r = _mm512_reduce_max_ps(_mm512_max_ps(l0, l1)), s = _mm512_reduce_add_ps(_mm512_add_ps(c0, c1));
    for (; i < n; i++) {
        r = a[i] > r ? a[i] : r;
        s += a[i] - a[i];
    }
    *chk += s;
    return r;
}
#define ROWMAX_FAST_f32(a, n, m, chk) (n >= 16 && side_by_side() ? max_f32_fast512 : max_f32_fast)(a, n, m, chk)
#else
#define ROWMAX_FAST_f32 max_f32_fast
#endif
#define ROWMAX_FAST_f64 max_f64_fast
ROWMAX(float, f32)
ROWMAX(double, f64)
ARGMAX(float, f32)
ARGMAX(double, f64)
