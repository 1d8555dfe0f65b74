/* Element-wise kernels on contiguous f32 and f64 arrays of the output's shape (add, sub, mul, maximum and
 * minimum also on i64 ones).
 *
 * Each computes what the op's NumPy reference computes, in the same order of operations and in the
 * same precision: built without FMA contraction or fast-math, the exactly rounded ops give the
 * reference's bits. The transcendentals and activations are evaluated in double with the C library's
 * exp, expm1, log, sin, cos, erf and pow (the routines NumPy's f64 loops call), by the formulas their
 * references write, and f32 results are rounded once from that double.
 *
 * exp, sigmoid, tanh, silu and gelu_tanh in f32 also have an AVX2 path (see "vectorized" below): double
 * polynomials within a relative 2^-42 of the scalar formulas, rounded once to f32; where that rounding
 * could go either way, the element is recomputed by the scalar formula, so both paths give the same bits.
 *
 * maximum and minimum are NumPy's: a NaN in either operand gives that NaN (the first when both are),
 * and on equal operands (0 and -0) the second one. relu is maximum(x, 0).
 *
 * vg_<op>_<dtype>(x, out, n, min_chunk, threads) and vg_<op>_<dtype>(a, b, out, n, min_chunk, threads).
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vg.h"
#include "vg_math.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VG_X86 1
#include <immintrin.h>
#endif

typedef struct {
    const void *a;
    const void *b;
    void *out;
} vg_args;

/* ---- kernels ----------------------------------------------------------------------------------------- */
#define UNARY_LOOP(NAME, T, SUF, EXPR, ATTR)                                                  \
    ATTR static void NAME##_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                \
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

#define UNARY(NAME, T, SUF, EXPR) UNARY_LOOP(NAME, T, SUF, EXPR, )
#define UNARY_FAST(NAME, T, SUF, EXPR) UNARY_LOOP(NAME, T, SUF, EXPR, VG_CLONES)

#define BINARY(NAME, T, SUF, EXPR)                                                            \
    VG_CLONES static void NAME##_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {           \
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

/* the ops in the dtype itself (exactly rounded), then those evaluated in double by d_<op> */
#define ALL_UNARY(T, SUF, ONE, ZERO, ABS, SQRT)                                   \
    UNARY_FAST(relu, T, SUF, (x > ZERO || isnan(x)) ? x : ZERO)                       \
    UNARY_FAST(relu_deriv, T, SUF, x > ZERO ? ONE : ZERO)                              \
    UNARY_FAST(neg, T, SUF, -x)                                                        \
    UNARY_FAST(abs, T, SUF, ABS(x))                                                    \
    UNARY_FAST(sqrt, T, SUF, SQRT(x))                                                  \
    UNARY_FAST(rsqrt, T, SUF, ONE / SQRT(x))                                           \
    UNARY_FAST(sigmoid_deriv, T, SUF, x * (ONE - x))                                   \
    UNARY_FAST(tanh_deriv, T, SUF, ONE - x * x)                                        \
    UNARY(log, T, SUF, (T)log((double)x))                                         \
    UNARY(expm1, T, SUF, (T)expm1((double)x))                                     \
    UNARY(log1p, T, SUF, (T)log1p((double)x))                                     \
    UNARY(sin, T, SUF, (T)sin((double)x))                                         \
    UNARY(cos, T, SUF, (T)cos((double)x))                                         \
    UNARY(silu_deriv, T, SUF, (T)d_silu_deriv((double)x))                         \
    UNARY(gelu, T, SUF, (T)d_gelu((double)x))                                     \
    UNARY(gelu_deriv, T, SUF, (T)d_gelu_deriv((double)x))                         \
    UNARY(gelu_tanh_deriv, T, SUF, (T)d_gelu_tanh_deriv((double)x))

/* The binary ops, each given to KERNEL (BINARY, or BINARY_BC below): on floats, and on 64-bit integers
 * (NumPy's: add, sub and mul wrap around, computed in unsigned arithmetic, where C's signed overflow is
 * undefined) */
#define FLOAT_BINARY(KERNEL, T, SUF)                                                 \
    KERNEL(add, T, SUF, a + b)                                                    \
    KERNEL(sub, T, SUF, a - b)                                                    \
    KERNEL(mul, T, SUF, a * b)                                                    \
    KERNEL(div, T, SUF, a / b)                                                    \
    KERNEL(pow, T, SUF, (T)pow((double)a, (double)b))                             \
    KERNEL(maximum, T, SUF, (a > b || isnan(a)) ? a : b)                         \
    KERNEL(minimum, T, SUF, (a < b || isnan(a)) ? a : b)
