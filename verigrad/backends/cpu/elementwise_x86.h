/* elementwise.c's AVX2 and AVX-512 f32 kernels (x86 only; included once, by elementwise.c, inside its
 * VG_X86 guard, after the scalar float formulas): exp, sigmoid, tanh, silu and the GELUs on vectors of
 * doubles (elementwise_vector.h per width) with the elements in doubt fixed by their routine, the
 * native build's float paths (elementwise_float.h per width), and VECTOR_DISPATCH, which picks the
 * path (vector_level). It uses elementwise.c's definitions before the include (the routines, the
 * FLOAT_* bounds, GELU_DERIV_HOLE_*, ROUND_SLACK). */

#define AVX2_TARGET "avx2,fma"
#define AVX512_TARGET "avx2,fma,avx512f,avx512dq"
#define AVX2 __attribute__((target(AVX2_TARGET)))
#define AVX2_INLINE __attribute__((target(AVX2_TARGET), always_inline)) static inline
#define AVX512 __attribute__((target(AVX512_TARGET)))
#define AVX512_INLINE __attribute__((target(AVX512_TARGET), always_inline)) static inline

#define LOG2E_8 0x1.71547652b82fep+3 /* 8 / ln2 */
#define LN2_8 0x1.62e42fefa39efp-4   /* ln2 / 8 */
#define SHIFTER 0x1.8p52             /* t = y + SHIFTER holds round(y) in its low bits */

/* 2^(j/8), j = 0..7, as the high and the low 32 bits of the double, the high ones less j 2^17: with
 * n 2^17 added (n 2^49 to the double's bits) for an n with n mod 8 = j, it is 2^(n/8) */
#define EXP_TABLE(X)                                                                          \
    X(0, 0x3ff00000, 0x00000000) X(1, 0x3ff172b8, 0x3c7d517b) X(2, 0x3ff306fe, 0x0a31b715)    \
    X(3, 0x3ff4bfda, 0xd5362a27) X(4, 0x3ff6a09e, 0x667f3bcd) X(5, 0x3ff8ace5, 0x422aa0db)    \
    X(6, 0x3ffae89f, 0x995ad3ad) X(7, 0x3ffd5818, 0xdcfba487)
#define EXP_HI(j, hi, lo) (int32_t)(hi - (j << 17)),
#define EXP_LO(j, hi, lo) (int32_t)lo,
#define EXP_BITS(j, hi, lo) (int64_t)((uint64_t)(hi - (j << 17)) << 32 | lo),
static const int32_t exp_table_hi[8] = {EXP_TABLE(EXP_HI)};
static const int32_t exp_table_lo[8] = {EXP_TABLE(EXP_LO)};
static const int64_t exp_table[8] = {EXP_TABLE(EXP_BITS)};

/* Which path the f32 kernels take: 2 AVX-512, 1 AVX2, 0 the scalar formula; at most what the machine
 * has (vg_vector_level). Read at every call. */
static int hardware_level(void) {
    if (vg_has_avx512()) return 2;
    return vg_has_avx2_fma() ? 1 : 0;
}
static int vector_level = -1;

/* AVX2: 2^(n/8) for the eight n of t[0] and t[1] (t = n + SHIFTER, |n| < 2^11). Their low halves,
 * gathered into one vector in the order 0 1 4 5 2 3 6 7, index both tables at once (a permute reads the
 * low 3 bits of its index: n mod 8 = j); n 2^17 added to the high half of 2^(j/8) - j 2^49 adds
 * floor(n/8) to its exponent; the unpacks put low and high halves together in the order of t[0] and t[1].
 * A permute of 32-bit lanes costs as much as four additions here, where a gather costs many. */
AVX2_INLINE void exp2_8_avx2(const __m256d t[2], __m256d scale[2]) {
    __m256i n = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castpd_ps(t[0]), _mm256_castpd_ps(t[1]), 0x88));
    __m256i lo = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)exp_table_lo), n);
    __m256i hi = _mm256_permutevar8x32_epi32(_mm256_loadu_si256((const __m256i *)exp_table_hi), n);
    hi = _mm256_add_epi32(hi, _mm256_slli_epi32(n, 17));
    scale[0] = _mm256_castsi256_pd(_mm256_unpacklo_epi32(lo, hi));
    scale[1] = _mm256_castsi256_pd(_mm256_unpackhi_epi32(lo, hi));
}

#define VK512 4 /* AVX-512 vectors a block: 32 elements */

