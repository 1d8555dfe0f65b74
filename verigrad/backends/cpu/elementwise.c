/* Element-wise kernels on contiguous f32 and f64 arrays of the output's shape (add, sub, mul, maximum and
 * minimum also on i64 ones).
 *
 * Each computes what the op's NumPy reference computes, in the same order of operations and in the
 * same precision: built without FMA contraction or fast-math, the exactly rounded ops give the
 * reference's bits. The transcendentals and activations are evaluated in double with the C library's
 * exp, expm1, log, sin, cos, erf and pow (the routines NumPy's f64 loops call, where it has none of its
 * own; see "NumPy's own f64 routines" for where it has), by the formulas their references write, and f32
 * results are rounded once from that double.
 *
 * exp, sigmoid, tanh, silu and gelu_tanh in f32 also have AVX2 and AVX-512 paths (see "vectorized"
 * below): double polynomials within a relative 2^-42 of the scalar formulas, rounded once to f32; where
 * that rounding could go either way, the element is recomputed by the op's routine (ROUTINE_BLOCKS:
 * NumPy's where it has its own, else the C library's formula), so every path gives the same bits. A
 * native build computes f32 exp, tanh, sigmoid, silu, gelu, gelu_deriv and gelu_tanh in f32 arithmetic
 * instead (see "float activations" below).
 *
 * maximum and minimum are NumPy's: a NaN in either operand gives that NaN (the first when both are),
 * and on equal operands (0 and -0) the second one. relu is x < 0 ? 0 : x (-0.0 and NaN pass, as PyTorch's).
 *
 * vg_<op>_<dtype>(x, out, n, min_chunk, threads) and vg_<op>_<dtype>(a, b, out, n, min_chunk, threads).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "vg.h"
#include "vg_math.h"
#include "vg_numpy.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VG_X86 1
#include <immintrin.h>
#endif

typedef struct {
    const void *a;
    const void *b;
    void *out;
} vg_args;

/* ---- NumPy's own f64 routines ------------------------------------------------------------------------
 *
 * Where NumPy's f64 exp, expm1, log, log1p, sin, cos and power are its own (its AVX-512 builds: SIMD and
 * SVML routines, within a few ulps, not the C library's), the references follow them (an f32 one rounds
 * their double once). elementwise.py then hands their inner loops (the ufuncs' d->d and dd->d loops) to
 * vg_use_numpy_routine, and every op evaluated with one of them runs it (ROUTINE_BLOCKS): a block of the
 * routine's arguments, NumPy's loop over the block, then the rest of each element's formula (vg_math.h's
 * <op>_arg and <op>_rest): the reference's bits (pow: see its kernels). The f32 vector paths (below) keep
 * their own polynomials and send the elements whose rounding is in doubt there. Without NumPy's loops,
 * the C library's formula, an element at a time. */
/* Hand NumPy's d->d loop `which` (NP_exp ..; NP_power's is dd->d) over; returns whether all are now
 * there. */
int vg_use_numpy_routine(int which, void *loop, void *data) { return np_use(which, loop, data); }