#define INT64_BINARY(KERNEL)                                                         \
    KERNEL(add, int64_t, i64, (int64_t)((uint64_t)a + (uint64_t)b))               \
    KERNEL(sub, int64_t, i64, (int64_t)((uint64_t)a - (uint64_t)b))               \
    KERNEL(mul, int64_t, i64, (int64_t)((uint64_t)a * (uint64_t)b))               \
    KERNEL(maximum, int64_t, i64, a > b ? a : b)                                  \
    KERNEL(minimum, int64_t, i64, a < b ? a : b)

ALL_UNARY(float, f32, 1.0f, 0.0f, fabsf, sqrtf)
ALL_UNARY(double, f64, 1.0, 0.0, fabs, sqrt)
FLOAT_BINARY(BINARY, float, f32)
FLOAT_BINARY(BINARY, double, f64)
INT64_BINARY(BINARY)

/* f64 kernels of the vectorized ops: the scalar formulas */
UNARY(exp, double, f64, d_exp(x))
UNARY(sigmoid, double, f64, d_sigmoid(x))
UNARY(tanh, double, f64, d_tanh(x))
UNARY(silu, double, f64, d_silu(x))
UNARY(gelu_tanh, double, f64, d_gelu_tanh(x))

/* ---- vectorized: exp, sigmoid, tanh, silu, gelu_tanh in f32 -------------------------------------------
 *
 * Eight f32 inputs at a time, widened to two vectors of four doubles. exp(x) = 2^(n/8) exp(r) with
 * n = round(8 x / ln2) and r = x - n ln2/8 (one FMA; |r| <= ln2/16; ln2/8 as a double is off by under
 * 2^-58, times |n| <= 1155 here); 2^(n/8) = 2^floor(n/8) T[n mod 8] with T[j] = 2^(j/8) looked up for all
 * eight inputs by two 8-lane permutes (its high and low 32-bit halves: a permute costs as much as four
 * additions here) and floor(n/8) added to its exponent; exp(r) = 1 + p,
 * p = r + r^2 q(r) with q a near-minimax fit: of degree 3 for exp, sigmoid and silu (relative error of
 * 1 + p below 2^-41 on the interval; evaluated as two halves, which shortens the chain of dependent
 * operations), of degree 4 for tanh and gelu_tanh, which need p as expm1(r) (relative error below 2^-43);
 * expm1(x) = T (1 + p) - 1. Sigmoid takes the table on x and the polynomial on -x (see v_sigmoid), so
 * that its denominator is one FMA after q. Checked against the scalar formulas on every f32 input (2^32)
 * that the vector path keeps: exp, sigmoid and silu within 3300 double ulps, tanh within 510, gelu_tanh
 * (x >= -3) within 960; the rounding test below allows ROUND_SLACK = 32768.
 *
 * Rounding test: a double y rounds to the same f32 as every double within ROUND_SLACK ulps of it unless
 * its 29 low mantissa bits are within ROUND_SLACK of the halfway pattern 0x10000000 (about 1.2e-4 of
 * random inputs), or the f32 result is subnormal (where the rounding point is elsewhere: exp, sigmoid and
 * silu of x < -87; tanh of a tiny x is x itself in double and needs no care). Such elements, and NaN
 * inputs, are recomputed by the scalar formula, so every element gets the bits the scalar formula gives.
 * `verigrad verify --every-f32` holds each kernel to the op's reference on all 2^32 inputs.
 */
#define ROUND_SLACK 32768

#ifdef VG_X86
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

static int have_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

#define LOG2E_8 0x1.71547652b82fep+3 /* 8 / ln2 */
#define LN2_8 0x1.62e42fefa39efp-4   /* ln2 / 8 */
#define SHIFTER 0x1.8p52             /* t = y + SHIFTER holds round(y) in its low bits */

/* the low and the high 32 bits of 2^(j/8), j = 0..7, the high ones less j 2^17 (see v_exp2_8) */
static const int32_t exp_table_lo[8] = {0x00000000, 0x3c7d517b, 0x0a31b715, 0xd5362a27,
                                        0x667f3bcd, 0x422aa0db, 0x995ad3ad, 0xdcfba487};
