/* attention_flash.c's AVX-512 loops (x86 only; included once, by attention_flash.c, inside its VG_X86
 * guard after the AVX2 loops they mirror): the dot products, weighted sums and exponentials of the
 * forward and the backward, and their four-row forms (fa_dots4_avx512, fa_axpys4_avx512) with which
 * each loaded vector serves four rows. */

/* The AVX-512 forms of the loops above: the same operations on each value (a fused multiply-add,
 * correctly rounded on every path: C's fma in the plain loops), so the same bits; a vector holds eight
 * columns (fa_dots: of the transposed block; fa_axpys, fa_dq_block: of the rows; these for d a multiple
 * of 4). */
#define FA512 __attribute__((target("avx2,avx512f,avx512dq")))
#define FA512F __attribute__((target("avx2,fma,avx512f,avx512dq"))) /* with fused multiply-adds */

/* fa_dots_avx2's sums eight columns a vector, sixteen at a time (the last ones' lanes masked) */
#define FA_FMA8(acc, i, m) acc = _mm512_fmadd_pd(_mm512_set1_pd(x[i]), _mm512_maskz_loadu_pd(m, c + (i) * ld), acc)
FA512F static void fa_dots_avx512(const double *x, const double *cols, int64_t ld, int64_t n, int64_t d,
                                  double *out) {
    int64_t r = 0;
    for (; r + 16 <= n; r += 16) {
        const double *c = cols + r;
        __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        int64_t i = 0;
        for (; i + 4 <= d; i += 4) {
            const __m512d x0 = _mm512_set1_pd(x[i]), x1 = _mm512_set1_pd(x[i + 1]);
            const __m512d x2 = _mm512_set1_pd(x[i + 2]), x3 = _mm512_set1_pd(x[i + 3]);
            a0 = _mm512_fmadd_pd(x0, _mm512_loadu_pd(c + i * ld), a0);
            b0 = _mm512_fmadd_pd(x0, _mm512_loadu_pd(c + i * ld + 8), b0);
            a1 = _mm512_fmadd_pd(x1, _mm512_loadu_pd(c + (i + 1) * ld), a1);
            b1 = _mm512_fmadd_pd(x1, _mm512_loadu_pd(c + (i + 1) * ld + 8), b1);
            a2 = _mm512_fmadd_pd(x2, _mm512_loadu_pd(c + (i + 2) * ld), a2);
            b2 = _mm512_fmadd_pd(x2, _mm512_loadu_pd(c + (i + 2) * ld + 8), b2);
            a3 = _mm512_fmadd_pd(x3, _mm512_loadu_pd(c + (i + 3) * ld), a3);
            b3 = _mm512_fmadd_pd(x3, _mm512_loadu_pd(c + (i + 3) * ld + 8), b3);
        }
        for (int l = 0; i < d; i++, l++) { /* the last d mod 4: sums 0, 1, 2 */
            const __m512d xi = _mm512_set1_pd(x[i]);
            const __m512d ya = _mm512_loadu_pd(c + i * ld), yb = _mm512_loadu_pd(c + i * ld + 8);
            if (l == 0) a0 = _mm512_fmadd_pd(xi, ya, a0), b0 = _mm512_fmadd_pd(xi, yb, b0);
            if (l == 1) a1 = _mm512_fmadd_pd(xi, ya, a1), b1 = _mm512_fmadd_pd(xi, yb, b1);
            if (l == 2) a2 = _mm512_fmadd_pd(xi, ya, a2), b2 = _mm512_fmadd_pd(xi, yb, b2);
        }
        _mm512_storeu_pd(out + r, _mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
        _mm512_storeu_pd(out + r + 8, _mm512_add_pd(_mm512_add_pd(b0, b1), _mm512_add_pd(b2, b3)));
    }
    for (; r < n; r += 8) {
        const __mmask8 m = n - r < 8 ? (__mmask8)((1u << (n - r)) - 1) : (__mmask8)0xff;
        const double *c = cols + r;
        __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        int64_t i = 0;
        for (; i + 4 <= d; i += 4) {
            FA_FMA8(a0, i, m);
            FA_FMA8(a1, i + 1, m);
            FA_FMA8(a2, i + 2, m);
            FA_FMA8(a3, i + 3, m);
        }
        if (i < d) FA_FMA8(a0, i, m);
        if (i + 1 < d) FA_FMA8(a1, i + 1, m);
        if (i + 2 < d) FA_FMA8(a2, i + 2, m);
        _mm512_mask_storeu_pd(out + r, m, _mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3)));
    }
}
#undef FA_FMA8

