/* Row kernels over the last axis of C-contiguous [rows, n] arrays: softmax, log_softmax, cross-entropy
 * (forward, and the gradient of its logits), layer_norm and rms_norm.
 *
 * Each kernel repeats, row by row, the steps of its op's decomposition with the same roundings: the
 * element-wise steps in the dtype, each sum as NumPy's add.reduce gives it (`vg_pairwise_*` of reduce.c:
 * pairwise in double, in blocks of `block` elements), rounded to the dtype before it is used. exp and
 * log are elementwise.c's kernels (f32: evaluated in double, rounded once); where those differ from the
 * references' exp and log, by a few ulps, so do the results; everything else gives the reference's bits.
 * One thread computes each row, so the result does not depend on the thread count. `out` may be `x` (in place) for softmax, log_softmax and the norms.
 * The norms take rows in batches (norm_batch), each batch's sums side by side (vg_pairwise_rows_f32), their
 * element-wise steps vectorized (built for each instruction set, the same operations in the same order).
 *
 * x:         [rows, n] input (logits for cross-entropy);
 * softmax:   out = e / sum(e), e = exp(x - max(x));   log_softmax: out = (x - m) - log(sum(e));
 * xent:      nll[r] = -((x[r, t] - m) - log(sum(e))) for t = target[r] in [0, n); 0 where t is the
 *            ignored class (has_ignore); returns 1, before any work, where another t is out of range;
 * xent_total: the sum of the nll (or their mean: over the rows, or over those not ignored) as the
 *            reference reduces them; returns 1 where it is NaN (whose bits depend on NumPy's order);
 * xent_grad: out[r, j] = (softmax(x)[r, j] - (j == t)) * g[r * g_step] (for a mean, g divided by the
 *            count of rows not ignored, in the dtype); 0 on an ignored row; returns 1 as xent does;
 * xent_step: xent_grad's rows, then xent's nll, from one pass over each row (a compiled step's loss and
 *            gradient, ir/passes/loss_step.py);
 * layer_norm: xc = x - mean(x); out = xc * (1 / sqrt(mean(xc * xc) + eps)) * w + b;
 * rms_norm:  out = x * (1 / sqrt(mean(x * x) + eps)) * w;
 * norm_grad: the gradient of layer_norm (center) or rms_norm with respect to x, for the output's
 *            gradient g: with rs, xc as above, xhat = xc * rs and d = g * w,
 *            out = rs * ((d - mean(d)) - xhat * mean(d * xhat)), without the "- mean(d)" for rms_norm;
 * norm_weight_grad: the gradient of their weight, the sum of g * xhat over the rows (and of g: the bias's),
 *            each column's added in row order in double from +0 and rounded once, as the sum over the
 *            leading axes gives it: every row's mean and rs first (threads take rows), then the columns
 *            (threads take columns), so the bits do not depend on the thread count.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "vg.h"

/* defined in reduce.c: the sum of n elements in NumPy's add.reduce order, and the largest */
double vg_pairwise_f32(const float *a, int64_t n, int64_t block);
double vg_pairwise_f64(const double *a, int64_t n, int64_t block);
float vg_rowmax_f32(const float *a, int64_t n);
double vg_rowmax_f64(const double *a, int64_t n);
/* defined in elementwise.c: the exp and log kernels (f32: in double, rounded once; exp vectorized where it
 * can), which give the reference's bits wherever those of the elementwise ops do */
void vg_exp_f32(const float *x, float *out, int64_t n, int64_t min_chunk, int threads);
void vg_exp_f64(const double *x, double *out, int64_t n, int64_t min_chunk, int threads);
void vg_log_f32(const float *x, float *out, int64_t n, int64_t min_chunk, int threads);
void vg_log_f64(const double *x, double *out, int64_t n, int64_t min_chunk, int threads);

