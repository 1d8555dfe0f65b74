/* Element-wise kernels on contiguous f32 and f64 arrays of the output's shape.
 *
 * Each computes what the op's NumPy reference computes, in the same order of operations and in the
 * same precision: built without FMA contraction or fast-math, the exactly rounded ops give the
 * reference's bits. Transcendentals use the C library: f64 directly, f32 in double rounded once.
 *
 * maximum and minimum are NumPy's: a NaN in either operand gives that NaN (the first when both are),
 * and on equal operands (0 and -0) the second one. relu is maximum(x, 0).
 *
 * vg_<op>_<dtype>(x, out, n, min_chunk, threads) and vg_<op>_<dtype>(a, b, out, n, min_chunk, threads).
 */
#include <math.h>
#include <stdint.h>

#include "vg.h"

typedef struct {
    const void *a;
    const void *b;
    void *out;
} vg_args;

#define UNARY(NAME, T, SUF, EXPR)                                                             \
    static void NAME##_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                     \
        const vg_args *p = (const vg_args *)ctx;                                              \
        const T *restrict xs = (const T *)p->a;                                               \
        T *restrict ys = (T *)p->out;                                                         \
        for (int64_t i = lo; i < hi; i++) {                                                   \
            T x = xs[i];                                                                      \
            ys[i] = (EXPR);                                                                   \
        }                                                                                     \
    }                                                                                         \
    void vg_##NAME##_##SUF(const T *x, T *out, int64_t n, int64_t min_chunk, int threads) {   \
        vg_args p = {x, 0, out};                                                              \
        vg_parallel_for(n, min_chunk, threads, NAME##_##SUF##_chunk, &p);                     \
    }

