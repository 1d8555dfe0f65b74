/* Element-wise kernels on contiguous f32 and f64 arrays of the output's shape.
 *
 * Each computes what the op's NumPy reference computes, in the same order of operations and in the
 * same precision: built without FMA contraction or fast-math, the exactly rounded ops give the
 * reference's bits. The transcendentals and activations are evaluated in double with the C library's
 * exp, expm1, log, sin, cos, erf and pow (the routines NumPy's f64 loops call), by the formulas their
 * references write, and f32 results are rounded once from that double.
 *
 * exp, sigmoid, tanh, silu and gelu_tanh in f32 also have an AVX2 path (see "vectorized" below): double
 * polynomials within a relative 2^-41 of the C library's routines, rounded once to f32; where that
 * rounding could go either way, the element is recomputed by the scalar formula, so both paths give the
 * same bits.
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
    UNARY(sin, T, SUF, (T)sin((double)x))                                         \
    UNARY(cos, T, SUF, (T)cos((double)x))                                         \
    UNARY(silu_deriv, T, SUF, (T)d_silu_deriv((double)x))                         \
    UNARY(gelu, T, SUF, (T)d_gelu((double)x))                                     \
    UNARY(gelu_deriv, T, SUF, (T)d_gelu_deriv((double)x))                         \
    UNARY(gelu_tanh_deriv, T, SUF, (T)d_gelu_tanh_deriv((double)x))

#define ALL_BINARY(T, SUF)                                                         \
    BINARY(add, T, SUF, a + b)                                                    \
    BINARY(sub, T, SUF, a - b)                                                    \
    BINARY(mul, T, SUF, a * b)                                                    \
    BINARY(div, T, SUF, a / b)                                                    \
    BINARY(pow, T, SUF, (T)pow((double)a, (double)b))                             \
    BINARY(maximum, T, SUF, (a > b || isnan(a)) ? a : b)                         \
    BINARY(minimum, T, SUF, (a < b || isnan(a)) ? a : b)

ALL_UNARY(float, f32, 1.0f, 0.0f, fabsf, sqrtf)
ALL_UNARY(double, f64, 1.0, 0.0, fabs, sqrt)
ALL_BINARY(float, f32)
ALL_BINARY(double, f64)

/* f64 kernels of the vectorized ops: the scalar formulas */
UNARY(exp, double, f64, d_exp(x))
UNARY(sigmoid, double, f64, d_sigmoid(x))
UNARY(tanh, double, f64, d_tanh(x))
UNARY(silu, double, f64, d_silu(x))
UNARY(gelu_tanh, double, f64, d_gelu_tanh(x))

/* ---- vectorized: exp, sigmoid, tanh, silu, gelu_tanh in f32 -------------------------------------------
 *
 * x = k ln2 + r with |r| <= ln2/2 and a two-part ln2; exp(r) = 1 + r + r^2 q(r) with q a least-squares
 * fit of degree 7 (relative error of exp below 2^-45 on the interval); expm1(x) = 2^k expm1(r) + (2^k - 1);
 * sigmoid(x) = 1 / (1 + exp(-x)). Measured against the scalar formulas on 3e7 inputs: exp, sigmoid and
 * silu within 180 double ulps, tanh within 1850, gelu_tanh (x >= -3) within 1100; the rounding test below
 * allows ROUND_SLACK.
 *
 * Rounding test: a double y rounds to the same f32 as every double within ROUND_SLACK ulps of it unless
 * its 29 low mantissa bits are within ROUND_SLACK of the halfway pattern 0x10000000 (about 1.2e-4 of
 * random inputs), or the f32 result is subnormal (where the rounding point is elsewhere: exp, sigmoid and
 * silu of x < -87; tanh of a tiny x is x itself in double and needs no care). Such elements are
 * recomputed by the scalar formula, so every element gets the bits the scalar formula gives.
 */
#define ROUND_SLACK 32768

#ifdef VG_X86
#define AVX2 __attribute__((target("avx2,fma")))
#define AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) static inline

