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
 * rows.c uses vg_pairwise_<dtype> (one run's sum) and vg_rowmax_<dtype> (one row's max); vg_total_<dtype> is
 * one vector's sum or mean (rows.py: cross-entropy's reduction of its per-row losses).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vg.h"

#define PW_BLOCK 128
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
        for (int64_t s = 0; s < n; s += block) acc += pairwise_##SUF(a + s, n - s < block ? n - s : block); \
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
    int vg_sum_##SUF(const T *x, T *out, const vg_red *d, int64_t min_out, int threads) {     \
        vg_rjob p = {x, out, d, 0};                                                           \
        vg_parallel_for(outputs(d), min_out, threads, sum_##SUF##_chunk, &p);                 \
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
    int vg_##NAME##_##SUF(const T *x, T *out, const vg_red *d, int64_t min_out, int threads) { \
        vg_rjob p = {x, out, d, 0};                                                           \
        vg_parallel_for(outputs(d), min_out, threads, NAME##_##SUF##_chunk, &p);              \
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
        T chk = 0, m = max_##SUF##_fast(a, n, a[0], &chk);                                    \
        if (chk == chk && m != 0) return m;                                                   \
        m = a[0];                                                                             \
        for (int64_t i = 1; i < n; i++) m = max_##SUF##_op(m, a[i]);                          \
        return m;                                                                             \
    }
ROWMAX(float, f32)
ROWMAX(double, f64)
ARGMAX(float, f32)
ARGMAX(double, f64)