#define BINARY(NAME, T, SUF, EXPR)                                                            \
    static void NAME##_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                     \
        const vg_args *p = (const vg_args *)ctx;                                              \
        const T *restrict as = (const T *)p->a;                                               \
        const T *restrict bs = (const T *)p->b;                                               \
        T *restrict ys = (T *)p->out;                                                         \
        for (int64_t i = lo; i < hi; i++) {                                                   \
            T a = as[i], b = bs[i];                                                           \
            ys[i] = (EXPR);                                                                   \
        }                                                                                     \
    }                                                                                         \
    void vg_##NAME##_##SUF(const T *a, const T *b, T *out, int64_t n, int64_t min_chunk,      \
                           int threads) {                                                     \
        vg_args p = {a, b, out};                                                              \
        vg_parallel_for(n, min_chunk, threads, NAME##_##SUF##_chunk, &p);                     \
    }

/* the reference's sigmoid: e = exp(-|x|); x >= 0 ? 1 / (1 + e) : e / (1 + e), all in the dtype */
static inline double sig_f64(double x) {
    double e = exp(-fabs(x));
    return x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
static inline float sig_f32(float x) {
    float e = (float)exp((double)-fabsf(x));
    return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e);
}

#define ALL_UNARY(T, SUF, ONE, ZERO, ABS, SQRT, SIG, F)                        \
    UNARY(relu, T, SUF, (x > ZERO || isnan(x)) ? x : ZERO)                   \
    UNARY(relu_deriv, T, SUF, x > ZERO ? ONE : ZERO)                          \
    UNARY(neg, T, SUF, -x)                                                    \
    UNARY(abs, T, SUF, ABS(x))                                                \
    UNARY(sqrt, T, SUF, SQRT(x))                                              \
    UNARY(sigmoid_deriv, T, SUF, x * (ONE - x))                               \
    UNARY(tanh_deriv, T, SUF, ONE - x * x)                                    \
    UNARY(exp, T, SUF, (T)exp((double)x))                                     \
    UNARY(log, T, SUF, (T)log((double)x))                                     \
    UNARY(tanh, T, SUF, (T)tanh((double)x))                                   \
    UNARY(sin, T, SUF, (T)sin((double)x))                                     \
    UNARY(cos, T, SUF, (T)cos((double)x))                                     \
    UNARY(sigmoid, T, SUF, SIG(x))                                            \
    UNARY(silu, T, SUF, x * SIG(x))                                           \
    UNARY(silu_deriv, T, SUF, F##_silu_deriv(x))

#define ALL_BINARY(T, SUF)                                                     \
    BINARY(add, T, SUF, a + b)                                                \
    BINARY(sub, T, SUF, a - b)                                                \
    BINARY(mul, T, SUF, a * b)                                                \
    BINARY(div, T, SUF, a / b)                                                \
    BINARY(maximum, T, SUF, (a > b || isnan(a)) ? a : b)                     \
    BINARY(minimum, T, SUF, (a < b || isnan(a)) ? a : b)

/* s * (1 + x * (1 - s)) with s = sigmoid(x), as the reference writes it */
static inline double f64_silu_deriv(double x) {
    double s = sig_f64(x);
    return s * (1.0 + x * (1.0 - s));
}
static inline float f32_silu_deriv(float x) {
    float s = sig_f32(x);
    return s * (1.0f + x * (1.0f - s));
}

ALL_UNARY(float, f32, 1.0f, 0.0f, fabsf, sqrtf, sig_f32, f32)
ALL_UNARY(double, f64, 1.0, 0.0, fabs, sqrt, sig_f64, f64)
ALL_BINARY(float, f32)
ALL_BINARY(double, f64)

/* Broadcast binary kernels: the output has shape[4] (row-major, leading dims padded with 1), operand k
 * reads element (i0, i1, i2, i3) at sum(i_d * stride_k[d]) (element strides, 0 on broadcast dims). The
 * output is walked in row-major order; a chunk [lo, hi) of the flattened output starts mid-row at most
 * once. dims = {shape[0..3], sa[0..3], sb[0..3]}.
 *
 * vg_<op>_bc_<dtype>(a, b, out, dims, min_chunk, threads).
 */
typedef struct {
    const void *a;
    const void *b;
    void *out;
    const int64_t *dims;
} vg_bargs;

#define BINARY_BC(NAME, T, SUF, EXPR)                                                         \
    static void NAME##_bc_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                  \
        const vg_bargs *p = (const vg_bargs *)ctx;                                            \
        const int64_t *d = p->dims;                                                           \
        const int64_t n1 = d[1], n2 = d[2], n3 = d[3], sa3 = d[7], sb3 = d[11];              \
        const T *restrict as = (const T *)p->a;                                               \
        const T *restrict bs = (const T *)p->b;                                               \
        T *restrict ys = (T *)p->out;                                                         \
        int64_t i = lo;                                                                       \
        while (i < hi) {                                                                      \
            int64_t row = i / n3, j = i - row * n3;                                           \
            int64_t i2 = row % n2, r = row / n2;                                              \
            int64_t i1 = r % n1, i0 = r / n1;                                                 \
            int64_t end = hi - i < n3 - j ? hi : i + (n3 - j);                                \
            int64_t len = end - i;                                                            \
            const T *restrict ap = as + i0 * d[4] + i1 * d[5] + i2 * d[6] + j * sa3;          \
            const T *restrict bp = bs + i0 * d[8] + i1 * d[9] + i2 * d[10] + j * sb3;         \
            T *restrict yp = ys + i;                                                          \
            if (sa3 == 1 && sb3 == 1) {                                                       \
                for (int64_t k = 0; k < len; k++) {                                           \
                    T a = ap[k], b = bp[k];                                                   \
                    yp[k] = (EXPR);                                                           \
                }                                                                             \
            } else if (sa3 == 1 && sb3 == 0) {                                                \
                const T b = bp[0];                                                            \
                for (int64_t k = 0; k < len; k++) {                                           \
                    T a = ap[k];                                                              \
                    yp[k] = (EXPR);                                                           \
                }                                                                             \
            } else if (sa3 == 0 && sb3 == 1) {                                                \
                const T a = ap[0];                                                            \
                for (int64_t k = 0; k < len; k++) {                                           \
                    T b = bp[k];                                                              \
                    yp[k] = (EXPR);                                                           \
                }                                                                             \
            } else {                                                                          \
                for (int64_t k = 0; k < len; k++) {                                           \
                    T a = ap[k * sa3], b = bp[k * sb3];                                       \
                    yp[k] = (EXPR);                                                           \
                }                                                                             \
            }                                                                                 \
            i = end;                                                                          \
        }                                                                                     \
    }                                                                                         \
    void vg_##NAME##_bc_##SUF(const T *a, const T *b, T *out, const int64_t *dims,            \
                              int64_t min_chunk, int threads) {                               \
        vg_bargs p = {a, b, out, dims};                                                       \
        int64_t n = dims[0] * dims[1] * dims[2] * dims[3];                                    \
        vg_parallel_for(n, min_chunk, threads, NAME##_bc_##SUF##_chunk, &p);                  \
    }

#define ALL_BINARY_BC(T, SUF)                                                  \
    BINARY_BC(add, T, SUF, a + b)                                             \
    BINARY_BC(sub, T, SUF, a - b)                                             \
    BINARY_BC(mul, T, SUF, a * b)                                             \
    BINARY_BC(div, T, SUF, a / b)                                             \
    BINARY_BC(maximum, T, SUF, (a > b || isnan(a)) ? a : b)                  \
    BINARY_BC(minimum, T, SUF, (a < b || isnan(a)) ? a : b)

ALL_BINARY_BC(float, f32)
ALL_BINARY_BC(double, f64)