static int have_avx2(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

#define LOG2E 0x1.71547652b82fep0
#define LN2_HI 0x1.62e42fefa39efp-1
#define LN2_LO 0x1.abc9e3b39803fp-56
#define SHIFTER 0x1.8p52 /* t = x/ln2 + SHIFTER holds round(x/ln2) in its low bits */

/* q(s r) for s = 1 or -1, with exp(r) = 1 + r + r^2 q(r) on |r| <= ln2/2 */
AVX2_INLINE __m256d v_q(__m256d r, const double s) {
    __m256d q = _mm256_set1_pd(s * 0x1.717dca207ffe1p-19);
    q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(0x1.a174497580487p-16));
    q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(s * 0x1.a01af4fd4decap-13));
    q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(0x1.6c1635ecf673bp-10));
    q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(s * 0x1.111110b6d1cedp-7));
    q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(0x1.555555819b191p-5));
    q = _mm256_fmadd_pd(q, r, _mm256_set1_pd(s * 0x1.5555555579cc6p-3));
    return _mm256_fmadd_pd(q, r, _mm256_set1_pd(0x1.ffffffffee836p-2));
}

/* 2^k from t = k + SHIFTER */
AVX2_INLINE __m256d v_pow2(__m256d t) {
    __m256i bits = _mm256_add_epi64(_mm256_castpd_si256(t), _mm256_set1_epi64x(1023));
    return _mm256_castsi256_pd(_mm256_slli_epi64(bits, 52));
}

/* exp(x) for x in [-200, 200] */
AVX2_INLINE __m256d v_exp(__m256d x) {
    __m256d t = _mm256_fmadd_pd(x, _mm256_set1_pd(LOG2E), _mm256_set1_pd(SHIFTER));
    __m256d k = _mm256_sub_pd(t, _mm256_set1_pd(SHIFTER));
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_HI), x);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_LO), r);
    __m256d p = _mm256_fmadd_pd(_mm256_mul_pd(r, r), v_q(r, 1.0), _mm256_add_pd(r, _mm256_set1_pd(1.0)));
    return _mm256_mul_pd(p, v_pow2(t));
}

/* exp(-x) for x in [-200, 200]: r = -(x + k ln2) is never formed, q is evaluated at -r */
AVX2_INLINE __m256d v_exp_neg(__m256d x) {
    __m256d t = _mm256_fmadd_pd(x, _mm256_set1_pd(-LOG2E), _mm256_set1_pd(SHIFTER));
    __m256d k = _mm256_sub_pd(t, _mm256_set1_pd(SHIFTER));
    __m256d mr = _mm256_fmadd_pd(k, _mm256_set1_pd(LN2_HI), x);
    mr = _mm256_fmadd_pd(k, _mm256_set1_pd(LN2_LO), mr);
    __m256d p = _mm256_fmadd_pd(_mm256_mul_pd(mr, mr), v_q(mr, -1.0), _mm256_sub_pd(_mm256_set1_pd(1.0), mr));
    return _mm256_mul_pd(p, v_pow2(t));
}

/* expm1(x) for x in [-200, 0], and in *e exp(x) = 1 + expm1(x) without the cancellation of forming it so */
AVX2_INLINE __m256d v_expm1_exp(__m256d x, __m256d *e) {
    __m256d t = _mm256_fmadd_pd(x, _mm256_set1_pd(LOG2E), _mm256_set1_pd(SHIFTER));
    __m256d k = _mm256_sub_pd(t, _mm256_set1_pd(SHIFTER));
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_HI), x);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(LN2_LO), r);
    __m256d p = _mm256_fmadd_pd(_mm256_mul_pd(r, r), v_q(r, 1.0), r);
    __m256d s = v_pow2(t);
    *e = _mm256_fmadd_pd(s, p, s);
    return _mm256_fmadd_pd(s, p, _mm256_sub_pd(s, _mm256_set1_pd(1.0)));
}

AVX2_INLINE __m256d v_expm1(__m256d x) {
    __m256d e;
    return v_expm1_exp(x, &e);
}

/* The ops on doubles whose f32 inputs were clamped as VECTOR_F32 says (exp is v_exp). */
AVX2_INLINE __m256d v_sigmoid(__m256d x) {
    const __m256d one = _mm256_set1_pd(1.0);
    return _mm256_div_pd(one, _mm256_add_pd(one, v_exp_neg(x)));
}