/* AVX-512: the same table, eight doubles, looked up by one permute per vector */
AVX512_INLINE void exp2_8_avx512(const __m512d t[VK512], __m512d scale[VK512]) {
    const __m512i table = _mm512_loadu_si512(exp_table);
    for (int k = 0; k < VK512; k++) {
        __m512i bits = _mm512_castpd_si512(t[k]);
        __m512i entry = _mm512_permutexvar_epi64(bits, table);
        scale[k] = _mm512_castsi512_pd(_mm512_add_epi64(entry, _mm512_slli_epi64(bits, 49)));
    }
}

/* AVX-512: a / b as a times 1 / b from rcp14's 14 bits and two Newton steps (relative error about
 * 2^-52 each), where the division's throughput is a quarter of the FMAs' */
AVX512_INLINE __m512d div_newton_avx512(__m512d a, __m512d b) {
    const __m512d one = _mm512_set1_pd(1.0);
    __m512d y = _mm512_rcp14_pd(b);
    y = _mm512_fmadd_pd(y, _mm512_fnmadd_pd(b, y, one), y);
    y = _mm512_fmadd_pd(y, _mm512_fnmadd_pd(b, y, one), y);
    return _mm512_mul_pd(a, y);
}

#define VK 2
#define VD __m256d
#define V(op) _mm256_##op
#define VNAME(name) name##_avx2
#define VINLINE AVX2_INLINE
#define VEXP2 exp2_8_avx2
#define VSELECT_NEG(x, neg, pos) _mm256_blendv_pd(pos, neg, x)
#define VDIV(a, b) _mm256_div_pd(a, b)
#define VALL_LE(v, c) (_mm256_movemask_pd(_mm256_cmp_pd(v, c, _CMP_LE_OQ)) == 0xf)
#include "elementwise_vector.h"
#undef VDIV
#undef VALL_LE
#undef VK
#undef VD
#undef V
#undef VNAME
#undef VINLINE
#undef VEXP2
#undef VSELECT_NEG

#define VK VK512
#define VD __m512d
#define V(op) _mm512_##op
#define VNAME(name) name##_avx512
#define VINLINE AVX512_INLINE
#define VEXP2 exp2_8_avx512
#define VSELECT_NEG(x, neg, pos) _mm512_mask_blend_pd(_mm512_movepi64_mask(_mm512_castpd_si512(x)), pos, neg)
#define VDIV div_newton_avx512
#define VALL_LE(v, c) (_mm512_cmp_pd_mask(v, c, _CMP_LE_OQ) == 0xff)
#include "elementwise_vector.h"

/* AVX2: the lanes (a bit each, in the order 0 1 4 5 2 3 6 7) of the 8 doubles y0 (0-3) and y1 (4-7) whose
 * 29 low mantissa bits are 0x10000000 + d, -ROUND_SLACK <= d < ROUND_SLACK: shifted to the top of a 32-bit
 * lane, they are 2^31 + 8 d, so with 8 ROUND_SLACK added (mod 2^32) the test is a signed comparison with
 * -2^31 + 16 ROUND_SLACK. */
AVX2_INLINE int near_half_avx2(__m256d y0, __m256d y1) {
    __m256i low = _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castpd_ps(y0), _mm256_castpd_ps(y1), 0x88));
    low = _mm256_add_epi32(_mm256_slli_epi32(low, 3), _mm256_set1_epi32(8 * ROUND_SLACK));
    __m256i near = _mm256_cmpgt_epi32(_mm256_set1_epi32(INT32_MIN + 16 * ROUND_SLACK), low);
    int lanes = _mm256_movemask_ps(_mm256_castsi256_ps(near));
    return (lanes & 0xC3) | (lanes & 0x0C) << 2 | (lanes & 0x30) >> 2; /* in element order */
}

/* AVX-512: the same test for the 16 doubles y0 (0-7) and y1 (8-15), on the low 32-bit halves gathered
 * into one vector: (bits + ROUND_SLACK - 0x10000000) mod 2^29 < 2 ROUND_SLACK (a power of two), so bits
 * log2(2 ROUND_SLACK) to 28 of the sum are zero, one test; a bit each, in order */
AVX512_INLINE int near_half_avx512(__m512d y0, __m512d y1) {
    const __m512i low = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512i v = _mm512_permutex2var_epi32(_mm512_castpd_si512(y0), low, _mm512_castpd_si512(y1));
    v = _mm512_add_epi32(v, _mm512_set1_epi32(ROUND_SLACK - 0x10000000));
    return _mm512_testn_epi32_mask(v, _mm512_set1_epi32(0x1FFFFFFF & -(2 * ROUND_SLACK)));
}

