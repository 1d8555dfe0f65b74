/* The f32 exp, sigmoid, tanh, silu and gelu_tanh formulas on vectors of doubles (elementwise.c's
 * "vectorized" section says how and why). Included once per instruction set, with:
 *   VD          the vector of doubles (__m256d, __m512d)
 *   V(op)       the intrinsic of that width (_mm256_##op, _mm512_##op)
 *   VNAME(name) the name of this width's version of a function
 *   VINLINE     the attributes of an inlined function of this width
 *   VEXP2(t, scale)          2^(n/8) for t = n + SHIFTER, two vectors each (the table lookup)
 *   VSELECT_NEG(x, neg, pos) neg where x's sign bit is set, else pos
 *   VDIV(a, b)               a / b within a few ulps (gelu's; the others divide exactly)
 *   VALL_LE(v, c)            whether every lane of v is at most c's (not where one is a NaN)
 */

/* q(s r) for s = 1 or -1, with exp(r) = 1 + r + r^2 q(r) on |r| <= ln2/16: of degree 4, or of degree 3 if
 * `short_q` (relative error of 1 + r + r^2 q below 2^-49 and 2^-41 on the interval; as (c0 + c1 r) +
 * r^2 (c2 + c3 r)) */
VINLINE VD VNAME(q)(VD r, const double s, const int short_q) {
    if (short_q) {
        VD low = V(fmadd_pd)(V(set1_pd)(s * 0x1.5555556b58f95p-3), r, V(set1_pd)(0x1.ffffffdc0411cp-2));
        VD high = V(fmadd_pd)(V(set1_pd)(s * 0x1.1110a02cdfcb9p-7), r, V(set1_pd)(0x1.555ced9965c38p-5));
        return V(fmadd_pd)(high, V(mul_pd)(r, r), low);
    }
    VD q = V(fmadd_pd)(V(set1_pd)(0x1.6c0ed782325f1p-10), r, V(set1_pd)(s * 0x1.1115b7826c329p-7));
    q = V(fmadd_pd)(q, r, V(set1_pd)(0x1.5555558fc9ec0p-5));
    q = V(fmadd_pd)(q, r, V(set1_pd)(s * 0x1.55555548f8bf6p-3));
    return V(fmadd_pd)(q, r, V(set1_pd)(0x1.fffffffffee2fp-2));
}

/* The range reduction of exp(s x) for s x in [-100, 100] (|n| <= 1155), x in VK vectors: T = 2^(n/8) in
 * scale, and m = x - s n ln2/8 (r = s x - n ln2/8 is m for s = 1, -m for s = -1) */
VINLINE void VNAME(exp_reduce)(const VD x[VK], const double s, VD m[VK], VD scale[VK]) {
    VD t[VK];
    for (int k = 0; k < VK; k++) t[k] = V(fmadd_pd)(x[k], V(set1_pd)(s * LOG2E_8), V(set1_pd)(SHIFTER));
    VEXP2(t, scale);
    for (int k = 0; k < VK; k++) {
        VD n = V(sub_pd)(t[k], V(set1_pd)(SHIFTER));
        m[k] = V(fnmadd_pd)(n, V(set1_pd)(s * LN2_8), x[k]);
    }
}

/* exp(s x) = T (1 + p): T in scale, p in p (q of VNAME(q), evaluated at r = s m) */
VINLINE void VNAME(exp_parts)(const VD x[VK], const double s, const int short_q, VD p[VK], VD scale[VK]) {
    VD m[VK];
    VNAME(exp_reduce)(x, s, m, scale);
    for (int k = 0; k < VK; k++) {
        VD mm = V(mul_pd)(m[k], m[k]);
        p[k] = s > 0 ? V(fmadd_pd)(mm, VNAME(q)(m[k], 1.0, short_q), m[k])
                     : V(fmsub_pd)(mm, VNAME(q)(m[k], -1.0, short_q), m[k]);
    }
}

/* The ops on VK vectors of doubles widened from f32 inputs. A NaN input, and one below VECTOR_F32's
 * UNSURE_BELOW, may give anything: those elements are recomputed by the scalar formula. The clamps
 * (min(x, c) is c for a NaN x) keep the rest in range. */
VINLINE void VNAME(exp)(const VD x[VK], VD y[VK]) {
    /* exp(100) overflows f32 as exp(x > 100) does */
    VD c[VK], p[VK], s[VK];
    for (int k = 0; k < VK; k++) c[k] = V(min_pd)(x[k], V(set1_pd)(100.0));
    VNAME(exp_parts)(c, 1.0, 1, p, s);
    for (int k = 0; k < VK; k++) y[k] = V(fmadd_pd)(s[k], p[k], s[k]);
}