AVX2_INLINE __m256d v_tanh(__m256d x) {
    const __m256d sign = _mm256_set1_pd(-0.0);
    __m256d u = v_expm1(_mm256_mul_pd(_mm256_set1_pd(-2.0), _mm256_andnot_pd(sign, x))); /* expm1(-2|x|) */
    __m256d t = _mm256_div_pd(_mm256_xor_pd(u, sign), _mm256_add_pd(u, _mm256_set1_pd(2.0)));
    return _mm256_or_pd(_mm256_andnot_pd(sign, t), _mm256_and_pd(sign, x)); /* copysign(t, x) */
}

AVX2_INLINE __m256d v_silu(__m256d x) {
    /* min and max return their second operand when either is NaN: a NaN goes through */
    __m256d xc = _mm256_max_pd(_mm256_set1_pd(-200.0), _mm256_min_pd(_mm256_set1_pd(200.0), x));
    return _mm256_mul_pd(x, v_sigmoid(xc));
}

/* 0.5 x (1 + t), t = tanh(sqrt(2/pi) (x + a x^3)) with the argument formed as the reference forms it;
 * 1 + t = 2 / (u + 2) for a positive argument and 2 e / (u + 2) for a negative one (u = expm1(-2|arg|),
 * e = 1 + u), so without cancellation. The reference's 1 + t does cancel: below x = -3 its rounding
 * error is too many ulps of the result for the rounding test, and VECTOR_F32 sends those to it. */
AVX2_INLINE __m256d v_gelu_tanh(__m256d x) {
    const __m256d sign = _mm256_set1_pd(-0.0), two = _mm256_set1_pd(2.0);
    __m256d x3 = _mm256_mul_pd(_mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(GELU_A), x), x), x);
    __m256d arg = _mm256_mul_pd(_mm256_set1_pd(SQRT_2_OVER_PI), _mm256_add_pd(x, x3));
    __m256d a2 = _mm256_mul_pd(_mm256_set1_pd(-2.0), _mm256_andnot_pd(sign, arg));
    __m256d e, u = v_expm1_exp(_mm256_max_pd(_mm256_set1_pd(-200.0), a2), &e);
    __m256d below = _mm256_cmp_pd(arg, _mm256_setzero_pd(), _CMP_LT_OQ);
    __m256d num = _mm256_blendv_pd(two, _mm256_mul_pd(two, e), below);
    __m256d one_plus_t = _mm256_div_pd(num, _mm256_add_pd(u, two));
    return _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), x), one_plus_t);
}

/* The lanes of y (a bit each) whose 29 low mantissa bits are within ROUND_SLACK of 0x10000000 */
AVX2_INLINE int v_near_half_lanes(__m256d y) {
    const __m256i shift = _mm256_set1_epi64x((1 << 29) + ROUND_SLACK - 0x10000000);
    __m256i low = _mm256_and_si256(_mm256_add_epi64(_mm256_castpd_si256(y), shift),
                                   _mm256_set1_epi64x(0x1FFFFFFF));
    __m256i near = _mm256_cmpgt_epi64(_mm256_set1_epi64x(2 * ROUND_SLACK + 1), low);
    return _mm256_movemask_pd(_mm256_castsi256_pd(near));
}

/* The same test, cheaper, for the 8 doubles lo and hi: all ones in the 32-bit lanes (in some order) of
 * those in doubt. The 29 bits are in the low halves, gathered into one vector. */
AVX2_INLINE __m256i v_near_half(__m256d lo, __m256d hi) {
    __m256i low = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castpd_ps(lo), _mm256_castpd_ps(hi), 0x88));
    low = _mm256_add_epi32(low, _mm256_set1_epi32((1 << 29) + ROUND_SLACK - 0x10000000));
    low = _mm256_and_si256(low, _mm256_set1_epi32(0x1FFFFFFF));
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(2 * ROUND_SLACK + 1), low);
}

/* The f32 kernel of v_NAME: inputs clamped to [LO, HI] in f32 (a NaN goes through), widened, computed,
 * rounded once; inputs below UNSURE_BELOW go to the scalar formula (they may give a subnormal f32, or
 * the reference's own rounding error may be too large; -INFINITY: none). */
