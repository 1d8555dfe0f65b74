/* attention_flash.c's AVX2 loops (x86 only; included once, by attention_flash.c, inside its VG_X86 guard
 * before the AVX-512 loops, which mirror them): the dot products over transposed blocks, the weighted sums
 * and dq's updates, one row at a time (fa_dots_avx2, fa_axpys_avx2, fa_dq_block_avx2) and two or four
 * (fa_dots2_avx2, fa_axpys4_avx2, fa_dq4_avx2: each loaded vector serves several rows), and the
 * element-wise steps; each sum in the plain loops' order, so the same bits. */

/* fa_dots_plain four columns a vector (the last ones' lanes masked) */
__attribute__((target("avx2,fma"))) static void fa_dots_avx2(const double *x, const double *cols, int64_t ld,
                                                         int64_t n, int64_t d, double *out) {
    for (int64_t r = 0; r < n; r += 4) {
        const __m256i m = _mm256_cmpgt_epi64(_mm256_set1_epi64x(n - r), _mm256_set_epi64x(3, 2, 1, 0));
        const double *c = cols + r;
        __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
        int64_t i = 0;
        for (; i + 4 <= d; i += 4) {
            a0 = _mm256_fmadd_pd(_mm256_broadcast_sd(x + i), _mm256_maskload_pd(c + i * ld, m), a0);
            a1 = _mm256_fmadd_pd(_mm256_broadcast_sd(x + i + 1), _mm256_maskload_pd(c + (i + 1) * ld, m), a1);
            a2 = _mm256_fmadd_pd(_mm256_broadcast_sd(x + i + 2), _mm256_maskload_pd(c + (i + 2) * ld, m), a2);
            a3 = _mm256_fmadd_pd(_mm256_broadcast_sd(x + i + 3), _mm256_maskload_pd(c + (i + 3) * ld, m), a3);
        }
        if (i < d) a0 = _mm256_fmadd_pd(_mm256_broadcast_sd(x + i), _mm256_maskload_pd(c + i * ld, m), a0);
        if (i + 1 < d)
            a1 = _mm256_fmadd_pd(_mm256_broadcast_sd(x + i + 1), _mm256_maskload_pd(c + (i + 1) * ld, m), a1);
        if (i + 2 < d)
            a2 = _mm256_fmadd_pd(_mm256_broadcast_sd(x + i + 2), _mm256_maskload_pd(c + (i + 2) * ld, m), a2);
        _mm256_maskstore_pd(out + r, m, _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    }
}

/* fa_axpys for d a multiple of 4 (the same bits): 16 columns at a time held in registers over all r */
__attribute__((target("avx2,fma"))) static void fa_axpys_avx2(const double *c, const double *rows, int64_t n,
                                                          int64_t d, double *acc) {
    int64_t e = 0;
    for (; e + 16 <= d; e += 16) {
        __m256d a0 = _mm256_loadu_pd(acc + e), a1 = _mm256_loadu_pd(acc + e + 4);
        __m256d a2 = _mm256_loadu_pd(acc + e + 8), a3 = _mm256_loadu_pd(acc + e + 12);
        for (int64_t r = 0; r < n; r++) {
            const double *y = rows + r * d + e;
            const __m256d cr = _mm256_broadcast_sd(c + r);
            a0 = _mm256_fmadd_pd(cr, _mm256_loadu_pd(y), a0);
            a1 = _mm256_fmadd_pd(cr, _mm256_loadu_pd(y + 4), a1);
            a2 = _mm256_fmadd_pd(cr, _mm256_loadu_pd(y + 8), a2);
            a3 = _mm256_fmadd_pd(cr, _mm256_loadu_pd(y + 12), a3);
        }
        _mm256_storeu_pd(acc + e, a0), _mm256_storeu_pd(acc + e + 4, a1);
        _mm256_storeu_pd(acc + e + 8, a2), _mm256_storeu_pd(acc + e + 12, a3);
    }
    for (; e < d; e += 4) {
        __m256d a = _mm256_loadu_pd(acc + e);
        for (int64_t r = 0; r < n; r++)
            a = _mm256_fmadd_pd(_mm256_broadcast_sd(c + r), _mm256_loadu_pd(rows + r * d + e), a);
        _mm256_storeu_pd(acc + e, a);
    }
}

/* fa_dots_avx2 for two vectors x, x + xs into out, out + os, 8 columns c (lanes m0, m1; full: all of
 * them, loaded whole): each loaded column serves both rows, each broadcast both vectors of columns. Each
 * partial sum a_l (i = l mod 4, in i order, from +0) and (a0 + a1) + (a2 + a3) as fa_dots_avx2 computes
 * them, so the same bits; the partials are taken two at a time (16 registers), the first pair's sums kept
 * while the second's run. */
__attribute__((target("avx2,fma"), always_inline)) static inline void fa_dots2_8(const double *x, int64_t xs,
                                                                             const double *c, int64_t ld,
                                                                             int64_t d, double *out, int64_t os,
                                                                             __m256i m0, __m256i m1, int full) {
#define FA_COLUMN(at, m) (full ? _mm256_loadu_pd(at) : _mm256_maskload_pd(at, m))
    __m256d h[4];
    for (int pair = 0; pair < 4; pair += 2) {
        __m256d a[4], b[4];
        for (int k = 0; k < 4; k++) a[k] = b[k] = _mm256_setzero_pd();
        for (int64_t i = pair; i < d; i += 4) {
            const __m256d y0 = FA_COLUMN(c + i * ld, m0), y1 = FA_COLUMN(c + i * ld + 4, m1);
            for (int q = 0; q < 2; q++) {
                const __m256d xq = _mm256_broadcast_sd(x + q * xs + i);
                a[2 * q] = _mm256_fmadd_pd(xq, y0, a[2 * q]);
                a[2 * q + 1] = _mm256_fmadd_pd(xq, y1, a[2 * q + 1]);
            }
            if (i + 1 >= d) break;
            const __m256d z0 = FA_COLUMN(c + (i + 1) * ld, m0), z1 = FA_COLUMN(c + (i + 1) * ld + 4, m1);
            for (int q = 0; q < 2; q++) {
                const __m256d xq = _mm256_broadcast_sd(x + q * xs + i + 1);
                b[2 * q] = _mm256_fmadd_pd(xq, z0, b[2 * q]);
                b[2 * q + 1] = _mm256_fmadd_pd(xq, z1, b[2 * q + 1]);
            }
        }
        for (int k = 0; k < 4; k++) {
            const __m256d ab = _mm256_add_pd(a[k], b[k]);
            if (pair == 0) {
                h[k] = ab;
                continue;
            }
            double *at = out + (k / 2) * os + (k % 2) * 4;
            if (full)
                _mm256_storeu_pd(at, _mm256_add_pd(h[k], ab));
            else
                _mm256_maskstore_pd(at, k % 2 ? m1 : m0, _mm256_add_pd(h[k], ab));
        }
    }
#undef FA_COLUMN
}

/* the lanes of a vector of four from r on, of n (as a mask for maskload) */
__attribute__((target("avx2"), always_inline)) static inline __m256i fa_mask4(int64_t left) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(left), _mm256_set_epi64x(3, 2, 1, 0));
}

