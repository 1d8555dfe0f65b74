/* qmatmul_q8 for the 256-value formats (q4_k, q5_k, q6_k, q2_k, q3_k, iq4_xs): the weight's blocks against
 * activations quantized as llama.cpp's q8_K (ops/quant.py quantize_q8_k: per 256 values, iscale = -127 /
 * the first value of the largest |x|, q = rint(x * iscale), d = 1 / iscale, bsums per 16 values).
 *
 * vg_qmatmul_k8: out[t, n] = qmatmul_q8's reference (ops/quant.py _qmatmul_q8_k_reference), bit for bit.
 * Each weight block is unpacked once per tile of activation rows into a kblock: an unsigned integer per
 * value (iq4_xs: the table value's magnitude, its sign moved to the activation), and per 16 values a scale,
 * a bias and a min, such that block b's exact integers are
 *   sumi = sum_g scale_g * sum_{i in g} u_i y_i - sum_g bias_g * bsums_g,   summ = sum_g mins_g * bsums_g
 * (q6_k's values are u - 32: bias 32 scale; q3_k's u - 4: bias 4 scale). Each output sums, in block order in
 * double from +0.0, the terms (d_w * d_x) * sumi [- (dmin_w * d_x) * summ], rounded once to f32.
 *
 * The integer dots are exact on every path (|u y| pairs fit int16: u <= 63, or |value| <= 127 with
 * |y| <= 127; |sumi| < 2^31), and the double arithmetic is the same scalar code on every path, so the
 * portable, AVX2, AVX-512 (BW) and VNNI paths give the same bits; vg_quant_simd (quant.c) chooses the path
 * (the AVX-512 one takes calls of 32 activation rows or more, AVX2 the others). The VNNI path (level 3) takes
 * 8 weight rows at a time, each block unpacked in registers once for a tile of up to 8 activation rows, the
 * 8 rows' dots made by vpmaddubsw and vpdpwssd (the scales as int16 lanes) and reduced together, and the 8
 * rows' double terms in one vector's lanes; a band's last rows (fewer than 8) take the row-at-a-time paths.
 * Threads take bands of weight rows and each output is computed by one thread in one order, independent of
 * the other activation rows: the same bits for every thread count and batch.
 */
#include "quant.h"

#define TILE 16 /* activation rows that share each unpacked weight block */

/* the 256-value formats' block bytes (0: a format this file does not take) */
static int64_t block_bytes(int qtype) {
    const int k_format = qtype == Q4_K || qtype == Q5_K || qtype == Q6_K || qtype == Q2_K || qtype == Q3_K;
    return k_format || qtype == IQ4_XS ? BLOCK_BYTES[qtype] : 0;
}


/* ---------------------------------------------------------------- activations: llama.cpp's q8_K */

/* x f32[k] -> q int8[k], d[k/256] (0 for a zero block or one whose iscale overflows, NaN for one with an
 * inf or NaN), bsums int16[k/16] */
static void quantize_k_row(const float *x, int64_t k, int8_t *q, double *d, int16_t *bsums) {
    for (int64_t b = 0; b < k / 256; b++) {
        const float *xb = x + 256 * b;
        int8_t *qb = q + 256 * b;
        uint32_t amax = 0;
        int at = 0;
        for (int i = 0; i < 256; i++) {
            uint32_t bits;
            memcpy(&bits, xb + i, 4);
            bits &= 0x7fffffffu;
            if (bits > amax) amax = bits, at = i;
        }
        float iscale = 0.0f;
        if (amax < 0x7f800000u && amax != 0) {
            iscale = -127.0f / xb[at];
            if (!isfinite(iscale)) iscale = 0.0f;
        }
        if (iscale == 0.0f) {
            memset(qb, 0, 256);
            memset(bsums + 16 * b, 0, 16 * sizeof(int16_t));
            d[b] = amax >= 0x7f800000u ? NAN : 0.0;
            continue;
        }
        for (int i = 0; i < 256; i++) qb[i] = (int8_t)(int)nearbyintf(xb[i] * iscale);
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += qb[16 * g + i];
            bsums[16 * b + g] = (int16_t)s;
        }
        d[b] = (double)(1.0f / iscale);
    }
}

/* ---------------------------------------------------------------- weights */

typedef struct {
    _Alignas(64) uint8_t u[256];   /* the unsigned integer of each value (iq4_xs: |value|) */
    _Alignas(64) int8_t sign[256]; /* iq4_xs: the values (their signs go to the activations) */
    int16_t scale[16], bias[16], mins[16];
    double d, dmin;
} kblock;

/* q4_k's and q5_k's 12 scale bytes (wb + 4) -> k4_scale for the 8 sub-blocks at once, 4 bytes a step
 * (llama.cpp's masks): scales 0..7 in the bytes of u[0..1], mins 0..7 in those of u[2..3] */