/* fa_axpys_avx2's sums, 32 then 8 columns at a time */
FA512F static void fa_axpys_avx512(const double *c, const double *rows, int64_t n, int64_t d, double *acc) {
    int64_t e = 0;
    for (; e + 32 <= d; e += 32) {
        __m512d a0 = _mm512_loadu_pd(acc + e), a1 = _mm512_loadu_pd(acc + e + 8);
        __m512d a2 = _mm512_loadu_pd(acc + e + 16), a3 = _mm512_loadu_pd(acc + e + 24);
        for (int64_t r = 0; r < n; r++) {
            const double *y = rows + r * d + e;
            const __m512d cr = _mm512_set1_pd(c[r]);
            a0 = _mm512_fmadd_pd(cr, _mm512_loadu_pd(y), a0);
            a1 = _mm512_fmadd_pd(cr, _mm512_loadu_pd(y + 8), a1);
            a2 = _mm512_fmadd_pd(cr, _mm512_loadu_pd(y + 16), a2);
            a3 = _mm512_fmadd_pd(cr, _mm512_loadu_pd(y + 24), a3);
        }
        _mm512_storeu_pd(acc + e, a0), _mm512_storeu_pd(acc + e + 8, a1);
        _mm512_storeu_pd(acc + e + 16, a2), _mm512_storeu_pd(acc + e + 24, a3);
    }
    for (; e + 8 <= d; e += 8) {
        __m512d a = _mm512_loadu_pd(acc + e);
        for (int64_t r = 0; r < n; r++)
            a = _mm512_fmadd_pd(_mm512_set1_pd(c[r]), _mm512_loadu_pd(rows + r * d + e), a);
        _mm512_storeu_pd(acc + e, a);
    }
    if (e < d) { /* the last four columns */
        __m256d a = _mm256_loadu_pd(acc + e);
        for (int64_t r = 0; r < n; r++)
            a = _mm256_fmadd_pd(_mm256_set1_pd(c[r]), _mm256_loadu_pd(rows + r * d + e), a);
        _mm256_storeu_pd(acc + e, a);
    }
}

/* exp(x) for x <= 0 (-inf gives 0) as attention.h's exp_nonpos_avx2 (x = k ln2 + r, |r| <= ln2/2, exp(r) by
 * its Taylor series to degree 13, 2^k in the exponent, 0 below -708), its reduction and Horner steps
 * fused multiply-adds (half the operations); the AVX2 and AVX-512 forms run the same operations on each
 * lane, so the same bits */
static const double fa_inv_fact[14] = {1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                                       1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
                                       1.0 / 479001600, 1.0 / 6227020800.0};
#define FA_LN2_HI 6.93147180369123816490e-01
#define FA_LN2_LO 1.90821492927058770002e-10
#define FA_MAGIC 6755399441055744.0 /* 2^52 + 2^51: k's integer in the low bits */

__attribute__((target("avx2,fma"), always_inline)) static inline __m256d fa_exp4(__m256d x) {
    const __m256d lo = _mm256_set1_pd(-708.0), magic = _mm256_set1_pd(FA_MAGIC);
    const __m256d xc = _mm256_max_pd(x, lo);
    const __m256d k = _mm256_round_pd(_mm256_mul_pd(xc, _mm256_set1_pd(1.4426950408889634)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(FA_LN2_HI), xc);
    r = _mm256_fnmadd_pd(k, _mm256_set1_pd(FA_LN2_LO), r);
    __m256d p = _mm256_set1_pd(fa_inv_fact[13]);
    for (int i = 12; i >= 0; i--) p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(fa_inv_fact[i]));
    const __m256i ki = _mm256_sub_epi64(_mm256_castpd_si256(_mm256_add_pd(k, magic)), _mm256_castpd_si256(magic));
    const __m256i scale = _mm256_slli_epi64(_mm256_add_epi64(ki, _mm256_set1_epi64x(1023)), 52);
    return _mm256_and_pd(_mm256_mul_pd(p, _mm256_castsi256_pd(scale)), _mm256_cmp_pd(x, lo, _CMP_GE_OQ));
}