/* fa_dots2_8 over n columns: whole blocks of 8 loaded unmasked, the common head sizes' loops unrolled */
__attribute__((target("avx2,fma"))) static void fa_dots2_avx2(const double *x, int64_t xs, const double *cols,
                                                          int64_t ld, int64_t n, int64_t d, double *out,
                                                          int64_t os) {
    const __m256i all = _mm256_set1_epi64x(-1);
    int64_t r = 0;
    for (; r + 8 <= n; r += 8)
        if (d == 32)
            fa_dots2_8(x, xs, cols + r, ld, 32, out + r, os, all, all, 1);
        else if (d == 64)
            fa_dots2_8(x, xs, cols + r, ld, 64, out + r, os, all, all, 1);
        else
            fa_dots2_8(x, xs, cols + r, ld, d, out + r, os, all, all, 1);
    if (r < n) fa_dots2_8(x, xs, cols + r, ld, d, out + r, os, fa_mask4(n - r), fa_mask4(n - r - 4), 0);
}

/* fa_axpys_avx2 for four coefficient rows c + q cs and accumulators acc + q as (q < 4), d a multiple of 4:
 * 8 columns of the four rows in registers, each loaded row serving the four; each sum in r order as
 * fa_axpys_avx2's, so the same bits */
__attribute__((target("avx2,fma"))) static void fa_axpys4_avx2(const double *c, int64_t cs, const double *rows,
                                                           int64_t n, int64_t d, double *acc, int64_t as) {
    int64_t e = 0;
    for (; e + 8 <= d; e += 8) {
        __m256d a[8];
        for (int k = 0; k < 8; k++) a[k] = _mm256_loadu_pd(acc + (k / 2) * as + e + (k % 2) * 4);
        for (int64_t r = 0; r < n; r++) {
            const double *y = rows + r * d + e;
            const __m256d y0 = _mm256_loadu_pd(y), y1 = _mm256_loadu_pd(y + 4);
            for (int q = 0; q < 4; q++) {
                const __m256d cq = _mm256_broadcast_sd(c + q * cs + r);
                a[2 * q] = _mm256_fmadd_pd(cq, y0, a[2 * q]);
                a[2 * q + 1] = _mm256_fmadd_pd(cq, y1, a[2 * q + 1]);
            }
        }
        for (int k = 0; k < 8; k++) _mm256_storeu_pd(acc + (k / 2) * as + e + (k % 2) * 4, a[k]);
    }
    if (e < d) { /* the last four columns */
        __m256d a[4];
        for (int q = 0; q < 4; q++) a[q] = _mm256_loadu_pd(acc + q * as + e);
        for (int64_t r = 0; r < n; r++) {
            const __m256d y = _mm256_loadu_pd(rows + r * d + e);
            for (int q = 0; q < 4; q++) a[q] = _mm256_fmadd_pd(_mm256_broadcast_sd(c + q * cs + r), y, a[q]);
        }
        for (int q = 0; q < 4; q++) _mm256_storeu_pd(acc + q * as + e, a[q]);
    }
}

