/* attention_lse and attention_grad (ops/composite/attention.py) for f32: causal attention of the last T of S
 * positions, forward and the gradients of q, k and v, flash-attention style. In double as the references:
 * a unit of work is one (batch, key/value head), whose keys, values, queries (and output gradients) are
 * converted to double once, the operands the dot products run along also transposed (the keys for the
 * forward, the queries and output gradients for the backward: vector lanes are keys or queries); no
 * [T, S] matrix is formed. Forward: each query row visits its visible keys
 * in blocks of FA_BLOCK with an online softmax (running max m and sum l, the accumulator rescaled when m
 * grows; a block is taken by every row that sees it before the next, so its keys and values stay in
 * cache); it writes the output and the row's log-sum-exp lse = m + log(l) (rounded to f32 as the
 * output). The backward runs no forward pass: it reads the forward's output o_i and lse_i, so
 * p_ij = exp(s_ij - lse_i) and delta_i = g_i . o_i - glse_i (glse_i: the gradient of lse_i), and takes
 * the keys in blocks of FA_KEYS, each key over the queries that see it (FA_QUERIES of them at a time for
 * every key of the block, so that they stay in cache): ds_ij = p_ij (g_i . v_j - delta_i),
 * dv_j = sum_i p_ij g_i and dk_j = scale sum_i ds_ij q_i in i order, then dq_i += scale ds_ij k_j for the
 * block's keys in j order (dq in double, a row read and written once a block). Each output is computed by
 * one thread in one order (threads take units), so every thread count gives the same bits. The three
 * gradients come from one pass (attention_grad packs them per unit). The forward takes four query rows a
 * block and the backward four keys a group of queries, so that each loaded key, value, query or
 * output-gradient vector serves several dot products or weighted sums (fa_dots4, fa_axpys4: four rows on
 * AVX-512, two or four on AVX2): each sum in its own order as one row or key alone, so the same bits as
 * the plain loops. The AVX2 loops are in attention_flash_avx2.h, the AVX-512 ones in
 * attention_flash_avx512.h. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "attention.h"

#define FA_BLOCK 64 /* keys a forward row takes at a time */
#define FA_KEYS 16  /* keys the backward takes at a time (dq's rows updated once per block) */
#define FA_QUERIES 32 /* queries the backward takes at a time for each key of a block (at most) */
#define FA_AHEAD 8 /* rows fa_load fetches ahead */

typedef struct {
    int64_t b, h, kv, t, s, d, dv;
    const float *q, *k, *v, *g, *o; /* g and o (the forward's result): [B, H, T, Dv + 1], the backward's */
    const int64_t *qs, *ks, *vs, *gs, *os; /* element strides */
    double scale;
    int which; /* 0 forward, 1 the gradients */
    float *out; /* contiguous: [B, H, T, Dv + 1] (forward: output, lse); the gradients
                 * [B, KV, G T D + S D + S Dv]: per unit dq of its G heads [G, T, D], dk [S, D], dv [S, Dv] */
    volatile int failed, nonfinite;
} fa_job;

/* Whether the AVX-512 loops below may run (where the CPU has them); vg_attention_avx512(0) turns them off
 * for the tests, -1 only asks. Returns the setting before the call. vg_attention_avx2 does the same for
 * the AVX2 loops, and with them the AVX-512 ones (off: the plain loops alone). */
static int fa_avx512_enabled = 1, fa_avx2_enabled = 1;
int vg_attention_avx512(int flag) {
    const int was = fa_avx512_enabled;
    if (flag >= 0) fa_avx512_enabled = flag;
    return was;
}
int vg_attention_avx2(int flag) {
    const int was = fa_avx2_enabled;
    if (flag >= 0) fa_avx2_enabled = flag;
    return was;
}
#if VG_X86
static inline int fa_avx2(void) { return fa_avx2_enabled && vg_has_avx2_fma(); }
static inline int fa_avx512(void) { return fa_avx512_enabled && fa_avx2() && vg_has_avx512(); }
#endif

/* out[r] = x . col r for r < n, col r = cols[i ld + r] (i < d: a transposed block, so that vector lanes
 * are the n columns): four partial sums of fused multiply-adds, a_l over i = l mod 4 in i order, then
 * (a0 + a1) + (a2 + a3); each lane one column's, so every path (and any n, d) gives the same bits. The dot
 * products, the weighted sums (fa_axpys) and dq's updates (fa_dq) fuse each multiply and add on every path
 * (the vector ones need FMA, else the plain loops run, with C's fma: the same bits) */
static void fa_dots_plain(const double *x, const double *cols, int64_t ld, int64_t n, int64_t d, double *out) {
    for (int64_t r = 0; r < n; r++) {
        double a[4] = {0.0, 0.0, 0.0, 0.0};
        for (int64_t i = 0; i < d; i++) a[i % 4] = fma(x[i], cols[i * ld + r], a[i % 4]);
        out[r] = (a[0] + a[1]) + (a[2] + a[3]);
    }
}

#if VG_X86
#include "attention_flash_avx2.h"
#include "attention_flash_avx512.h"

#endif

static void fa_dots(const double *x, const double *cols, int64_t ld, int64_t n, int64_t d, double *out) {
#if VG_X86
    if (fa_avx512()) {
        fa_dots_avx512(x, cols, ld, n, d, out);
        return;
    }
    if (fa_avx2()) {
        fa_dots_avx2(x, cols, ld, n, d, out);
        return;
    }
#endif
    fa_dots_plain(x, cols, ld, n, d, out);
}

