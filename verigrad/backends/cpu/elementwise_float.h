/* exp, tanh, sigmoid, silu, gelu and gelu_deriv in f32 arithmetic: the native build's vector path (elementwise.c's "float
 * activations" section says when and why). Included once per instruction set, with:
 *   FV          the vector of floats (__m256, __m512)
 *   FK          vectors a block
 *   F(op)       the intrinsic of that width (_mm256_##op, _mm512_##op)
 *   FNAME(name) the name of this width's version of a function
 *   FINLINE     the attributes of an inlined function of this width
 *   FSCALE(e, t, n)          e 2^n for t = n + SHIFTER_F (e in [0.7, 1.5], n >= -126: a normal result)
 *   FSELECT_NEG(x, neg, pos) neg where x's sign bit is set, else pos
 * which it undefines at its end, for the next width's.
 */

/* exp's argument reduction, shared by every f32 exp below: t = a / ln2 + SHIFTER (its low bits hold n),
 * n = round(a / ln2), r = a - n ln2 (ln2 in two parts) and p = r + r^2 q(r), q of degree 4 */
FINLINE void FNAME(exp_reduce_float)(FV a, FV *t, FV *n, FV *p) {
    *t = F(fmadd_ps)(a, F(set1_ps)(0x1.715476p+0f), F(set1_ps)(SHIFTER_F));
    *n = F(sub_ps)(*t, F(set1_ps)(SHIFTER_F));
    FV r = F(fnmadd_ps)(*n, F(set1_ps)(0x1.62e4p-1f), a);
    r = F(fnmadd_ps)(*n, F(set1_ps)(0x1.7f7d1cp-20f), r);
    FV q = F(fmadd_ps)(F(set1_ps)(0x1.6a2354p-10f), r, F(set1_ps)(0x1.123a68p-7f));
    q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.5558f4p-5f));
    q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.555490p-3f));
    q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.fffffcp-2f));
    *p = F(fmadd_ps)(F(mul_ps)(r, r), q, r);
}

/* exp(-|x|) (at least exp(-87), a normal float) = 2^n (1 + r + r^2 q(r)), n = round(-|x| / ln2),
 * r = -|x| - n ln2 in two exact steps (n ln2_hi is exact: ln2_hi has 16 bits, |n| <= 126 has 7), q of
 * degree 4 (1 + r + r^2 q within 2^-28 of exp(r) on |r| <= ln2/2); then 1 / (1 + e) for x >= 0 and
 * e / (1 + e) for x < 0, so nothing cancels. Each f32 operation rounds once; the result is within 3
 * ulps of the reference (measured on every f32 input: elementwise.c). */
FINLINE void FNAME(sigmoid_float)(const FV x[FK], FV y[FK]) {
    const FV one = F(set1_ps)(1.0f);
    for (int k = 0; k < FK; k++) {
        FV a = F(max_ps)(F(or_ps)(x[k], F(set1_ps)(-0.0f)), F(set1_ps)(-87.0f));
        FV t, n, p;
        FNAME(exp_reduce_float)(a, &t, &n, &p);
        FV e = FSCALE(F(add_ps)(p, one), t, n);
        y[k] = F(div_ps)(FSELECT_NEG(x[k], e, one), F(add_ps)(one, e));
    }
}

/* exp(x) for x in [-87, 88.5] (normal results, no overflow: the kernels send the rest to the op's routine)
 * = 2^n (1 + r + r^2 q(r)), n = round(x / ln2) (|n| <= 128: 8 bits, so n ln2_hi is exact), r and q as
 * sigmoid's. Each f32 operation rounds once: the native build's f32 exp (see FLOAT_ULPS). */
FINLINE void FNAME(exp_float)(const FV x[FK], FV y[FK]) {
    for (int k = 0; k < FK; k++) {
        FV a = F(min_ps)(F(max_ps)(x[k], F(set1_ps)(-87.0f)), F(set1_ps)(88.5f));
        FV t, n, p;
        FNAME(exp_reduce_float)(a, &t, &n, &p);
        y[k] = FSCALE(F(add_ps)(p, F(set1_ps)(1.0f)), t, n);
    }
}

/* exp(a) = s (1 + p) for a in [-87, 0]: s = 2^n and p = r + r^2 q as exp's; tanh_float and gelu_tanh_float
 * build expm1(a) = s p + (s - 1) (and 1 + expm1) from them */