static inline __attribute__((always_inline)) void k4_scale_words(const uint8_t *wb, uint32_t u[4]) {
    memcpy(u, wb + 4, 12);
    u[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
    const uint32_t m03 = u[1] & 0x3f3f3f3fu;
    u[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
    u[2] = m03;
    u[0] &= 0x3f3f3f3fu;
}

/* weight block wb of `qtype` -> kb's scales, biases, mins, d and dmin (bias and mins: the formats that have
 * them) */
static inline __attribute__((always_inline)) void unpack_scales(int qtype, const uint8_t *wb, kblock *kb) {
    if (qtype == Q4_K || qtype == Q5_K) {
        uint32_t u[4];
        k4_scale_words(wb, u);
        uint8_t b[16];
        memcpy(b, u, 16);
        for (int j = 0; j < 8; j++) {
            kb->scale[2 * j] = kb->scale[2 * j + 1] = b[j];
            kb->mins[2 * j] = kb->mins[2 * j + 1] = b[8 + j];
        }
        kb->d = (double)vg_f16_at(wb);
        kb->dmin = (double)vg_f16_at(wb + 2);
    } else if (qtype == Q6_K) {
        for (int g = 0; g < 16; g++) {
            kb->scale[g] = (int8_t)wb[192 + g];
            kb->bias[g] = (int16_t)(32 * kb->scale[g]);
        }
        kb->d = (double)vg_f16_at(wb + 208);
    } else if (qtype == Q2_K) {
        for (int g = 0; g < 16; g++) kb->scale[g] = wb[g] & 15, kb->mins[g] = wb[g] >> 4;
        kb->d = (double)vg_f16_at(wb + 80);
        kb->dmin = (double)vg_f16_at(wb + 82);
    } else if (qtype == Q3_K) {
        const uint8_t *s = wb + 96;
        for (int g = 0; g < 16; g++) {
            int low = g < 8 ? s[g] & 15 : s[g - 8] >> 4, high = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
            kb->scale[g] = (int16_t)((low | (high << 4)) - 32);
            kb->bias[g] = (int16_t)(4 * kb->scale[g]); /* u is the value plus 4 */
        }
        kb->d = (double)vg_f16_at(wb + 108);
    } else { /* iq4_xs */
        const unsigned high = (unsigned)wb[2] | ((unsigned)wb[3] << 8);
        for (int j = 0; j < 8; j++) {
            int ls = ((wb[4 + j / 2] >> (4 * (j % 2))) & 15) | (((high >> (2 * j)) & 3) << 4);
            kb->scale[2 * j] = kb->scale[2 * j + 1] = (int16_t)(ls - 32);
        }
        kb->d = (double)vg_f16_at(wb);
    }
}

/* weight block wb of `qtype` -> kb's values (u, and iq4_xs's signed values), portable */
static void unpack_values(int qtype, const uint8_t *wb, kblock *kb) {
    uint8_t *u = kb->u;
    if (qtype == Q4_K || qtype == Q5_K) {
        const uint8_t *qs = wb + (qtype == Q4_K ? 16 : 48), *qh = wb + 16;
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                u[64 * c + l] = qs[32 * c + l] & 15;
                u[64 * c + 32 + l] = qs[32 * c + l] >> 4;
            }
        if (qtype == Q5_K) /* sub-block j's fifth bits: bit j of qh's 32 bytes */
            for (int j = 0; j < 8; j++)
                for (int l = 0; l < 32; l++) u[32 * j + l] |= ((qh[l] >> j) & 1) << 4;
    } else if (qtype == Q6_K) {
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = wb + 64 * h, *qh = wb + 128 + 32 * h;
            uint8_t *o = u + 128 * h;
            for (int l = 0; l < 32; l++) {
                o[l] = (ql[l] & 15) | ((qh[l] & 3) << 4);
                o[32 + l] = (ql[32 + l] & 15) | (((qh[l] >> 2) & 3) << 4);
                o[64 + l] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
                o[96 + l] = (ql[32 + l] >> 4) | (((qh[l] >> 6) & 3) << 4);
            }
        }
    } else if (qtype == Q2_K || qtype == Q3_K) {
        const uint8_t *qs = wb + (qtype == Q2_K ? 16 : 32);
        for (int c = 0; c < 2; c++)
            for (int s = 0; s < 4; s++)
                for (int l = 0; l < 32; l++) u[128 * c + 32 * s + l] = (qs[32 * c + l] >> (2 * s)) & 3;
        if (qtype == Q3_K) /* value i's bit of hmask: bit i / 32 of byte i % 32 */
            for (int i = 0; i < 8; i++)
                for (int l = 0; l < 32; l++) u[32 * i + l] |= ((wb[l] >> i) & 1) << 2;
    } else { /* iq4_xs */
        const uint8_t *qs = wb + 8;
        for (int j = 0; j < 8; j++)
            for (int l = 0; l < 16; l++) {
                kb->sign[32 * j + l] = IQ4_VALUES[qs[16 * j + l] & 15];
                kb->sign[32 * j + 16 + l] = IQ4_VALUES[qs[16 * j + l] >> 4];
            }
        for (int i = 0; i < 256; i++) u[i] = (uint8_t)(kb->sign[i] < 0 ? -kb->sign[i] : kb->sign[i]);
    }
}

/* sum_g scale_g * sum_{i in g} value_i y_i, portable */
static int32_t dot_scalar(int qtype, const kblock *kb, const int8_t *y) {
    int32_t total = 0;
    for (int g = 0; g < 16; g++) {
        int32_t s = 0;
        for (int i = 16 * g; i < 16 * g + 16; i++)
            s += (qtype == IQ4_XS ? (int32_t)kb->sign[i] : (int32_t)kb->u[i]) * y[i];
        total += kb->scale[g] * s;
    }
    return total;
}

/* sum_g bias_g * bsums_g and sum_g mins_g * bsums_g, portable */
static void corrections_scalar(int qtype, const kblock *kb, const int16_t *bs, int32_t *bias, int32_t *summ) {
    int32_t b = 0, m = 0;
    if (qtype == Q6_K || qtype == Q3_K)
        for (int g = 0; g < 16; g++) b += (int32_t)kb->bias[g] * bs[g];
    if (qtype == Q4_K || qtype == Q5_K || qtype == Q2_K)
        for (int g = 0; g < 16; g++) m += (int32_t)kb->mins[g] * bs[g];
    *bias = b, *summ = m;
}

