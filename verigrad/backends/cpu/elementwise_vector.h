/* The f32 exp, sigmoid, tanh, silu and gelu_tanh formulas on vectors of doubles (elementwise.c's
 * "vectorized" section says how and why). Included once per instruction set, with:
 *   VD          the vector of doubles (__m256d, __m512d)
 *   V(op)       the intrinsic of that width (_mm256_##op, _mm512_##op)
 *   VNAME(name) the name of this width's version of a function
 *   VINLINE     the attributes of an inlined function of this width
 *   VEXP2(t, scale)          2^(n/8) for t = n + SHIFTER, two vectors each (the table lookup)
 *   VSELECT_NEG(x, neg, pos) neg where x's sign bit is set, else pos
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