FINLINE void FNAME(exp_parts_float)(FV a, FV *s, FV *p) {
    FV t, n;
    FNAME(exp_reduce_float)(a, &t, &n, p);
    *s = FSCALE(F(set1_ps)(1.0f), t, n);
}

/* tanh(x) = copysign(-u / (u + 2), x), u = expm1(-2|x|) (the reference's formula), u = 2^n (1 + p) - 1 =
 * 2^n p + (2^n - 1) with 2^n and p = r + r^2 q as exp's (-2|x| clamped to -87: u is -1 there as below); near
 * 0 (n = 0) u is p itself, so nothing cancels: the native build's f32 tanh (see FLOAT_ULPS). */
FINLINE void FNAME(tanh_float)(const FV x[FK], FV y[FK]) {
    const FV sign = F(set1_ps)(-0.0f);
    for (int k = 0; k < FK; k++) {
        FV a = F(max_ps)(F(mul_ps)(F(or_ps)(x[k], sign), F(set1_ps)(2.0f)), F(set1_ps)(-87.0f));
        FV s, p;
        FNAME(exp_parts_float)(a, &s, &p);
        FV u = F(fmadd_ps)(s, p, F(sub_ps)(s, F(set1_ps)(1.0f)));
        FV m = F(div_ps)(u, F(add_ps)(u, F(set1_ps)(2.0f))); /* -|tanh x|, or +0 */
        y[k] = F(or_ps)(F(andnot_ps)(sign, m), F(and_ps)(sign, x[k]));
    }
}

FINLINE void FNAME(silu_float)(const FV x[FK], FV y[FK]) {
    FNAME(sigmoid_float)(x, y);
    for (int k = 0; k < FK; k++) y[k] = F(mul_ps)(x[k], y[k]);
}

/* gelu and gelu_deriv's parts: F = 1 + erf(x / sqrt2) and e = exp(-x^2 / 2), for x >= -5.5 (the kernels
 * send the rest to the routine). As the double paths: E = erfc(t) = erfcx(t) exp(-t^2), t = |x| / sqrt2
 * clamped to 4 (beyond, 2 - E rounds to 2), F = E for x < 0 and 2 - E for x >= 0, so nothing cancels.
 * erfcx(t) is a polynomial of degree 9 in s = (t - 3) / (t + 3), fitted on [0, 4] with each f32
 * coefficient rounded before the next was fitted (relative error below 2^-27 there). exp(-x^2 / 2) has
 * x^2 = a + b exactly (one FMA), so its argument is -a / 2 - b / 2 (x clamped to 13: exp(-84.5) is normal,
 * and what it multiplies is then negligible), reduced as exp_float's. */
FINLINE void FNAME(gelu_parts_float)(const FV x[FK], FV cdf2[FK], FV e[FK]) {
    const FV sign = F(set1_ps)(-0.0f), three = F(set1_ps)(3.0f);
    for (int k = 0; k < FK; k++) {
        FV ax = F(min_ps)(F(andnot_ps)(sign, x[k]), F(set1_ps)(13.0f));
        FV t = F(min_ps)(F(mul_ps)(ax, F(set1_ps)(0x1.6a09e6p-1f)), F(set1_ps)(4.0f));
        FV s = F(div_ps)(F(sub_ps)(t, three), F(add_ps)(t, three));
        FV r = F(fmadd_ps)(F(set1_ps)(-0x1.6b1e74p-13f), s, F(set1_ps)(-0x1.c7ef70p-11f));
        r = F(fmadd_ps)(r, s, F(set1_ps)(0x1.22193ep-11f));
        r = F(fmadd_ps)(r, s, F(set1_ps)(0x1.163fc8p-8f));
        r = F(fmadd_ps)(r, s, F(set1_ps)(-0x1.8f6a2ep-6f));
        r = F(fmadd_ps)(r, s, F(set1_ps)(0x1.259106p-4f));
        r = F(fmadd_ps)(r, s, F(set1_ps)(-0x1.336ff0p-3f));
        r = F(fmadd_ps)(r, s, F(set1_ps)(0x1.f6ff0ap-3f));
        r = F(fmadd_ps)(r, s, F(set1_ps)(-0x1.4e102cp-2f));
        r = F(fmadd_ps)(r, s, F(set1_ps)(0x1.6e9828p-3f));
        FV a = F(mul_ps)(ax, ax);
        FV b = F(fmsub_ps)(ax, ax, a);
        FV arg = F(mul_ps)(a, F(set1_ps)(-0.5f));
        FV tn = F(fmadd_ps)(arg, F(set1_ps)(0x1.715476p+0f), F(set1_ps)(SHIFTER_F));
        FV n = F(sub_ps)(tn, F(set1_ps)(SHIFTER_F));
        FV w = F(fnmadd_ps)(n, F(set1_ps)(0x1.62e4p-1f), arg);
        w = F(fnmadd_ps)(n, F(set1_ps)(0x1.7f7d1cp-20f), w);
        w = F(fnmadd_ps)(b, F(set1_ps)(0.5f), w);
        FV q = F(fmadd_ps)(F(set1_ps)(0x1.6a2354p-10f), w, F(set1_ps)(0x1.123a68p-7f));
        q = F(fmadd_ps)(q, w, F(set1_ps)(0x1.5558f4p-5f));
        q = F(fmadd_ps)(q, w, F(set1_ps)(0x1.555490p-3f));
        q = F(fmadd_ps)(q, w, F(set1_ps)(0x1.fffffcp-2f));
        e[k] = FSCALE(F(add_ps)(F(fmadd_ps)(F(mul_ps)(w, w), q, w), F(set1_ps)(1.0f)), tn, n);
        FV E = F(mul_ps)(r, e[k]);
        cdf2[k] = FSELECT_NEG(x[k], E, F(sub_ps)(F(set1_ps)(2.0f), E));
    }
}