#if VG_X86
/* x . y as fa_dots_plain's sum for one column (d terms): lane l of a vector of four is a_l (the last d mod 4
 * lanes add 0 * 0, which changes no a_l: never -0) */
__attribute__((target("avx2,fma"))) static double fa_dot_avx2(const double *x, const double *y, int64_t d) {
    __m256d a = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 4 <= d; i += 4) a = _mm256_fmadd_pd(_mm256_loadu_pd(x + i), _mm256_loadu_pd(y + i), a);
    if (i < d) {
        const __m256i m = _mm256_cmpgt_epi64(_mm256_set1_epi64x(d - i), _mm256_set_epi64x(3, 2, 1, 0));
        a = _mm256_fmadd_pd(_mm256_maskload_pd(x + i, m), _mm256_maskload_pd(y + i, m), a);
    }
    double l[4];
    _mm256_storeu_pd(l, a);
    return (l[0] + l[1]) + (l[2] + l[3]);
}
#endif

/* x . y in fa_dots' order (one column) */
static double fa_dot(const double *x, const double *y, int64_t d) {
#if VG_X86
    if (fa_avx2()) return fa_dot_avx2(x, y, d);
#endif
    double out;
    fa_dots_plain(x, y, 1, 1, d, &out);
    return out;
}

/* x[j] = exp(x[j] - m) (-inf gives 0): the vector loops where every x[j] - m <= 0 (nonpos: 1 where the caller
 * knows so, 0 where it knows not, -1 to check here; false for NaN), else C's exp */
static void fa_exps(double *x, int64_t n, double m, int nonpos) {
#if VG_X86
    int ok = fa_avx2() && nonpos != 0;
    if (ok && nonpos < 0 && fa_avx512())
        ok = fa_nonpos_avx512(x, n, m);
    else if (ok && nonpos < 0)
        for (int64_t j = 0; j < n && ok; j++) ok = x[j] - m <= 0.0; /* false for NaN */
    if (ok && fa_avx512()) {
        fa_exps_avx512(x, n, m);
        return;
    }
    if (ok) {
        fa_exps_avx2(x, n, m);
        return;
    }
#else
    (void)nonpos;
#endif
    for (int64_t j = 0; j < n; j++) x[j] = exp(x[j] - m);
}

/* acc[e] += sum_{r<n} c[r] rows[r][e], e < d, in r order */
static void fa_axpys(const double *c, const double *rows, int64_t n, int64_t d, double *acc) {
#if VG_X86
    if (d % 4 == 0 && fa_avx512()) {
        fa_axpys_avx512(c, rows, n, d, acc);
        return;
    }
    if (d % 4 == 0 && fa_avx2()) {
        fa_axpys_avx2(c, rows, n, d, acc);
        return;
    }
#endif
    for (int64_t r = 0; r < n; r++) {
        const double cr = c[r], *y = rows + r * d;
        for (int64_t e = 0; e < d; e++) acc[e] = fma(cr, y[e], acc[e]);
    }
}

/* out[q os + r] = fa_dots(x + q xs, cols, ..) for q < nq: four at a time on AVX-512, two on AVX2 (the
 * same bits) */
static void fa_dots4(const double *x, int64_t xs, const double *cols, int64_t ld, int64_t n, int64_t d,
                     double *out, int64_t os, int64_t nq) {
    int64_t q = 0;
#if VG_X86
    if (nq == 4 && fa_avx512()) {
        fa_dots4_avx512(x, xs, cols, ld, n, d, out, os);
        return;
    }
    if (fa_avx2())
        for (; q + 2 <= nq; q += 2) fa_dots2_avx2(x + q * xs, xs, cols, ld, n, d, out + q * os, os);
#endif
    for (; q < nq; q++) fa_dots(x + q * xs, cols, ld, n, d, out + q * os);
}

/* fa_axpys(c + q cs, rows, n, d, acc + q as) for q < nq: four at a time on AVX-512 and AVX2 (the same
 * bits); with sums (else NULL), also sums[q] = sums[q] + c[q cs + r] for r < n in r order */
static void fa_axpys4(const double *c, int64_t cs, const double *rows, int64_t n, int64_t d, double *acc,
                      int64_t as, int64_t nq, double *sums) {
#if VG_X86
    if (nq == 4 && d > 0 && d % 4 == 0 && fa_avx512()) { /* its sums run inside a column loop */
        fa_axpys4_avx512(c, cs, rows, n, d, acc, as, sums);
        return;
    }
#endif
    if (sums && nq == 4) { /* four independent chains, in registers (c may alias sums) */
        double l0 = sums[0], l1 = sums[1], l2 = sums[2], l3 = sums[3];
        for (int64_t r = 0; r < n; r++)
            l0 = l0 + c[r], l1 = l1 + c[cs + r], l2 = l2 + c[2 * cs + r], l3 = l3 + c[3 * cs + r];
        sums[0] = l0, sums[1] = l1, sums[2] = l2, sums[3] = l3;
    } else if (sums)
        for (int64_t q = 0; q < nq; q++)
            for (int64_t r = 0; r < n; r++) sums[q] = sums[q] + c[q * cs + r];
#if VG_X86
    if (nq == 4 && d % 4 == 0 && fa_avx2()) {
        fa_axpys4_avx2(c, cs, rows, n, d, acc, as);
        return;
    }
#endif
    for (int64_t q = 0; q < nq; q++) fa_axpys(c + q * cs, rows, n, d, acc + q * as);
}