#define NP_BLOCK 256
/* ys[0..n) = NAME of xs[0..n) in T (ys may be xs), as the section's comment says */
#define ROUTINE_BLOCKS(NAME, ROUTINE, T, SUF)                                                 \
    VG_CLONES static void NAME##_##SUF##_routine(const T *xs, T *ys, int64_t n) {             \
        if (!numpy_routines) {                                                                \
            for (int64_t i = 0; i < n; i++) ys[i] = (T)d_##NAME((double)xs[i]);               \
            return;                                                                           \
        }                                                                                     \
        const int routine_itself = __builtin_strcmp(#NAME, #ROUTINE) == 0; /* exp, log, .. */  \
        if (routine_itself && sizeof(T) == sizeof(double)) { /* the loop straight over them */ \
            np_run(NP_##ROUTINE, (const double *)(const void *)xs, 0, (double *)(void *)ys, n); \
            return;                                                                           \
        }                                                                                     \
        double arg[NP_BLOCK], r[NP_BLOCK];                                                    \
        for (int64_t i0 = 0; i0 < n; i0 += NP_BLOCK) {                                        \
            const int64_t m = n - i0 < NP_BLOCK ? n - i0 : NP_BLOCK;                          \
            for (int64_t j = 0; j < m; j++) arg[j] = NAME##_arg((double)xs[i0 + j]);          \
            np_run(NP_##ROUTINE, arg, 0, r, m);                                               \
            for (int64_t j = 0; j < m; j++) ys[i0 + j] = (T)NAME##_rest((double)xs[i0 + j], r[j]); \
        }                                                                                     \
    }

/* ---- kernels ----------------------------------------------------------------------------------------- */
#define UNARY_LOOP(NAME, T, SUF, EXPR, ATTR)                                                  \
    ATTR static void NAME##_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                \
        const vg_args *p = (const vg_args *)ctx;                                              \
        const T *restrict xs = (const T *)p->a;                                               \
        T *restrict ys = (T *)p->out;                                                         \
        int64_t from = vg_aligned_from(ys, lo, hi, sizeof(T));                                \
        for (int64_t i = lo; i < from; i++) {                                                 \
            T x = xs[i];                                                                      \
            ys[i] = (EXPR);                                                                   \
        }                                                                                     \
        for (int64_t i = from; i < hi; i++) {                                                 \
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
        int64_t from = vg_aligned_from(ys, lo, hi, sizeof(T));                                \
        for (int64_t i = lo; i < from; i++) {                                                 \
            T a = as[i], b = bs[i];                                                           \
            ys[i] = (EXPR);                                                                   \
        }                                                                                     \
        for (int64_t i = from; i < hi; i++) {                                                 \
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
    UNARY_FAST(relu, T, SUF, x < ZERO ? ZERO : x)                                       \
    UNARY_FAST(relu_deriv, T, SUF, x > ZERO ? ONE : ZERO)                              \
    UNARY_FAST(neg, T, SUF, -x)                                                        \
    UNARY_FAST(abs, T, SUF, ABS(x))                                                    \
    UNARY_FAST(sqrt, T, SUF, SQRT(x))                                                  \
    UNARY_FAST(rsqrt, T, SUF, ONE / SQRT(x))                                           \
    UNARY_FAST(sigmoid_deriv, T, SUF, x * (ONE - x))                                   \
    UNARY_FAST(tanh_deriv, T, SUF, ONE - x * x)

/* The binary ops, each given to KERNEL (BINARY, or BINARY_BC below): on floats, and on 64-bit integers
 * (NumPy's: add, sub and mul wrap around, computed in unsigned arithmetic, where C's signed overflow is
 * undefined) */
/* add and mul take b as a where a is a NaN: x86 gives the first operand's NaN, but the compiler may put
 * either operand first, differently in a loop's vector body and its scalar prologue, so an element's NaN
 * would depend on where its thread's block starts; a select keeps it a's on every thread count */
#define FIRST_NAN(a, b) (isnan(a) ? (a) : (b))
#define FLOAT_BINARY(KERNEL, T, SUF)                                                 \
    KERNEL(add, T, SUF, a + FIRST_NAN(a, b))                                      \
    KERNEL(sub, T, SUF, a - b)                                                    \
    KERNEL(mul, T, SUF, a * FIRST_NAN(a, b))                                      \
    KERNEL(div, T, SUF, a / b)                                                    \
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
UNARY(gelu, double, f64, d_gelu(x)) /* f32 gelu has vector paths (below) */
/* erf: the C library's, which CPython's math.erf (the reference's) calls */
UNARY(erf, double, f64, erf(x))
UNARY(erf, float, f32, (float)erf((double)x))
FLOAT_BINARY(BINARY, float, f32)
FLOAT_BINARY(BINARY, double, f64)
INT64_BINARY(BINARY)

/* scaled_add: a + alpha * b rounded once (C's fma, exactly rounded as the reference's emulation is;
 * PyTorch's add and sub with alpha), alpha rounded to the dtype first, on same-shape operands */
typedef struct {
    const void *a;
    const void *b;
    void *out;
    double alpha;
} vg_scaled_args;

#define SCALED_ADD(T, SUF, FMA)                                                                   \
    static void scaled_add_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                     \
        const vg_scaled_args *p = (const vg_scaled_args *)ctx;                                    \
        const T *restrict as = (const T *)p->a;                                                   \
        const T *restrict bs = (const T *)p->b;                                                   \
        T *restrict ys = (T *)p->out;                                                             \
        const T alpha = (T)p->alpha;                                                              \
        for (int64_t i = lo; i < hi; i++) ys[i] = FMA(alpha, bs[i], as[i]);                       \
    }                                                                                             \
    void vg_scaled_add_##SUF(const T *a, const T *b, T *out, int64_t n, double alpha,             \
                             int64_t min_chunk, int threads) {                                    \
        vg_scaled_args p = {a, b, out, alpha};                                                    \
        vg_parallel_for(n, min_chunk, threads, scaled_add_##SUF##_chunk, &p);                     \
    }

SCALED_ADD(float, f32, fmaf)
SCALED_ADD(double, f64, fma)

/* pow: NumPy's f64 power loop where it was handed over (its AVX-512 builds have their own routine), else
 * the C library's pow, on the operands widened to double, then pow_rest (vg_math.h), rounded once. The
 * loop runs over blocks of the operands gathered with unit strides (NumPy's own paths for strided and
 * broadcast operands differ). */

#define POW(T, SUF)                                                                               \
    VG_CLONES static void pow_##SUF##_run(const T *a, int64_t sa, const T *b, int64_t sb, T *y,   \
                                          int64_t n) {                                            \
        double x0[NP_BLOCK], x1[NP_BLOCK], r[NP_BLOCK];                                           \
        for (int64_t i0 = 0; i0 < n; i0 += NP_BLOCK) {                                            \
            const int64_t m = n - i0 < NP_BLOCK ? n - i0 : NP_BLOCK;                              \
            const double *p0 = x0, *p1 = x1;                                                      \
            if (sizeof(T) == sizeof(double) && sa == 1 && sb == 1) /* the loop reads them in place */ \
                p0 = (const double *)(const void *)(a + i0), p1 = (const double *)(const void *)(b + i0); \
            else if (sa == 1 && sb == 1)                                                          \
                for (int64_t j = 0; j < m; j++) x0[j] = (double)a[i0 + j], x1[j] = (double)b[i0 + j]; \
            else                                                                                  \
                for (int64_t j = 0; j < m; j++)                                                   \
                    x0[j] = (double)a[(i0 + j) * sa], x1[j] = (double)b[(i0 + j) * sb];           \
            if (numpy_routines)                                                                   \
                np_run(NP_power, p0, p1, r, m);                                                   \
            else                                                                                  \
                for (int64_t j = 0; j < m; j++) r[j] = pow(p0[j], p1[j]);                         \
            int64_t special = 0; /* exponents of 2 or 0.5 in the block, by their bits: it vectorizes */ \
            for (int64_t j = 0; j < m; j++) {                                                     \
                uint64_t e;                                                                       \
                memcpy(&e, p1 + j, sizeof e);                                                     \
                special += (e == 0x4000000000000000u) + (e == 0x3FE0000000000000u);               \
            }                                                                                     \
            if (special)                                                                          \
                for (int64_t j = 0; j < m; j++) r[j] = pow_rest(p0[j], p1[j], r[j]);              \
            for (int64_t j = 0; j < m; j++) y[i0 + j] = (T)r[j];                                  \
        }                                                                                         \
    }                                                                                             \
    static void pow_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                            \
        const vg_args *p = (const vg_args *)ctx;                                                  \
        pow_##SUF##_run((const T *)p->a + lo, 1, (const T *)p->b + lo, 1, (T *)p->out + lo, hi - lo); \
    }                                                                                             \
    void vg_pow_##SUF(const T *a, const T *b, T *out, int64_t n, int64_t min_chunk, int threads) { \
        vg_args p = {a, b, out};                                                                  \
        vg_parallel_for(n, min_chunk, threads, pow_##SUF##_chunk, &p);                            \
    }
POW(float, f32)
POW(double, f64)

/* cast between f32 and f64: C's conversions, f64 to f32 rounded to nearest, ties to even, as NumPy's
 * astype rounds (a NaN stays a NaN of its sign). vg_cast_<from>_<to>(x, out, n, min_chunk, threads) */
#define CAST(FROM, TO, NAME)                                                                  \
    VG_CLONES static void cast_##NAME##_chunk(void *ctx, int64_t lo, int64_t hi) {            \
        const vg_args *p = (const vg_args *)ctx;                                              \
        const FROM *restrict xs = (const FROM *)p->a;                                         \
        TO *restrict ys = (TO *)p->out;                                                       \
        for (int64_t i = lo; i < hi; i++) ys[i] = (TO)xs[i];                                  \
    }                                                                                         \
    void vg_cast_##NAME(const FROM *x, TO *out, int64_t n, int64_t min_chunk, int threads) {  \
        vg_args p = {x, 0, out};                                                              \
        vg_parallel_for(n, min_chunk, threads, cast_##NAME##_chunk, &p);                      \
    }