#if VG_X86
/* unpack_values with 32 bytes a step */
__attribute__((target("avx2"), always_inline)) static inline void unpack_values_avx2(int qtype, const uint8_t *wb,
                                                                                     kblock *kb) {
    const __m256i low4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    __m256i *u = (__m256i *)kb->u;
    if (qtype == Q4_K || qtype == Q5_K) {
        const uint8_t *qs = wb + (qtype == Q4_K ? 16 : 48);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb + 16));
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
            if (qtype == Q5_K) { /* bit 2c (low nibbles) and 2c + 1 (high) of qh, to 16 */
                __m256i b0 = _mm256_min_epu8(_mm256_and_si256(qh, _mm256_set1_epi8((char)(1 << (2 * c)))), one);
                __m256i b1 = _mm256_min_epu8(_mm256_and_si256(qh, _mm256_set1_epi8((char)(2 << (2 * c)))), one);
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(b0, 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(b1, 4));
            }
            _mm256_store_si256(u + 2 * c, lo);
            _mm256_store_si256(u + 2 * c + 1, hi);
        }
    } else if (qtype == Q6_K) {
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(wb + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(wb + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(wb + 128 + 32 * h));
            __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4);
            __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0c)), 2);
            __m256i h2 = _mm256_and_si256(qh, _mm256_set1_epi8(0x30));
            __m256i h3 = _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8((char)0xc0)), 2);
            _mm256_store_si256(u + 4 * h, _mm256_or_si256(_mm256_and_si256(l0, low4), h0));
            _mm256_store_si256(u + 4 * h + 1, _mm256_or_si256(_mm256_and_si256(l1, low4), h1));
            _mm256_store_si256(u + 4 * h + 2, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), h2));
            _mm256_store_si256(u + 4 * h + 3, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4), h3));
        }
    } else if (qtype == Q2_K || qtype == Q3_K) {
        const uint8_t *qs = wb + (qtype == Q2_K ? 16 : 32);
        const __m256i three = _mm256_set1_epi8(3), hm = _mm256_loadu_si256((const __m256i *)wb);
        for (int c = 0; c < 2; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            for (int s = 0; s < 4; s++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * s), three);
                if (qtype == Q3_K) {
                    __m256i bit = _mm256_min_epu8(_mm256_and_si256(hm, _mm256_set1_epi8((char)(1 << (4 * c + s)))), one);
                    q = _mm256_or_si256(q, _mm256_slli_epi16(bit, 2));
                }
                _mm256_store_si256(u + 4 * c + s, q);
            }
        }
    } else { /* iq4_xs */
        const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)IQ4_VALUES));
        for (int j = 0; j < 8; j++) {
            __m128i n = _mm_loadu_si128((const __m128i *)(wb + 8 + 16 * j));
            __m256i idx = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(n, 4), n), low4);
            __m256i v = _mm256_shuffle_epi8(table, idx);
            _mm256_store_si256((__m256i *)(kb->sign + 32 * j), v);
            _mm256_store_si256(u + j, _mm256_abs_epi8(v));
        }
    }
}

/* sum_g scale_g * sum_{i in g} value_i y_i with 32 values a step: u times y (iq4_xs: y with the value's
 * sign) in pairs summed in 16 bits (exact), times the pairs' scales in pairs summed in 32 */
__attribute__((target("avx2"), always_inline)) static inline int32_t dot_avx2(int qtype, const kblock *kb,
                                                                              const int8_t *y) {
    __m256i acc = _mm256_setzero_si256();
    for (int i = 0; i < 8; i++) {
        __m256i u = _mm256_load_si256((const __m256i *)(kb->u + 32 * i));
        __m256i v = _mm256_loadu_si256((const __m256i *)(y + 32 * i));
        if (qtype == IQ4_XS) v = _mm256_sign_epi8(v, _mm256_load_si256((const __m256i *)(kb->sign + 32 * i)));
        __m256i sc = qtype == Q4_K || qtype == Q5_K || qtype == IQ4_XS
                         ? _mm256_set1_epi16(kb->scale[2 * i])
                         : _mm256_set_m128i(_mm_set1_epi16(kb->scale[2 * i + 1]), _mm_set1_epi16(kb->scale[2 * i]));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, v), sc));
    }
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* corrections_scalar's sums, 16 products at once */
__attribute__((target("avx2"), always_inline)) static inline void corrections_avx2(int qtype, const kblock *kb,
                                                                                   const int16_t *bs,
                                                                                   int32_t *bias, int32_t *summ) {
    *bias = 0, *summ = 0;
    const int16_t *c = qtype == Q6_K || qtype == Q3_K ? kb->bias : kb->mins;
    if (qtype == IQ4_XS) return;
    __m256i p = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)c), _mm256_loadu_si256((const __m256i *)bs));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    *(c == kb->bias ? bias : summ) = _mm_cvtsi128_si32(s);
}

/* 64 bytes that unpack_values_avx2 stored 32 at a time (one 64-byte load of them would wait for both stores
 * to reach the cache: store forwarding takes a load from one store) */
__attribute__((target("avx512f"), always_inline)) static inline __m512i load_halves(const uint8_t *p) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_load_si256((const __m256i *)p)),
                              _mm256_load_si256((const __m256i *)(p + 32)), 1);
}