static const int32_t exp_table_hi[8] = {0x3ff00000 - (0 << 17), 0x3ff172b8 - (1 << 17), 0x3ff306fe - (2 << 17),
                                        0x3ff4bfda - (3 << 17), 0x3ff6a09e - (4 << 17), 0x3ff8ace5 - (5 << 17),
                                        0x3ffae89f - (6 << 17), 0x3ffd5818 - (7 << 17)};

/* q(s r) for s = 1 or -1, with exp(r) = 1 + r + r^2 q(r) on |r| <= ln2/16: of degree 4, or of degree 3 if
 * `short_q` (relative error of 1 + r + r^2 q below 2^-49 and 2^-41 on the interval; as (c0 + c1 r) +
 * r^2 (c2 + c3 r)) */
AVX2_INLINE __m256d v_q(__m256d r, const double s, const int short_q) {
    if (short_q) {
        __m256d low = _mm256_fmadd_pd(_mm256_set1_pd(s * 0x1.5555556b58f95p-3), r, _mm256_set1_pd(0x1.ffffffdc0411cp-2));
        __m256d high = _mm256_fmadd_pd(_mm256_set1_pd(s * 0x1.1110a02cdfcb9p-7), r, _mm256_set1_pd(0x1.555ced9965c38p-5));
        return _mm256_fmadd_pd(high, _mm256_mul_pd(r, r), low);
    }
    __m256d q = _mm256_fmadd_pd(_mm256_set1_pd(0x1.6c0ed782325f1p-10), r, _mm256_set1_pd(s * 0x1.1115b7826c329p-7));
    q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(0x1.5555558fc9ec0p-5));
    q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(s * 0x1.55555548f8bf6p-3));
    return _mm256_fmadd_pd(q, r, _mm256_set1_pd(0x1.fffffffffee2fp-2));
}

/* 2^(n/8) for the eight n of t[0] and t[1] (t = n + SHIFTER, |n| < 2^11). Their low halves, gathered into
 * one vector in the order 0 1 4 5 2 3 6 7, index both tables at once (a permute reads the low 3 bits of
 * its index: n mod 8 = j); n 2^17 added to the high half of 2^(j/8) - j 2^49 adds floor(n/8) to its
 * exponent; the unpacks put low and high halves together in the order of t[0] and t[1]. */
AVX2_INLINE void v_exp2_8(const __m256d t[2], __m256d scale[2]) {
    __m256i n = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castpd_ps(t[0]), _mm256_castpd_ps(t[1]), 0x88));
    __m256i lo = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)exp_table_lo), n);
    __m256i hi = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)exp_table_hi), n);
    hi = _mm256_add_epi32(hi, _mm256_slli_epi32(n, 17));
    scale[0] = _mm256_castsi256_pd(_mm256_unpacklo_epi32(lo, hi));
    scale[1] = _mm256_castsi256_pd(_mm256_unpackhi_epi32(lo, hi));
}

/* The range reduction of exp(s x) for s x in [-100, 100] (|n| <= 1155), x in two vectors: T = 2^(n/8) in
 * scale, and m = x - s n ln2/8 (r = s x - n ln2/8 is m for s = 1, -m for s = -1) */
AVX2_INLINE void v_exp_reduce(const __m256d x[2], const double s, __m256d m[2], __m256d scale[2]) {
    __m256d t[2];
    for (int k = 0; k < 2; k++) t[k] = _mm256_fmadd_pd(x[k], _mm256_set1_pd(s * LOG2E_8), _mm256_set1_pd(SHIFTER));
    v_exp2_8(t, scale);
    for (int k = 0; k < 2; k++) {
        __m256d n = _mm256_sub_pd(t[k], _mm256_set1_pd(SHIFTER));
        m[k] = _mm256_fnmadd_pd(n, _mm256_set1_pd(s * LN2_8), x[k]);
    }
}

/* exp(s x) = T (1 + p): T in scale, p in p (q of v_q, evaluated at r = s m) */
AVX2_INLINE void v_exp_parts(const __m256d x[2], const double s, const int short_q, __m256d p[2],
                             __m256d scale[2]) {
    __m256d m[2];
    v_exp_reduce(x, s, m, scale);
    for (int k = 0; k < 2; k++) {
        __m256d mm = _mm256_mul_pd(m[k], m[k]);
        p[k] = s > 0 ? _mm256_fmadd_pd(mm, v_q(m[k], 1.0, short_q), m[k])
                     : _mm256_fmsub_pd(mm, v_q(m[k], -1.0, short_q), m[k]);
    }
}