CAST(double, float, f64_f32)
CAST(float, double, f32_f64)

/* The kernels of the ops evaluated with a routine (ROUTINE_BLOCKS) but the f32 ones with vector paths:
 * exp, sigmoid, tanh, silu and gelu_tanh (below) */
#define ROUTINE_UNARY(NAME, ROUTINE, T, SUF)                                                  \
    ROUTINE_BLOCKS(NAME, ROUTINE, T, SUF)                                                     \
    static void NAME##_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                     \
        const vg_args *p = (const vg_args *)ctx;                                              \
        NAME##_##SUF##_routine((const T *)p->a + lo, (T *)p->out + lo, hi - lo);              \
    }                                                                                         \
    void vg_##NAME##_##SUF(const T *x, T *out, int64_t n, int64_t min_chunk, int threads) {   \
        vg_args p = {x, 0, out};                                                              \
        vg_parallel_for(n, min_chunk, threads, NAME##_##SUF##_chunk, &p);                     \
    }
#define ROUTINE_UNARY_F64(NAME, ROUTINE) ROUTINE_UNARY(NAME, ROUTINE, double, f64)
VG_ROUTINE_OPS(ROUTINE_UNARY_F64)
#define VECTOR_OPS(X)                                                                         \
    X(exp, exp) X(sigmoid, exp) X(tanh, expm1) X(silu, exp) X(gelu_tanh, expm1) X(gelu_deriv, exp)