/* The elements in doubt gathered over blocks: their inputs and where their results go, until NAME's
 * routine runs on FIX_BATCH or more of them at once (NumPy's loop costs more a call than an element) */
#define FIX_BATCH 256
typedef struct {
    float in[FIX_BATCH + 64]; /* a block adds at most 64 */
    float *to[FIX_BATCH + 64];
    int64_t k;
} vg_fixes;

/* ys[lo..hi) from xs[lo..hi) by BLOCK(xs + i, ys + i, m, fixes), m <= B elements a block; the last few
 * through a padded block (a block reads B elements of xs); then the elements in doubt left */
#define BLOCKED(ATTR, FN, BLOCK, B, NAME)                                                     \
    ATTR static void FN(const float *xs, float *ys, int64_t lo, int64_t hi) {                 \
        vg_fixes f;                                                                           \
        f.k = 0;                                                                              \
        int64_t i = lo;                                                                       \
        for (; i + B <= hi; i += B) BLOCK(xs + i, ys + i, B, &f);                             \
        if (i < hi) {                                                                         \
            float xb[B] = {0};                                                                \
            memcpy(xb, xs + i, (size_t)(hi - i) * sizeof(float));                             \
            BLOCK(xb, ys + i, hi - i, &f);                                                    \
        }                                                                                     \
        if (f.k) NAME##_f32_fix(&f);                                                          \
    }

/* The end of a block of B results, which STORE(dst) stores: the inputs in doubt (the bits of `fix`)
 * kept for NAME's routine first (ys may be xs), then the results stored, straight into ys, or through a
 * buffer where the block is short (m < B) */
#define FINISH_BLOCK(NAME, B, STORE)                                                          \
    for (uint64_t b = (uint64_t)fix; b; b &= b - 1) {                                         \
        const int j = __builtin_ctzll(b);                                                     \
        if (j < m) f->in[f->k] = xs[j], f->to[f->k++] = ys + j;                               \
    }                                                                                         \
    if (m < (B)) {                                                                            \
        float yb[B];                                                                          \
        STORE(yb);                                                                            \
        memcpy(ys, yb, (size_t)m * sizeof(float));                                            \
    } else {                                                                                  \
        STORE(ys);                                                                            \
    }                                                                                         \
    if (f->k >= FIX_BATCH) NAME##_f32_fix(f);
#define STORE_HALVES(dst) (_mm_storeu_ps(dst, y0), _mm_storeu_ps((dst) + 4, y1))
#define STORE_HALF_VECTORS(dst) for (int k = 0; k < VK512; k++) _mm256_storeu_ps((dst) + 8 * k, y[k])

/* The f32 kernels of NAME: inputs widened, computed, rounded once; NaN inputs and those below
 * UNSURE_BELOW go to NAME's routine with the elements whose rounding is in doubt (their result may
 * be a subnormal f32, or the reference's own rounding error may be too large; -INFINITY: none). A block
 * (ys[0..m) from xs[0..m); ys may be xs) is 8 elements (AVX2) or 8 VK512 (AVX-512). */
#define VECTOR_F32(NAME, UNSURE_BELOW) VECTOR_F32_HOLE(NAME, UNSURE_BELOW, INFINITY, NAN, NAN)
/* the same, with the inputs above UNSURE_ABOVE and those in [HOLE_LO, HOLE_HI] also sent to NAME's
 * routine (near a zero of the result, where the polynomials' absolute error is many ulps of it, or where
 * the result is a subnormal f32; NAN: none) */
