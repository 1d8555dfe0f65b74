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