#define SCALAR_OPS(X)                                                                         \
    X(expm1, expm1) X(log, log) X(log1p, log1p) X(sin, sin) X(cos, cos) X(silu_deriv, exp)    \
    X(gelu_tanh_deriv, expm1)
#define ROUTINE_UNARY_F32(NAME, ROUTINE) ROUTINE_UNARY(NAME, ROUTINE, float, f32)
SCALAR_OPS(ROUTINE_UNARY_F32)

/* the f32 ops with vector paths: their routine for the elements those leave (and for machines without
 * them), and one element of it, for the native build's one-element path */
#define ROUTINE_F32(NAME, ROUTINE)                                                            \
    ROUTINE_BLOCKS(NAME, ROUTINE, float, f32)                                                 \
    __attribute__((unused)) static float NAME##_f32_scalar(float x) {                         \
        float y;                                                                              \
        NAME##_f32_routine(&x, &y, 1);                                                        \
        return y;                                                                             \
    }
VECTOR_OPS(ROUTINE_F32)
/* gelu's routine is erf, which NumPy does not have: the C library's, an element at a time */
static void gelu_f32_routine(const float *xs, float *ys, int64_t n) {
    for (int64_t i = 0; i < n; i++) ys[i] = (float)d_gelu((double)xs[i]);
}
__attribute__((unused)) static float gelu_f32_scalar(float x) { return (float)d_gelu((double)x); }