#define VECTOR_F32(NAME, LO, HI, UNSURE_BELOW)                                               \
    /* the elements of a block of 8 whose rounding is in doubt, by the scalar formula */       \
    __attribute__((noinline)) AVX2 static void NAME##_f32_fix(const float *x, float *y) {     \
        __m256 v = _mm256_loadu_ps(x);                                                        \
        __m256 c = _mm256_max_ps(_mm256_set1_ps(LO), _mm256_min_ps(_mm256_set1_ps(HI), v));   \
        int lanes = _mm256_movemask_ps(_mm256_cmp_ps(v, _mm256_set1_ps(UNSURE_BELOW), _CMP_LT_OQ)); \
        lanes |= v_near_half_lanes(v_##NAME(_mm256_cvtps_pd(_mm256_castps256_ps128(c))));     \
        lanes |= v_near_half_lanes(v_##NAME(_mm256_cvtps_pd(_mm256_extractf128_ps(c, 1)))) << 4; \
        for (int l = 0; l < 8; l++)                                                           \
            if (lanes >> l & 1) y[l] = (float)d_##NAME((double)x[l]);                         \
    }                                                                                         \
    AVX2_INLINE __m256 NAME##_f32_v8(__m256 v, __m256i *unsure) {                             \
        __m256 c = _mm256_max_ps(_mm256_set1_ps(LO), _mm256_min_ps(_mm256_set1_ps(HI), v));   \
        __m256d ylo = v_##NAME(_mm256_cvtps_pd(_mm256_castps256_ps128(c)));                   \
        __m256d yhi = v_##NAME(_mm256_cvtps_pd(_mm256_extractf128_ps(c, 1)));                 \
        __m256 low = _mm256_cmp_ps(v, _mm256_set1_ps(UNSURE_BELOW), _CMP_LT_OQ);              \
        *unsure = _mm256_or_si256(_mm256_castps_si256(low), v_near_half(ylo, yhi));           \
        return _mm256_set_m128(_mm256_cvtpd_ps(yhi), _mm256_cvtpd_ps(ylo));                   \
    }                                                                                         \
    AVX2 static void NAME##_f32_avx2(const float *xs, float *ys, int64_t lo, int64_t hi) {    \
        float xb[16] = {0}, yb[16];                                                           \
        for (int64_t i = lo; i < hi; i += 16) {                                               \
            const float *x = xs + i;                                                          \
            float *y = ys + i;                                                                \
            if (hi - i < 16) { /* the last few through a padded block: one path for all */    \
                memcpy(xb, x, (size_t)(hi - i) * sizeof(float));                              \
                x = xb;                                                                       \
                y = yb;                                                                       \
            }                                                                                 \
            __m256i u0, u1;                                                                   \
            _mm256_storeu_ps(y, NAME##_f32_v8(_mm256_loadu_ps(x), &u0));                      \
            _mm256_storeu_ps(y + 8, NAME##_f32_v8(_mm256_loadu_ps(x + 8), &u1));              \
            if (!_mm256_testz_si256(u0, u0)) NAME##_f32_fix(x, y);                            \
            if (!_mm256_testz_si256(u1, u1)) NAME##_f32_fix(x + 8, y + 8);                    \
            if (y == yb) memcpy(ys + i, yb, (size_t)(hi - i) * sizeof(float));               \
        }                                                                                     \
    }
VECTOR_F32(exp, -200.0f, 200.0f, -87.0f)
VECTOR_F32(sigmoid, -200.0f, 200.0f, -87.0f)
VECTOR_F32(tanh, -100.0f, 100.0f, -INFINITY)
VECTOR_F32(silu, -INFINITY, INFINITY, -87.0f)
VECTOR_F32(gelu_tanh, -INFINITY, INFINITY, -3.0f)
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

#define ALL_BINARY_BC(T, SUF)                                                      \
    BINARY_BC(add, T, SUF, a + b)                                                 \
    BINARY_BC(sub, T, SUF, a - b)                                                 \
    BINARY_BC(mul, T, SUF, a * b)                                                 \
    BINARY_BC(div, T, SUF, a / b)                                                 \
    BINARY_BC(pow, T, SUF, (T)pow((double)a, (double)b))                          \
    BINARY_BC(maximum, T, SUF, (a > b || isnan(a)) ? a : b)                      \
    BINARY_BC(minimum, T, SUF, (a < b || isnan(a)) ? a : b)

ALL_BINARY_BC(float, f32)
ALL_BINARY_BC(double, f64)