typedef struct {
    const void *x, *w, *b, *g;
    const int64_t *target;
    const void *scale;
    void *out;
    void *losses; /* xent_grad: the rows' losses too, where not null */
    int64_t n, block, scale_step;
    int64_t ignore, count; /* the ignored class (where has_ignore); the mean's count (0: a sum) */
    int has_ignore;
    double eps;
    int log;    /* log_softmax rather than softmax */
    int center; /* layer_norm (subtract the mean, add b) rather than rms_norm */
} vg_rowjob;

/* whether a class target other than the ignored one is outside [0, n): cross_entropy and its gradient
 * refuse it */
static int targets_out_of_range(const int64_t *target, int64_t rows, int64_t n, int has_ignore,
                                int64_t ignore) {
    for (int64_t r = 0; r < rows; r++)
        if ((uint64_t)target[r] >= (uint64_t)n && !(has_ignore && target[r] == ignore)) return 1;
    return 0;
}
/* how many targets are not the ignored class */
static int64_t kept_rows(const int64_t *target, int64_t rows, int has_ignore, int64_t ignore) {
    int64_t kept = rows;
    if (has_ignore)
        for (int64_t r = 0; r < rows; r++) kept -= target[r] == ignore;
    return kept;
}
/* Cross-entropy's rows (and softmax's of BATCH elements or more) go in pieces of PIECE elements (shift,
 * exp), each followed by a request for the same part of the next row into L2: the logits come from memory
 * while exp computes (the hardware prefetcher alone left the first pass over each row waiting on its
 * loads, about a fifth of the time on [1024, 4096] logits); a piece's 16 lines are requests the core
 * keeps in flight. */
#define PIECE 256
void vg_exp_f32_range(const float *x, float *out, int64_t n); /* elementwise.c: on the calling thread */
static inline void exp_range_f32(const float *x, float *out, int64_t n) { vg_exp_f32_range(x, out, n); }
static inline void exp_range_f64(const double *x, double *out, int64_t n) { vg_exp_f64(x, out, n, n, 1); }
static inline void prefetch_l2(const void *from, int64_t bytes) {
    for (int64_t i = 0; i < bytes; i += 64) __builtin_prefetch((const char *)from + i, 0, 2);
}
static inline float sqrt_f32(float x) { return sqrtf(x); }
static inline double sqrt_f64(double x) { return sqrt(x); }


/* softmax's batches: rows of at most BATCH elements in all go through one exp call; their sums are taken
 * ROW_SUMS rows at a time */
#define BATCH 4096
#define ROW_SUMS 64
void vg_pairwise_rows_f32(const float *a, int64_t rows, int64_t n, int64_t block, double *sums);
static inline void row_sums_f32(const float *a, int64_t rows, int64_t n, int64_t block, double *sums) {
    vg_pairwise_rows_f32(a, rows, n, block, sums);
}
static inline void row_sums_f64(const double *a, int64_t rows, int64_t n, int64_t block, double *sums) {
    for (int64_t r = 0; r < rows; r++) sums[r] = vg_pairwise_f64(a + r * n, n, block);
}
/* out[i] = (out[i] / s) g: divisions, or on rows of QUOTIENTS_FROM f32 elements or more quotients.c's
 * products (the division's bits without a division an element; below, its calls cost more than they save) */
#define QUOTIENTS_FROM 256
void vg_quotients_f32(float *out, int64_t n, float s, float g);
#define DIVIDE(T, SUF)                                                                        \
    VG_CLONES static void divide_by_##SUF(T *out, int64_t n, T s, T g) {                      \
        for (int64_t i = 0; i < n; i++) out[i] = out[i] / s * g;                              \
    }