/* ---- vectorized: exp, sigmoid, tanh, silu, gelu_tanh in f32 -------------------------------------------
 *
 * The f32 inputs are widened to doubles: eight a block in two vectors of four (AVX2), or 32 in four of
 * eight (AVX-512; more independent vectors keep its units busier). exp(x) = 2^(n/8) exp(r) with
 * n = round(8 x / ln2) and r = x - n ln2/8 (one FMA; |r| <= ln2/16; ln2/8 as a double is off by under
 * 2^-58, times |n| <= 1155 here); 2^(n/8) = 2^floor(n/8) T[n mod 8] with T[j] = 2^(j/8) looked up by
 * permutes (AVX2: of the 32-bit halves of the table, for eight inputs at once; AVX-512: of the eight
 * doubles) and floor(n/8) added to its exponent; exp(r) = 1 + p,
 * p = r + r^2 q(r) with q a near-minimax fit: of degree 3 for exp, sigmoid and silu (relative error of
 * 1 + p below 2^-41 on the interval; evaluated as two halves, which shortens the chain of dependent
 * operations), of degree 4 for tanh and gelu_tanh, which need p as expm1(r) (relative error below 2^-43);
 * expm1(x) = T (1 + p) - 1. Sigmoid takes the table on x and the polynomial on -x (see its formula in
 * elementwise_vector.h), so that its denominator is one FMA after q. Both widths run the same formulas,
 * one correctly rounded operation after another in the same order, so they give the same doubles.
 * Checked against the scalar formulas on every f32 input (2^32) that the vector path keeps: exp, sigmoid
 * and silu within 3300 double ulps, tanh within 510, gelu_tanh (x >= -3) within 960; the rounding test
 * below allows ROUND_SLACK = 32768.
 *
 * Rounding test: a double y rounds to the same f32 as every double less than ROUND_SLACK ulps from it
 * unless its 29 low mantissa bits are 0x10000000 (halfway) + d, -ROUND_SLACK <= d < ROUND_SLACK (about
 * 1.2e-4 of random inputs), or the f32 result is subnormal (where the rounding point is elsewhere: exp,
 * sigmoid and silu of x < -87; tanh of a tiny x is x itself in double and needs no care). Such elements,
 * and NaN inputs, are recomputed by the op's routine (ROUTINE_BLOCKS), gathered, so every element gets
 * the bits the routine gives. The polynomials' doubles are within 3300 ulps of the C library's formula's
 * and those within a few of NumPy's routines', so the slack holds for either.
 * `verigrad verify --every-f32` holds each kernel, on each path the machine has, to the op's reference
 * on all 2^32 inputs.
 */


/* ---- float activations: exp, tanh, sigmoid, silu and the GELUs in f32 arithmetic, native build --------
 *
 * The paths above compute in double so that every element gets the reference's bits; widening, the
 * double polynomial and division, narrowing and the rounding test cost about 1.9 times what f32
 * arithmetic does on 16 lanes (0.49 and 0.26 ns an element on AVX-512). A native build
 * (VERIGRAD_NATIVE=1, which states that results may differ from the reference's in the last bits) takes
 * elementwise_float.h's f32 formulas instead, within 2 ulps (exp, sigmoid) and 3 (tanh, silu) of the reference
 * on every f32 input (measured; the kernels state it: elementwise.py's FLOAT_ULPS); the row kernels'
 * softmax, log_softmax and cross-entropy call this exp there. NaN inputs, those below -87, whose results
 * are subnormal, and exp's above 88.5 (near overflow) go to the scalar formula of the double paths.
 * gelu (within 6 ulps) and gelu_deriv (within 2^-22 |reference| + 2^-23: its terms cancel near its zero)
 * take erfcx's f32 fit (elementwise_float.h), measured on every f32 input by tools/gelu_float_sweep.py;
 * their inputs below -5.5, NaN, gelu's |x| < 2^-120 and gelu_deriv's +inf go to the routine. gelu_tanh
 * takes tanh's expm1 (within 15 ulps: the rounding of its argument, times 2|arg| in exp(-2|arg|), grows
 * towards x = -3; below, as in the double path, the routine). Each element's
 * operations are the same in every block, on both vector widths and one element at a time (below), so
 * the bits depend on neither the thread count nor the path.
 */
#ifdef VG_NATIVE
#define FLOAT_ACTIVATIONS 1
#else
#define FLOAT_ACTIVATIONS 0
#endif
#define GELU_FLOAT_BELOW -5.5f /* the float gelu's erfcx fit ends at x = -4 sqrt2 */
#define SHIFTER_F 0x1.8p23f /* t = y + SHIFTER_F holds round(y) in its low bits */

