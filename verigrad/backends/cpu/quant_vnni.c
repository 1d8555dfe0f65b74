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
 * Layout: the 8 rows' values of a block unpacked into four zmm, v[i] holding values 8i..8i+7 of row r in
 * 64-bit lane r (the nibble bytes of 4 rows loaded a row per 128-bit lane, then their halves gathered by
 * vpermt2q), against the activations' 8 bytes broadcast to every 64-bit lane: a row's dot in two int32
 * lanes, one add from its sum (where 4 int32 lanes a row took a tree of 9 unpacks and adds for 16 dots:
 * 6-10% of an 8-row tile in L2). q8_0: 2 rows' 32 bytes, one row per 256 bits, against the 32 bytes
 * broadcast. q5's fifth bits become the byte masks of a masked add of 16. q8_0's signed weights: (y + 128)
 * as u8 times w, less 128 * sum(w). iq4_nl's signed table values: the nibbles through the table plus 128
 * (vpshufb, 1..241 as u8) times y, less 128 * sum(y) (as q4_0's nibbles less 8 * sum(y)). */
#include "quant.h"

#if VG_X86
#define VNNI_Q __attribute__((target("avx2,f16c,avx512f,avx512dq,avx512bw,avx512vl,avx512vnni")))

/* the little-endian 64 bits at p */
static inline int64_t load64(const int8_t *p) {
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* the 16 bytes at a, b, c, d in the four 128-bit lanes */
VNNI_Q __attribute__((always_inline)) static inline __m512i lanes4(const uint8_t *a, const uint8_t *b,
                                                                   const uint8_t *c, const uint8_t *d) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)a));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)b), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)c), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)d), 3);
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
    double dx[4], dxs[4]; /* a, a, b, b: the lanes of pair_sums' 128-bit lane */
    int32_t bias[4];
} pair_side;

/* a zero the register renamer makes (vpxord's zeroing idiom, no execution port), where the compiler copied
 * one zero register before each accumulating vpdpbusd */
VNNI_Q __attribute__((always_inline)) static inline __m512i fresh_zero(void) {
    __m512i z;
    __asm__ volatile("vpxord %0, %0, %0" : "=v"(z));
    return z;
}

/* the integer dot parts of 8 weight rows' unpacked values v[i] (values 8i..8i+7 of row r in 64-bit lane r)
 * with activations y: two int32 parts a row (lanes 2r, 2r + 1), each of 16 products */
VNNI_Q __attribute__((always_inline)) static inline __m512i row_dots(const __m512i *v, const int8_t *y) {
    __m512i s = fresh_zero();
    for (int i = 0; i < 4; i++) s = _mm512_dpbusd_epi32(s, v[i], _mm512_set1_epi64(load64(y + 8 * i)));
    return s;
}

/* the 8 rows' dots of row_dots' parts s: the sums of lanes 2r and 2r + 1 */
VNNI_Q __attribute__((always_inline)) static inline __m256i sums8_of_pairs(__m512i s) {
    const __m512i u = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
    const __m512i order = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, u));
}

/* two activation rows' parts (sa, sb: row_dots') -> their 16 dots, by 128-bit lane l: (row 2l, a), (row 2l + 1,
 * a), (row 2l, b), (row 2l + 1, b) */