/* dot_avx2 with 64 values a step */
__attribute__((target("avx512f,avx512bw"), always_inline)) static inline int32_t dot_avx512(int qtype,
                                                                                            const kblock *kb,
                                                                                            const int8_t *y) {
    __m512i acc = _mm512_setzero_si512();
    for (int i = 0; i < 4; i++) {
        __m512i u = load_halves(kb->u + 64 * i);
        __m512i v = _mm512_loadu_si512((const void *)(y + 64 * i));
        if (qtype == IQ4_XS) {
            __mmask64 negative = _mm512_movepi8_mask(load_halves((const uint8_t *)kb->sign + 64 * i));
            v = _mm512_mask_sub_epi8(v, negative, _mm512_setzero_si512(), v);
        }
        const int16_t *g = kb->scale + 4 * i;
        __m512i sc = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_set_m128i(_mm_set1_epi16(g[1]), _mm_set1_epi16(g[0]))),
            _mm256_set_m128i(_mm_set1_epi16(g[3]), _mm_set1_epi16(g[2])), 1);
        acc = _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, v), sc));
    }
    return _mm512_reduce_add_epi32(acc);
}

/* ---------------------------------------------------------------- AVX-512 VNNI: 8 weight rows at a time */

#define VNNI_K __attribute__((target("avx2,f16c,avx512f,avx512dq,avx512bw,avx512vl,avx512vnni")))

/* 8 weight rows' block unpacked once for a tile of activation rows, row r: its values u[r][c] (64 a chunk, in
 * order); its scales sc[r][c] as int16 lanes (lane l, the pair of products of values 64c + 2l and 64c + 2l + 1,
 * takes the scale of their group of 16); cor[r], the int16 lanes that a vpdpwssd against the bsums (lanes
 * 0..15, zeros above) turns into the corrections: the negated bias (q6_k, q3_k: added to sumi) or the mins
 * (q4_k, q5_k, q2_k: summ); iq4_xs's negative values as masks; d and dmin by row, as f16 */
typedef struct {
    __m512i u[8][4], sc[8][4], cor[8];
    __mmask64 negative[8][4];
    uint32_t dm[8]; /* the f16 d (low half) and dmin (high half, the formats that have one) by row */
} kblock8;