/* The float formulas one element at a time, as the vector instructions compute them */
static inline float one_set1_ps(float v) { return v; }
static inline float one_or_ps(float x, float mask) {
    uint32_t a, b;
    memcpy(&a, &x, 4);
    memcpy(&b, &mask, 4);
    a |= b;
    memcpy(&x, &a, 4);
    return x;
}
static inline float one_and_ps(float x, float mask) {
    uint32_t a, b;
    memcpy(&a, &x, 4);
    memcpy(&b, &mask, 4);
    a &= b;
    memcpy(&x, &a, 4);
    return x;
}
static inline float one_andnot_ps(float mask, float x) { /* x without mask's bits */
    uint32_t a, b;
    memcpy(&a, &x, 4);
    memcpy(&b, &mask, 4);
    a &= ~b;
    memcpy(&x, &a, 4);
    return x;
}
static inline float one_max_ps(float a, float b) { return a > b ? a : b; } /* b if either is NaN */
static inline float one_min_ps(float a, float b) { return a < b ? a : b; } /* b if either is NaN */
static inline float one_fmadd_ps(float a, float b, float c) { return fmaf(a, b, c); }
static inline float one_fnmadd_ps(float a, float b, float c) { return fmaf(-a, b, c); }
static inline float one_fmsub_ps(float a, float b, float c) { return fmaf(a, b, -c); }
static inline float one_add_ps(float a, float b) { return a + b; }
static inline float one_sub_ps(float a, float b) { return a - b; }
static inline float one_mul_ps(float a, float b) { return a * b; }
static inline float one_div_ps(float a, float b) { return a / b; }
#define FV float
#define FK 1
#define F(op) one_##op
#define FNAME(name) name##_one
#define FINLINE static inline
#define FSCALE(e, t, n) ldexpf(e, (int)(n))
#define FSELECT_NEG(x, neg, pos) (signbit(x) ? (neg) : (pos))
#include "elementwise_float.h"

/* NAME in f32 arithmetic, or by its routine where the vector paths send an element to it: NaN, x below
 * BELOW or above ABOVE, |x| < TINY */
#define FLOAT_ONE(NAME, ABOVE) FLOAT_ONE_RANGE(NAME, -87.0f, ABOVE, 0.0f)
#define FLOAT_ONE_RANGE(NAME, BELOW, ABOVE, TINY)                                             \
    static float NAME##_f32_float_scalar(float x) {                                           \
        if (!(x >= (BELOW)) || x > (ABOVE) || fabsf(x) < (TINY)) return NAME##_f32_scalar(x); \
        float y;                                                                              \
        NAME##_float_one(&x, &y);                                                             \
        return y;                                                                             \
    }
FLOAT_ONE(exp, 88.5f) /* above: the routine's (exp(88.73) overflows) */
FLOAT_ONE(tanh, INFINITY)
FLOAT_ONE(sigmoid, INFINITY)
FLOAT_ONE(silu, INFINITY)
FLOAT_ONE_RANGE(gelu, GELU_FLOAT_BELOW, INFINITY, 0x1p-120f)
FLOAT_ONE_RANGE(gelu_deriv, GELU_FLOAT_BELOW, FLT_MAX, 0.0f)
FLOAT_ONE_RANGE(gelu_tanh, -3.0f, INFINITY, 0x1p-120f)

#define ROUND_SLACK 32768
/* gelu_deriv's zero (x = -0.75179): the inputs around it that go to its routine (VECTOR_F32_HOLE). Its
 * vector path's doubles are within 140 ulps of the scalar formula's for x >= -3 but near the zero, where
 * that grows to 24576 ulps; outside this hole 1536 at most (measured on 6M inputs in [-0.8, -0.7]) */
#define GELU_DERIV_HOLE_LO -0.756f
#define GELU_DERIV_HOLE_HI -0.747f

#ifdef VG_X86
#include "elementwise_x86.h"
#else
#define VECTOR_DISPATCH(NAME, KIND)
#endif /* VG_X86 */