/* 1 / (1 + exp(-x)) = T / (T + 1 + p) for T = 2^(n/8) and 1 + p = exp(-r) = exp(-x) T (n and r of x, so
 * m = r), with T + 1 + p = (T + 1 - m) + m^2 q(-m) */
VINLINE void VNAME(sigmoid)(const VD x[VK], VD y[VK]) {
    /* x >= 40: sigmoid(x) is 1 in double */
    VD c[VK], m[VK], s[VK];
    for (int k = 0; k < VK; k++) c[k] = V(min_pd)(x[k], V(set1_pd)(40.0));
    VNAME(exp_reduce)(c, 1.0, m, s);
    for (int k = 0; k < VK; k++) {
        VD rest = V(sub_pd)(V(add_pd)(s[k], V(set1_pd)(1.0)), m[k]);
        y[k] = V(div_pd)(s[k], V(fmadd_pd)(V(mul_pd)(m[k], m[k]), VNAME(q)(m[k], -1.0, 1), rest));
    }}

VINLINE void VNAME(silu)(const VD x[VK], VD y[VK]) {
    VNAME(sigmoid)(x, y);
    for (int k = 0; k < VK; k++) y[k] = V(mul_pd)(x[k], y[k]);
}

/* copysign(-u / (u + 2), x), u = expm1(-2|x|) = T (1 + p) - 1; |x| >= 20 gives u = -1 as 20 does */
VINLINE void VNAME(tanh)(const VD x[VK], VD y[VK]) {
    const VD sign = V(set1_pd)(-0.0);
    VD a[VK], p[VK], s[VK];
    for (int k = 0; k < VK; k++) {
        a[k] = V(min_pd)(V(andnot_pd)(sign, x[k]), V(set1_pd)(20.0));
        a[k] = V(add_pd)(a[k], a[k]);
    }
    VNAME(exp_parts)(a, -1.0, 0, p, s);
    for (int k = 0; k < VK; k++) {
        VD u = V(fmadd_pd)(s[k], p[k], V(sub_pd)(s[k], V(set1_pd)(1.0)));
        VD t = V(div_pd)(u, V(add_pd)(u, V(set1_pd)(2.0))); /* -|tanh x|, or +0 */
        y[k] = V(or_pd)(V(andnot_pd)(sign, t), V(and_pd)(sign, x[k]));
    }
}

/* 0.5 x (1 + t), t = tanh(sqrt(2/pi) (x + a x^3)) with the argument formed as the reference forms it;
 * 1 + t = 2 / (u + 2) for a positive argument and 2 e / (u + 2) for a negative one (u = expm1(-2|arg|),
 * e = 1 + u), so without cancellation (at arg = -0, e = 1: either is 2 / (u + 2)). The reference's 1 + t
 * does cancel: below x = -3 its rounding error is too many ulps of the result for the rounding test, and
 * VECTOR_F32 sends those to it. For x >= -3, -2|arg| >= -7 where arg < 0, and where arg > 0 an argument
 * clamped to 20 gives the same u = -1. */
VINLINE void VNAME(gelu_tanh)(const VD x[VK], VD y[VK]) {
    const VD two = V(set1_pd)(2.0);
    VD arg[VK], a[VK], p[VK], s[VK];
    for (int k = 0; k < VK; k++) {
        VD x3 = V(mul_pd)(V(mul_pd)(V(mul_pd)(V(set1_pd)(GELU_A), x[k]), x[k]), x[k]);
        arg[k] = V(mul_pd)(V(set1_pd)(SQRT_2_OVER_PI), V(add_pd)(x[k], x3));
        a[k] = V(min_pd)(V(andnot_pd)(V(set1_pd)(-0.0), arg[k]), V(set1_pd)(20.0));
        a[k] = V(add_pd)(a[k], a[k]);
    }
    VNAME(exp_parts)(a, -1.0, 0, p, s);
    for (int k = 0; k < VK; k++) {
        VD e = V(fmadd_pd)(s[k], p[k], s[k]);
        VD u = V(fmadd_pd)(s[k], p[k], V(sub_pd)(s[k], V(set1_pd)(1.0)));
        VD twice = VSELECT_NEG(arg[k], V(mul_pd)(two, e), two);
        VD num = V(mul_pd)(V(mul_pd)(V(set1_pd)(0.5), x[k]), twice);
        y[k] = V(div_pd)(num, V(add_pd)(u, two));
    }
}