DIVIDE(float, f32)
DIVIDE(double, f64)
static inline void quotients_f32(float *out, int64_t n, float s, float g) {
    (n < QUOTIENTS_FROM ? divide_by_f32 : vg_quotients_f32)(out, n, s, g);
}
static inline void quotients_f64(double *out, int64_t n, double s, double g) { divide_by_f64(out, n, s, g); }
/* out[i] = x[i] - m; out[i] = out[i] / s: plain IEEE operations, built for each instruction set */
#define ROW_STEPS(T, SUF)                                                                     \
    VG_CLONES static void shift_##SUF(const T *restrict x, T *restrict out, int64_t n, T m) { \
        for (int64_t i = 0; i < n; i++) out[i] = x[i] - m;                                    \
    }                                                                                         \
    static void divide_##SUF(T *out, int64_t n, T s) { quotients_##SUF(out, n, s, (T)1); } /* x / s * 1: x / s */ \
    /* out[i] = (out[i] / s - (i == t)) g: the "- 0" of i != t changes no bits (out[i] / s >= 0) */ \
    static void xent_grad_row_##SUF(T *out, int64_t n, T s, int64_t t, T g) {                 \
        const T hit = (out[t] / s - (T)1) * g;                                                \
        quotients_##SUF(out, n, s, g);                                                        \
        out[t] = hit;                                                                         \
    }
ROW_STEPS(float, f32)
ROW_STEPS(double, f64)

/* The norms' element-wise steps on one row, plain IEEE operations in the decompositions' order, built for
 * each instruction set */
#define NORM_STEPS(T, SUF)                                                                    \
    VG_CLONES static void squares_##SUF(const T *restrict x, T *restrict sq, int64_t n, T mu, int center) { \
        if (center)                                                                           \
            for (int64_t i = 0; i < n; i++) sq[i] = (x[i] - mu) * (x[i] - mu);                \
        else                                                                                  \
            for (int64_t i = 0; i < n; i++) sq[i] = x[i] * x[i];                              \
    }                                                                                         \
    /* out may be x */                                                                        \
    VG_CLONES static void norm_out_##SUF(const T *x, const T *restrict w, const T *restrict b, T *out, \
                                         int64_t n, T mu, T rs, int center) {                 \
        if (center)                                                                           \
            for (int64_t i = 0; i < n; i++) out[i] = (x[i] - mu) * rs * w[i] + b[i];          \
        else                                                                                  \
            for (int64_t i = 0; i < n; i++) out[i] = x[i] * rs * w[i];                        \
    }                                                                                         \
    VG_CLONES static void grad_parts_##SUF(const T *restrict x, const T *restrict g, const T *restrict w, \
                                           T *restrict xhat, T *restrict d, T *restrict dx, int64_t n, \
                                           T mu, T rs, int center) {                          \
        for (int64_t i = 0; i < n; i++) {                                                     \
            xhat[i] = (center ? x[i] - mu : x[i]) * rs;                                       \
            d[i] = g[i] * w[i];                                                               \
            dx[i] = d[i] * xhat[i];                                                           \
        }                                                                                     \
    }                                                                                         \
    VG_CLONES static void grad_out_##SUF(const T *restrict d, const T *restrict xhat, T *out, int64_t n, \
                                         T rs, T md, T dot, int center) {                     \
        if (center)                                                                           \
            for (int64_t i = 0; i < n; i++) out[i] = rs * ((d[i] - md) - xhat[i] * dot);      \
        else                                                                                  \
            for (int64_t i = 0; i < n; i++) out[i] = rs * (d[i] - xhat[i] * dot);             \
    }                                                                                         \
    /* wacc[i] += g xhat, bacc[i] += g (where `bias`), widened: the reduction's additions, in row order */ \
    VG_CLONES static void weight_acc_##SUF(const T *restrict x, const T *restrict g, double *restrict wacc, \
                                           double *restrict bacc, int64_t n, T mu, T rs, int center, int bias) { \
        for (int64_t i = 0; i < n; i++) wacc[i] += (double)(g[i] * ((center ? x[i] - mu : x[i]) * rs)); \
        if (bias)                                                                             \
            for (int64_t i = 0; i < n; i++) bacc[i] += (double)g[i];                          \
    }
NORM_STEPS(float, f32)
NORM_STEPS(double, f64)
/* the norms take rows in batches of at most ROW_SUMS rows and NORM_BATCH elements, their sums side by side */
#define NORM_BATCH 1024
static inline int64_t norm_batch(int64_t n) {
    int64_t per = NORM_BATCH / n;
    return per < 1 ? 1 : per > ROW_SUMS ? ROW_SUMS : per;
}
/* the weight gradient's columns a thread takes at least */
#define WEIGHT_COLUMNS 64