FA512F static inline __m512d fa_exp8(__m512d x) {
    const __m512d lo = _mm512_set1_pd(-708.0), magic = _mm512_set1_pd(FA_MAGIC);
    const __m512d xc = _mm512_max_pd(x, lo);
    const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(xc, _mm512_set1_pd(1.4426950408889634)),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(FA_LN2_HI), xc);
    r = _mm512_fnmadd_pd(k, _mm512_set1_pd(FA_LN2_LO), r);
    __m512d p = _mm512_set1_pd(fa_inv_fact[13]);
    for (int i = 12; i >= 0; i--) p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(fa_inv_fact[i]));
    const __m512i ki = _mm512_sub_epi64(_mm512_castpd_si512(_mm512_add_pd(k, magic)), _mm512_castpd_si512(magic));
    const __m512i scale = _mm512_slli_epi64(_mm512_add_epi64(ki, _mm512_set1_epi64(1023)), 52);
    return _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(x, lo, _CMP_GE_OQ), _mm512_mul_pd(p, _mm512_castsi512_pd(scale)));
}

/* x[j] = exp(x[j] - m) for x[j] - m <= 0, none NaN: four lanes a vector (the last ones' masked) */
__attribute__((target("avx2,fma"))) static void fa_exps_avx2(double *x, int64_t n, double m) {
    const __m256d mv = _mm256_set1_pd(m);
    for (int64_t j = 0; j < n; j += 4) {
        const __m256i in = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n - j), _mm256_set_epi64x(3, 2, 1, 0));
        _mm256_maskstore_pd(x + j, in, fa_exp4(_mm256_sub_pd(_mm256_maskload_pd(x + j, in), mv)));
    }
}

/* fa_exps_avx2 eight lanes a vector */
FA512F static void fa_exps_avx512(double *x, int64_t n, double m) {
    const __m512d mv = _mm512_set1_pd(m);
    for (int64_t j = 0; j < n; j += 8) {
        const __mmask8 in = n - j < 8 ? (__mmask8)((1u << (n - j)) - 1) : (__mmask8)0xff;
        _mm512_mask_storeu_pd(x + j, in, fa_exp8(_mm512_sub_pd(_mm512_maskz_loadu_pd(in, x + j), mv)));
    }
}

/* s[j] = s[j] scale for j < n and the largest of them and m, for finite s (fa_row's loop, whose result
 * differs only in the sign of a zero maximum: no exp(x - m) or comparison with m sees it) */
FA512 static double fa_scale_max_avx512(double *s, int64_t n, double scale, double m) {
    const __m512d sc = _mm512_set1_pd(scale);
    __m512d top = _mm512_set1_pd(m);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m512d x = _mm512_mul_pd(_mm512_loadu_pd(s + j), sc);
        _mm512_storeu_pd(s + j, x);
        top = _mm512_max_pd(top, x);
    }
    m = _mm512_reduce_max_pd(top);
    for (; j < n; j++) {
        s[j] = s[j] * scale;
        if (s[j] > m) m = s[j];
    }
    return m;
}

/* the lanes of a vector of eight from r on, of n */
static inline __mmask8 fa_mask8(int64_t left) {
    return left >= 8 ? (__mmask8)0xff : left <= 0 ? (__mmask8)0 : (__mmask8)((1u << left) - 1);
}