/* dq[i][e] += sum_{j < kb, i >= first[j]} ds[j js + i] k[j][e] for rows i in [lo, n), in j order (k
 * rows of length d): each dq row is read and written once per block of keys */
static void fa_dq_block(const double *ds, int64_t js, const int64_t *first, int64_t kb, const double *k,
                        int64_t lo, int64_t n, int64_t d, double *dq) {
    for (int64_t i = lo; i < n; i++) {
        double *row = dq + i * d;
        for (int64_t j = 0; j < kb; j++) {
            if (i < first[j]) continue;
            const double c = ds[j * js + i], *y = k + j * d;
            for (int64_t e = 0; e < d; e++) row[e] = fma(c, y[e], row[e]);
        }
    }
}

#if VG_X86
/* fa_dq_block_avx2's sums, 32 then 8 columns of a row at a time */
FA512F static void fa_dq_block_avx512(const double *ds, int64_t js, const int64_t *first, int64_t kb,
                                     const double *k, int64_t lo, int64_t n, int64_t d, double *dq) {
    for (int64_t i = lo; i < n; i++) {
        double *row = dq + i * d;
        int64_t e = 0;
        for (; e + 32 <= d; e += 32) {
            __m512d a0 = _mm512_loadu_pd(row + e), a1 = _mm512_loadu_pd(row + e + 8);
            __m512d a2 = _mm512_loadu_pd(row + e + 16), a3 = _mm512_loadu_pd(row + e + 24);
            for (int64_t j = 0; j < kb; j++) {
                if (i < first[j]) continue;
                const __m512d c = _mm512_set1_pd(ds[j * js + i]);
                const double *y = k + j * d + e;
                a0 = _mm512_fmadd_pd(c, _mm512_loadu_pd(y), a0);
                a1 = _mm512_fmadd_pd(c, _mm512_loadu_pd(y + 8), a1);
                a2 = _mm512_fmadd_pd(c, _mm512_loadu_pd(y + 16), a2);
                a3 = _mm512_fmadd_pd(c, _mm512_loadu_pd(y + 24), a3);
            }
            _mm512_storeu_pd(row + e, a0), _mm512_storeu_pd(row + e + 8, a1);
            _mm512_storeu_pd(row + e + 16, a2), _mm512_storeu_pd(row + e + 24, a3);
        }
        for (; e + 8 <= d; e += 8) {
            __m512d a = _mm512_loadu_pd(row + e);
            for (int64_t j = 0; j < kb; j++)
                if (i >= first[j])
                    a = _mm512_fmadd_pd(_mm512_set1_pd(ds[j * js + i]), _mm512_loadu_pd(k + j * d + e), a);
            _mm512_storeu_pd(row + e, a);
        }
        if (e < d) {
            __m256d a = _mm256_loadu_pd(row + e);
            for (int64_t j = 0; j < kb; j++)
                if (i >= first[j])
                    a = _mm256_fmadd_pd(_mm256_set1_pd(ds[j * js + i]), _mm256_loadu_pd(k + j * d + e), a);
            _mm256_storeu_pd(row + e, a);
        }
    }
}
#endif

#if VG_X86
/* fa_dq_block_avx512 for four rows i..i + 3 at a time where d is a multiple of 8 and every key of the
 * block is seen by all four (i >= first[kb - 1]: first[] grows with j), the rest a row at a time: each
 * loaded key vector serves four rows; each row's sums in j order, so the same bits */
