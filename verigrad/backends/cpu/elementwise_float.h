/* exp, tanh, sigmoid and silu in f32 arithmetic: the native build's vector path (elementwise.c's "float
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

/* exp(-|x|) (at least exp(-87), a normal float) = 2^n (1 + r + r^2 q(r)), n = round(-|x| / ln2),
 * r = -|x| - n ln2 in two exact steps (n ln2_hi is exact: ln2_hi has 16 bits, |n| <= 126 has 7), q of
 * degree 4 (1 + r + r^2 q within 2^-28 of exp(r) on |r| <= ln2/2); then 1 / (1 + e) for x >= 0 and
 * e / (1 + e) for x < 0, so nothing cancels. Each f32 operation rounds once; the result is within 3
 * ulps of the reference (measured on every f32 input: elementwise.c). */
FINLINE void FNAME(sigmoid_float)(const FV x[FK], FV y[FK]) {
    const FV one = F(set1_ps)(1.0f);
    for (int k = 0; k < FK; k++) {
        FV a = F(max_ps)(F(or_ps)(x[k], F(set1_ps)(-0.0f)), F(set1_ps)(-87.0f));
        FV t = F(fmadd_ps)(a, F(set1_ps)(0x1.715476p+0f), F(set1_ps)(SHIFTER_F));
        FV n = F(sub_ps)(t, F(set1_ps)(SHIFTER_F));
        FV r = F(fnmadd_ps)(n, F(set1_ps)(0x1.62e4p-1f), a);
        r = F(fnmadd_ps)(n, F(set1_ps)(0x1.7f7d1cp-20f), r);
        FV q = F(fmadd_ps)(F(set1_ps)(0x1.6a2354p-10f), r, F(set1_ps)(0x1.123a68p-7f));
        q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.5558f4p-5f));
        q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.555490p-3f));
        q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.fffffcp-2f));
        FV e = FSCALE(F(add_ps)(F(fmadd_ps)(F(mul_ps)(r, r), q, r), one), t, n);
        y[k] = F(div_ps)(FSELECT_NEG(x[k], e, one), F(add_ps)(one, e));
    }
}

/* exp(x) for x in [-87, 88.5] (normal results, no overflow: the kernels send the rest to the op's routine)
 * = 2^n (1 + r + r^2 q(r)), n = round(x / ln2) (|n| <= 128: 8 bits, so n ln2_hi is exact), r and q as
 * sigmoid's. Each f32 operation rounds once: the native build's f32 exp (see FLOAT_ULPS). */
FINLINE void FNAME(exp_float)(const FV x[FK], FV y[FK]) {
    for (int k = 0; k < FK; k++) {
        FV a = F(min_ps)(F(max_ps)(x[k], F(set1_ps)(-87.0f)), F(set1_ps)(88.5f));
        FV t = F(fmadd_ps)(a, F(set1_ps)(0x1.715476p+0f), F(set1_ps)(SHIFTER_F));
        FV n = F(sub_ps)(t, F(set1_ps)(SHIFTER_F));
        FV r = F(fnmadd_ps)(n, F(set1_ps)(0x1.62e4p-1f), a);
        r = F(fnmadd_ps)(n, F(set1_ps)(0x1.7f7d1cp-20f), r);
        FV q = F(fmadd_ps)(F(set1_ps)(0x1.6a2354p-10f), r, F(set1_ps)(0x1.123a68p-7f));
        q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.5558f4p-5f));
        q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.555490p-3f));
        q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.fffffcp-2f));
        y[k] = FSCALE(F(add_ps)(F(fmadd_ps)(F(mul_ps)(r, r), q, r), F(set1_ps)(1.0f)), t, n);
    }
}

/* tanh(x) = copysign(-u / (u + 2), x), u = expm1(-2|x|) (the reference's formula), u = 2^n (1 + p) - 1 =
 * 2^n p + (2^n - 1) with 2^n and p = r + r^2 q as exp's (-2|x| clamped to -87: u is -1 there as below); near
 * 0 (n = 0) u is p itself, so nothing cancels: the native build's f32 tanh (see FLOAT_ULPS). */
FINLINE void FNAME(tanh_float)(const FV x[FK], FV y[FK]) {
    const FV sign = F(set1_ps)(-0.0f);
    for (int k = 0; k < FK; k++) {
        FV a = F(max_ps)(F(mul_ps)(F(or_ps)(x[k], sign), F(set1_ps)(2.0f)), F(set1_ps)(-87.0f));
        FV t = F(fmadd_ps)(a, F(set1_ps)(0x1.715476p+0f), F(set1_ps)(SHIFTER_F));
        FV n = F(sub_ps)(t, F(set1_ps)(SHIFTER_F));
        FV r = F(fnmadd_ps)(n, F(set1_ps)(0x1.62e4p-1f), a);
        r = F(fnmadd_ps)(n, F(set1_ps)(0x1.7f7d1cp-20f), r);
        FV q = F(fmadd_ps)(F(set1_ps)(0x1.6a2354p-10f), r, F(set1_ps)(0x1.123a68p-7f));
        q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.5558f4p-5f));
        q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.555490p-3f));
        q = F(fmadd_ps)(q, r, F(set1_ps)(0x1.fffffcp-2f));
        FV p = F(fmadd_ps)(F(mul_ps)(r, r), q, r);
        FV s = FSCALE(F(set1_ps)(1.0f), t, n);
        FV u = F(fmadd_ps)(s, p, F(sub_ps)(s, F(set1_ps)(1.0f)));
        FV m = F(div_ps)(u, F(add_ps)(u, F(set1_ps)(2.0f))); /* -|tanh x|, or +0 */
        y[k] = F(or_ps)(F(andnot_ps)(sign, m), F(and_ps)(sign, x[k]));
    }
}

FINLINE void FNAME(silu_float)(const FV x[FK], FV y[FK]) {
    FNAME(sigmoid_float)(x, y);
    for (int k = 0; k < FK; k++) y[k] = F(mul_ps)(x[k], y[k]);
}

#undef FV
#undef FK
#undef F
#undef FNAME
#undef FINLINE
#undef FSCALE
#undef FSELECT_NEG