/* fa_dots_avx512 of four vectors x + q xs (q < 4) into out + q os, for 16 columns c (lanes m0, m1; full:
 * all of them, loaded whole): each loaded column serves the four. Each partial sum a_l (i = l mod 4, in i
 * order, from +0) and (a0 + a1) + (a2 + a3) as fa_dots_avx512 computes them, so the same bits; the partials
 * are taken two at a time (16 keys of 4 rows: 8 vectors each), the first pair's sums kept while the
 * second's run. */
FA512F __attribute__((always_inline)) static inline void fa_dots4_16(const double *x, int64_t xs, const double *c,
                                                                    int64_t ld, int64_t d, double *out, int64_t os,
                                                                    __mmask8 m0, __mmask8 m1, int full) {
#define FA_COLUMN(at, m) (full ? _mm512_loadu_pd(at) : _mm512_maskz_loadu_pd(m, at))
    __m512d h[8];
    for (int pair = 0; pair < 4; pair += 2) {
        __m512d a[8], b[8];
        for (int k = 0; k < 8; k++) a[k] = b[k] = _mm512_setzero_pd();
        for (int64_t i = pair; i < d; i += 4) {
            const __m512d y0 = FA_COLUMN(c + i * ld, m0), y1 = FA_COLUMN(c + i * ld + 8, m1);
            for (int q = 0; q < 4; q++) {
                const __m512d xq = _mm512_set1_pd(x[q * xs + i]);
                a[2 * q] = _mm512_fmadd_pd(xq, y0, a[2 * q]);
                a[2 * q + 1] = _mm512_fmadd_pd(xq, y1, a[2 * q + 1]);
            }
            if (i + 1 >= d) break;
            const __m512d z0 = FA_COLUMN(c + (i + 1) * ld, m0), z1 = FA_COLUMN(c + (i + 1) * ld + 8, m1);
            for (int q = 0; q < 4; q++) {
                const __m512d xq = _mm512_set1_pd(x[q * xs + i + 1]);
                b[2 * q] = _mm512_fmadd_pd(xq, z0, b[2 * q]);
                b[2 * q + 1] = _mm512_fmadd_pd(xq, z1, b[2 * q + 1]);
            }
        }
        for (int k = 0; k < 8; k++) {
            const __m512d ab = _mm512_add_pd(a[k], b[k]);
            if (pair == 0) {
                h[k] = ab;
                continue;
            }
            double *at = out + (k / 2) * os + (k % 2) * 8;
            if (full)
                _mm512_storeu_pd(at, _mm512_add_pd(h[k], ab));
            else
                _mm512_mask_storeu_pd(at, k % 2 ? m1 : m0, _mm512_add_pd(h[k], ab));
        }
    }
#undef FA_COLUMN
}

/* fa_dots4_16 over n columns: whole blocks of 16 loaded unmasked, the common head sizes' loops unrolled */
FA512F static void fa_dots4_avx512(const double *x, int64_t xs, const double *cols, int64_t ld, int64_t n,
                                   int64_t d, double *out, int64_t os) {
    for (int64_t r = 0; r < n; r += 16) {
        const __mmask8 m0 = fa_mask8(n - r), m1 = fa_mask8(n - r - 8);
        if (m1 != 0xff)
            fa_dots4_16(x, xs, cols + r, ld, d, out + r, os, m0, m1, 0);
        else if (d == 32)
            fa_dots4_16(x, xs, cols + r, ld, 32, out + r, os, m0, m1, 1);
        else if (d == 64)
            fa_dots4_16(x, xs, cols + r, ld, 64, out + r, os, m0, m1, 1);
        else
            fa_dots4_16(x, xs, cols + r, ld, d, out + r, os, m0, m1, 1);
    }
}

/* fa_axpys_avx512 for four coefficient rows c + q cs and accumulators acc + q as (q < 4), d a multiple of
 * 4: each loaded row serves the four, each sum in r order as fa_axpys_avx512's, so the same bits. With
 * sums (else NULL), also sums[q] = sums[q] + c[q cs + r] in r order, in the first columns' loop (the
 * forward's sums of weights: four short chains of additions beside the multiply-adds, whose latency
 * they hide) */