VNNI_Q __attribute__((always_inline)) static inline __m512i pair_sums(__m512i sa, __m512i sb) {
    const __m512 a = _mm512_castsi512_ps(sa), b = _mm512_castsi512_ps(sb);
    return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0))),
                            _mm512_castps_si512(_mm512_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1))));
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
    /* the 8 rows' u32 of fifth bits -> byte j of each row in 64-bit lane j (values 8j..8j+7's bits) */
    const __m256i bytes_by_row = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m256i quads = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    /* the first and the second 8 nibble bytes of each row: rows 0-3 in a, 4-7 in b (a row per 128-bit lane) */
    const __m512i firsts = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    const __m512i seconds = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const __m256i offsets = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                               _mm256_set1_epi32((int32_t)stride));
    const __m512i evens_odds = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    /* a pair's lanes (pair_sums'): weight rows 0 1 0 1 2 3 2 3 (low half) and 4 5 4 5 6 7 6 7 (high) */
    const __m512i pair_lo = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
    const __m512i pair_hi = _mm512_setr_epi64(4, 5, 4, 5, 6, 7, 6, 7);
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
        /* the 8 rows' values 8i..8i+7 in v[i], a row per 64-bit lane */
        __m512i v[4];
        {
            const uint8_t *n = wb + at;
            const __m512i a = lanes4(n, n + stride, n + 2 * stride, n + 3 * stride);
            const __m512i c = lanes4(n + 4 * stride, n + 5 * stride, n + 6 * stride, n + 7 * stride);
            const __m512i first = _mm512_permutex2var_epi64(a, firsts, c);
            const __m512i second = _mm512_permutex2var_epi64(a, seconds, c);
            v[0] = _mm512_and_si512(first, mask), v[1] = _mm512_and_si512(second, mask);
            v[2] = _mm512_and_si512(_mm512_srli_epi16(first, 4), mask);
            v[3] = _mm512_and_si512(_mm512_srli_epi16(second, 4), mask);
            if (qtype == IQ4_NL)
                for (int i = 0; i < 4; i++) v[i] = _mm512_shuffle_epi8(table, v[i]);
            if (five) { /* value j's fifth bit: bit j of the u32 before the nibbles */
                const uint8_t *q = n - 4;
                const __m256i qh = _mm256_setr_epi32(load32(q), load32(q + stride), load32(q + 2 * stride),
                                                     load32(q + 3 * stride), load32(q + 4 * stride),
                                                     load32(q + 5 * stride), load32(q + 6 * stride),
                                                     load32(q + 7 * stride));
                const __m256i bits = _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(qh, bytes_by_row), quads);
                const uint64_t words[4] = {
                    (uint64_t)_mm256_extract_epi64(bits, 0), (uint64_t)_mm256_extract_epi64(bits, 1),
                    (uint64_t)_mm256_extract_epi64(bits, 2), (uint64_t)_mm256_extract_epi64(bits, 3)};
                for (int i = 0; i < 4; i++)
                    v[i] = _mm512_mask_add_epi8(v[i], _cvtu64_mask64(words[i]), v[i], sixteen);
            }
        }
        if (np) {
            const __m512d d_lo = _mm512_permutexvar_pd(pair_lo, d), d_hi = _mm512_permutexvar_pd(pair_hi, d);
            const __m512d m_lo = _mm512_permutexvar_pd(pair_lo, m), m_hi = _mm512_permutexvar_pd(pair_hi, m);
            for (int p = 0; p < np; p++) {
                const pair_side *ps = side + p * nb + b;
                const int8_t *y = qx + 2 * p * k + 32 * b;
                __m512i dots = pair_sums(row_dots(v, y), row_dots(v, y + k));
                if (biased)
                    dots = _mm512_add_epi32(dots, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ps->bias)));
                const __m512d dxv = _mm512_broadcast_f64x4(_mm256_loadu_pd(ps->dx));
                const __m512d dot_lo = _mm512_cvtepi32_pd(_mm512_castsi512_si256(dots));
                const __m512d dot_hi = _mm512_cvtepi32_pd(_mm512_extracti64x4_epi64(dots, 1));
                const __m512d dxsv = _mm512_broadcast_f64x4(_mm256_loadu_pd(ps->dxs));
                pacc[2 * p] = add_term(qtype, pacc[2 * p], _mm512_mul_pd(d_lo, dxv), dot_lo, m_lo, dxsv);
                pacc[2 * p + 1] = add_term(qtype, pacc[2 * p + 1], _mm512_mul_pd(d_hi, dxv), dot_hi, m_hi, dxsv);
            }
        }
        for (int t = t1; t < tn; t++) {
            __m256i dots = sums8_of_pairs(row_dots(v, qx + t * k + 32 * b));
            if (qtype == Q4_0) dots = _mm256_sub_epi32(dots, _mm256_set1_epi32(8 * sx[t * nb + b]));
            if (qtype == Q5_0) dots = _mm256_sub_epi32(dots, _mm256_set1_epi32(16 * sx[t * nb + b]));
            if (qtype == IQ4_NL) dots = _mm256_sub_epi32(dots, _mm256_set1_epi32(128 * sx[t * nb + b]));
            acc[t] = add_term(qtype, acc[t], _mm512_mul_pd(d, _mm512_set1_pd(dx[t * nb + b])), _mm512_cvtepi32_pd(dots),
                              m, _mm512_set1_pd(dxs[t * nb + b]));
        }
    }
    /* a pair's 16 outputs, pair_sums' -> y0's rows 0..7, then y1's */
    const __m512i order = _mm512_setr_epi32(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
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
            for (int64_t j = 0; j < 4; j++) {
                const int64_t at = (2 * p + j / 2) * nb + b;
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