/* The element-wise steps four at a time: the same operations on each element as the plain loops (and the
 * AVX-512 ones), so the same bits */
#define FA256 __attribute__((target("avx2")))

/* fa_load for es 1 (the conversion is exact: the same values) */
FA256 static int fa_load_avx2(const float *src, int64_t rs, int64_t n, int64_t d, double *dst) {
    __m256d bad = _mm256_setzero_pd();
    int ok = 1;
    for (int64_t r = 0; r < n; r++) {
        const float *x = src + r * rs;
        double *y = dst + r * d;
        if (r + FA_AHEAD < n)
            for (int64_t e = 0; e < d; e += 16) _mm_prefetch((const char *)(x + FA_AHEAD * rs + e), _MM_HINT_T0);
        int64_t e = 0;
        for (; e + 4 <= d; e += 4) {
            const __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(x + e));
            _mm256_storeu_pd(y + e, v);
            bad = _mm256_or_pd(bad, _mm256_cmp_pd(_mm256_sub_pd(v, v), _mm256_setzero_pd(), _CMP_NEQ_UQ));
        }
        for (; e < d; e++) {
            const double v = (double)x[e];
            y[e] = v;
            ok &= v - v == 0.0;
        }
    }
    return ok && _mm256_movemask_pd(bad) == 0;
}

/* dst[e] = (float)(src[e] / div) for e < n (div 1: the conversion alone) */
FA256 static void fa_store_avx2(const double *src, int64_t n, double div, float *dst) {
    const __m256d dv = _mm256_set1_pd(div);
    int64_t e = 0;
    if (div == 1.0)
        for (; e + 4 <= n; e += 4) _mm_storeu_ps(dst + e, _mm256_cvtpd_ps(_mm256_loadu_pd(src + e)));
    else
        for (; e + 4 <= n; e += 4) _mm_storeu_ps(dst + e, _mm256_cvtpd_ps(_mm256_div_pd(_mm256_loadu_pd(src + e), dv)));
    for (; e < n; e++) dst[e] = (float)(src[e] / div);
}

/* ds[i] = p[i] (ds[i] - delta[i]) scale */
FA256 static void fa_ds_avx2(double *ds, const double *p, int64_t n, const double *delta, double scale) {
    const __m256d sc = _mm256_set1_pd(scale);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m256d d = _mm256_sub_pd(_mm256_loadu_pd(ds + i), _mm256_loadu_pd(delta + i));
        _mm256_storeu_pd(ds + i, _mm256_mul_pd(_mm256_mul_pd(_mm256_loadu_pd(p + i), d), sc));
    }
    for (; i < n; i++) ds[i] = p[i] * (ds[i] - delta[i]) * scale;
}

/* s[j] = s[j] scale for j < n and the largest of them and m, for finite s (as fa_scale_max_avx512) */
FA256 static double fa_scale_max_avx2(double *s, int64_t n, double scale, double m) {
    const __m256d sc = _mm256_set1_pd(scale);
    __m256d top = _mm256_set1_pd(m);
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const __m256d x = _mm256_mul_pd(_mm256_loadu_pd(s + j), sc);
        _mm256_storeu_pd(s + j, x);
        top = _mm256_max_pd(top, x);
    }
    double l[4];
    _mm256_storeu_pd(l, top);
    m = l[0] > l[1] ? l[0] : l[1];
    m = m > l[2] ? m : l[2];
    m = m > l[3] ? m : l[3];
    for (; j < n; j++) {
        s[j] = s[j] * scale;
        if (s[j] > m) m = s[j];
    }
    return m;
}