/* The ops on eight doubles, in two vectors, widened from f32 inputs. A NaN input, and one below
 * VECTOR_F32's UNSURE_BELOW, may give anything: those elements are recomputed by the scalar formula. The
 * clamps (min(x, c) is c for a NaN x) keep the rest in range. */
AVX2_INLINE void v_exp(const __m256d x[2], __m256d y[2]) {
    /* exp(100) overflows f32 as exp(x > 100) does */
    __m256d c[2], p[2], s[2];
    for (int k = 0; k < 2; k++) c[k] = _mm256_min_pd(x[k], _mm256_set1_pd(100.0));
    v_exp_parts(c, 1.0, 1, p, s);
    for (int k = 0; k < 2; k++) y[k] = _mm256_fmadd_pd(s[k], p[k], s[k]);
}

/* 1 / (1 + exp(-x)) = T / (T + 1 + p) for T = 2^(n/8) and 1 + p = exp(-r) = exp(-x) T (n and r of x, so
 * m = r), with T + 1 + p = (T + 1 - m) + m^2 q(-m) */
AVX2_INLINE void v_sigmoid(const __m256d x[2], __m256d y[2]) {
    /* x >= 40: sigmoid(x) is 1 in double */
    __m256d c[2], m[2], s[2];
    for (int k = 0; k < 2; k++) c[k] = _mm256_min_pd(x[k], _mm256_set1_pd(40.0));
    v_exp_reduce(c, 1.0, m, s);
    for (int k = 0; k < 2; k++) {
        __m256d rest = _mm256_sub_pd(_mm256_add_pd(s[k], _mm256_set1_pd(1.0)), m[k]);
        y[k] = _mm256_div_pd(s[k], _mm256_fmadd_pd(_mm256_mul_pd(m[k], m[k]), v_q(m[k], -1.0, 1), rest));
    }
}

AVX2_INLINE void v_silu(const __m256d x[2], __m256d y[2]) {
    v_sigmoid(x, y);
    for (int k = 0; k < 2; k++) y[k] = _mm256_mul_pd(x[k], y[k]);
}

/* copysign(-u / (u + 2), x), u = expm1(-2|x|) = T (1 + p) - 1; |x| >= 20 gives u = -1 as 20 does */
AVX2_INLINE void v_tanh(const __m256d x[2], __m256d y[2]) {
    const __m256d sign = _mm256_set1_pd(-0.0);
    __m256d a[2], p[2], s[2];
    for (int k = 0; k < 2; k++) {
        a[k] = _mm256_min_pd(_mm256_andnot_pd(sign, x[k]), _mm256_set1_pd(20.0));
        a[k] = _mm256_add_pd(a[k], a[k]);
    }
    v_exp_parts(a, -1.0, 0, p, s);
    for (int k = 0; k < 2; k++) {
        __m256d u = _mm256_fmadd_pd(s[k], p[k], _mm256_sub_pd(s[k], _mm256_set1_pd(1.0)));
        __m256d t = _mm256_div_pd(u, _mm256_add_pd(u, _mm256_set1_pd(2.0))); /* -|tanh x|, or +0 */
        y[k] = _mm256_or_pd(_mm256_andnot_pd(sign, t), _mm256_and_pd(sign, x[k]));
    }
}

/* 0.5 x (1 + t), t = tanh(sqrt(2/pi) (x + a x^3)) with the argument formed as the reference forms it;
 * 1 + t = 2 / (u + 2) for a positive argument and 2 e / (u + 2) for a negative one (u = expm1(-2|arg|),
 * e = 1 + u), so without cancellation. The reference's 1 + t does cancel: below x = -3 its rounding
 * error is too many ulps of the result for the rounding test, and VECTOR_F32 sends those to it. For
 * x >= -3, -2|arg| >= -7 where arg < 0, and where arg > 0 an argument clamped to 20 gives the same u = -1. */