/* gelu and gelu_deriv through E = erfc(|z|) = erfcx(t) exp(-t^2), t = |z|, z = x / sqrt2: 1 + erf(z) is
 * 2 - E for z >= 0 and E for z < 0, so without the reference's cancellation (below x = -3 its own rounding
 * error is too many ulps of the result, and VECTOR_F32 sends those to it). erfcx(t) (smooth on [0, inf))
 * is a polynomial of degree 16 in s = (2t - 3) / (t + 3), fitted at the Chebyshev nodes on t in [0, 6]
 * (relative error below 2^-44 there, measured against a 40-digit erfcx); beyond t = 6 E is below 2^-54
 * and 2 - E is 2 as the reference's 1 + erf(z) is. exp(-t^2) is exp_parts' degree-4 fit (t clamped to
 * 10: exp(-100) is as good as 0 here). Sets F = 1 + erf(z) and e = exp(-x^2 / 2). */
VINLINE void VNAME(gelu_parts)(const VD x[VK], VD F[VK], VD e[VK]) {
    static const double c[17] = {
        0x1.67875ba0af35dp-35, 0x1.99d5014c08ffbp-31, 0x1.c34e7c7082d18p-31, -0x1.e58b37cda61c3p-27,
        -0x1.2a80bc8c035a2p-25, 0x1.e80450250ebd4p-23, 0x1.b3cd36aec29afp-21, -0x1.302b0a8153663p-18,
        -0x1.fc79dd5596e52p-17, 0x1.0aaebc9869b93p-13, 0x1.262078e8a8130p-14, -0x1.034535de8b91bp-8,
        0x1.7de1eeee70920p-6, -0x1.4e57f3653ff8dp-4, 0x1.9c8bf9b174be6p-3, -0x1.78fcb94cd63d1p-2,
        0x1.494daffa2ad64p-2};
    const VD sign = V(set1_pd)(-0.0);
    VD z[VK], t[VK], a[VK], p[VK], scale[VK];
    for (int k = 0; k < VK; k++) {
        z[k] = V(mul_pd)(x[k], V(set1_pd)(1.0 / SQRT2));
        t[k] = V(min_pd)(V(andnot_pd)(sign, z[k]), V(set1_pd)(10.0));
        a[k] = V(mul_pd)(t[k], t[k]);
    }
    VNAME(exp_parts)(a, -1.0, 0, p, scale);
    for (int k = 0; k < VK; k++) {
        VD t6 = V(min_pd)(t[k], V(set1_pd)(6.0));
        VD s = VDIV(V(fmsub_pd)(V(set1_pd)(2.0), t6, V(set1_pd)(3.0)), V(add_pd)(t6, V(set1_pd)(3.0)));
        /* sum c[16 - j] s^j as its even and its odd powers' parts, Horner's scheme in s^2 on each (two chains
         * of 8 operations, where one in s is 16 long) */
        VD s2 = V(mul_pd)(s, s), even = V(set1_pd)(c[0]), odd = V(set1_pd)(c[1]);
        for (int j = 2; j < 16; j += 2) {
            even = V(fmadd_pd)(even, s2, V(set1_pd)(c[j]));
            odd = V(fmadd_pd)(odd, s2, V(set1_pd)(c[j + 1]));
        }
        VD r = V(fmadd_pd)(odd, s, V(fmadd_pd)(even, s2, V(set1_pd)(c[16])));
        e[k] = V(fmadd_pd)(scale[k], p[k], scale[k]);
        VD E = V(mul_pd)(r, e[k]);
        F[k] = VSELECT_NEG(z[k], E, V(sub_pd)(V(set1_pd)(2.0), E));
    }
}

/* For a block whose every |x| is at most GELU_SMALL (2.5), where a GPT's activations mostly are: the
 * cdf 0.5 (1 + erf(x / sqrt2)) = 0.5 + x A(x^2) and gelu_deriv(x) = cdf + x exp(-x^2 / 2) / sqrt(2 pi) =
 * 0.5 + x B(x^2), A and B polynomials in u = x^2 (degrees 14 and 15, Chebyshev fits on [0, 6.25]: relative
 * error below 2^-48.7 with the coefficients rounded to double): no exp, no erfcx and no division. The sum
 * cancels where the result is small (at x = -2.5 the cdf is 0.0062: 80 times; gelu_deriv near its zero,
 * whose hole goes to the routine) and stays well within ROUND_SLACK; checked on every f32 input in
 * [-2.5, 2.5] against the routine (the result's bits). A block with a larger |x| (or a NaN) takes
 * gelu_parts. */