FA512F static void fa_dq4_avx512(const double *ds, int64_t js, const int64_t *first, int64_t kb, const double *k,
                                 int64_t lo, int64_t n, int64_t d, double *dq) {
    int64_t i = lo;
    const int64_t all = first[kb - 1] > lo ? first[kb - 1] : lo; /* the first row that sees every key */
    if (all > i) {
        fa_dq_block_avx512(ds, js, first, kb, k, i, all < n ? all : n, d, dq);
        i = all;
    }
    for (; i + 4 <= n; i += 4) {
        double *row = dq + i * d;
        int64_t e = 0;
        for (; e + 32 <= d; e += 32) { /* 32 columns of the four rows in registers: 4 loads, 16 FMAs a key */
            __m512d a[16];
            for (int v = 0; v < 16; v++) a[v] = _mm512_loadu_pd(row + (v / 4) * d + e + (v % 4) * 8);
            for (int64_t j = 0; j < kb; j++) {
                const double *y = k + j * d + e, *c = ds + j * js + i;
                const __m512d y0 = _mm512_loadu_pd(y), y1 = _mm512_loadu_pd(y + 8);
                const __m512d y2 = _mm512_loadu_pd(y + 16), y3 = _mm512_loadu_pd(y + 24);
                for (int q = 0; q < 4; q++) {
                    const __m512d cq = _mm512_set1_pd(c[q]);
                    a[4 * q] = _mm512_fmadd_pd(cq, y0, a[4 * q]);
                    a[4 * q + 1] = _mm512_fmadd_pd(cq, y1, a[4 * q + 1]);
                    a[4 * q + 2] = _mm512_fmadd_pd(cq, y2, a[4 * q + 2]);
                    a[4 * q + 3] = _mm512_fmadd_pd(cq, y3, a[4 * q + 3]);
                }
            }
            for (int v = 0; v < 16; v++) _mm512_storeu_pd(row + (v / 4) * d + e + (v % 4) * 8, a[v]);
        }
        for (; e < d; e += 8) {
            __m512d a0 = _mm512_loadu_pd(row + e), a1 = _mm512_loadu_pd(row + d + e);
            __m512d a2 = _mm512_loadu_pd(row + 2 * d + e), a3 = _mm512_loadu_pd(row + 3 * d + e);
            for (int64_t j = 0; j < kb; j++) {
                const __m512d y = _mm512_loadu_pd(k + j * d + e);
                const double *c = ds + j * js + i;
                a0 = _mm512_fmadd_pd(_mm512_set1_pd(c[0]), y, a0);
                a1 = _mm512_fmadd_pd(_mm512_set1_pd(c[1]), y, a1);
                a2 = _mm512_fmadd_pd(_mm512_set1_pd(c[2]), y, a2);
                a3 = _mm512_fmadd_pd(_mm512_set1_pd(c[3]), y, a3);
            }
            _mm512_storeu_pd(row + e, a0), _mm512_storeu_pd(row + d + e, a1);
            _mm512_storeu_pd(row + 2 * d + e, a2), _mm512_storeu_pd(row + 3 * d + e, a3);
        }
    }
    if (i < n) fa_dq_block_avx512(ds, js, first, kb, k, i, n, d, dq);
}
#endif

static void fa_dq(const double *ds, int64_t js, const int64_t *first, int64_t kb, const double *k, int64_t lo,
                  int64_t n, int64_t d, double *dq) {
#if VG_X86
    if (d % 8 == 0 && fa_avx512()) {
        fa_dq4_avx512(ds, js, first, kb, k, lo, n, d, dq);
        return;
    }
    if (d % 4 == 0 && fa_avx512()) {
        fa_dq_block_avx512(ds, js, first, kb, k, lo, n, d, dq);
        return;
    }
    if (d % 4 == 0 && fa_avx2()) {
        fa_dq4_avx2(ds, js, first, kb, k, lo, n, d, dq);
        return;
    }
#endif
    fa_dq_block(ds, js, first, kb, k, lo, n, d, dq);
}

/* fa_shift's elements i..n - 1 one at a time (its plain loop, and the vector loop's tail) */
static int fa_shift_from(double *s, int64_t i, int64_t n, int64_t hidden, double scale, const double *m) {
    int ok = 1;
    for (; i < n; i++) {
        s[i] = s[i] * scale - m[i];
        if (i < hidden)
            s[i] = -INFINITY;
        else
            ok &= s[i] <= 0.0;
    }
    return ok;
}

/* The backward's element-wise steps over a key's n queries, eight at a time on AVX-512 (the same
 * operations on each element, so the same bits as the scalar loops) */
#if VG_X86
FA512 static int fa_shift_avx512(double *s, int64_t n, int64_t hidden, double scale, const double *m) {
    const __m512d sc = _mm512_set1_pd(scale), none = _mm512_set1_pd(-INFINITY);
    int ok = 1;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const int64_t h = hidden - i < 0 ? 0 : hidden - i; /* lanes l >= h see the key */
        const __mmask8 seen = h >= 8 ? 0 : (__mmask8)(0xffu << h);
        const __m512d x = _mm512_sub_pd(_mm512_mul_pd(_mm512_loadu_pd(s + i), sc), _mm512_loadu_pd(m + i));
        ok &= _mm512_mask_cmp_pd_mask(seen, x, _mm512_setzero_pd(), _CMP_LE_OQ) == seen;
        _mm512_storeu_pd(s + i, _mm512_mask_blend_pd(seen, none, x));
    }
    return fa_shift_from(s, i, n, hidden, scale, m) & ok;
}
/* fa_shift_avx512 four lanes a vector */
__attribute__((target("avx2"))) static int fa_shift_avx2(double *s, int64_t n, int64_t hidden, double scale,
                                                         const double *m) {
    const __m256d sc = _mm256_set1_pd(scale), none = _mm256_set1_pd(-INFINITY);
    __m256d bad = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m256d seen = _mm256_castsi256_pd(
            _mm256_cmpgt_epi64(_mm256_set_epi64x(i + 3, i + 2, i + 1, i), _mm256_set1_epi64x(hidden - 1)));
        const __m256d x = _mm256_sub_pd(_mm256_mul_pd(_mm256_loadu_pd(s + i), sc), _mm256_loadu_pd(m + i));
        bad = _mm256_or_pd(bad, _mm256_andnot_pd(_mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_LE_OQ), seen));
        _mm256_storeu_pd(s + i, _mm256_blendv_pd(none, x, seen));
    }
    return fa_shift_from(s, i, n, hidden, scale, m) & (_mm256_movemask_pd(bad) == 0);
}
FA512 static void fa_ds_avx512(double *ds, const double *p, int64_t n, const double *delta, double scale) {
    const __m512d sc = _mm512_set1_pd(scale);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m512d d = _mm512_sub_pd(_mm512_loadu_pd(ds + i), _mm512_loadu_pd(delta + i));
        _mm512_storeu_pd(ds + i, _mm512_mul_pd(_mm512_mul_pd(_mm512_loadu_pd(p + i), d), sc));
    }
    for (; i < n; i++) ds[i] = p[i] * (ds[i] - delta[i]) * scale;
}
#endif