#define VECTOR_F32_HOLE(NAME, UNSURE_BELOW, UNSURE_ABOVE, HOLE_LO, HOLE_HI)                   \
    /* the elements in doubt gathered in `f` by NAME's routine, stored where they go */             \
    __attribute__((noinline)) static void NAME##_f32_fix(vg_fixes *f) {                       \
        float out[FIX_BATCH + 64];                                                            \
        NAME##_f32_routine(f->in, out, f->k);                                                 \
        for (int64_t j = 0; j < f->k; j++) *f->to[j] = out[j];                                \
        f->k = 0;                                                                             \
    }                                                                                         \
    AVX2_INLINE void NAME##_f32_block_avx2(const float *xs, float *ys, int64_t m, vg_fixes *f) { \
        __m256d xd[2] = {_mm256_cvtps_pd(_mm_loadu_ps(xs)), _mm256_cvtps_pd(_mm_loadu_ps(xs + 4))}, d[2]; \
        NAME##_avx2(xd, d);                                                                   \
        __m128 y0 = _mm256_cvtpd_ps(d[0]), y1 = _mm256_cvtpd_ps(d[1]);                        \
        __m256 x8 = _mm256_loadu_ps(xs);                                                      \
        __m256 hole = _mm256_and_ps(_mm256_cmp_ps(x8, _mm256_set1_ps(HOLE_LO), _CMP_GE_OQ),  \
                                    _mm256_cmp_ps(x8, _mm256_set1_ps(HOLE_HI), _CMP_LE_OQ)); \
        hole = _mm256_or_ps(hole, _mm256_cmp_ps(x8, _mm256_set1_ps(UNSURE_ABOVE), _CMP_GT_OQ)); \
        int fix = _mm256_movemask_ps(_mm256_or_ps(_mm256_cmp_ps(x8, _mm256_set1_ps(UNSURE_BELOW), _CMP_NGE_UQ), hole)); \
        fix |= near_half_avx2(d[0], d[1]);                                                    \
        FINISH_BLOCK(NAME, 8, STORE_HALVES)                                                   \
    }                                                                                         \
    BLOCKED(AVX2, NAME##_f32_avx2, NAME##_f32_block_avx2, 8, NAME)                            \
    AVX512_INLINE void NAME##_f32_block_avx512(const float *xs, float *ys, int64_t m, vg_fixes *f) { \
        __m512d xd[VK512], d[VK512];                                                          \
        __m256 y[VK512];                                                                      \
        uint64_t fix = 0;                                                                     \
        for (int k = 0; k < VK512; k++) xd[k] = _mm512_cvtps_pd(_mm256_loadu_ps(xs + 8 * k)); \
        NAME##_avx512(xd, d);                                                                 \
        for (int k = 0; k < VK512; k++) y[k] = _mm512_cvtpd_ps(d[k]);                         \
        for (int k = 0; k < VK512; k += 2) {                                                  \
            __m512 x16 = _mm512_loadu_ps(xs + 8 * k);                                         \
            uint64_t low = _mm512_cmp_ps_mask(x16, _mm512_set1_ps(UNSURE_BELOW), _CMP_NGE_UQ); \
            low |= _mm512_cmp_ps_mask(x16, _mm512_set1_ps(HOLE_LO), _CMP_GE_OQ) &             \
                   _mm512_cmp_ps_mask(x16, _mm512_set1_ps(HOLE_HI), _CMP_LE_OQ);               \
            low |= _mm512_cmp_ps_mask(x16, _mm512_set1_ps(UNSURE_ABOVE), _CMP_GT_OQ);        \
            fix |= (low | (uint64_t)near_half_avx512(d[k], d[k + 1])) << 8 * k;                \
        }                                                                                     \
        FINISH_BLOCK(NAME, 8 * VK512, STORE_HALF_VECTORS)                                     \
    }                                                                                         \
    BLOCKED(AVX512, NAME##_f32_avx512, NAME##_f32_block_avx512, 8 * VK512, NAME)
VECTOR_F32(exp, -87.0f)
VECTOR_F32(sigmoid, -87.0f)
VECTOR_F32(tanh, -INFINITY)
VECTOR_F32(silu, -87.0f)
VECTOR_F32(gelu_tanh, -3.0f)
/* gelu of |x| < 2^-120 is subnormal or zero; gelu_deriv of +inf is the reference's inf * 0, NaN */
VECTOR_F32_HOLE(gelu, -3.0f, INFINITY, -0x1p-120f, 0x1p-120f)
VECTOR_F32_HOLE(gelu_deriv, -3.0f, FLT_MAX, GELU_DERIV_HOLE_LO, GELU_DERIV_HOLE_HI)

#define FK_AVX2 2 /* vectors a block */
#define FK_AVX512 2

#define FV __m256
#define FK FK_AVX2
#define F(op) _mm256_##op
#define FNAME(name) name##_avx2
#define FINLINE AVX2_INLINE
/* e 2^n: n added to the exponent (the low 9 bits of t's, shifted there, are n mod 512) */
#define FSCALE(e, t, n)                                                                       \
    _mm256_castsi256_ps(                                                                      \
        _mm256_add_epi32(_mm256_castps_si256(e), _mm256_slli_epi32(_mm256_castps_si256(t), 23)))
#define FSELECT_NEG(x, neg, pos) _mm256_blendv_ps(pos, neg, x)
#include "elementwise_float.h"

#define FV __m512
#define FK FK_AVX512
#define F(op) _mm512_##op
#define FNAME(name) name##_avx512
#define FINLINE AVX512_INLINE
#define FSCALE(e, t, n) _mm512_scalef_ps(e, n)
#define FSELECT_NEG(x, neg, pos) _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(x)), pos, neg)
#include "elementwise_float.h"

#define STORE_AVX2_FLOATS(dst) for (int k = 0; k < FK_AVX2; k++) _mm256_storeu_ps((dst) + 8 * k, y[k])
#define STORE_AVX512_FLOATS(dst) for (int k = 0; k < FK_AVX512; k++) _mm512_storeu_ps((dst) + 16 * k, y[k])

/* The f32-arithmetic kernels of NAME (NAME##_float of elementwise_float.h), blocks of FK vectors */
#define FLOAT_F32(NAME, ABOVE) FLOAT_F32_RANGE(NAME, -87.0f, ABOVE, 0.0f)
#define FLOAT_F32_RANGE(NAME, BELOW, ABOVE, TINY)                                             \
    AVX2_INLINE void NAME##_f32_float_block_avx2(const float *xs, float *ys, int64_t m, vg_fixes *f) { \
        __m256 x[FK_AVX2], y[FK_AVX2];                                                        \
        uint64_t fix = 0;                                                                     \
        for (int k = 0; k < FK_AVX2; k++) {                                                   \
            x[k] = _mm256_loadu_ps(xs + 8 * k);                                               \
            __m256 low = _mm256_cmp_ps(x[k], _mm256_set1_ps(BELOW), _CMP_NGE_UQ);             \
            low = _mm256_or_ps(low, _mm256_cmp_ps(x[k], _mm256_set1_ps(ABOVE), _CMP_GT_OQ));  \
            __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x[k]);                        \
            low = _mm256_or_ps(low, _mm256_cmp_ps(ax, _mm256_set1_ps(TINY), _CMP_LT_OQ));     \
            fix |= (uint64_t)_mm256_movemask_ps(low) << 8 * k;                                \
        }                                                                                     \
        NAME##_float_avx2(x, y);                                                              \
        FINISH_BLOCK(NAME, 8 * FK_AVX2, STORE_AVX2_FLOATS)                                    \
    }                                                                                         \
    BLOCKED(AVX2, NAME##_f32_float_avx2, NAME##_f32_float_block_avx2, 8 * FK_AVX2, NAME)     \
    AVX512_INLINE void NAME##_f32_float_block_avx512(const float *xs, float *ys, int64_t m, vg_fixes *f) { \
        __m512 x[FK_AVX512], y[FK_AVX512];                                                    \
        uint64_t fix = 0;                                                                     \
        for (int k = 0; k < FK_AVX512; k++) {                                                 \
            x[k] = _mm512_loadu_ps(xs + 16 * k);                                              \
            __m512 ax = _mm512_andnot_ps(_mm512_set1_ps(-0.0f), x[k]);                        \
            fix |= (uint64_t)(_mm512_cmp_ps_mask(x[k], _mm512_set1_ps(BELOW), _CMP_NGE_UQ) |   \
                              _mm512_cmp_ps_mask(x[k], _mm512_set1_ps(ABOVE), _CMP_GT_OQ) |    \
                              _mm512_cmp_ps_mask(ax, _mm512_set1_ps(TINY), _CMP_LT_OQ)) << 16 * k; \
        }                                                                                     \
        NAME##_float_avx512(x, y);                                                            \
        FINISH_BLOCK(NAME, 16 * FK_AVX512, STORE_AVX512_FLOATS)                               \
    }                                                                                         \
    BLOCKED(AVX512, NAME##_f32_float_avx512, NAME##_f32_float_block_avx512, 16 * FK_AVX512, NAME)
FLOAT_F32(exp, 88.5f)
FLOAT_F32(tanh, INFINITY)
FLOAT_F32(sigmoid, INFINITY)
FLOAT_F32(silu, INFINITY)
FLOAT_F32_RANGE(gelu, GELU_FLOAT_BELOW, INFINITY, 0x1p-120f)
FLOAT_F32_RANGE(gelu_deriv, GELU_FLOAT_BELOW, FLT_MAX, 0.0f)
FLOAT_F32_RANGE(gelu_tanh, -3.0f, INFINITY, 0x1p-120f)

/* NAME's KIND kernel (f32: the double path; f32_float: the float one) on the chosen path's vectors */
#define VECTOR_DISPATCH(NAME, KIND)                                                           \
    if (vector_level < 0) vector_level = hardware_level();                                    \
    if (vector_level == 2) {                                                                  \
        NAME##_##KIND##_avx512(xs, ys, lo, hi);                                               \
        return;                                                                               \
    }                                                                                         \
    if (vector_level == 1) {                                                                  \
        NAME##_##KIND##_avx2(xs, ys, lo, hi);                                                 \
        return;                                                                               \
    }
