/* qmatmul_q8 of the 32-value formats q8_0, q4_0, q4_1, q5_0, q5_1 and iq4_nl with AVX-512 VNNI (vpdpbusd: four
 * u8 x s8 products summed into each int32 lane in one instruction), 8 weight rows at a time against a tile
 * of up to 8 activation rows, each weight block unpacked once for the tile.
 *
 * The arithmetic is quant.c's q8_row, so the reference's bits: each block's integer dot is exact (the
 * nibbles, or |w| for q8_0, times the int8 activations, summed in int32: |sum| <= 32 * 255 * 127), the
 * terms (d_w * d_x) * dot [+ m_w * dxs] are made in double, one row per double lane, and added in block
 * order from +0.0, rounded once to f32. Only the order in which the int32 parts of a dot are added differs,
 * and integer sums do not round.
 *
 * Layout: a zmm holds 4 rows' 16 nibble bytes, one row per 128-bit lane (q8_0: 2 rows' 32 bytes, one row
 * per 256 bits); the activations' 16 (32) bytes are broadcast to every lane. q5's fifth bits become the
 * byte masks of a masked add of 16. q8_0's signed weights: (y + 128) as u8 times w, less 128 * sum(w).
 * iq4_nl's signed table values: the nibbles through the table plus 128 (vpshufb, 1..241 as u8) times y, less
 * 128 * sum(y) (as q4_0's nibbles less 8 * sum(y)). */
#include "quant.h"

#if VG_X86
#define VNNI_Q __attribute__((target("avx2,f16c,avx512f,avx512dq,avx512bw,avx512vl,avx512vnni")))

/* the 16 bytes at a, b, c, d in the four 128-bit lanes */
VNNI_Q __attribute__((always_inline)) static inline __m512i lanes4(const uint8_t *a, const uint8_t *b,
                                                                   const uint8_t *c, const uint8_t *d) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)a));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)b), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)c), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)d), 3);
}

/* a (rows 0..3) and b (rows 4..7), four int32 parts per row in each 128-bit lane -> the 8 rows' sums */
VNNI_Q __attribute__((always_inline)) static inline __m256i sums8_of_lanes(__m512i a, __m512i b) {
    __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    u = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC)); /* lane l: row l, row l + 4 */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, u));
}

/* a (rows 0, 1), b (2, 3), c (4, 5), d (6, 7): eight int32 parts per row in each 256-bit half -> the 8
 * rows' sums */
VNNI_Q __attribute__((always_inline)) static inline __m256i sums8_of_halves(__m512i a, __m512i b, __m512i c,
                                                                            __m512i d) {
    __m512i ab = _mm512_add_epi32(_mm512_unpacklo_epi32(a, b), _mm512_unpackhi_epi32(a, b));
    __m512i cd = _mm512_add_epi32(_mm512_unpacklo_epi32(c, d), _mm512_unpackhi_epi32(c, d));
    /* lane l: rows (0, 2, 4, 6) for l = 0, 1 and (1, 3, 5, 7) for l = 2, 3, two parts each */
    __m512i s = _mm512_add_epi32(_mm512_unpacklo_epi64(ab, cd), _mm512_unpackhi_epi64(ab, cd));
    s = _mm512_add_epi32(s, _mm512_shuffle_i32x4(s, s, _MM_SHUFFLE(2, 3, 0, 1))); /* lanes 0 + 1, 2 + 3 */
    const __m512i order = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, s));
}

/* a pair of activation rows' values per block, side by side (made once per call): their d, d * sum(q) and
 * the integer dots' bias (q4_0, q5_0, iq4_nl: -c sum(q)) */
enum { PAIRS_FROM = 4 }; /* the fewest activation rows of a tile taken in pairs */
typedef struct {
    double dx[2], dxs[2];
    int32_t bias[2];
} pair_side;

/* a zero the register renamer makes (vpxord's zeroing idiom, no execution port), where the compiler copied
 * one zero register before each accumulating vpdpbusd */
VNNI_Q __attribute__((always_inline)) static inline __m512i fresh_zero(void) {
    __m512i z;
    __asm__ volatile("vpxord %0, %0, %0" : "=v"(z));
    return z;
}

/* the 16 integer dots of 8 weight rows' unpacked values (lo: rows 0-3's values 0-15, one row per 128-bit
 * lane, then rows 4-7's; hi: values 16-31) with activation rows y0 and y0 + k: one tree of unpacks for the
 * 16, which leaves lane l as (row l, y0), (row l, y1), (row l + 4, y0), (row l + 4, y1) */