/* s[i] = s[i] scale - m[i], -inf for i < hidden (a key's queries that do not see it); whether each of the
 * others is <= 0 (false for a NaN: exp's vector loops take them) */
static int fa_shift(double *s, int64_t n, int64_t hidden, double scale, const double *m) {
#if VG_X86
    if (fa_avx512()) return fa_shift_avx512(s, n, hidden, scale, m);
    if (fa_avx2()) return fa_shift_avx2(s, n, hidden, scale, m);
#endif
    return fa_shift_from(s, 0, n, hidden, scale, m);
}

/* ds[i] = p[i] (ds[i] - delta[i]) scale */
static void fa_ds(double *ds, const double *p, int64_t n, const double *delta, double scale) {
#if VG_X86
    if (fa_avx512()) {
        fa_ds_avx512(ds, p, n, delta, scale);
        return;
    }
    if (fa_avx2()) {
        fa_ds_avx2(ds, p, n, delta, scale);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) ds[i] = p[i] * (ds[i] - delta[i]) * scale;
}

#if VG_X86
/* fa_load for es 1: eight values a vector (the conversion is exact: the same values) */
FA512 static int fa_load_avx512(const float *src, int64_t rs, int64_t n, int64_t d, double *dst) {
    int ok = 1;
    for (int64_t r = 0; r < n; r++) {
        const float *x = src + r * rs;
        double *y = dst + r * d;
        if (r + FA_AHEAD < n) /* rows of a head view lie far apart (a qkv projection's): fetched ahead */
            for (int64_t e = 0; e < d; e += 16) _mm_prefetch((const char *)(x + FA_AHEAD * rs + e), _MM_HINT_T0);
        int64_t e = 0;
        for (; e + 8 <= d; e += 8) {
            const __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(x + e));
            _mm512_storeu_pd(y + e, v);
            ok &= _mm512_cmp_pd_mask(_mm512_sub_pd(v, v), _mm512_setzero_pd(), _CMP_EQ_OQ) == 0xff;
        }
        for (; e < d; e++) {
            const double v = (double)x[e];
            y[e] = v;
            ok &= v - v == 0.0;
        }
    }
    return ok;
}
#endif

/* dst[r d + e] = (double)src[r rs + e es] for r < n, e < d; whether all are finite */
static int fa_load(const float *src, int64_t rs, int64_t es, int64_t n, int64_t d, double *dst) {
#if VG_X86
    if (es == 1 && fa_avx512()) return fa_load_avx512(src, rs, n, d, dst);
    if (es == 1 && fa_avx2()) return fa_load_avx2(src, rs, n, d, dst);
#endif
    int ok = 1;
    for (int64_t r = 0; r < n; r++)
        for (int64_t e = 0; e < d; e++) {
            const double x = (double)src[r * rs + e * es];
            dst[r * d + e] = x;
            ok &= x - x == 0.0; /* NaN at an infinity or a NaN */
        }
    return ok;
}

#if VG_X86
/* fa_transpose eight rows by eight columns at a time (the last ones' lanes masked) */
FA512 static void fa_transpose_avx512(const double *src, int64_t n, int64_t d, double *dst, int64_t ld) {
    /* pairs of rows' even, then odd, columns; then four rows' columns c and c + 4; then eight rows' */
    const __m512i lo4 = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0), hi4 = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    const __m512i lo8 = _mm512_set_epi64(11, 10, 9, 8, 3, 2, 1, 0), hi8 = _mm512_set_epi64(15, 14, 13, 12, 7, 6, 5, 4);
    for (int64_t r0 = 0; r0 < n; r0 += 8) {
        const __mmask8 rm = fa_mask8(n - r0);
        for (int64_t e0 = 0; e0 < d; e0 += 8) {
            const __mmask8 em = fa_mask8(d - e0);
            __m512d x[8], t[8], u[8], y[8];
            for (int k = 0; k < 8; k++)
                x[k] = r0 + k < n ? _mm512_maskz_loadu_pd(em, src + (r0 + k) * d + e0) : _mm512_setzero_pd();
            for (int k = 0; k < 8; k += 2) { /* t[k]: columns 0 2 4 6 of rows k, k + 1 interleaved; t[k + 1]: 1 3 5 7 */
                t[k] = _mm512_unpacklo_pd(x[k], x[k + 1]);
                t[k + 1] = _mm512_unpackhi_pd(x[k], x[k + 1]);
            }
            for (int k = 0; k < 8; k += 4) /* u[k + c]: columns c and c + 4 of rows k..k + 3 (c < 4) */
                for (int c = 0; c < 2; c++) {
                    u[k + c] = _mm512_permutex2var_pd(t[k + c], lo4, t[k + 2 + c]);
                    u[k + 2 + c] = _mm512_permutex2var_pd(t[k + c], hi4, t[k + 2 + c]);
                }
            for (int c = 0; c < 4; c++) { /* column c, c + 4 of the eight rows */
                y[c] = _mm512_permutex2var_pd(u[c], lo8, u[4 + c]);
                y[c + 4] = _mm512_permutex2var_pd(u[c], hi8, u[4 + c]);
            }
            for (int k = 0; k < 8 && e0 + k < d; k++) _mm512_mask_storeu_pd(dst + (e0 + k) * ld + r0, rm, y[k]);
        }
    }
}