FA512F static void fa_axpys4_avx512(const double *c, int64_t cs, const double *rows, int64_t n, int64_t d,
                                    double *acc, int64_t as, double *sums) {
    double l0 = sums ? sums[0] : 0.0, l1 = sums ? sums[1] : 0.0, l2 = sums ? sums[2] : 0.0;
    double l3 = sums ? sums[3] : 0.0;
    int sum = sums != NULL; /* in the first loop that runs */
#define FA_SUMS(r)                                                                                          \
    if (sum) l0 = l0 + c[r], l1 = l1 + c[cs + (r)], l2 = l2 + c[2 * cs + (r)], l3 = l3 + c[3 * cs + (r)]
    int64_t e = 0;
    for (; e + 32 <= d; e += 32, sum = 0) {
        __m512d a[16];
        for (int k = 0; k < 16; k++) a[k] = _mm512_loadu_pd(acc + (k / 4) * as + e + (k % 4) * 8);
        for (int64_t r = 0; r < n; r++) {
            const double *y = rows + r * d + e;
            const __m512d y0 = _mm512_loadu_pd(y), y1 = _mm512_loadu_pd(y + 8);
            const __m512d y2 = _mm512_loadu_pd(y + 16), y3 = _mm512_loadu_pd(y + 24);
            for (int q = 0; q < 4; q++) {
                const __m512d cq = _mm512_set1_pd(c[q * cs + r]);
                a[4 * q] = _mm512_fmadd_pd(cq, y0, a[4 * q]);
                a[4 * q + 1] = _mm512_fmadd_pd(cq, y1, a[4 * q + 1]);
                a[4 * q + 2] = _mm512_fmadd_pd(cq, y2, a[4 * q + 2]);
                a[4 * q + 3] = _mm512_fmadd_pd(cq, y3, a[4 * q + 3]);
            }
            FA_SUMS(r);
        }
        for (int k = 0; k < 16; k++) _mm512_storeu_pd(acc + (k / 4) * as + e + (k % 4) * 8, a[k]);
    }
    for (; e + 8 <= d; e += 8, sum = 0) {
        __m512d a[4];
        for (int q = 0; q < 4; q++) a[q] = _mm512_loadu_pd(acc + q * as + e);
        for (int64_t r = 0; r < n; r++) {
            const __m512d y = _mm512_loadu_pd(rows + r * d + e);
            for (int q = 0; q < 4; q++) a[q] = _mm512_fmadd_pd(_mm512_set1_pd(c[q * cs + r]), y, a[q]);
            FA_SUMS(r);
        }
        for (int q = 0; q < 4; q++) _mm512_storeu_pd(acc + q * as + e, a[q]);
    }
    if (e < d) { /* the last four columns */
        __m256d a[4];
        for (int q = 0; q < 4; q++) a[q] = _mm256_loadu_pd(acc + q * as + e);
        for (int64_t r = 0; r < n; r++) {
            const __m256d y = _mm256_loadu_pd(rows + r * d + e);
            for (int q = 0; q < 4; q++) a[q] = _mm256_fmadd_pd(_mm256_set1_pd(c[q * cs + r]), y, a[q]);
            FA_SUMS(r);
        }
        for (int q = 0; q < 4; q++) _mm256_storeu_pd(acc + q * as + e, a[q]);
    }
#undef FA_SUMS
    if (sums) sums[0] = l0, sums[1] = l1, sums[2] = l2, sums[3] = l3;
}

/* whether x[j] - m <= 0 for every j < n (false for a NaN) */
FA512 static int fa_nonpos_avx512(const double *x, int64_t n, double m) {
    const __m512d mv = _mm512_set1_pd(m);
    for (int64_t j = 0; j < n; j += 8) {
        const __mmask8 in = fa_mask8(n - j);
        const __m512d y = _mm512_sub_pd(_mm512_maskz_loadu_pd(in, x + j), mv);
        if (_mm512_mask_cmp_pd_mask(in, y, _mm512_setzero_pd(), _CMP_LE_OQ) != in) return 0;
    }
    return 1;
}