VNNI_Q __attribute__((always_inline)) static inline __m512i pair_dots(const __m512i *lo, const __m512i *hi,
                                                                      const int8_t *y0, int64_t k) {
    __m512i s[4]; /* rows 0-3 x y0, 0-3 x y1, 4-7 x y0, 4-7 x y1: four int32 parts per row and y */
    for (int i = 0; i < 4; i++) {
        const int8_t *y = y0 + (i & 1) * k;
        const __m512i y_lo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)y));
        const __m512i y_hi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(y + 16)));
        s[i] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(fresh_zero(), lo[i >> 1], y_lo), hi[i >> 1], y_hi);
    }
    const __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]), _mm512_unpackhi_epi32(s[0], s[1]));
    const __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]), _mm512_unpackhi_epi32(s[2], s[3]));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(u, v), _mm512_unpackhi_epi64(u, v));
}

/* acc + q8_row's term of a block, (d_w * d_x) * dot [+ m_w * dxs] (ddx: d_w * d_x, exact: 11 by 24 bits), lane
 * by lane. The 4- and 5-bit formats' products ddx * dot are exact (|dot| <= 32 * 31 * 127 < 2^17: 52 bits),
 * so a fused multiply-add, which rounds once, gives the reference's sum of the rounded product and saves an
 * operation; iq4_nl's dots (up to 32 * 127 * 127) may round, so its terms are multiplied, then added. */
VNNI_Q __attribute__((always_inline)) static inline __m512d add_term(int qtype, __m512d acc, __m512d ddx, __m512d dot,
                                                                     __m512d m, __m512d dxs) {
    if (qtype == Q4_1 || qtype == Q5_1) return _mm512_add_pd(acc, _mm512_fmadd_pd(ddx, dot, _mm512_mul_pd(m, dxs)));
    if (qtype == Q4_0 || qtype == Q5_0) return _mm512_fmadd_pd(ddx, dot, acc);
    return _mm512_add_pd(acc, _mm512_mul_pd(ddx, dot));
}

/* 8 rows (w + i stride) x TN activation rows (qx + t k): the outputs out[t * out_step + i]. Rows 2p and
 * 2p + 1 (p < TN / 2) go as a pair, whose 16 dots one tree of unpacks reduces (the rows' lanes in the order
 * it leaves them: the scales permuted to match, the outputs put back in order at the end); an odd last row
 * alone. Every (weight row, activation row) output has the same double operations in the same order. */