AVX2_INLINE void v_gelu_tanh(const __m256d x[2], __m256d y[2]) {
    const __m256d two = _mm256_set1_pd(2.0);
    __m256d arg[2], a[2], p[2], s[2];
    for (int k = 0; k < 2; k++) {
        __m256d x3 = _mm256_mul_pd(_mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(GELU_A), x[k]), x[k]), x[k]);
        arg[k] = _mm256_mul_pd(_mm256_set1_pd(SQRT_2_OVER_PI), _mm256_add_pd(x[k], x3));
        a[k] = _mm256_min_pd(_mm256_andnot_pd(_mm256_set1_pd(-0.0), arg[k]), _mm256_set1_pd(20.0));
        a[k] = _mm256_add_pd(a[k], a[k]);
    }
    v_exp_parts(a, -1.0, 0, p, s);
    for (int k = 0; k < 2; k++) {
        __m256d e = _mm256_fmadd_pd(s[k], p[k], s[k]);
        __m256d u = _mm256_fmadd_pd(s[k], p[k], _mm256_sub_pd(s[k], _mm256_set1_pd(1.0)));
        __m256d below = _mm256_cmp_pd(arg[k], _mm256_setzero_pd(), _CMP_LT_OQ);
        __m256d twice = _mm256_blendv_pd(two, _mm256_mul_pd(two, e), below);
        __m256d num = _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), x[k]), twice);
        y[k] = _mm256_div_pd(num, _mm256_add_pd(u, two));
    }
}

/* The lanes (a bit each, in the order 0 1 4 5 2 3 6 7) of the 8 doubles y0 (0-3) and y1 (4-7) whose 29 low
 * mantissa bits are within ROUND_SLACK of 0x10000000: shifted to the top of a 32-bit lane, they are
 * 2^31 + 8 d for d that difference, so with 8 ROUND_SLACK added (mod 2^32) the test is a signed
 * comparison with -2^31 + 16 ROUND_SLACK. */
AVX2_INLINE int v_near_half(__m256d y0, __m256d y1) {
    __m256i low = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castpd_ps(y0), _mm256_castpd_ps(y1), 0x88));
    low = _mm256_add_epi32(_mm256_slli_epi32(low, 3), _mm256_set1_epi32(8 * ROUND_SLACK));
    __m256i near = _mm256_cmpgt_epi32(_mm256_set1_epi32(INT32_MIN + 16 * ROUND_SLACK + 1), low);
    return _mm256_movemask_ps(_mm256_castsi256_ps(near));
}

/* The f32 kernel of v_NAME: inputs widened, computed, rounded once; NaN inputs and those below
 * UNSURE_BELOW go to the scalar formula with the elements whose rounding is in doubt (their result may
 * be a subnormal f32, or the reference's own rounding error may be too large; -INFINITY: none). */