/* the 8 int32 sums of a[0..7] (16 lanes each): row r's in lane r */
VNNI_K __attribute__((always_inline)) static inline __m256i rows8_sums(const __m512i *a) {
    __m512i t[4], u[2];
    for (int i = 0; i < 4; i++) /* per 128 bits: rows 2i, 2i + 1, 2i, 2i + 1 */
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * i], a[2 * i + 1]),
                                _mm512_unpackhi_epi32(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 2; i++) /* per 128 bits: rows 4i .. 4i + 3 */
        u[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(t[2 * i], t[2 * i + 1]),
                                _mm512_unpackhi_epi64(t[2 * i], t[2 * i + 1]));
    /* 128-bit parts (u0's 0 + 2, 1 + 3, u1's 0 + 2, 1 + 3), then part 0 + 1 (rows 0..3) and 2 + 3 (4..7) */
    __m512i s = _mm512_add_epi32(_mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_i32x4(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
    s = _mm512_add_epi32(s, _mm512_shuffle_i32x4(s, s, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m512i order = _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(order, s));
}

/* the int16 lanes of v at at + l / width, l = 0..31 (a chunk's scales by value pair: width 16 or 8) */
VNNI_K __attribute__((always_inline)) static inline __m512i spread16(__m512i v, int at, int width) {
    const __m512i lane = _mm512_setr_epi32(0x10000, 0x30002, 0x50004, 0x70006, 0x90008, 0xb000a, 0xd000c,
                                           0xf000e, 0x110010, 0x130012, 0x150014, 0x170016, 0x190018,
                                           0x1b001a, 0x1d001c, 0x1f001e);
    __m512i index = width == 16 ? _mm512_srli_epi16(lane, 4) : width == 8 ? _mm512_srli_epi16(lane, 3)
                                                                           : _mm512_srli_epi16(lane, 1);
    return _mm512_permutexvar_epi16(_mm512_add_epi16(index, _mm512_set1_epi16((short)at)), v);
}

/* block wb -> row r of k8, in registers (unpack_scales's and unpack_values's integers) */
VNNI_K __attribute__((always_inline)) static inline void unpack_row8(int qtype, const uint8_t *wb, int r,
                                                                    kblock8 *k8) {
    const __m512i low4 = _mm512_set1_epi8(15);
    if (qtype == Q4_K || qtype == Q5_K) {
        uint32_t u[4];
        k4_scale_words(wb, u);
        const __m512i sm = _mm512_zextsi256_si512(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)u)));
        for (int c = 0; c < 4; c++) k8->sc[r][c] = spread16(sm, 2 * c, 16); /* sub-blocks 2c, 2c + 1 */
        k8->cor[r] = spread16(sm, 8, 2); /* group g: min g / 2 (lanes 16.. meet the bsums' zeros) */
        k8->dm[r] = (uint32_t)load32(wb);
        const uint8_t *qs = wb + (qtype == Q4_K ? 16 : 48);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb + 16)));
        for (int h = 0; h < 2; h++) { /* qs[64h..]: chunk 2h's low nibbles, then chunk 2h + 1's */
            const __m512i q = _mm512_loadu_si512((const void *)(qs + 64 * h));
            const __m512i lo = _mm512_and_si512(q, low4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), low4);
            for (int e = 0; e < 2; e++) {
                const int c = 2 * h + e;
                __m512i v = e ? _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2))
                              : _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
                if (qtype == Q5_K) { /* value 32j + l's fifth bit: bit j of qh[l] (j = 2c, 2c + 1) */
                    const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * c))),
                                                           _mm256_set1_epi8((char)(2 << (2 * c))), 1);
                    v = _mm512_mask_add_epi8(v, _mm512_test_epi8_mask(qh, bit), v, _mm512_set1_epi8(16));
                }
                k8->u[r][c] = v;
            }
        }
    } else if (qtype == Q6_K) {
        const __m512i sc = _mm512_zextsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(wb + 192))));
        for (int c = 0; c < 4; c++) k8->sc[r][c] = spread16(sc, 4 * c, 8);
        k8->cor[r] = _mm512_sub_epi16(_mm512_setzero_si512(), _mm512_slli_epi16(sc, 5)); /* -32 scale */
        k8->dm[r] = (uint32_t)wb[208] | (uint32_t)wb[209] << 8;
        const __m512i bits = _mm512_set1_epi8(0x30);
        const __m512i left = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
        const __m512i right = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
        for (int h = 0; h < 2; h++) { /* unpack_values_avx2's, 64 values a step */
            const __m512i l = _mm512_loadu_si512((const void *)(wb + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(wb + 128 + 32 * h)));
            const __m512i h0 = _mm512_and_si512(_mm512_sllv_epi16(qh, left), bits);  /* bits 0-1, 2-3 */
            const __m512i h1 = _mm512_and_si512(_mm512_srlv_epi16(qh, right), bits); /* bits 4-5, 6-7 */
            k8->u[r][2 * h] = _mm512_or_si512(_mm512_and_si512(l, low4), h0);
            k8->u[r][2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), h1);
        }
    } else if (qtype == IQ4_XS) {
        /* sub-block j's scale: nibble j of the 4 bytes at 4, with bits 2j, 2j + 1 of the u16 at 2 above, less 32 */
        const __m128i bytes = _mm_cvtepu8_epi16(_mm_cvtsi32_si128(load32(wb + 4)));
        const __m128i low = _mm_unpacklo_epi16(_mm_and_si128(bytes, _mm_set1_epi16(15)), _mm_srli_epi16(bytes, 4));
        const __m128i high = _mm_and_si128(_mm_srlv_epi16(_mm_set1_epi16((short)(wb[2] | wb[3] << 8)),
                                                          _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
                                           _mm_set1_epi16(3));
        const __m128i ls = _mm_sub_epi16(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi16(32));
        const __m512i sub = _mm512_zextsi128_si512(ls);
        for (int c = 0; c < 4; c++) k8->sc[r][c] = spread16(sub, 2 * c, 16);
        k8->dm[r] = (uint32_t)wb[0] | (uint32_t)wb[1] << 8;
        const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)IQ4_VALUES));
        for (int c = 0; c < 4; c++) { /* qs[32c..]: 16 bytes per sub-block, low nibbles first */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(wb + 8 + 32 * c));
            const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
            const __m512i ordered = _mm512_shuffle_i64x2(both, both, _MM_SHUFFLE(3, 1, 2, 0)); /* lo0 hi0 lo1 hi1 */
            const __m512i v = _mm512_shuffle_epi8(table, _mm512_and_si512(ordered, low4));
            k8->negative[r][c] = _mm512_movepi8_mask(v);
            k8->u[r][c] = _mm512_abs_epi8(v);
        }
    } else { /* q2_k, q3_k */
        const uint8_t *qs = wb + (qtype == Q2_K ? 16 : 32);
        __m256i scales;
        if (qtype == Q2_K) { /* byte g: scale g (low nibble), min g (high) */
            const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)wb));
            scales = _mm256_and_si256(b, _mm256_set1_epi16(15));
            k8->cor[r] = _mm512_zextsi256_si512(_mm256_srli_epi16(b, 4));
            k8->dm[r] = (uint32_t)load32(wb + 80);
        } else { /* unpack_scales's: nibble g of bytes 96..103, with 2 bits of byte 104 + g % 4 above, less 32 */
            const uint8_t *sb = wb + 96;
            const __m128i b = _mm_loadl_epi64((const __m128i *)sb);
            const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(b, _mm_set1_epi8(15)),
                                                   _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(15)));
            const __m128i four = _mm_shuffle_epi8(_mm_cvtsi32_si128(load32(sb + 8)),
                                                  _mm_setr_epi8(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3));
            const __m256i high = _mm256_and_si256(
                _mm256_srlv_epi16(_mm256_cvtepu8_epi16(four), _mm256_setr_epi16(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6)),
                _mm256_set1_epi16(3));
            scales = _mm256_sub_epi16(_mm256_or_si256(_mm256_cvtepu8_epi16(low), _mm256_slli_epi16(high, 4)),
                                      _mm256_set1_epi16(32));
            k8->cor[r] = _mm512_zextsi256_si512(_mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(scales, 2)));
            k8->dm[r] = (uint32_t)wb[108] | (uint32_t)wb[109] << 8;
        }
        const __m512i sc = _mm512_zextsi256_si512(scales);
        const __m512i three = _mm512_set1_epi8(3);
        /* chunk k: values 128c + 32s + l, c = k / 2, s = 2 (k % 2) and 2 (k % 2) + 1 (the halves): bits 2s of
         * qs[32c + l]; q3_k's third bit, bit 4c + s of hmask[l] */
        const __m512i hm = qtype == Q3_K ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)wb))
                                         : _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) {
            const int c = k / 2, s0 = 2 * (k % 2);
            const __m512i q = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(qs + 32 * c)));
            const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * s0)),
                                                     _mm256_set1_epi16((short)(2 * s0 + 2)), 1);
            __m512i v = _mm512_and_si512(_mm512_srlv_epi16(q, shift), three);
            if (qtype == Q3_K) {
                const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * c + s0))),
                                                       _mm256_set1_epi8((char)(1 << (4 * c + s0 + 1))), 1);
                v = _mm512_mask_add_epi8(v, _mm512_test_epi8_mask(hm, bit), v, _mm512_set1_epi8(4));
            }
            k8->u[r][k] = v;
            k8->sc[r][k] = spread16(sc, 4 * k, 8);
        }
    }
}