VNNI_Q __attribute__((always_inline)) static inline void rows8_vnni(int qtype, int tn, const uint8_t *w,
                                                                    int64_t stride, int64_t nb, int64_t k,
                                                                    const int8_t *qx, const double *dx,
                                                                    const double *dxs, const int32_t *sx,
                                                                    const pair_side *side, float *out,
                                                                    int64_t out_step) {
    const int five = qtype == Q5_0 || qtype == Q5_1, affine = qtype == Q4_1 || qtype == Q5_1;
    const int biased = qtype == Q4_0 || qtype == Q5_0 || qtype == IQ4_NL;
    /* pairs (from 4 rows: at 2 the permuted scales cost more than the pair's reduction saves); rows t1..
     * alone */
    const int np = qtype == Q8_0 || tn < PAIRS_FROM ? 0 : tn / 2, t1 = 2 * np;
    const int64_t bytes = BLOCK_BYTES[qtype], at = qtype == Q5_1 ? 8 : qtype == Q5_0 ? 6 : affine ? 4 : 2;
    const __m512i mask = _mm512_set1_epi8(15), sixteen = _mm512_set1_epi8(16);
    /* iq4_nl's values plus 128, by nibble, in every 128-bit lane */
    const __m512i table = _mm512_broadcast_i32x4(
        _mm_xor_si128(_mm_loadu_si128((const __m128i *)IQ4_VALUES), _mm_set1_epi8((char)0x80)));
    /* bytes 0-1 of each u32 (the low 16 fifth bits), then bytes 2-3 (the high 16) */
    const __m128i halves = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                               _mm256_set1_epi32((int32_t)stride));
    const __m512i evens_odds = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    /* a pair's lanes: weight rows 0 0 4 4 1 1 5 5 (low) and 2 2 6 6 3 3 7 7 (high), activation rows
     * alternating */
    const __m512i pair_lo = _mm512_setr_epi64(0, 0, 4, 4, 1, 1, 5, 5);
    const __m512i pair_hi = _mm512_setr_epi64(2, 2, 6, 6, 3, 3, 7, 7);
    __m512d acc[8], pacc[8];
    for (int t = t1; t < tn; t++) acc[t] = _mm512_setzero_pd();
    for (int i = 0; i < 2 * np; i++) pacc[i] = _mm512_setzero_pd();
    const uint8_t *next = w + 8 * stride; /* the next 8 rows: fetched while these are computed */
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bytes, *pf = next + 8 * b * bytes;
        for (int64_t off = 0; off < 8 * bytes; off += 64) _mm_prefetch((const char *)(pf + off), _MM_HINT_T0);
        /* the scales' f16 pairs of the 8 rows: d in the low 16 bits, m (q4_1, q5_1) in the high (a row: 8
         * loads, where a vpgatherdd took a quarter of the call; more rows: the gather, whose fewer uops
         * leave the shuffle port to the dots' reductions) */
        const __m256i dm = tn == 1 ? _mm256_setr_epi32(load32(wb), load32(wb + stride), load32(wb + 2 * stride),
                                                       load32(wb + 3 * stride), load32(wb + 4 * stride),
                                                       load32(wb + 5 * stride), load32(wb + 6 * stride),
                                                       load32(wb + 7 * stride))
                                   : _mm256_i32gather_epi32((const int *)wb, offsets, 1);
        __m512d d, m = _mm512_setzero_pd();
        if (affine) { /* the 16 halves at once: d0 m0 d1 m1 ... -> d0..d7 m0..m7 */
            const __m512 f = _mm512_permutexvar_ps(evens_odds, _mm512_cvtph_ps(dm));
            d = _mm512_cvtps_pd(_mm512_castps512_ps256(f));
            m = _mm512_cvtps_pd(_mm512_extractf32x8_ps(f, 1));
        } else {
            d = _mm512_cvtps_pd(_mm256_cvtph_ps(_mm256_cvtepi32_epi16(dm)));
        }
        if (qtype == Q8_0) {
            __m512i v[4], sumw[4];
            const __m512i ones = _mm512_set1_epi8(1);
            for (int i = 0; i < 4; i++) {
                const uint8_t *r = wb + 2 * i * stride + 2;
                v[i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)r)),
                                          _mm256_loadu_si256((const __m256i *)(r + stride)), 1);
                sumw[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, v[i]);
            }
            const __m256i bias = _mm256_slli_epi32(sums8_of_halves(sumw[0], sumw[1], sumw[2], sumw[3]), 7);
            for (int t = 0; t < tn; t++) {
                const __m256i y = _mm256_loadu_si256((const __m256i *)(qx + t * k + 32 * b));
                const __m512i yu = _mm512_xor_si512(_mm512_broadcast_i64x4(y), _mm512_set1_epi8((char)0x80));
                __m512i s[4];
                for (int i = 0; i < 4; i++) s[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), yu, v[i]);
                const __m256i dots = _mm256_sub_epi32(sums8_of_halves(s[0], s[1], s[2], s[3]), bias);
                const __m512d term = _mm512_mul_pd(_mm512_mul_pd(d, _mm512_set1_pd(dx[t * nb + b])),
                                                   _mm512_cvtepi32_pd(dots));
                acc[t] = _mm512_add_pd(acc[t], term);
            }
            continue;
        }
        __m512i lo[2], hi[2];
        for (int h = 0; h < 2; h++) { /* rows 4h..4h+3 */
            const uint8_t *n = wb + at + 4 * h * stride;
            const __m512i v = lanes4(n, n + stride, n + 2 * stride, n + 3 * stride);
            lo[h] = _mm512_and_si512(v, mask);
            hi[h] = _mm512_and_si512(_mm512_srli_epi16(v, 4), mask);
            if (qtype == IQ4_NL) lo[h] = _mm512_shuffle_epi8(table, lo[h]), hi[h] = _mm512_shuffle_epi8(table, hi[h]);
            if (five) { /* value j's fifth bit: bit j of the u32 before the nibbles */
                const uint8_t *q = n - 4;
                const __m128i qh = _mm_setr_epi32(load32(q), load32(q + stride), load32(q + 2 * stride),
                                                  load32(q + 3 * stride));
                const __m128i bits = _mm_shuffle_epi8(qh, halves);
                lo[h] = _mm512_mask_add_epi8(lo[h], _cvtu64_mask64((uint64_t)_mm_cvtsi128_si64(bits)), lo[h],
                                             sixteen);
                hi[h] = _mm512_mask_add_epi8(hi[h], _cvtu64_mask64((uint64_t)_mm_extract_epi64(bits, 1)), hi[h],
                                             sixteen);
            }
        }
        if (np) {
            const __m512d d_lo = _mm512_permutexvar_pd(pair_lo, d), d_hi = _mm512_permutexvar_pd(pair_hi, d);
            const __m512d m_lo = _mm512_permutexvar_pd(pair_lo, m), m_hi = _mm512_permutexvar_pd(pair_hi, m);
            for (int p = 0; p < np; p++) {
                const pair_side *ps = side + p * nb + b;
                __m512i dots = pair_dots(lo, hi, qx + 2 * p * k + 32 * b, k);
                if (biased) {
                    int64_t bias; /* the pair's two int32, as one 64-bit lane to broadcast */
                    memcpy(&bias, ps->bias, 8);
                    dots = _mm512_add_epi32(dots, _mm512_set1_epi64(bias));
                }
                const __m512d dxv = _mm512_broadcast_f64x2(_mm_loadu_pd(ps->dx));
                const __m512d dot_lo = _mm512_cvtepi32_pd(_mm512_castsi512_si256(dots));
                const __m512d dot_hi = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(dots, 1));
                const __m512d dxsv = _mm512_broadcast_f64x2(_mm_loadu_pd(ps->dxs));
                pacc[2 * p] = add_term(qtype, pacc[2 * p], _mm512_mul_pd(d_lo, dxv), dot_lo, m_lo, dxsv);
                pacc[2 * p + 1] = add_term(qtype, pacc[2 * p + 1], _mm512_mul_pd(d_hi, dxv), dot_hi, m_hi, dxsv);
            }
        }
        for (int t = t1; t < tn; t++) {
            const int8_t *y = qx + t * k + 32 * b;
            const __m512i y_lo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)y));
            const __m512i y_hi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(y + 16)));
            __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[0], y_lo);
            __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[1], y_lo);
            s0 = _mm512_dpbusd_epi32(s0, hi[0], y_hi);
            s1 = _mm512_dpbusd_epi32(s1, hi[1], y_hi);
            __m256i dots = sums8_of_lanes(s0, s1);
            if (qtype == Q4_0) dots = _mm256_sub_epi32(dots, _mm256_set1_epi32(8 * sx[t * nb + b]));
            if (qtype == Q5_0) dots = _mm256_sub_epi32(dots, _mm256_set1_epi32(16 * sx[t * nb + b]));
            if (qtype == IQ4_NL) dots = _mm256_sub_epi32(dots, _mm256_set1_epi32(128 * sx[t * nb + b]));
            acc[t] = add_term(qtype, acc[t], _mm512_mul_pd(d, _mm512_set1_pd(dx[t * nb + b])), _mm512_cvtepi32_pd(dots),
                              m, _mm512_set1_pd(dxs[t * nb + b]));
        }
    }
    /* a pair's 16 outputs: (row, y0), (row, y1) for rows 0 4 1 5 2 6 3 7 -> y0's rows 0..7, then y1's */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15);
    for (int p = 0; p < np; p++) {
        const __m512 f = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(pacc[2 * p])),
                                            _mm512_cvtpd_ps(pacc[2 * p + 1]), 1);
        const __m512 o = _mm512_permutexvar_ps(order, f);
        _mm256_storeu_ps(out + 2 * p * out_step, _mm512_castps512_ps256(o));
        _mm256_storeu_ps(out + (2 * p + 1) * out_step, _mm512_extractf32x8_ps(o, 1));
    }
    for (int t = t1; t < tn; t++) _mm256_storeu_ps(out + t * out_step, _mm512_cvtpd_ps(acc[t]));
}