#define VECTOR_F32(NAME, UNSURE_BELOW)                                                        \
    /* one copy of the scalar formula, so that a NaN's sign does not depend on its place in a block */ \
    __attribute__((noinline)) static float NAME##_f32_scalar(float x) { return (float)d_##NAME((double)x); } \
    /* the elements of a block of 8 in doubt by the scalar formula: the bits of `low` in element order, \
     * those of `near` in v_near_half's */                                                     \
    __attribute__((noinline)) static void NAME##_f32_fix(const float *x, float *y, int low, int near) { \
        static const int8_t element[8] = {0, 1, 4, 5, 2, 3, 6, 7};                             \
        for (int l = 0; l < 8; l++) {                                                          \
            int e = element[l];                                                                \
            if ((near >> l | low >> e) & 1) y[e] = NAME##_f32_scalar(x[e]);                    \
        }                                                                                      \
    }                                                                                          \
    /* f32 results of x[0..8) in *y0 and *y1; nonzero when some need NAME##_f32_fix (*low and *near for it) */ \
    AVX2_INLINE int NAME##_f32_v8(const float *x, __m128 *y0, __m128 *y1, int *low, int *near) { \
        __m256d xd[2] = {_mm256_cvtps_pd(_mm_loadu_ps(x)), _mm256_cvtps_pd(_mm_loadu_ps(x + 4))}, d[2]; \
        v_##NAME(xd, d);                                                                       \
        *y0 = _mm256_cvtpd_ps(d[0]);                                                           \
        *y1 = _mm256_cvtpd_ps(d[1]);                                                           \
        *low = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x), _mm256_set1_ps(UNSURE_BELOW), _CMP_NGE_UQ)); \
        *near = v_near_half(d[0], d[1]);                                                           \
        return *low | *near;                                                                   \
    }                                                                                          \
    /* ys[i..i+m) from xs[i..i+m), m <= 8 (8 of xs readable); ys may be xs */                  \
    AVX2_INLINE void NAME##_f32_block(const float *xs, float *ys, int64_t m) {                 \
        __m128 y0, y1;                                                                         \
        int low, near;                                                                         \
        if (NAME##_f32_v8(xs, &y0, &y1, &low, &near) || m < 8) {                               \
            float yb[8];                                                                       \
            _mm_storeu_ps(yb, y0);                                                             \
            _mm_storeu_ps(yb + 4, y1);                                                         \
            if (low | near) NAME##_f32_fix(xs, yb, low, near);                                 \
            memcpy(ys, yb, (size_t)m * sizeof(float));                                         \
        } else {                                                                               \
            _mm_storeu_ps(ys, y0);                                                             \
            _mm_storeu_ps(ys + 4, y1);                                                         \
        }                                                                                      \
    }                                                                                          \
    AVX2 static void NAME##_f32_avx2(const float *xs, float *ys, int64_t lo, int64_t hi) {     \
        int64_t i = lo;                                                                        \
        for (; i + 8 <= hi; i += 8) NAME##_f32_block(xs + i, ys + i, 8);                       \
        if (i < hi) { /* the last few through a padded block */                                \
            float xb[8] = {0};                                                                 \
            memcpy(xb, xs + i, (size_t)(hi - i) * sizeof(float));                             \
            NAME##_f32_block(xb, ys + i, hi - i);                                              \
        }                                                                                      \
    }
VECTOR_F32(exp, -87.0f)
VECTOR_F32(sigmoid, -87.0f)
VECTOR_F32(tanh, -INFINITY)
VECTOR_F32(silu, -87.0f)
VECTOR_F32(gelu_tanh, -3.0f)
#endif /* VG_X86 */

#ifdef VG_X86
#define VECTOR_DISPATCH(NAME)                                                                 \
    if (have_avx2()) {                                                                        \
        NAME##_f32_avx2(xs, ys, lo, hi);                                                      \
        return;                                                                               \
    }
#else
#define VECTOR_DISPATCH(NAME)
#endif

#define VECTORIZED(NAME)                                                                      \
    static void NAME##_f32_chunk(void *ctx, int64_t lo, int64_t hi) {                         \
        const vg_args *p = (const vg_args *)ctx;                                              \
        const float *xs = (const float *)p->a;                                                \
        float *ys = (float *)p->out;                                                          \
        VECTOR_DISPATCH(NAME)                                                                 \
        for (int64_t i = lo; i < hi; i++) ys[i] = (float)d_##NAME((double)xs[i]);            \
    }                                                                                         \
    void vg_##NAME##_f32(const float *x, float *out, int64_t n, int64_t min_chunk, int threads) { \
        vg_args p = {x, 0, out};                                                              \
        vg_parallel_for(n, min_chunk, threads, NAME##_f32_chunk, &p);                         \
    }

VECTORIZED(exp)
VECTORIZED(sigmoid)
VECTORIZED(tanh)
VECTORIZED(silu)
VECTORIZED(gelu_tanh)

/* Whether the f32 exp, sigmoid, tanh, silu and gelu_tanh kernels take the AVX2 path on this machine. */
int vg_elementwise_vectorized(void) {
#ifdef VG_X86
    return have_avx2();
#else
    return 0;
#endif
}

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
        const int64_t sa3 = d[7], sb3 = d[11];                                                \
        const T *restrict as = (const T *)p->a;                                               \
        const T *restrict bs = (const T *)p->b;                                               \
        T *restrict ys = (T *)p->out;                                                         \
        int64_t i = lo;                                                                       \
        while (i < hi) {                                                                      \
            vg_run run = vg_run_at(d, i, hi);                                                 \
            int64_t end = run.end, len = end - i;                                             \
            const T *restrict ap = as + vg_run_offset(run, d + 4);                            \
            const T *restrict bp = bs + vg_run_offset(run, d + 8);                            \
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

FLOAT_BINARY(BINARY_BC, float, f32)
FLOAT_BINARY(BINARY_BC, double, f64)
INT64_BINARY(BINARY_BC)