/* 0.5 x (1 + erf(x / sqrt2)): 0.5 x exact (the kernels send |x| < 2^-120 to the routine) */
FINLINE void FNAME(gelu_float)(const FV x[FK], FV y[FK]) {
    FV cdf2[FK], e[FK];
    FNAME(gelu_parts_float)(x, cdf2, e);
    for (int k = 0; k < FK; k++) y[k] = F(mul_ps)(F(mul_ps)(F(set1_ps)(0.5f), x[k]), cdf2[k]);
}

/* 0.5 (1 + erf(x / sqrt2)) + x exp(-x^2 / 2) / sqrt(2 pi), x clamped to 13 in the second term (+inf goes to
 * the routine, whose inf * 0 is NaN). Near its zero (x = -0.7518) the two terms cancel: the kernel states
 * an absolute tolerance as well (elementwise.py's FLOAT_TOLERANCE). */
FINLINE void FNAME(gelu_deriv_float)(const FV x[FK], FV y[FK]) {
    FV cdf2[FK], e[FK];
    FNAME(gelu_parts_float)(x, cdf2, e);
    for (int k = 0; k < FK; k++) {
        FV xc = F(min_ps)(x[k], F(set1_ps)(13.0f));
        FV pdf = F(mul_ps)(xc, F(mul_ps)(e[k], F(set1_ps)(0x1.988454p-2f)));
        y[k] = F(fmadd_ps)(F(set1_ps)(0.5f), cdf2[k], pdf);
    }
}

/* 0.5 x (1 + tanh(arg)), arg = sqrt(2/pi) (x + 0.044715 x^3), for x >= -3 (the kernels send the rest to the
 * routine): with u = expm1(-2|arg|) and e = 1 + u as tanh_float's, 1 + tanh(arg) is 2 / (u + 2) for
 * arg >= 0 and 2 e / (u + 2) below, as the double path has it, so nothing cancels */
FINLINE void FNAME(gelu_tanh_float)(const FV x[FK], FV y[FK]) {
    const FV sign = F(set1_ps)(-0.0f), two = F(set1_ps)(2.0f);
    for (int k = 0; k < FK; k++) {
        FV x3 = F(mul_ps)(F(mul_ps)(F(mul_ps)(F(set1_ps)(0.044715f), x[k]), x[k]), x[k]);
        FV arg = F(mul_ps)(F(set1_ps)(0x1.988454p-1f), F(add_ps)(x[k], x3));
        FV a = F(max_ps)(F(mul_ps)(F(or_ps)(arg, sign), two), F(set1_ps)(-87.0f));
        FV s, p;
        FNAME(exp_parts_float)(a, &s, &p);
        FV u = F(fmadd_ps)(s, p, F(sub_ps)(s, F(set1_ps)(1.0f)));
        FV e = F(fmadd_ps)(s, p, s);
        FV twice = FSELECT_NEG(arg, F(mul_ps)(two, e), two);
        FV num = F(mul_ps)(F(mul_ps)(F(set1_ps)(0.5f), x[k]), twice);
        y[k] = F(div_ps)(num, F(add_ps)(u, two));
    }
}

#undef FV
#undef FK
#undef F
#undef FNAME
#undef FINLINE
#undef FSCALE
#undef FSELECT_NEG