/* one copy per format and tile size, so that the branches are resolved at compile time */
#define TILE_PARAMS                                                                                       \
    const uint8_t *w, int64_t stride, int64_t nb, int64_t k, const int8_t *qx, const double *dx,         \
        const double *dxs, const int32_t *sx, const pair_side *side, float *out, int64_t out_step
#define TILE_FN(QNAME, QTYPE, TN)                                                                         \
    VNNI_Q static void rows8_##QNAME##_##TN(TILE_PARAMS) {                                              \
        rows8_vnni(QTYPE, TN, w, stride, nb, k, qx, dx, dxs, sx, side, out, out_step);                         \
    }
#define TILE_FNS(QNAME, QTYPE)                                                                            \
    TILE_FN(QNAME, QTYPE, 1) TILE_FN(QNAME, QTYPE, 2) TILE_FN(QNAME, QTYPE, 3) TILE_FN(QNAME, QTYPE, 4)      \
    TILE_FN(QNAME, QTYPE, 5) TILE_FN(QNAME, QTYPE, 6) TILE_FN(QNAME, QTYPE, 7) TILE_FN(QNAME, QTYPE, 8)
TILE_FNS(q8_0, Q8_0)
TILE_FNS(q4_0, Q4_0)
TILE_FNS(q4_1, Q4_1)
TILE_FNS(q5_0, Q5_0)
TILE_FNS(q5_1, Q5_1)
TILE_FNS(iq4_nl, IQ4_NL)