/* 8 weight rows (w + r stride) against TN activation rows (block b of row t at t nb + b): out[t out_step + r].
 * ROW_BODY's arithmetic, one row per lane: sumi and summ are the same integers (vpmaddubsw's pairs are
 * exact, |u y + u' y'| <= 2 * 127 * 127, and int32 sums of exact integers that fit do not depend on the
 * order), the double terms the same operations in the same order. */
VNNI_K __attribute__((always_inline)) static inline void rows8_k8(int qtype, int tn, const uint8_t *w,
                                                                 int64_t stride, int64_t nb, const int8_t *qx,
                                                                 const double *dx, const int16_t *bsums,
                                                                 float *out, int64_t out_step, kblock8 *k8) {
    const int has_min = qtype == Q4_K || qtype == Q5_K || qtype == Q2_K, has_bias = qtype == Q6_K || qtype == Q3_K;
    const int64_t bytes = BLOCK_BYTES[qtype];
    const __m512i zero = _mm512_setzero_si512();
    __m512d acc[8];
    for (int t = 0; t < tn; t++) acc[t] = _mm512_setzero_pd();
    const uint8_t *next = w + 8 * stride; /* the next 8 rows: fetched while these are computed */
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *pf = next + 8 * b * bytes;
        for (int64_t off = 0; off < 8 * bytes; off += 64) _mm_prefetch((const char *)(pf + off), _MM_HINT_T0);
        for (int r = 0; r < 8; r++) unpack_row8(qtype, w + r * stride + b * bytes, r, k8);
        /* the 8 rows' d0 dmin0 d1 dmin1 ... as f32 (exact), then d0..d7 and dmin0..dmin7 */
        const __m512i evens_odds = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        const __m512 f = _mm512_permutexvar_ps(evens_odds, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)k8->dm)));
        const __m512d d = _mm512_cvtps_pd(_mm512_castps512_ps256(f));
        const __m512d dmin = has_min ? _mm512_cvtps_pd(_mm512_extractf32x8_ps(f, 1)) : _mm512_setzero_pd();
        for (int t = 0; t < tn; t++) {
            const int64_t at = t * nb + b;
            const int8_t *y = qx + 256 * at;
            const __m512i bs = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(bsums + 16 * at)));
            __m512i yv[4], s[8], m[8];
            for (int c = 0; c < 4; c++) yv[c] = _mm512_loadu_si512((const void *)(y + 64 * c));
            for (int r = 0; r < 8; r++) {
                __m512i a = has_bias ? _mm512_dpwssd_epi32(zero, k8->cor[r], bs) : zero; /* - bias */
                for (int c = 0; c < 4; c++) {
                    __m512i v = yv[c];
                    if (qtype == IQ4_XS) v = _mm512_mask_sub_epi8(v, k8->negative[r][c], zero, v);
                    a = _mm512_dpwssd_epi32(a, _mm512_maddubs_epi16(k8->u[r][c], v), k8->sc[r][c]);
                }
                s[r] = a;
                if (has_min) m[r] = _mm512_dpwssd_epi32(zero, k8->cor[r], bs);
            }
            const __m256i sumi = rows8_sums(s), cor = has_min ? rows8_sums(m) : _mm256_setzero_si256();
            const __m512d x = _mm512_set1_pd(dx[at]);
            __m512d term = _mm512_mul_pd(_mm512_mul_pd(d, x), _mm512_cvtepi32_pd(sumi));
            if (has_min) term = _mm512_sub_pd(term, _mm512_mul_pd(_mm512_mul_pd(dmin, x), _mm512_cvtepi32_pd(cor)));
            acc[t] = _mm512_add_pd(acc[t], term);
        }
    }
    for (int t = 0; t < tn; t++) _mm256_storeu_ps(out + t * out_step, _mm512_cvtpd_ps(acc[t]));
}

/* one copy per format and tile size, so that the branches are resolved at compile time */
#define K8_PARAMS                                                                                         \
    const uint8_t *w, int64_t stride, int64_t nb, const int8_t *qx, const double *dx, const int16_t *bsums, \
        float *out, int64_t out_step, kblock8 *k8
#define K8_FN(QNAME, QTYPE, TN)                                                                           \
    VNNI_K static void rows8_##QNAME##_##TN(K8_PARAMS) {                                                 \
        rows8_k8(QTYPE, TN, w, stride, nb, qx, dx, bsums, out, out_step, k8);                            \
    }