/* A native build's f32 NAME: the float path, on vectors where the machine has them */
#define FLOAT_FIRST(NAME)                                                                     \
    if (FLOAT_ACTIVATIONS) {                                                                  \
        VECTOR_DISPATCH(NAME, f32_float)                                                      \
        for (int64_t i = lo; i < hi; i++) ys[i] = NAME##_f32_float_scalar(xs[i]);            \
        return;                                                                               \
    }

/* The f32 kernel of NAME: FIRST (a native build's float path, or nothing), else the double path, else
 * NAME's routine */
#define VECTORIZED(NAME, FIRST)                                                               \
    static void NAME##_f32_chunk(void *ctx, int64_t lo, int64_t hi) {                         \
        const vg_args *p = (const vg_args *)ctx;                                              \
        const float *xs = (const float *)p->a;                                                \
        float *ys = (float *)p->out;                                                          \
        FIRST                                                                                 \
        VECTOR_DISPATCH(NAME, f32)                                                            \
        NAME##_f32_routine(xs + lo, ys + lo, hi - lo);                                        \
    }                                                                                         \
    void vg_##NAME##_f32(const float *x, float *out, int64_t n, int64_t min_chunk, int threads) { \
        vg_args p = {x, 0, out};                                                              \
        vg_parallel_for(n, min_chunk, threads, NAME##_f32_chunk, &p);                         \
    }                                                                                         \
    /* the same on the calling thread, without the pool: a fused kernel's stage */            \
    void vg_##NAME##_f32_range(const float *x, float *out, int64_t n) {                       \
        vg_args p = {x, 0, out};                                                              \
        NAME##_f32_chunk(&p, 0, n);                                                           \
    }

VECTORIZED(exp, FLOAT_FIRST(exp))
VECTORIZED(sigmoid, FLOAT_FIRST(sigmoid))
VECTORIZED(tanh, FLOAT_FIRST(tanh))
VECTORIZED(silu, FLOAT_FIRST(silu))
VECTORIZED(gelu_tanh, FLOAT_FIRST(gelu_tanh))
VECTORIZED(gelu, FLOAT_FIRST(gelu))
VECTORIZED(gelu_deriv, FLOAT_FIRST(gelu_deriv))

/* The path the f32 exp, sigmoid, tanh, silu and gelu_tanh kernels take: 2 AVX-512, 1 AVX2, 0 the scalar
 * formula. A `level` >= 0 first chooses it, capped at what the machine has (for the tests and the
 * verification of every path); every path gives the same bits. */
int vg_vector_level(int level) {
#ifdef VG_X86
    int most = hardware_level();
    if (level >= 0) vector_level = level < most ? level : most;
    if (vector_level < 0) vector_level = most;
    return vector_level;
#else
    (void)level;
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
        for (vg_run run = vg_run_at(d, lo, hi); i < hi; vg_run_next(&run, d, hi)) {           \
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

#define POW_BC(T, SUF)                                                                            \
    static void pow_bc_##SUF##_chunk(void *ctx, int64_t lo, int64_t hi) {                         \
        const vg_bargs *p = (const vg_bargs *)ctx;                                                \
        const int64_t *d = p->dims;                                                               \
        int64_t i = lo;                                                                           \
        for (vg_run run = vg_run_at(d, lo, hi); i < hi; vg_run_next(&run, d, hi)) {               \
            pow_##SUF##_run((const T *)p->a + vg_run_offset(run, d + 4), d[7],                    \
                            (const T *)p->b + vg_run_offset(run, d + 8), d[11], (T *)p->out + i,  \
                            run.end - i);                                                         \
            i = run.end;                                                                          \
        }                                                                                         \
    }                                                                                             \
    void vg_pow_bc_##SUF(const T *a, const T *b, T *out, const int64_t *dims, int64_t min_chunk,  \
                         int threads) {                                                           \
        vg_bargs p = {a, b, out, dims};                                                           \
        vg_parallel_for(dims[0] * dims[1] * dims[2] * dims[3], min_chunk, threads, pow_bc_##SUF##_chunk, &p); \
    }
POW_BC(float, f32)
POW_BC(double, f64)