#ifndef GELU_SMALL /* the tables once, for both widths */
#define GELU_SMALL 2.5
static const double gelu_cdf_poly[15] = {
    0x1.5637739835ec1p-59, -0x1.8cac3f5516ea5p-53, 0x1.edc847651c0dcp-48, -0x1.c7c9d40b151d4p-43,
    0x1.63ffab8742e6fp-38, -0x1.f0193f5ef5a0fp-34, 0x1.38632b7ae6f5cp-29, -0x1.621f9a59539f7p-25,
    0x1.6589dec8c6bbcp-21, -0x1.3ce8f681980b4p-17, 0x1.e42b0cf760435p-14, -0x1.37403f6958af2p-10,
    0x1.46d0429759af5p-7, -0x1.1058377e2cc4dp-4, 0x1.9884533d4364ep-2};
static const double gelu_deriv_poly[16] = {
    -0x1.35186700b500ap-59, 0x1.7457da8608589p-53, -0x1.dd3e22ba15776p-48, 0x1.c0733390272c8p-43,
    -0x1.611d515c02d40p-38, 0x1.ed371dbd88b34p-34, -0x1.367ec1bf0d70cp-29, 0x1.5f81ffb464bc4p-25,
    -0x1.6221c4af37353p-21, 0x1.38d8d0137cdacp-17, -0x1.db5d76ac5fa58p-14, 0x1.2e9ae845b8f2bp-10,
    -0x1.37403f6b07e68p-7, 0x1.ea3863e316939p-5, -0x1.1058377e2cdd6p-2, 0x1.9884533d4364fp-1};
#endif

/* whether every lane of the VK vectors has |x| <= GELU_SMALL (not where one is a NaN) */
VINLINE int VNAME(gelu_small)(const VD x[VK]) {
    int all = 1;
    for (int k = 0; k < VK; k++) all &= VALL_LE(V(andnot_pd)(V(set1_pd)(-0.0), x[k]), V(set1_pd)(GELU_SMALL));
    return all;
}

/* 0.5 + x P(x^2), P(u) = sum c[j] u^(n - j), as its even and its odd powers' parts (Horner's scheme in u^2
 * on each: two chains of n / 2 operations) */
VINLINE VD VNAME(half_plus_x_poly)(VD x, const double *c, const int n) {
    VD u = V(mul_pd)(x, x), u2 = V(mul_pd)(u, u), even = V(set1_pd)(c[n % 2]), odd = V(set1_pd)(c[1 - n % 2]);
    for (int j = n % 2 + 2; j <= n; j += 2) even = V(fmadd_pd)(even, u2, V(set1_pd)(c[j]));
    for (int j = 3 - n % 2; j < n; j += 2) odd = V(fmadd_pd)(odd, u2, V(set1_pd)(c[j]));
    return V(fmadd_pd)(x, V(fmadd_pd)(odd, u, even), V(set1_pd)(0.5));
}

/* 0.5 x (1 + erf(x / sqrt2)) */
VINLINE void VNAME(gelu)(const VD x[VK], VD y[VK]) {
    if (VNAME(gelu_small)(x)) {
        for (int k = 0; k < VK; k++) y[k] = V(mul_pd)(x[k], VNAME(half_plus_x_poly)(x[k], gelu_cdf_poly, 14));
        return;
    }
    VD F[VK], e[VK];
    VNAME(gelu_parts)(x, F, e);
    for (int k = 0; k < VK; k++) y[k] = V(mul_pd)(V(mul_pd)(V(set1_pd)(0.5), x[k]), F[k]);
}

/* 0.5 (1 + erf(x / sqrt2)) + x exp(-x^2 / 2) / sqrt(2 pi); x clamped to 15 in the second term, which is
 * then below 2^-140 */
VINLINE void VNAME(gelu_deriv)(const VD x[VK], VD y[VK]) {
    if (VNAME(gelu_small)(x)) {
        for (int k = 0; k < VK; k++) y[k] = VNAME(half_plus_x_poly)(x[k], gelu_deriv_poly, 15);
        return;
    }
    VD F[VK], e[VK];
    VNAME(gelu_parts)(x, F, e);
    for (int k = 0; k < VK; k++) {
        VD pdf = V(mul_pd)(V(min_pd)(x[k], V(set1_pd)(15.0)), V(mul_pd)(e[k], V(set1_pd)(1.0 / SQRT_2PI)));
        y[k] = V(fmadd_pd)(V(set1_pd)(0.5), F[k], pdf);
    }
}