#define K8_FNS(QNAME, QTYPE) K8_FN(QNAME, QTYPE, 1) K8_FN(QNAME, QTYPE, 2) K8_FN(QNAME, QTYPE, 4) K8_FN(QNAME, QTYPE, 8)
K8_FNS(q4_k, Q4_K)
K8_FNS(q5_k, Q5_K)
K8_FNS(q6_k, Q6_K)
K8_FNS(q2_k, Q2_K)
K8_FNS(q3_k, Q3_K)
K8_FNS(iq4_xs, IQ4_XS)

typedef void (*k8_tile_fn)(K8_PARAMS);
#define K8_TILES_OF(QNAME) {rows8_##QNAME##_1, rows8_##QNAME##_2, rows8_##QNAME##_4, rows8_##QNAME##_8}
/* by format code: tiles of 1, 2, 4 and 8 activation rows */
static const k8_tile_fn K8_TILES[NQTYPES][4] = {[Q4_K] = K8_TILES_OF(q4_k), [Q5_K] = K8_TILES_OF(q5_k),
                                               [Q6_K] = K8_TILES_OF(q6_k), [Q2_K] = K8_TILES_OF(q2_k),
                                               [Q3_K] = K8_TILES_OF(q3_k), [IQ4_XS] = K8_TILES_OF(iq4_xs)};
#endif

/* ---------------------------------------------------------------- the product */

typedef struct {
    int qtype, level;
    const uint8_t *w;
    int64_t n, k, t; /* n: the outputs' row stride (the bands say which weight rows) */
    const int8_t *qx;
    const double *dx;
    const int16_t *bsums;
    float *out;
} kjob;

/* weight row w against activation rows t0..t1 (at most TILE): the outputs out[t * n] */
#define ROW_BODY(UNPACK, DOT, CORRECTIONS)                                                                  \
    const int64_t nb = p->k / 256, bytes = block_bytes(p->qtype);                                          \
    const int has_min = p->qtype == Q4_K || p->qtype == Q5_K || p->qtype == Q2_K;                           \
    double acc[TILE];                                                                                       \
    kblock kb;                                                                                              \
    for (int64_t t = t0; t < t1; t++) acc[t - t0] = 0.0;                                                   \
    for (int64_t b = 0; b < nb; b++) {                                                                      \
        const uint8_t *wb = w + b * bytes;                                                                  \
        unpack_scales(p->qtype, wb, &kb);                                                                   \
        UNPACK(p->qtype, wb, &kb);                                                                          \
        for (int64_t t = t0; t < t1; t++) {                                                                 \
            const int64_t at = t * nb + b;                                                                  \
            int32_t bias, summ;                                                                             \
            CORRECTIONS(p->qtype, &kb, p->bsums + 16 * at, &bias, &summ);                                   \
            const int32_t sumi = DOT(p->qtype, &kb, p->qx + 256 * at) - bias;                               \
            const double dx = p->dx[at];                                                                    \
            double term = (kb.d * dx) * (double)sumi;                                                       \
            if (has_min) term = term - (kb.dmin * dx) * (double)summ;                                       \
            acc[t - t0] = acc[t - t0] + term;                                                               \
        }                                                                                                   \
    }                                                                                                       \
    for (int64_t t = t0; t < t1; t++) out[(t - t0) * p->n] = (float)acc[t - t0];

typedef void (*row_fn)(const kjob *, const uint8_t *, int64_t, int64_t, float *);

static void row_scalar(const kjob *p, const uint8_t *w, int64_t t0, int64_t t1, float *out) {
    ROW_BODY(unpack_values, dot_scalar, corrections_scalar)
}

#if VG_X86
/* one copy per format, so that its branches are resolved at compile time */
#define ROWS(NAME, TARGET, QTYPE, DOT)                                                                      \
    __attribute__((target(TARGET))) static void NAME(const kjob *p, const uint8_t *w, int64_t t0, int64_t t1, \
                                                     float *out) {                                          \
        kjob q = *p;                                                                                        \
        q.qtype = QTYPE;                                                                                    \
        p = &q;                                                                                             \
        ROW_BODY(unpack_values_avx2, DOT, corrections_avx2)                                                 \
    }