typedef void (*tile_fn)(TILE_PARAMS);
#define TILES_OF(QNAME)                                                                                   \
    {rows8_##QNAME##_1, rows8_##QNAME##_2, rows8_##QNAME##_3, rows8_##QNAME##_4,                           \
     rows8_##QNAME##_5, rows8_##QNAME##_6, rows8_##QNAME##_7, rows8_##QNAME##_8}
/* by format code: tiles of 1 to 8 activation rows (a server's batch of any size up to 8 unpacks each
 * weight block once; tiles of 1, 2, 4 and 8 alone took 3 rows as 2 + 1, twice the unpacking, 10% more
 * than 4 rows) */
static const tile_fn TILES[NQTYPES][8] = {[Q8_0] = TILES_OF(q8_0), [Q4_0] = TILES_OF(q4_0),
                                         [Q4_1] = TILES_OF(q4_1), [Q5_0] = TILES_OF(q5_0),
                                         [Q5_1] = TILES_OF(q5_1), [IQ4_NL] = TILES_OF(iq4_nl)};
#endif

int vg_q8_vnni_takes(int qtype) {
#if VG_X86
    return qtype >= 0 && qtype < NQTYPES && TILES[qtype][0] != 0;
#else
    (void)qtype;
    return 0;
#endif
}

#if VG_X86
/* the pairs' side data of t activation rows (pair p: rows 2p, 2p + 1), or NULL (out of memory, or no pair) */
static pair_side *pair_sides(int qtype, int64_t t, int64_t nb, const double *dx, const double *dxs,
                             const int32_t *sx) {
    if (t < PAIRS_FROM || qtype == Q8_0) return NULL;
    pair_side *side = malloc(sizeof(pair_side) * (size_t)(t / 2 * nb));
    if (!side) return NULL;
    const int32_t c = qtype == Q4_0 ? 8 : qtype == Q5_0 ? 16 : qtype == IQ4_NL ? 128 : 0;
    for (int64_t p = 0; p < t / 2; p++)
        for (int64_t b = 0; b < nb; b++) {
            pair_side *ps = side + p * nb + b;
            for (int64_t j = 0; j < 2; j++) {
                const int64_t at = (2 * p + j) * nb + b;
                ps->dx[j] = dx[at], ps->dxs[j] = dxs[at], ps->bias[j] = -c * sx[at];
            }
        }
    return side;
}
#endif

int64_t vg_q8_rows8_vnni(int qtype, const uint8_t *w, int64_t r, int64_t hi, int64_t n, int64_t k, int64_t t,
                         const int8_t *qx, const double *dx, const double *dxs, const int32_t *sx, float *out) {
#if VG_X86
    const int64_t nb = k / 32, stride = nb * BLOCK_BYTES[qtype];
    if (r + 8 > hi) return r;
    pair_side *side = pair_sides(qtype, t, nb, dx, dxs, sx);
    for (; r + 8 <= hi; r += 8)
        for (int64_t t0 = 0; t0 < t;) {
            /* where the pairs' data could not be made (out of memory), a row at a time */
            const int tn = side || qtype == Q8_0 || t < PAIRS_FROM ? (t - t0 >= 8 ? 8 : (int)(t - t0)) : 1;
            TILES[qtype][tn - 1](w + r * stride, stride, nb, k, qx + t0 * k, dx + t0 * nb, dxs + t0 * nb,
                                 sx + t0 * nb, side ? side + t0 / 2 * nb : NULL, out + t0 * n + r, n);
            t0 += tn;
        }
    free(side);
#else
    (void)qtype, (void)w, (void)hi, (void)n, (void)k, (void)t, (void)qx, (void)dx, (void)dxs, (void)sx, (void)out;
#endif
    return r;
}