/* fa_dq_block for d a multiple of 4 (the same bits): 16 columns of a row held in registers */
__attribute__((target("avx2,fma"))) static void fa_dq_block_avx2(const double *ds, int64_t js, const int64_t *first,
                                                             int64_t kb, const double *k, int64_t lo, int64_t n,
                                                             int64_t d, double *dq) {
    for (int64_t i = lo; i < n; i++) {
        double *row = dq + i * d;
        int64_t e = 0;
        for (; e + 16 <= d; e += 16) {
            __m256d a0 = _mm256_loadu_pd(row + e), a1 = _mm256_loadu_pd(row + e + 4);
            __m256d a2 = _mm256_loadu_pd(row + e + 8), a3 = _mm256_loadu_pd(row + e + 12);
            for (int64_t j = 0; j < kb; j++) {
                if (i < first[j]) continue;
                const __m256d c = _mm256_broadcast_sd(ds + j * js + i);
                const double *y = k + j * d + e;
                a0 = _mm256_fmadd_pd(c, _mm256_loadu_pd(y), a0);
                a1 = _mm256_fmadd_pd(c, _mm256_loadu_pd(y + 4), a1);
                a2 = _mm256_fmadd_pd(c, _mm256_loadu_pd(y + 8), a2);
                a3 = _mm256_fmadd_pd(c, _mm256_loadu_pd(y + 12), a3);
            }
            _mm256_storeu_pd(row + e, a0), _mm256_storeu_pd(row + e + 4, a1);
            _mm256_storeu_pd(row + e + 8, a2), _mm256_storeu_pd(row + e + 12, a3);
        }
        for (; e < d; e += 4) {
            __m256d a = _mm256_loadu_pd(row + e);
            for (int64_t j = 0; j < kb; j++)
                if (i >= first[j])
                    a = _mm256_fmadd_pd(_mm256_broadcast_sd(ds + j * js + i), _mm256_loadu_pd(k + j * d + e), a);
            _mm256_storeu_pd(row + e, a);
        }
    }
}

/* fa_dq_block_avx2 for four rows i..i + 3 at a time where d is a multiple of 8 and every key of the block
 * is seen by all four (i >= first[kb - 1]: first[] grows with j), the rest a row at a time: 8 columns of
 * the four rows in registers, each loaded key vector serving four rows; each row's sums in j order, so
 * the same bits */
__attribute__((target("avx2,fma"))) static void fa_dq4_avx2(const double *ds, int64_t js, const int64_t *first,
                                                        int64_t kb, const double *k, int64_t lo, int64_t n,
                                                        int64_t d, double *dq) {
    int64_t i = lo;
    const int64_t all = first[kb - 1] > lo ? first[kb - 1] : lo; /* the first row that sees every key */
    if (all > i || d % 8) {
        const int64_t to = d % 8 ? n : all < n ? all : n;
        fa_dq_block_avx2(ds, js, first, kb, k, i, to, d, dq);
        i = to;
    }
    for (; i + 4 <= n; i += 4)
        for (int64_t e = 0; e < d; e += 8) {
            double *row = dq + i * d + e;
            __m256d a[8];
            for (int v = 0; v < 8; v++) a[v] = _mm256_loadu_pd(row + (v / 2) * d + (v % 2) * 4);
            for (int64_t j = 0; j < kb; j++) {
                const double *y = k + j * d + e, *c = ds + j * js + i;
                const __m256d y0 = _mm256_loadu_pd(y), y1 = _mm256_loadu_pd(y + 4);
                for (int q = 0; q < 4; q++) {
                    const __m256d cq = _mm256_broadcast_sd(c + q);
                    a[2 * q] = _mm256_fmadd_pd(cq, y0, a[2 * q]);
                    a[2 * q + 1] = _mm256_fmadd_pd(cq, y1, a[2 * q + 1]);
                }
            }
            for (int v = 0; v < 8; v++) _mm256_storeu_pd(row + (v / 2) * d + (v % 2) * 4, a[v]);
        }
    if (i < n) fa_dq_block_avx2(ds, js, first, kb, k, i, n, d, dq);
}