#define ROWS_ALL(PREFIX, TARGET, DOT)                                                                       \
    ROWS(PREFIX##_q4_k, TARGET, Q4_K, DOT)                                                                  \
    ROWS(PREFIX##_q5_k, TARGET, Q5_K, DOT)                                                                  \
    ROWS(PREFIX##_q6_k, TARGET, Q6_K, DOT)                                                                  \
    ROWS(PREFIX##_q2_k, TARGET, Q2_K, DOT)                                                                  \
    ROWS(PREFIX##_q3_k, TARGET, Q3_K, DOT)                                                                  \
    ROWS(PREFIX##_iq4_xs, TARGET, IQ4_XS, DOT)
ROWS_ALL(avx2, "avx2", dot_avx2)
ROWS_ALL(avx512, "avx512f,avx512bw", dot_avx512)

/* by format code */
static row_fn row_vector(int level, int qtype) {
    switch (qtype) {
    case Q4_K: return level == 2 ? avx512_q4_k : avx2_q4_k;
    case Q5_K: return level == 2 ? avx512_q5_k : avx2_q5_k;
    case Q6_K: return level == 2 ? avx512_q6_k : avx2_q6_k;
    case Q2_K: return level == 2 ? avx512_q2_k : avx2_q2_k;
    case Q3_K: return level == 2 ? avx512_q3_k : avx2_q3_k;
    default: return level == 2 ? avx512_iq4_xs : avx2_iq4_xs;
    }
}
#endif

#if VG_X86
/* rows r.. of a band 8 at a time against every activation row, in tiles of 8, 4, 2 and 1; returns the first
 * row left (fewer than 8 before hi) */
VNNI_K static int64_t k8_rows8_band(const kjob *p, int64_t r, int64_t hi, int64_t stride) {
    const int64_t nb = p->k / 256;
    kblock8 *k8 = aligned_alloc(64, (sizeof(kblock8) + 63) / 64 * 64);
    if (!k8) return r; /* the rows then take the row-at-a-time path */
    for (; r + 8 <= hi; r += 8)
        for (int64_t t0 = 0; t0 < p->t;) {
            const int64_t left = p->t - t0;
            const int size = left >= 8 ? 3 : left >= 4 ? 2 : left >= 2 ? 1 : 0;
            K8_TILES[p->qtype][size](p->w + r * stride, stride, nb, p->qx + t0 * p->k, p->dx + t0 * nb,
                                     p->bsums + 16 * t0 * nb, p->out + t0 * p->n + r, p->n, k8);
            t0 += (int64_t)1 << size;
        }
    free(k8);
    return r;
}
#endif

/* the row-at-a-time path at `level` for t activation rows: AVX2's below 2 TILE rows where AVX-512's is allowed
 * (a decode call, tens of microseconds, ran AVX-512's rows 1.5-2.4x slower than AVX2's on the Xeon measured:
 * benchmarks/README.md; the same bits either way) */
static int row_level(int level, int64_t t) {
    if (level > 2) level = 2;
    return level == 2 && t < 2 * TILE ? 1 : level;
}

static void k8_band(void *ctx, int64_t lo, int64_t hi) {
    const kjob *p = (const kjob *)ctx;
    const int64_t stride = p->k / 256 * block_bytes(p->qtype);
    int64_t r = lo;
#if VG_X86
    if (p->level == 3) r = k8_rows8_band(p, r, hi, stride);
    const int level = row_level(p->level, p->t);
    const row_fn row = level ? row_vector(level, p->qtype) : row_scalar;
#else
    const row_fn row = row_scalar;
#endif
    for (; r < hi; r++)
        for (int64_t t0 = 0; t0 < p->t; t0 += TILE)
            row(p, p->w + r * stride, t0, t0 + TILE < p->t ? t0 + TILE : p->t, p->out + t0 * p->n + r);
}

/* the path taken: 3 where AVX-512 VNNI is allowed and the CPU has it (with BW), 2 AVX-512 (BW), 1 AVX2, 0
 * portable */
static int k8_level(void) {
    int level = vg_quant_simd(-1);
#if VG_X86
    if (level >= 2 && !vg_has_avx512bw()) level = 1;
#endif
    return level;
}

/* the code a call of t activation rows runs: 3 quant_k8.c's VNNI rows (8 weight rows at a time, a band's last
 * rows row_level's), else row_level's */
int vg_k8_path(int64_t t) {
    const int level = k8_level();
    return level == 3 ? 3 : row_level(level, t);
}

int vg_k8_quantize(const float *x, int64_t t, int64_t k, k8_acts *a) {
    const int64_t nb = k / 256;
    a->qx = malloc((size_t)(t * k) + 1);
    a->dx = malloc(sizeof(double) * (size_t)(t * nb) + 1);
    a->bsums = malloc(sizeof(int16_t) * (size_t)(16 * t * nb) + 1);
    if (!a->qx || !a->dx || !a->bsums) {
        vg_k8_free(a);
        return -1;
    }
    for (int64_t i = 0; i < t; i++)
        quantize_k_row(x + i * k, k, a->qx + i * k, a->dx + i * nb, a->bsums + 16 * i * nb);
    return 0;
}

void vg_k8_free(k8_acts *a) {
    free(a->qx), free(a->dx), free(a->bsums);
    a->qx = NULL, a->dx = NULL, a->bsums = NULL;
}

void vg_k8_product(int qtype, const uint8_t *w, int64_t n, int64_t k, int64_t t, const k8_acts *a, float *out,
                   int64_t out_stride, int64_t min_rows, int threads) {
    kjob p = {.qtype = qtype, .level = k8_level(), .w = w, .n = out_stride, .k = k, .t = t, .qx = a->qx,
              .dx = a->dx, .bsums = a->bsums, .out = out};
    vg_parallel_for(n, min_rows, threads, k8_band, &p);
}

/* out f32[t, n] = qmatmul_q8(x f32[t, k], w[n, k/256 blocks of qtype]); returns 0, or -1 when out of memory
 * (or for a format it does not take) */
int vg_qmatmul_k8(int qtype, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t, float *out,
                  int64_t min_rows, int threads) {
    k8_acts a;
    if (!block_bytes(qtype) || vg_k8_quantize(x, t, k, &a)) return -1;
    vg_k8_product(qtype, w, n, k, t, &a, out, n, min_rows, threads);
    vg_k8_free(&a);
    return 0;
}

/* out f32[t, n] = qmatmul_q8(rms_norm(x, norm_w, eps), w) for the 256-value formats; returns 0, or -1 when
 * out of memory */
int vg_rms_norm_qmatmul_k8(int qtype, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t,
                           float *out, int64_t min_rows, int threads, const float *norm_w, double eps,
                           int64_t block) {
    float *normed = malloc(sizeof(float) * (size_t)(t * k) + 1);
    if (!normed) return -1;
    vg_rms_norm_f32(x, norm_w, normed, t, k, eps, block, t, 1);
    int status = vg_qmatmul_k8(qtype, w, n, k, normed, t, out, min_rows, threads);
    free(normed);
    return status;
}