#define ROWS(T, SUF)                                                                          \
    /* z = row - m, e = exp(z) (not in place: the exp kernel reads z after it writes e; e may be  \
       row), the next row (where not null) fetched meanwhile */                               \
    static void shifted_exps_##SUF(const T *row, T *z, T *e, int64_t n, T m, const T *next) {  \
        for (int64_t i = 0; i < n; i += PIECE) {                                              \
            int64_t k = n - i < PIECE ? n - i : PIECE;                                        \
            shift_##SUF(row + i, z + i, k, m);                                                \
            exp_range_##SUF(z + i, e + i, k);                                                 \
            if (next) prefetch_l2(next + i, k * (int64_t)sizeof(T));                           \
        }                                                                                     \
    }                                                                                         \
    /* the same, returning sum(e) rounded as the reference does */                            \
    static T exps_##SUF(const T *row, T *z, T *e, int64_t n, T m, int64_t block, const T *next) { \
        shifted_exps_##SUF(row, z, e, n, m, next);                                            \
        return (T)vg_pairwise_##SUF(e, n, block);                                             \
    }                                                                                         \
    /* rows [lo, hi) a batch at a time: every row's z = row - max(row) into tmp, one exp call over the  \
       batch (the exp kernel's per-call work once, not per row; each element's bits are its own; a  \
       batch of one row: shifted_exps_), then each row's sum and the division (or log) */     \
    static void softmax_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                    \
        const vg_rowjob *p = (const vg_rowjob *)ctx;                                          \
        int64_t n = p->n, per = BATCH / n < 1 ? 1 : BATCH / n;                                \
        if (per > hi - lo) per = hi - lo;                                                     \
        T *tmp = (T *)malloc((p->log ? 2 : 1) * (size_t)(per * n) * sizeof(T));               \
        double sums[ROW_SUMS];                                                                \
        for (int64_t r0 = lo; r0 < hi; r0 += per) {                                           \
            int64_t k = hi - r0 < per ? hi - r0 : per;                                        \
            const T *x = (const T *)p->x + r0 * n;                                            \
            T *out = (T *)p->out + r0 * n, *e = p->log ? tmp + per * n : out;                 \
            if (k == 1) { /* a long row: in pieces, the next one fetched meanwhile */          \
                shifted_exps_##SUF(x, tmp, e, n, vg_rowmax_##SUF(x, n), r0 + 1 < hi ? x + n : 0); \
            } else {                                                                          \
                for (int64_t r = 0; r < k; r++) shift_##SUF(x + r * n, tmp + r * n, n, vg_rowmax_##SUF(x + r * n, n)); \
                vg_exp_##SUF(tmp, e, k * n, k * n, 1); /* one thread: this chunk's */         \
            }                                                                                 \
            for (int64_t r = 0; r < k; r += ROW_SUMS) {                                       \
                int64_t m = k - r < ROW_SUMS ? k - r : ROW_SUMS;                              \
                T s[ROW_SUMS];                                                                \
                row_sums_##SUF(e + r * n, m, n, p->block, sums);                              \
                for (int64_t j = 0; j < m; j++) s[j] = (T)sums[j];                            \
                if (p->log) vg_log_##SUF(s, s, m, m, 1); /* the rows' logs in one call */     \
                for (int64_t j = 0; j < m; j++) {                                             \
                    T *o = out + (r + j) * n;                                                 \
                    if (p->log)                                                               \
                        shift_##SUF(tmp + (r + j) * n, o, n, s[j]);                           \
                    else                                                                      \
                        divide_##SUF(o, n, s[j]);                                             \
                }                                                                             \
            }                                                                                 \
        }                                                                                     \
        free(tmp);                                                                            \
    }                                                                                         \
    void vg_softmax_##SUF(const T *x, T *out, int64_t rows, int64_t n, int64_t block, int log, \
                          int64_t min_rows, int threads) {                                    \
        vg_rowjob p = {.x = x, .out = out, .n = n, .block = block, .log = log};               \
        vg_parallel_for(rows, min_rows, threads, softmax_##SUF##_chunk, &p);                  \
    }                                                                                         \
    /* rows [lo, hi) ROW_SUMS at a time: each row's max and sum of exps, then the batch's logs in one \
       call (a call per row cost more than the row's exps where rows are short), then the losses */ \
    static void xent_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                       \
        const vg_rowjob *p = (const vg_rowjob *)ctx;                                          \
        int64_t n = p->n;                                                                     \
        T *tmp = (T *)malloc(2 * (size_t)n * sizeof(T)), m[ROW_SUMS], s[ROW_SUMS], l[ROW_SUMS]; \
        for (int64_t r0 = lo; r0 < hi; r0 += ROW_SUMS) {                                      \
            int64_t k = hi - r0 < ROW_SUMS ? hi - r0 : ROW_SUMS;                              \
            for (int64_t j = 0; j < k; j++) {                                                 \
                const T *row = (const T *)p->x + (r0 + j) * n;                                \
                m[j] = (T)0, s[j] = (T)1; /* an ignored row's, unused */                      \
                if (p->has_ignore && p->target[r0 + j] == p->ignore) continue;                \
                m[j] = vg_rowmax_##SUF(row, n);                                               \
                s[j] = exps_##SUF(row, tmp, tmp + n, n, m[j], p->block, r0 + j + 1 < hi ? row + n : 0); \
            }                                                                                 \
            vg_log_##SUF(s, l, k, k, 1); /* each element's bits are its own */                \
            for (int64_t j = 0; j < k; j++) {                                                 \
                const T *row = (const T *)p->x + (r0 + j) * n;                                \
                int64_t t = p->target[r0 + j];                                                \
                T *nll = (T *)p->out + r0 + j;                                                \
                /* t in [0, n): vg_xent checked */                                            \
                *nll = p->has_ignore && t == p->ignore ? (T)0 : -((row[t] - m[j]) - l[j]);    \
            }                                                                                 \
        }                                                                                     \
        free(tmp);                                                                            \
    }                                                                                         \
    int vg_xent_##SUF(const T *x, const int64_t *target, T *nll, int64_t rows, int64_t n,     \
                      int64_t block, int has_ignore, int64_t ignore, int64_t min_rows, int threads) { \
        if (targets_out_of_range(target, rows, n, has_ignore, ignore)) return 1;              \
        vg_rowjob p = {.x = x, .target = target, .out = nll, .n = n, .block = block,          \
                       .has_ignore = has_ignore, .ignore = ignore};                           \
        vg_parallel_for(rows, min_rows, threads, xent_##SUF##_chunk, &p);                     \
        return 0;                                                                             \
    }                                                                                         \
    /* mean: 0 a sum, 1 a mean */                                                             \
    int vg_xent_total_##SUF(const T *nll, const int64_t *target, int64_t rows, int64_t block,  \
                            int mean, int has_ignore, int64_t ignore, T *out) {               \
        double s = vg_pairwise_##SUF(nll, rows, block);                                       \
        if (!mean) {                                                                          \
            out[0] = (T)s;                                                                    \
        } else if (!has_ignore) {                                                             \
            out[0] = (T)(s / (double)rows); /* the mean op's reference */                     \
        } else { /* the sum, then divided by the count in the dtype */                        \
            out[0] = (T)s / (T)kept_rows(target, rows, has_ignore, ignore);                   \
        }                                                                                     \
        return out[0] != out[0];                                                              \
    }                                                                                         \
    /* the gradient's rows; where p->losses is not null, each row's loss too (xent's), from the same  \
       exps: the row's exps, sum and log, then its quotients while the row is in cache */     \
    static void xent_grad_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                  \
        const vg_rowjob *p = (const vg_rowjob *)ctx;                                          \
        int64_t n = p->n;                                                                     \
        T *tmp = (T *)malloc((size_t)n * sizeof(T)), *losses = (T *)p->losses;                \
        for (int64_t r = lo; r < hi; r++) {                                                   \
            const T *row = (const T *)p->x + r * n;                                           \
            T *out = (T *)p->out + r * n;                                                     \
            int64_t t = p->target[r];                                                         \
            if (p->has_ignore && t == p->ignore) {                                            \
                for (int64_t i = 0; i < n; i++) out[i] = (T)0;                                \
                if (losses) losses[r] = (T)0;                                                 \
                continue;                                                                     \
            }                                                                                 \
            T m = vg_rowmax_##SUF(row, n);                                                    \
            T s = exps_##SUF(row, tmp, out, n, m, p->block, r + 1 < hi ? row + n : 0);        \
            if (losses) {                                                                     \
                T l;                                                                          \
                vg_log_##SUF(&s, &l, 1, 1, 1); /* each element's bits are its own: xent's */  \
                losses[r] = -((row[t] - m) - l);                                              \
            }                                                                                 \
            T g = ((const T *)p->scale)[r * p->scale_step];                                   \
            if (p->count) g = g / (T)p->count;                                                \
            xent_grad_row_##SUF(out, n, s, t, g);                                             \
        }                                                                                     \
        free(tmp);                                                                            \
    }                                                                                         \
    /* mean: g divided by the count of rows not ignored; nll: null, or the rows' losses (as xent's) */ \
    static int xent_grad_##SUF(const T *x, const int64_t *target, const T *g, int64_t g_step, T *out, \
                               T *nll, int64_t rows, int64_t n, int64_t block, int mean,      \
                               int has_ignore, int64_t ignore, int64_t min_rows, int threads) { \
        if (targets_out_of_range(target, rows, n, has_ignore, ignore)) return 1;              \
        vg_rowjob p = {.x = x, .target = target, .scale = g, .scale_step = g_step,            \
                       .out = out, .losses = nll, .n = n, .block = block,                     \
                       .has_ignore = has_ignore, .ignore = ignore,                            \
                       .count = mean ? kept_rows(target, rows, has_ignore, ignore) : 0};      \
        vg_parallel_for(rows, min_rows, threads, xent_grad_##SUF##_chunk, &p);                \
        return 0;                                                                             \
    }                                                                                         \
    int vg_xent_grad_##SUF(const T *x, const int64_t *target, const T *g, int64_t g_step, T *out, \
                           int64_t rows, int64_t n, int64_t block, int mean, int has_ignore,  \
                           int64_t ignore, int64_t min_rows, int threads) {                   \
        return xent_grad_##SUF(x, target, g, g_step, out, 0, rows, n, block, mean, has_ignore, ignore, \
                               min_rows, threads);                                            \
    }                                                                                         \
    /* out: rows * n gradient elements, then the rows' losses */                              \
    int vg_xent_step_##SUF(const T *x, const int64_t *target, const T *g, int64_t g_step, T *out, \
                           int64_t rows, int64_t n, int64_t block, int mean, int has_ignore,  \
                           int64_t ignore, int64_t min_rows, int threads) {                   \
        return xent_grad_##SUF(x, target, g, g_step, out, out + rows * n, rows, n, block, mean, has_ignore, \
                               ignore, min_rows, threads);                                    \
    }                                                                                         \
    /* each row's mean (0 for rms_norm) and rs = 1 / sqrt(mean(xc * xc) + eps) for the k rows at x,   \
       as the decompositions round them (sq: k n of scratch) */                               \
    static void norm_stats_##SUF(const T *x, int64_t k, int64_t n, int center, T eps, int64_t block, \
                                 T *sq, T *mu, T *rs) {                                       \
        double sums[ROW_SUMS];                                                                \
        if (center) {                                                                         \
            row_sums_##SUF(x, k, n, block, sums);                                             \
            for (int64_t r = 0; r < k; r++) mu[r] = (T)(sums[r] / (double)n);                 \
        } else {                                                                              \
            for (int64_t r = 0; r < k; r++) mu[r] = (T)0;                                     \
        }                                                                                     \
        for (int64_t r = 0; r < k; r++) squares_##SUF(x + r * n, sq + r * n, n, mu[r], center); \
        row_sums_##SUF(sq, k, n, block, sums);                                                \
        for (int64_t r = 0; r < k; r++) rs[r] = (T)1 / sqrt_##SUF((T)(sums[r] / (double)n) + eps); \
    }                                                                                         \
    static void norm_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                       \
        const vg_rowjob *p = (const vg_rowjob *)ctx;                                          \
        int64_t n = p->n, per = norm_batch(n);                                                \
        T mu[ROW_SUMS], rs[ROW_SUMS], *sq = (T *)malloc((size_t)(per * n) * sizeof(T));       \
        for (int64_t r0 = lo; r0 < hi; r0 += per) {                                           \
            int64_t k = hi - r0 < per ? hi - r0 : per;                                        \
            const T *x = (const T *)p->x + r0 * n;                                            \
            norm_stats_##SUF(x, k, n, p->center, (T)p->eps, p->block, sq, mu, rs);            \
            for (int64_t r = 0; r < k; r++)                                                   \
                norm_out_##SUF(x + r * n, (const T *)p->w, (const T *)p->b, (T *)p->out + (r0 + r) * n, n, \
                               mu[r], rs[r], p->center);                                      \
        }                                                                                     \
        free(sq);                                                                             \
    }                                                                                         \
    void vg_layer_norm_##SUF(const T *x, const T *w, const T *b, T *out, int64_t rows,        \
                             int64_t n, double eps, int64_t block, int64_t min_rows, int threads) { \
        vg_rowjob p = {.x = x, .w = w, .b = b, .out = out, .n = n, .block = block, .eps = eps, .center = 1}; \
        vg_parallel_for(rows, min_rows, threads, norm_##SUF##_chunk, &p);                     \
    }                                                                                         \
    void vg_rms_norm_##SUF(const T *x, const T *w, T *out, int64_t rows, int64_t n, double eps, \
                           int64_t block, int64_t min_rows, int threads) {                    \
        vg_rowjob p = {.x = x, .w = w, .out = out, .n = n, .block = block, .eps = eps};       \
        vg_parallel_for(rows, min_rows, threads, norm_##SUF##_chunk, &p);                     \
    }                                                                                         \
    static void norm_grad_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                  \
        const vg_rowjob *p = (const vg_rowjob *)ctx;                                          \
        int64_t n = p->n, per = norm_batch(n);                                                \
        T mu[ROW_SUMS], rs[ROW_SUMS], md[ROW_SUMS], dot[ROW_SUMS];                            \
        T *sq = (T *)malloc(3 * (size_t)(per * n) * sizeof(T)), *xhat = sq + per * n, *d = xhat + per * n; \
        double sums[ROW_SUMS];                                                                \
        for (int64_t r0 = lo; r0 < hi; r0 += per) {                                           \
            int64_t k = hi - r0 < per ? hi - r0 : per;                                        \
            const T *x = (const T *)p->x + r0 * n, *g = (const T *)p->g + r0 * n;             \
            norm_stats_##SUF(x, k, n, p->center, (T)p->eps, p->block, sq, mu, rs);            \
            for (int64_t r = 0; r < k; r++) /* xhat, d = g w, and d xhat (in sq) */           \
                grad_parts_##SUF(x + r * n, g + r * n, (const T *)p->w, xhat + r * n, d + r * n, sq + r * n, \
                                 n, mu[r], rs[r], p->center);                                 \
            row_sums_##SUF(sq, k, n, p->block, sums);                                         \
            for (int64_t r = 0; r < k; r++) dot[r] = (T)(sums[r] / (double)n);                \
            if (p->center) {                                                                  \
                row_sums_##SUF(d, k, n, p->block, sums);                                      \
                for (int64_t r = 0; r < k; r++) md[r] = (T)(sums[r] / (double)n);             \
            }                                                                                 \
            for (int64_t r = 0; r < k; r++)                                                   \
                grad_out_##SUF(d + r * n, xhat + r * n, (T *)p->out + (r0 + r) * n, n, rs[r], md[r], dot[r], \
                               p->center);                                                    \
        }                                                                                     \
        free(sq);                                                                             \
    }                                                                                         \
    void vg_norm_grad_##SUF(const T *g, const T *x, const T *w, T *out, int64_t rows, int64_t n, \
                            double eps, int center, int64_t block, int64_t min_rows, int threads) { \
        vg_rowjob p = {.x = x, .w = w, .g = g, .out = out, .n = n, .block = block, .eps = eps, \
                       .center = center};                                                     \
        vg_parallel_for(rows, min_rows, threads, norm_grad_##SUF##_chunk, &p);                \
    }                                                                                         \
    /* the weight gradient's first phase: every row's mean and rs (into p->scale: 2 rows of T) */ \
    static void norm_stats_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                 \
        const vg_rowjob *p = (const vg_rowjob *)ctx;                                          \
        int64_t n = p->n, rows = p->count, per = norm_batch(n);                               \
        T *mu = (T *)p->out, *rs = mu + rows, *sq = (T *)malloc((size_t)(per * n) * sizeof(T)); \
        for (int64_t r0 = lo; r0 < hi; r0 += per) {                                           \
            int64_t k = hi - r0 < per ? hi - r0 : per;                                        \
            norm_stats_##SUF((const T *)p->x + r0 * n, k, n, p->center, (T)p->eps, p->block, sq, mu + r0, rs + r0); \
        }                                                                                     \
        free(sq);                                                                             \
    }                                                                                         \
    /* the second: columns [lo, hi) of sum(g xhat) (and of sum(g) into p->b), each over the rows in order */ \
    static void norm_weight_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                \
        const vg_rowjob *p = (const vg_rowjob *)ctx;                                          \
        int64_t n = p->n, rows = p->count, m = hi - lo;                                       \
        const T *mu = (const T *)p->scale, *rs = mu + rows;                                   \
        double *acc = (double *)calloc(2 * (size_t)m, sizeof(double));                        \
        for (int64_t r = 0; r < rows; r++)                                                    \
            weight_acc_##SUF((const T *)p->x + r * n + lo, (const T *)p->g + r * n + lo, acc, acc + m, m, mu[r], \
                             rs[r], p->center, p->b != 0);                                    \
        for (int64_t j = 0; j < m; j++) {                                                     \
            ((T *)p->out)[lo + j] = (T)acc[j];                                                \
            if (p->b) ((T *)p->b)[lo + j] = (T)acc[m + j];                                    \
        }                                                                                     \
        free(acc);                                                                            \
    }                                                                                         \
    /* wout = the sum over the rows of g * xhat, bout (where not null) that of g; returns 1 where one \
       is a zero or a NaN (whose sign NumPy's order decides: the caller runs the reference) */ \
    int vg_norm_weight_grad_##SUF(const T *g, const T *x, T *wout, T *bout, int64_t rows, int64_t n, \
                                  double eps, int center, int64_t block, int64_t min_rows, int threads) { \
        T *stats = (T *)malloc(2 * (size_t)rows * sizeof(T));                                 \
        vg_rowjob p = {.x = x, .g = g, .out = stats, .n = n, .block = block, .eps = eps,      \
                       .center = center, .count = rows};                                      \
        vg_parallel_for(rows, min_rows, threads, norm_stats_##SUF##_chunk, &p);               \
        vg_rowjob q = {.x = x, .g = g, .scale = stats, .out = wout, .b = bout, .n = n,        \
                       .center = center, .count = rows};                                      \
        vg_parallel_for(n, WEIGHT_COLUMNS, threads, norm_weight_##SUF##_chunk, &q);           \
        free(stats);                                                                          \
        int bad = 0;                                                                          \
        for (int64_t j = 0; j < n; j++) bad |= !(wout[j] != 0) || (bout && !(bout[j] != 0));  \
        return bad;                                                                           \
    }

ROWS(float, f32)
ROWS(double, f64)