/* dst[e] = (float)(src[e] / div) for e < n (div 1: the conversion alone) */
FA512 static void fa_store_avx512(const double *src, int64_t n, double div, float *dst) {
    const __m512d dv = _mm512_set1_pd(div);
    int64_t e = 0;
    if (div == 1.0) /* x / 1 is x: the conversion alone */
        for (; e + 8 <= n; e += 8) _mm256_storeu_ps(dst + e, _mm512_cvtpd_ps(_mm512_loadu_pd(src + e)));
    else
        for (; e + 8 <= n; e += 8) _mm256_storeu_ps(dst + e, _mm512_cvtpd_ps(_mm512_div_pd(_mm512_loadu_pd(src + e), dv)));
    for (; e < n; e++) dst[e] = (float)(src[e] / div);
}
#endif

/* dst[e] = (float)(src[e] / div) for e < n */
static void fa_store(const double *src, int64_t n, double div, float *dst) {
#if VG_X86
    if (fa_avx512()) {
        fa_store_avx512(src, n, div, dst);
        return;
    }
    if (fa_avx2()) {
        fa_store_avx2(src, n, div, dst);
        return;
    }
#endif
    for (int64_t e = 0; e < n; e++) dst[e] = (float)(src[e] / div);
}

/* dst[e ld + r] = src[r d + e] for r < n, e < d */
static void fa_transpose(const double *src, int64_t n, int64_t d, double *dst, int64_t ld) {
#if VG_X86
    if (fa_avx512()) {
        fa_transpose_avx512(src, n, d, dst, ld);
        return;
    }
#endif
    for (int64_t r0 = 0; r0 < n; r0 += 8)
        for (int64_t e = 0; e < d; e++)
            for (int64_t r = r0; r < n && r < r0 + 8; r++) dst[e * ld + r] = src[r * d + e];
}

/* the forward over one block of keys (kt: the block's first column of the transposed keys [D, S], vd: its
 * first row of values) for nr <= 4 query rows (qi: the first's, in rows d apart), row q seeing the block's
 * first nb[q] keys: the online softmax's step on each row's running max m[q], sum l[q] and unnormalized
 * acc + q dv (s: 4 FA_BLOCK). The rows share the dot products' and weighted sums' loads (fa_dots4,
 * fa_axpys4) and their sums of weights run side by side; each row's weights past its nb (0, exactly) add
 * nothing (l + 0 = l, fma(0, v, acc) = acc: finite values, acc never -0), so each row gets the bits it
 * gets alone. */
static void fa_tile_block(const fa_job *a, int64_t nr, const int64_t *nb, const double *qi, const double *kt,
                          int64_t ld, const double *vd, double *s, double *m_io, double *l_io, double *acc) {
    int64_t nmax = 0;
    for (int64_t q = 0; q < nr; q++) nmax = nb[q] > nmax ? nb[q] : nmax;
    if (nmax == 0) return;
    fa_dots4(qi, a->d, kt, ld, nmax, a->d, s, FA_BLOCK, nr);
    for (int64_t q = 0; q < nr; q++) {
        double *sq = s + q * FA_BLOCK, *aq = acc + q * a->dv, m = m_io[q];
        const int64_t n = nb[q];
        double bm = m;
#if VG_X86
        if (fa_avx512()) /* finite scores (fa_units checked the inputs) */
            bm = fa_scale_max_avx512(sq, n, a->scale, bm);
        else if (fa_avx2())
            bm = fa_scale_max_avx2(sq, n, a->scale, bm);
        else
#endif
            for (int64_t j = 0; j < n; j++) {
                sq[j] = sq[j] * a->scale;
                if (isnan(sq[j]) || sq[j] > bm) bm = isnan(bm) ? bm : sq[j];
            }
        if (bm != m) { /* a larger max (or a NaN): rescale what was summed */
            const double r = m == -INFINITY ? 0.0 : exp(m - bm);
            l_io[q] = l_io[q] * r;
            for (int64_t e = 0; e < a->dv; e++) aq[e] = aq[e] * r;
            m_io[q] = m = bm;
        }
        /* every score so far -inf: weights 0 until a finite one. The scores are not NaN (finite inputs and
         * scale: their dot products are far from overflowing), so a finite max m is at least each of them:
         * each x - m <= 0 */
        if (m != -INFINITY) fa_exps(sq, n, m, isfinite(m) && isfinite(a->scale) ? 1 : -1);
        for (int64_t j = m != -INFINITY ? n : 0; j < nmax; j++) sq[j] = 0.0;
    }
    /* the weighted sums of the values and each row's sum of weights, in j order */
    fa_axpys4(s, FA_BLOCK, vd, nmax, a->dv, acc, a->dv, nr, l_io);
}

