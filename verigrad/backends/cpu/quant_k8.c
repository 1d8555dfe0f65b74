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
 * portable, AVX2 and AVX-512 (BW) paths give the same bits; vg_quant_simd (quant.c) chooses the path (the
 * AVX-512 one takes calls of 32 activation rows or more, AVX2 the others).
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

/* weight block wb of `qtype` -> kb's scales, biases, mins, d and dmin (bias and mins: the formats that have
 * them) */
static inline __attribute__((always_inline)) void unpack_scales(int qtype, const uint8_t *wb, kblock *kb) {
    if (qtype == Q4_K || qtype == Q5_K) {
        /* k4_scale for the 8 sub-blocks at once, 4 bytes a step (llama.cpp's masks): scales 0..7 in the
         * bytes of u[0..1], mins 0..7 in those of u[2..3] */
        uint32_t u[4];
        memcpy(u, wb + 4, 12);
        u[3] = ((u[2] >> 4) & 0x0f0f0f0fu) | (((u[1] >> 6) & 0x03030303u) << 4);
        const uint32_t m03 = u[1] & 0x3f3f3f3fu;
        u[1] = (u[2] & 0x0f0f0f0fu) | (((u[0] >> 6) & 0x03030303u) << 4);
        u[2] = m03;
        u[0] &= 0x3f3f3f3fu;
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
#endif

/* ---------------------------------------------------------------- the product */

typedef struct {
    int qtype, level;
    const uint8_t *w;
    int64_t n, k, t;
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

static void k8_band(void *ctx, int64_t lo, int64_t hi) {
    const kjob *p = (const kjob *)ctx;
    const int64_t stride = p->k / 256 * block_bytes(p->qtype);
#if VG_X86
    const row_fn row = p->level ? row_vector(p->level, p->qtype) : row_scalar;
#else
    const row_fn row = row_scalar;
#endif
    for (int64_t r = lo; r < hi; r++)
        for (int64_t t0 = 0; t0 < p->t; t0 += TILE)
            row(p, p->w + r * stride, t0, t0 + TILE < p->t ? t0 + TILE : p->t, p->out + t0 * p->n + r);
}

/* the path taken: 2 where AVX-512 is allowed and the CPU has its BW instructions, 1 AVX2, 0 portable */
static int k8_level(void) {
    int level = vg_quant_simd(-1);
    if (level > 2) level = 2; /* VNNI: quant_vnni.c's formats only */
#if VG_X86
    if (level == 2 && !vg_has_avx512bw()) level = 1;
#endif
    return level;
}

/* the path a call of t activation rows takes: k8_level's, but AVX2's below 2 TILE rows (a decode call, tens
 * of microseconds, ran AVX-512's rows 1.5-2.4x slower than AVX2's on the Xeon measured: benchmarks/README.md;
 * the same bits either way) */
int vg_k8_path(int64_t t) {
    const int level = k8_level();
    return level == 2 && t < 2 * TILE ? 1 : level;
}

/* out f32[t, n] = qmatmul_q8(x f32[t, k], w[n, k/256 blocks of qtype]); returns 0, or -1 when out of memory
 * (or for a format it does not take) */
int vg_qmatmul_k8(int qtype, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t, float *out,
                  int64_t min_rows, int threads) {
    const int64_t nb = k / 256;
    if (!block_bytes(qtype)) return -1;
    int8_t *qx = malloc((size_t)(t * k) + 1);
    double *dx = malloc(sizeof(double) * (size_t)(t * nb) + 1);
    int16_t *bsums = malloc(sizeof(int16_t) * (size_t)(16 * t * nb) + 1);
    if (!qx || !dx || !bsums) {
        free(qx), free(dx), free(bsums);
        return -1;
    }
    for (int64_t i = 0; i < t; i++) quantize_k_row(x + i * k, k, qx + i * k, dx + i * nb, bsums + 16 * i * nb);
    const int level = vg_k8_path(t);
    kjob p = {.qtype = qtype, .level = level, .w = w, .n = n, .k = k, .t = t, .qx = qx, .dx = dx,
              .bsums = bsums, .out = out};
    vg_parallel_for(n, min_rows, threads, k8_band, &p);
    free(qx), free(dx), free(bsums);
    return 0;
}

/* defined in rows.c: rms_norm's kernel (the reference's bits) */
void vg_rms_norm_f32(const float *x, const float *w, float *out, int64_t rows, int64_t n, double eps,
                     int64_t block, int64_t min_rows, int threads);

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