static void fa_units(void *ctx, int64_t lo, int64_t hi) {
    fa_job *a = (fa_job *)ctx;
    const int64_t t = a->t, S = a->s, d = a->d, dv = a->dv, group = a->h / a->kv, off = S - t;
    const int64_t wide = (d > dv ? d : dv), rows = group * t;
    const int backward = a->which != 0;
    /* kd [S, d], vd [S, dv], qd [G T, d], gd [G T, dv] (the forward's accumulators), dq [G T, d], m, l (or
     * lse), delta [G T], s [max(G T, BLOCK)], ds [KEYS, G T], acc [d + dv], kacc [KEYS, d + dv]; the
     * transposed blocks the dot products read: kt [d, S] (forward), or qt [d, G T] and gt [dv, G T], their
     * rows ld apart: an odd number of cache lines, so that a column's lines spread over the cache's sets
     * (rows 1 KiB apart would fill a few sets) */
    const int64_t lines = ((backward ? rows : S) + 7) / 8, ld = 8 * (lines + (lines % 2 == 0));
    const int64_t sn = rows + FA_BLOCK, tn = backward ? ld * (d + dv) : ld * d;
    /* each array's start a multiple of 64 bytes (the vector loops' loads split no cache line where their
     * rows' lengths are whole vectors too) */
    const int64_t sizes[] = {S * d, S * dv, rows * d, rows * dv, backward ? rows * d : 0, rows, rows, rows, 4 * sn,
                             backward ? FA_KEYS * rows : 0, wide + d + dv + 1, backward ? FA_KEYS * (d + dv) : 0, tn};
    enum { n_arrays = sizeof(sizes) / sizeof(sizes[0]) };
    double *at[n_arrays];
    size_t count = 0;
    for (int i = 0; i < n_arrays; i++) count += (size_t)(sizes[i] + 7) / 8 * 8;
    double *kd = aligned_alloc(64, sizeof(double) * count);
    if (!kd) {
        a->failed = 1;
        return;
    }
    at[0] = kd;
    for (int i = 1; i < n_arrays; i++) at[i] = at[i - 1] + (sizes[i - 1] + 7) / 8 * 8;
    double *vd = at[1], *qd = at[2], *gd = at[3], *dq = at[4], *mrow = at[5], *lrow = at[6], *delta = at[7];
    double *s = at[8], *dsb = at[9], *acc = at[10], *kacc = at[11], *kt = at[12], *qt = kt, *gt = qt + ld * d;
    for (int64_t unit = lo; unit < hi; unit++) { /* unit = (b, kv head) */
        const int64_t b = unit / a->kv, g = unit % a->kv;
        int finite = fa_load(a->k + b * a->ks[0] + g * a->ks[1], a->ks[2], a->ks[3], S, d, kd);
        finite &= fa_load(a->v + b * a->vs[0] + g * a->vs[1], a->vs[2], a->vs[3], S, dv, vd);
        for (int64_t hh = 0; hh < group; hh++) {
            const int64_t h = g * group + hh;
            finite &= fa_load(a->q + b * a->qs[0] + h * a->qs[1], a->qs[2], a->qs[3], t, d, qd + hh * t * d);
            if (!backward) continue;
            finite &= fa_load(a->g + b * a->gs[0] + h * a->gs[1], a->gs[2], a->gs[3], t, dv, gd + hh * t * dv);
            for (int64_t i = 0; i < t; i++) { /* the forward's o_i and lse_i, glse_i: delta_i */
                const int64_t r = hh * t + i;
                const float *o = a->o + b * a->os[0] + h * a->os[1] + i * a->os[2];
                const float *gl = a->g + b * a->gs[0] + h * a->gs[1] + i * a->gs[2] + dv * a->gs[3];
                finite &= fa_load(o, 0, a->os[3], 1, dv + 1, acc);
                finite &= fa_load(gl, 0, 0, 1, 1, acc + dv + 1);
                delta[r] = fa_dot(gd + r * dv, acc, dv) - acc[dv + 1];
                mrow[r] = acc[dv]; /* lse_i */
            }
        }
        if (!finite) { /* the reference's 0 * inf of hidden positions: the caller runs it */
            a->nonfinite = 1;
            break;
        }
        if (!backward)
            fa_transpose(kd, S, d, kt, ld);
        else
            fa_transpose(qd, rows, d, qt, ld), fa_transpose(gd, rows, dv, gt, ld);
        if (!backward) {
            /* the rows' online softmax a block of keys at a time (the block's keys and values stay in
             * cache for every row that sees it), each row's steps in block order */
            double *accs = gd; /* [G T, dv] */
            for (int64_t r = 0; r < rows; r++) mrow[r] = -INFINITY, lrow[r] = 0.0;
            for (int64_t e = 0; e < rows * dv; e++) accs[e] = 0.0;
            for (int64_t j0 = 0; j0 < S; j0 += FA_BLOCK)
                for (int64_t r0 = 0; r0 < rows; r0 += 4) { /* four rows at a time */
                    const int64_t nr = rows - r0 < 4 ? rows - r0 : 4;
                    int64_t nb[4];
                    for (int64_t q = 0; q < nr; q++) { /* the keys of the block row r0 + q sees */
                        const int64_t n = off + (r0 + q) % t + 1 - j0;
                        nb[q] = n <= 0 ? 0 : n < FA_BLOCK ? n : FA_BLOCK;
                    }
                    fa_tile_block(a, nr, nb, qd + r0 * d, kt + j0, ld, vd + j0 * dv, s, mrow + r0, lrow + r0,
                                  accs + r0 * dv);
                }
            for (int64_t r = 0; r < rows; r++) { /* each row's output and log-sum-exp */
                const int64_t hh = r / t, i = r % t;
                float *o = a->out + ((b * a->h + g * group + hh) * t + i) * (dv + 1);
                fa_store(accs + r * dv, dv, lrow[r], o);
                o[dv] = (float)(mrow[r] + log(lrow[r]));
            }
            continue;
        }
        /* the gradients, a block of keys at a time, each key over the queries that see it, `queries` of
         * them at a time for every key of the block (they stay in cache: their rows and transposed
         * columns of q and g, 16 KiB each at most): dk_j and dv_j summed in (head, i) order, each dq_i in
         * j order in dq (double), whatever `queries` is */
        int64_t queries = 2048 / (d + dv) / 8 * 8;
        queries = queries < 8 ? 8 : queries > FA_QUERIES ? FA_QUERIES : queries;
        float *o = a->out + unit * (rows * d + S * (d + dv));
        for (int64_t e = 0; e < rows * d; e++) dq[e] = 0.0;
        for (int64_t j0 = 0; j0 < S; j0 += FA_KEYS) {
            const int64_t kb = S - j0 < FA_KEYS ? S - j0 : FA_KEYS;
            int64_t first[FA_KEYS];
            for (int64_t j = j0; j < j0 + kb; j++) first[j - j0] = j > off ? j - off : 0;
            for (int64_t e = 0; e < kb * (d + dv); e++) kacc[e] = 0.0;
            for (int64_t hh = 0; hh < group; hh++)
                for (int64_t c0 = first[0]; c0 < t; c0 += queries) {
                    const int64_t c1 = t - c0 < queries ? t : c0 + queries;
                    for (int64_t j = j0; j < j0 + kb; j += 4) { /* four keys at a time */
                        const int64_t nk = j0 + kb - j < 4 ? j0 + kb - j : 4, ks = group * t, as = d + dv;
                        /* the queries the first key sees (first[] grows with j), from a multiple of 8 of
                         * the transposed rows (whole vectors: no load splits a cache line) but not before
                         * c0: the queries a key does not see get weight 0 (score -inf), which adds nothing
                         * (finite values) */
                        const int64_t seen = first[j - j0] > c0 ? first[j - j0] : c0;
                        if (seen >= c1) continue;
                        const int64_t back = (hh * t + seen) % 8, lo = seen - back < c0 ? c0 : seen - back;
                        const int64_t n = c1 - lo, r0 = hh * t + lo;
                        double *ds = dsb + ((j - j0) * group + hh) * t + lo;
                        double *dk = kacc + (j - j0) * (d + dv), *dvj = dk + d;
                        fa_dots4(kd + j * d, d, qt + r0, ld, n, d, s, sn, nk);
                        for (int64_t q = 0; q < nk; q++) {
                            const int64_t hidden = first[j - j0 + q] - lo;
                            const int nonpos = fa_shift(s + q * sn, n, hidden, a->scale, mrow + r0);
                            fa_exps(s + q * sn, n, 0.0, nonpos);
                        }
                        fa_axpys4(s, sn, gd + r0 * dv, n, dv, dvj, as, nk, NULL);
                        fa_dots4(vd + j * dv, dv, gt + r0, ld, n, dv, ds, ks, nk);
                        for (int64_t q = 0; q < nk; q++) fa_ds(ds + q * ks, s + q * sn, n, delta + r0, a->scale);
                        fa_axpys4(ds, ks, qd + r0 * d, n, d, dk, as, nk, NULL);
                    }
                }
            for (int64_t j = j0; j < j0 + kb; j++) {
                const double *dk = kacc + (j - j0) * (d + dv), *dvj = dk + d;
                fa_store(dk, d, 1.0, o + rows * d + j * d); /* x / 1 is x */
                fa_store(dvj, dv, 1.0, o + rows * d + S * d + j * dv);
            }
            for (int64_t hh = 0; hh < group; hh++) /* ds [kb, G, T]: head hh's rows at stride G T */
                fa_dq(dsb + hh * t, group * t, first, kb, kd + j0 * d, first[0], t, d, dq + hh * t * d);
        }
        fa_store(dq, rows * d, 1.0, o);
    }
    free(kd);
}

/* sizes: B, H, KV, T, S, D, Dv; which: 0 forward, 1 the gradients (g, o and their strides unused by the
 * forward). Returns 0; 1 where an input holds an infinity or a NaN (a hidden position's then reaches every
 * row through the reference's 0 * inf: the caller runs the reference); -1 when out of memory. */
int vg_flash_attention_f32(const int64_t *sizes, int which, const float *q, const int64_t *qs, const float *k,
                           const int64_t *ks, const float *v, const int64_t *vs, const float *g,
                           const int64_t *gs, const float *o, const int64_t *os, double scale, float *out,
                           int threads) {
    fa_job a = {.b = sizes[0], .h = sizes[1], .kv = sizes[2], .t = sizes[3], .s = sizes[4], .d = sizes[5],
                .dv = sizes[6], .q = q, .k = k, .v = v, .g = g, .o = o, .qs = qs, .ks = ks, .vs = vs, .gs = gs,
                .os = os, .scale = scale, .which = which, .out = out, .failed = 0, .nonfinite = 0};
    vg_parallel_for(a.b * a.kv, 1, threads, fa_units, &a);
    return a.failed ? -1 : a.nonfinite ? 1 : 0;
}
