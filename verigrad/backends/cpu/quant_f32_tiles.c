/* vg_qmatmul_f32: out[t, n] = qmatmul's reference (ops/quant.py `lane_dot`), bit for bit (quant_f32.c
 * gives the summation rule). A decode step (one activation row) takes quant_f32.c's fused kernels where
 * they exist; 2 to 8 rows (a server's batch of a few sequences) of the 32-value formats on AVX-512 take
 * FEW_ROWS (2 to 4) or HALVES (5 to 8), which de-quantize each block once for all of them
 * (quant_blocks32.h; HALVES a chunk of blocks at a time into a buffer in L1, or half of each block in its
 * loop) and write their outputs from registers (put_rows); otherwise a panel of weight
 * rows (AVX-512: 6, AVX2: 3; a decode step 4 and 1) is de-quantized into a row buffer (in L1: the panel is
 * read once per tile of activation rows, which stream from L2) and multiplied with tiles of up to 4 (AVX2:
 * 3) activation rows by the panel's rows. A tile sums each output's partial sums 0..15 over all of k, one
 * vector an output, then its sums 16..31 (AVX2: the four vectors of 8 in turn): 24 accumulators for 24
 * fused multiply-adds a step, against 10 loads; the folds of 16 outputs are made side by side
 * (fold16_avx512). Each output is summed as dot_f32 sums it, so a row's bits do not depend on how many
 * rows there are, which tile it falls in or what the others hold.
 *
 * Threads take bands of weight rows (each reads only its band); every output is computed by one thread
 * in one order, so every thread count gives the same bits.
 */
#include "quant.h"
#include "quant_blocks32.h"

typedef struct {
    int qtype;
    const uint8_t *w;
    int64_t n, k, t;
    const float *x;
    float *out;
    int avx2, avx512;    /* the vector paths taken (vg_quant_simd) */
    volatile int failed; /* a band could not allocate its row buffer */
} fjob;

#if VG_X86
/* dot_f32 of one activation row x with RN de-quantized weight rows (v + j vs), 16 f32 lanes, each output's
 * 32 partial sums in two vectors (8 chains of fused multiply-adds in flight for 4 rows): s[j] */
#define ROW_AVX512(NAME, RN)                                                                               \
    AVX512_Q static void NAME(const float *x, const float *v, int64_t vs, int64_t k, float *s) {           \
        __m512 a[RN], b[RN];                                                                               \
        for (int j = 0; j < RN; j++) a[j] = b[j] = _mm512_setzero_ps();                                    \
        for (int64_t i = 0; i < k; i += 32) {                                                              \
            __m512 x0 = _mm512_loadu_ps(x + i), x1 = _mm512_loadu_ps(x + i + 16);                          \
            for (int j = 0; j < RN; j++) {                                                                 \
                a[j] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(v + j * vs + i), a[j]);                         \
                b[j] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(v + j * vs + i + 16), b[j]);                    \
            }                                                                                              \
        }                                                                                                  \
        for (int j = 0; j < RN; j++) s[j] = fold_avx512(a[j], b[j]);                                       \
    }
ROW_AVX512(row1_avx512, 1)
ROW_AVX512(row2_avx512, 2)
ROW_AVX512(row3_avx512, 3)
ROW_AVX512(row4_avx512, 4)
typedef void (*row_fn)(const float *, const float *, int64_t, int64_t, float *);
static const row_fn ROW_DOTS[4] = {row1_avx512, row2_avx512, row3_avx512, row4_avx512};

/* the folds of m <= 16 outputs at once (dot_f32's tree: s[j] + s[j + h], h = 16, ..., 1; an addition's
 * bits do not depend on its operands' order), a[o] holding output o's partial sums 0..15 and b[o] 16..31:
 * output o in lane o. Each level adds the halves of two vectors' groups side by side (one shuffle per
 * operand, where fold_avx512 took 4 shuffles and 5 additions an output). */
AVX512_Q __attribute__((always_inline)) static inline __m512 fold16_avx512(const __m512 *a, const __m512 *b,
                                                                            int m) {
    __m512 r[16], p[8], g[4], e[2];
    for (int o = 0; o < 16; o++) r[o] = o < m ? _mm512_add_ps(a[o], b[o]) : _mm512_setzero_ps(); /* 16 */
    for (int i = 0; i < 8; i++) /* 8: lanes 0..7 output 2i's, 8..15 output 2i + 1's */
        p[i] = _mm512_add_ps(_mm512_shuffle_f32x4(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int i = 0; i < 4; i++) /* 4: 128-bit lane c holds output 4i + c */
        g[i] = _mm512_add_ps(_mm512_shuffle_f32x4(p[2 * i], p[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(p[2 * i], p[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int i = 0; i < 2; i++) /* 2: lane c: outputs 8i + c (2 values), 8i + 4 + c (2) */
        e[i] = _mm512_add_ps(_mm512_shuffle_ps(g[2 * i], g[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(g[2 * i], g[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    /* 1: value 4c + d is output 4d + c, put in order */
    const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, f);
}

/* the sums of a kernel of TN activation rows by RN weight rows (f0: outputs 0..15, f1: 16..31, output u RN + j)
 * written to out[u n + j] (j < rn), every NaN as the quiet NaN 0x7fc00000 (f32_band's rule): a permutation
 * and a masked store a row, from registers (the sums stored and read back as floats, then NaN-scrubbed in
 * another pass, took 5-6% of a 576 x 576 product of 8 rows, the loads seemingly waiting on the masked store) */
AVX512_Q __attribute__((always_inline)) static inline void put_rows(__m512 f0, __m512 f1, int tn, int rn_most,
                                                                    int rn, float *out, int64_t n) {
    const __mmask16 take = (__mmask16)((1u << rn) - 1);
    const __m512 nan = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000));
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int u = 0; u < tn; u++) {
        const __m512 f = _mm512_permutex2var_ps(f0, _mm512_add_epi32(iota, _mm512_set1_epi32(u * rn_most)), f1);
        _mm512_mask_storeu_ps(out + u * n, take, _mm512_mask_mov_ps(f, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), nan));
    }
}

/* dot_f32 of TN activation rows (x + u xs) with RN de-quantized weight rows (v + j vs): s[u RN + j]. Each
 * output's partial sums 0..15 are summed over all of k, then its sums 16..31 (one vector an output at a
 * time: TN RN accumulators, TN + RN loads for TN RN fused multiply-adds), then folded */
#define TILE_AVX512(NAME, TN, RN)                                                                          \
    AVX512_Q static void NAME(const float *x, int64_t xs, const float *v, int64_t vs, int64_t k, float *s) { \
        __m512 half[2][TN * RN];                                                                           \
        for (int h = 0; h < 2; h++) {                                                                      \
            __m512 a[TN][RN];                                                                              \
            for (int u = 0; u < TN; u++)                                                                   \
                for (int j = 0; j < RN; j++) a[u][j] = _mm512_setzero_ps();                                \
            for (int64_t i = 16 * h; i < k; i += 32) {                                                     \
                __m512 w[RN];                                                                              \
                for (int j = 0; j < RN; j++) w[j] = _mm512_loadu_ps(v + j * vs + i);                       \
                for (int u = 0; u < TN; u++) {                                                             \
                    const __m512 xv = _mm512_loadu_ps(x + u * xs + i);                                     \
                    for (int j = 0; j < RN; j++) a[u][j] = _mm512_fmadd_ps(xv, w[j], a[u][j]);             \
                }                                                                                          \
            }                                                                                              \
            for (int u = 0; u < TN; u++)                                                                   \
                for (int j = 0; j < RN; j++) half[h][u * RN + j] = a[u][j];                                \
        }                                                                                                  \
        for (int o = 0; o < TN * RN; o += 16)                                                              \
            _mm512_mask_storeu_ps(s + o, (__mmask16)((1u << (TN * RN - o < 16 ? TN * RN - o : 16)) - 1),   \
                                  fold16_avx512(half[0] + o, half[1] + o, TN * RN - o < 16 ? TN * RN - o : 16)); \
    }
#define TILES_RN(TN)                                                                                       \
    TILE_AVX512(tile##TN##x1, TN, 1)                                                                       \
    TILE_AVX512(tile##TN##x2, TN, 2)                                                                       \
    TILE_AVX512(tile##TN##x3, TN, 3)                                                                       \
    TILE_AVX512(tile##TN##x4, TN, 4)                                                                       \
    TILE_AVX512(tile##TN##x5, TN, 5)                                                                       \
    TILE_AVX512(tile##TN##x6, TN, 6)
TILES_RN(1)
TILES_RN(2)
TILES_RN(3)
TILES_RN(4)
typedef void (*tile_fn)(const float *, int64_t, const float *, int64_t, int64_t, float *);
/* TILES[TN - 1][RN - 1]: up to 4 activation rows by up to 6 weight rows (24 accumulators, 6 weight vectors
 * and an activation vector: 31 of the 32 registers) */
#define TILE_ROW(TN) {tile##TN##x1, tile##TN##x2, tile##TN##x3, tile##TN##x4, tile##TN##x5, tile##TN##x6}
static const tile_fn TILES[4][6] = {TILE_ROW(1), TILE_ROW(2), TILE_ROW(3), TILE_ROW(4)};
enum { TILE_T = 4, TILE_R = 6 }; /* activation rows, weight rows of the largest tile */

/* dot_f32 of TN activation rows (x + u k, 2 <= TN <= 4) with RN weight rows (w + j stride; rows past rn - 1
 * repeat row rn - 1, their sums not used) of a 32-value format, each block de-quantized in registers once for
 * all TN rows (quant_blocks32.h: FUSED_32's values) and multiplied at once into its 2 TN RN sums; the next
 * RN rows are fetched meanwhile: out[u n + j], each output summed as dot_f32 sums it. A batch of
 * a few sequences' decode step pays one de-quantization, where a row buffer paid it in stores and loads. */
#define FEW_ROWS(NAME, QTYPE, TN, RN)                                                                      \
    AVX512_Q static void NAME(const uint8_t *w, int64_t stride, int64_t nb, int rn, const float *x,        \
                              int64_t k, float *out, int64_t n) {                                          \
        const int qt = QTYPE, affine = qt == Q4_1 || qt == Q5_1;                                           \
        const int64_t bytes = BLOCK_BYTES[qt];                                                             \
        __m512 a[TN][RN], b[TN][RN];                                                                       \
        for (int u = 0; u < TN; u++)                                                                       \
            for (int j = 0; j < RN; j++) a[u][j] = b[u][j] = _mm512_setzero_ps();                          \
        const uint8_t *row[RN];                                                                            \
        for (int j = 0; j < RN; j++) row[j] = w + (j < rn ? j : rn - 1) * stride;                          \
        const uint8_t *next = w + rn * stride;                                                             \
        float dd[RN][16], mm[RN][16];                                                                      \
        for (int64_t i0 = 0; i0 < nb; i0 += 16) { /* 16 blocks' scales at once, then their blocks */       \
            const int64_t cn = nb - i0 < 16 ? nb - i0 : 16;                                                \
            for (int j = 0; j < RN; j++) scales16(row[j] + i0 * bytes, bytes, cn, affine, dd[j], mm[j]);   \
            for (int64_t c = 0; c < cn; c++) {                                                             \
                const int64_t i = i0 + c;                                                                  \
                for (int j = 0; j < RN; j++) {                                                             \
                    _mm_prefetch((const char *)(next + j * stride + i * bytes), _MM_HINT_T0);              \
                    __m512 lo, hi;                                                                         \
                    block32_avx512(qt, row[j] + i * bytes, _mm512_set1_ps(dd[j][c]), _mm512_set1_ps(mm[j][c]), \
                                   &lo, &hi);                                                              \
                    for (int u = 0; u < TN; u++) {                                                         \
                        a[u][j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + u * k + 32 * i), lo, a[u][j]);       \
                        b[u][j] = _mm512_fmadd_ps(_mm512_loadu_ps(x + u * k + 32 * i + 16), hi, b[u][j]);  \
                    }                                                                                      \
                }                                                                                          \
            }                                                                                              \
        }                                                                                                  \
        __m512 fa[TN * RN], fb[TN * RN]; /* TN RN <= 16 */                                                 \
        for (int u = 0; u < TN; u++)                                                                       \
            for (int j = 0; j < RN; j++) fa[u * RN + j] = a[u][j], fb[u * RN + j] = b[u][j];               \
        put_rows(fold16_avx512(fa, fb, TN * RN), _mm512_setzero_ps(), TN, RN, rn, out, n);                 \
    }
enum { CHUNK = 32 }; /* the most blocks HALVES takes at once */
/* dot_f32 of TN activation rows (x + u k, 5 <= TN <= 8) with RN weight rows (as FEW_ROWS takes them) of a
 * 32-value format: each output's partial sums 0..15 over a chunk of up to CHUNK blocks, then its sums
 * 16..31 (TN RN accumulators, 24 at most: TN loads of x for TN RN fused multiply-adds, where both halves at
 * once left room for one weight row, a load of x per multiply-add). out[u n + j], each output summed as
 * dot_f32 sums it (sums 0..15 and 16..31 are separate chains: their interleaving does not matter).
 * Each chunk's blocks are de-quantized once into val (in L1), so the multiply-adds' loop is loads and
 * multiply-adds only: the widening, shifts and lookups (on the ports the multiply-adds need) are not
 * repeated for the second half, and the scales come 16 blocks at a time (scales16) and are broadcast from
 * memory (from a register, 3 shuffles a block). q8_0 has no table to share: its values are made in the
 * loop, and the next rows fetched block by block in its first half (all of a call's fetches before its
 * loop left the 49152 x 576 head 2% slower in a step). The chunks are of even size (48 blocks: 2 of 24,
 * where 32 and 16 read 8 rows of x past L1).
 * INLOOP (q4_0, q4_1 and iq4_nl rows of several chunks, LONG_ROWS): the loop of sums 0..15 de-quantizes
 * each block in registers and stores only values 16..31 for the second loop, half the buffer's stores and
 * loads (576 x 1536 q4_1, 8 rows: 1.10x; at one chunk, 576 wide, it was 2% slower: the buffer stays). */
#define HALVES(NAME, QTYPE, TN, RN, INLOOP)                                                                \
    AVX512_Q static void NAME(const uint8_t *w, int64_t stride, int64_t nb, int rn, const float *x,        \
                              int64_t k, float *out, int64_t n) {                                          \
        const int qt = QTYPE, affine = qt == Q4_1 || qt == Q5_1;                                           \
        const int inloop = INLOOP;                                                                         \
        const int64_t bytes = BLOCK_BYTES[qt];                                                             \
        __m512 sums[2][TN * RN];                                                                           \
        const uint8_t *row[RN];                                                                            \
        for (int j = 0; j < RN; j++) row[j] = w + (j < rn ? j : rn - 1) * stride;                          \
        const uint8_t *next = w + rn * stride;                                                             \
        float dd[RN][CHUNK], mm[RN][CHUNK];                                                                \
        __m512 val[RN][CHUNK][2];                                                                          \
        const int64_t parts = (nb + CHUNK - 1) / CHUNK, most = parts == 1 ? nb : (nb + parts - 1) / parts; \
        for (int64_t i0 = 0; i0 < nb; i0 += most) {                                                        \
            const int64_t cn = nb - i0 < most ? nb - i0 : most;                                            \
            for (int j = 0; j < RN; j++)                                                                   \
                for (int64_t c = 0; c < cn; c += 16)                                                       \
                    scales16(row[j] + (i0 + c) * bytes, bytes, cn - c, affine, dd[j] + c, mm[j] + c);      \
            for (int j = 0; j < RN && !inloop && qt != Q8_0; j++)                                          \
                for (int64_t c = 0; c < cn; c++) {                                                         \
                    const uint8_t *wb = row[j] + (i0 + c) * bytes;                                         \
                    _mm_prefetch((const char *)(wb + (next - w)), _MM_HINT_T0);                            \
                    block32_avx512(qt, wb, _mm512_set1_ps(dd[j][c]), _mm512_set1_ps(mm[j][c]), &val[j][c][0], \
                                   &val[j][c][1]);                                                         \
                }                                                                                          \
            for (int h = 0; h < 2; h++) {                                                                  \
                __m512 a[TN][RN];                                                                          \
                for (int u = 0; u < TN; u++)                                                               \
                    for (int j = 0; j < RN; j++) a[u][j] = i0 ? sums[h][u * RN + j] : _mm512_setzero_ps(); \
                for (int64_t c = 0; c < cn; c++) {                                                         \
                    const int64_t i = i0 + c;                                                              \
                    __m512 v[RN];                                                                          \
                    for (int j = 0; j < RN; j++) {                                                         \
                        const uint8_t *wb = row[j] + i * bytes;                                            \
                        const __m512 d = _mm512_set1_ps(dd[j][c]);                                         \
                        if (qt == Q8_0) {                                                                  \
                            if (!h) _mm_prefetch((const char *)(wb + (next - w)), _MM_HINT_T0);            \
                            v[j] = half32_avx512(qt, wb, h, &d);                                           \
                        } else if (!inloop || h)                                                           \
                            v[j] = val[j][c][h];                                                           \
                        else {                                                                             \
                            _mm_prefetch((const char *)(wb + (next - w)), _MM_HINT_T0);                    \
                            block32_avx512(qt, wb, d, _mm512_set1_ps(mm[j][c]), &v[j], &val[j][c][1]);     \
                        }                                                                                  \
                    }                                                                                      \
                    VG_TILE_FMAS(a, v, TN, RN, x + u * k + 32 * i + 16 * h)                                \
                }                                                                                          \
                VG_TILE_KEEP(a, sums[h], TN, RN)                                                           \
            }                                                                                              \
        }                                                                                                  \
        const __m512 f0 = fold16_avx512(sums[0], sums[1], TN * RN < 16 ? TN * RN : 16);                     \
        put_rows(f0, TN * RN > 16 ? fold16_avx512(sums[0] + 16, sums[1] + 16, TN * RN - 16) : f0, TN, RN, rn, \
                 out, n);                                                                                  \
    }
/* each format's kernels for 2..8 activation rows (24 sums in registers at most) */
#define FEW_ROWS_ALL(F, QTYPE)                                                                             \
    FEW_ROWS(few2_##F, QTYPE, 2, 4)                                                                        \
    FEW_ROWS(few3_##F, QTYPE, 3, 4)                                                                        \
    FEW_ROWS(few4_##F, QTYPE, 4, 3)                                                                        \
    HALVES(few5_##F, QTYPE, 5, 4, 0)                                                                       \
    HALVES(few6_##F, QTYPE, 6, 4, 0)                                                                       \
    HALVES(few7_##F, QTYPE, 7, 3, 0)                                                                       \
    HALVES(few8_##F, QTYPE, 8, 3, 0)
/* the kernels of 5..8 rows that de-quantize in the loop, for rows of several chunks (LONG_ROWS); not q5_0 and
 * q5_1 (their two tables and fifth bits beside the 24 sums: no faster) nor q8_0 (no buffer to halve) */
#define LONG_ALL(F, QTYPE)                                                                                 \
    HALVES(long5_##F, QTYPE, 5, 4, 1)                                                                      \
    HALVES(long6_##F, QTYPE, 6, 4, 1)                                                                      \
    HALVES(long7_##F, QTYPE, 7, 3, 1)                                                                      \
    HALVES(long8_##F, QTYPE, 8, 3, 1)
FEW_ROWS_ALL(q8_0, Q8_0)
FEW_ROWS_ALL(q4_0, Q4_0)
FEW_ROWS_ALL(q4_1, Q4_1)
FEW_ROWS_ALL(q5_0, Q5_0)
FEW_ROWS_ALL(q5_1, Q5_1)
FEW_ROWS_ALL(iq4_nl, IQ4_NL)
LONG_ALL(q4_0, Q4_0)
LONG_ALL(q4_1, Q4_1)
LONG_ALL(iq4_nl, IQ4_NL)
typedef void (*few_fn)(const uint8_t *, int64_t, int64_t, int, const float *, int64_t, float *, int64_t);
enum { FEW_MAX = 8 };                                /* the most activation rows the kernels take */
static const int FEW_RN[FEW_MAX + 1] = {0, 0, 4, 4, 3, 4, 4, 3, 3}; /* their weight rows, by TN */
#define FEW_ROW(F) {0, 0, few2_##F, few3_##F, few4_##F, few5_##F, few6_##F, few7_##F, few8_##F}
static const few_fn FEW[NQTYPES][FEW_MAX + 1] = {
    [Q8_0] = FEW_ROW(q8_0), [Q4_0] = FEW_ROW(q4_0),     [Q4_1] = FEW_ROW(q4_1),
    [Q5_0] = FEW_ROW(q5_0), [Q5_1] = FEW_ROW(q5_1), [IQ4_NL] = FEW_ROW(iq4_nl)};
#define LONG_ROW(F) {0, 0, 0, 0, 0, long5_##F, long6_##F, long7_##F, long8_##F}
static const few_fn LONG_ROWS[NQTYPES][FEW_MAX + 1] = {
    [Q4_0] = LONG_ROW(q4_0), [Q4_1] = LONG_ROW(q4_1), [IQ4_NL] = LONG_ROW(iq4_nl)};

/* dot_f32 of TN activation rows (x + u xs) with RN weight rows (v + j vs), 8 lanes: each output's 32
 * partial sums in 4 vectors, summed a vector (a quarter of the lanes) at a time over all of k, then folded
 * as dot_f32 folds them: s[u RN + j] */
#define TILE_AVX2(NAME, TN, RN)                                                                            \
    __attribute__((target("avx2,fma"))) static void NAME(const float *x, int64_t xs, const float *v,       \
                                                         int64_t vs, int64_t k, float *s) {                \
        __m256 q[4][TN * RN];                                                                              \
        for (int l = 0; l < 4; l++) {                                                                      \
            __m256 a[TN][RN];                                                                              \
            for (int u = 0; u < TN; u++)                                                                   \
                for (int j = 0; j < RN; j++) a[u][j] = _mm256_setzero_ps();                                \
            for (int64_t i = 8 * l; i < k; i += 32) {                                                      \
                __m256 w[RN];                                                                              \
                for (int j = 0; j < RN; j++) w[j] = _mm256_loadu_ps(v + j * vs + i);                       \
                for (int u = 0; u < TN; u++) {                                                             \
                    const __m256 xv = _mm256_loadu_ps(x + u * xs + i);                                     \
                    for (int j = 0; j < RN; j++) a[u][j] = _mm256_fmadd_ps(xv, w[j], a[u][j]);             \
                }                                                                                          \
            }                                                                                              \
            for (int u = 0; u < TN; u++)                                                                   \
                for (int j = 0; j < RN; j++) q[l][u * RN + j] = a[u][j];                                   \
        }                                                                                                  \
        for (int o = 0; o < TN * RN; o++) s[o] = vg_fold_avx2(q[0][o], q[1][o], q[2][o], q[3][o]);         \
    }
#define TILES2_RN(TN)                                                                                      \
    TILE_AVX2(tile2_##TN##x1, TN, 1)                                                                       \
    TILE_AVX2(tile2_##TN##x2, TN, 2)                                                                       \
    TILE_AVX2(tile2_##TN##x3, TN, 3)
TILES2_RN(1)
TILES2_RN(2)
TILES2_RN(3)
/* a decode step's dot_f32 of x with one weight row v on AVX2 (its 4 vectors of partial sums interleaved:
 * 4 chains of fused multiply-adds) */
__attribute__((target("avx2,fma"))) static float row_avx2(const float *x, const float *v, int64_t k) {
    __m256 a[4];
    for (int l = 0; l < 4; l++) a[l] = _mm256_setzero_ps();
    for (int64_t i = 0; i < k; i += 32)
        for (int l = 0; l < 4; l++)
            a[l] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8 * l), _mm256_loadu_ps(v + i + 8 * l), a[l]);
    return vg_fold_avx2(a[0], a[1], a[2], a[3]);
}
/* TILES_AVX2[TN - 1][RN - 1]: up to 3 activation rows by 3 weight rows (9 accumulators of the 16
 * registers) */
#define TILE2_ROW(TN) {tile2_##TN##x1, tile2_##TN##x2, tile2_##TN##x3}
static const tile_fn TILES_AVX2[3][3] = {TILE2_ROW(1), TILE2_ROW(2), TILE2_ROW(3)};
enum { TILE2_T = 3, TILE2_R = 3 };
#endif


/* row r of w de-quantized into v (the vector path's way, the same values), the row `ahead` rows on fetched
 * meanwhile: a panel's rows ahead, so the fetch has the panel's tiles to arrive (the next row alone, read a
 * few hundred cycles later, left the de-quantization waiting on memory: a batch of 2 rows cost 2.3x a
 * decode step's products, 1.6x after) */
static void dequantize_into(const fjob *p, int level, int64_t r, int64_t nb, int64_t stride, float *v,
                            int64_t ahead) {
    const uint8_t *row = p->w + r * stride;
#if VG_X86
    for (int64_t off = 0; off < stride; off += 64) /* the row `ahead` rows on */
        _mm_prefetch((const char *)(row + ahead * stride + off), _MM_HINT_T0);
#else
    (void)ahead;
#endif
    vg_dequantize_f32_row(p->qtype, row, nb, v, level);
}

/* rows lo..hi - 1 of out; returns 1 where the NaNs are already written as f32_band writes them */
static int f32_rows(fjob *p, int64_t lo, int64_t hi) {
    const int64_t nb = p->k / BLOCK_VALUES[p->qtype], stride = nb * BLOCK_BYTES[p->qtype], k = p->k;
    const int avx2 = p->avx2, avx512 = p->avx512, level = avx512 ? 2 : avx2;
#if VG_X86
    if (avx512 && p->t >= 2 && p->t <= FEW_MAX && FEW[p->qtype][p->t]) { /* a few rows: no row buffer */
        const few_fn longer = nb > CHUNK ? LONG_ROWS[p->qtype][p->t] : 0;
        const few_fn few = longer ? longer : FEW[p->qtype][p->t];
        const int most = FEW_RN[p->t];
        for (int64_t r = lo; r < hi; r += most) {
            const int rn = hi - r < most ? (int)(hi - r) : most;
            few(p->w + r * stride, stride, nb, rn, p->x, k, p->out + r, p->n);
        }
        return 1;
    }
    int most = 0; /* the K formats' (quant_f32_k_rows.c): into s, f32_band's NaN pass after */
    const vg_few_fn k_rows = avx512 ? vg_few_rows_k_avx512(p->qtype, p->t, &most) : 0;
    if (k_rows) {
        float s[FEW_MAX * 4]; /* TN RN <= 32 */
        for (int64_t r = lo; r < hi; r += most) {
            const int rn = hi - r < most ? (int)(hi - r) : most;
            k_rows(p->w + r * stride, stride, nb, rn, p->x, k, s);
            for (int u = 0; u < p->t; u++)
                for (int j = 0; j < rn; j++) p->out[u * p->n + r + j] = s[u * most + j];
        }
        return 0;
    }
    /* the weight rows de-quantized at once: a tile's (a decode step's: ROW_DOTS's 4 on AVX-512) */
    const int panel = avx512 ? (p->t == 1 ? 4 : TILE_R) : avx2 && p->t > 1 ? TILE2_R : 1;
    float stack[TILE_R * 1536]; /* SmolLM2's widest rows */
#else
    const int panel = 1;
    float stack[4096];
#endif
    const int64_t room = (int64_t)(sizeof stack / sizeof *stack);
    float *v = panel * k <= room ? stack : malloc(sizeof(float) * (size_t)(panel * k));
    if (!v) {
        p->failed = 1;
        return 0;
    }
    for (int64_t r = lo; r < hi;) {
        const int rn = hi - r < panel ? (int)(hi - r) : panel;
        if (p->t == 1) { /* a decode step: no row buffer where a fused kernel takes the rows */
            float f[4];
            const int done =
                vg_fused_decode_f32(p->qtype, level, p->w + r * stride, stride, nb, hi - r, p->x, f);
            for (int j = 0; j < done; j++) p->out[r + j] = f[j];
            if (done) {
                r += done;
                continue;
            }
        }
        for (int j = 0; j < rn; j++) dequantize_into(p, level, r + j, nb, stride, v + j * k, panel);
        int64_t t = 0;
#if VG_X86
        float s[TILE_T * TILE_R];
        if (avx512 && p->t == 1) {
            ROW_DOTS[rn - 1](p->x, v, k, k, s);
            for (int j = 0; j < rn; j++) p->out[r + j] = s[j];
            t = 1;
        } else if (avx512 || (avx2 && p->t > 1)) { /* tiles of activation rows by the panel's rows */
            const int tile_t = avx512 ? TILE_T : TILE2_T;
            for (t = 0; t < p->t; t += tile_t) {
                const int tn = p->t - t < tile_t ? (int)(p->t - t) : tile_t;
                const tile_fn tile = avx512 ? TILES[tn - 1][rn - 1] : TILES_AVX2[tn - 1][rn - 1];
                tile(p->x + t * k, k, v, k, k, s);
                for (int u = 0; u < tn; u++)
                    for (int j = 0; j < rn; j++) p->out[(t + u) * p->n + r + j] = s[u * rn + j];
            }
        } else if (avx2) {
            p->out[r] = row_avx2(p->x, v, k);
            t = 1;
        }
#endif
        for (; t < p->t; t++)
            for (int j = 0; j < rn; j++) p->out[t * p->n + r + j] = vg_dot_f32(p->x + t * k, v + j * k, k);
        r += rn;
    }
    if (v != stack) free(v);
    return 0;
}

/* Which NaN a sum ends in (an input's, or the default NaN of inf - inf) depends on the order of its operands,
 * which the tiles, the decode kernels and each vector level arrange differently: every NaN of an output is
 * written as the one quiet NaN 0x7fc00000, as the reference's are (`lane_dot`), so every path gives the same
 * bits. */
static void f32_band(void *ctx, int64_t lo, int64_t hi) {
    fjob *p = (fjob *)ctx;
    if (f32_rows(p, lo, hi)) return;
    for (int64_t t = 0; t < p->t; t++) {
        uint32_t *o = (uint32_t *)(p->out + t * p->n);
        for (int64_t r = lo; r < hi; r++) { /* every value stored: a vector loop (the branch's took 1-2% of
                                               * a step of 8 rows) */
            const uint32_t v = o[r];
            o[r] = (v & 0x7fffffffu) > 0x7f800000u ? 0x7fc00000u : v;
        }
    }
}

/* out f32[t, n] = x f32[t, k] @ dequantize(w)^T, each output as dot_f32 sums it; returns 0, or -1 when out
 * of memory */
int vg_qmatmul_f32(int qtype, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t, float *out,
                   int64_t min_rows, int threads) {
    const int level = vg_quant_simd(-1);
    /* x copied to a 64-byte boundary for the tiles of several rows (a load across two cache lines costs
     * two: the kernels of 5 to 8 rows load x once for every 3 or 4 products) */
    float *aligned = NULL;
    if (t > 1 && ((uintptr_t)x & 63) && (aligned = aligned_alloc(64, (size_t)(t * k * 4 + 63) / 64 * 64)))
        x = memcpy(aligned, x, sizeof(float) * (size_t)(t * k));
    fjob p = {.qtype = qtype, .w = w, .n = n, .k = k, .t = t, .x = x, .out = out, .avx2 = level >= 1,
              .avx512 = level >= 2, .failed = 0};
    vg_parallel_for(n, min_rows, threads, f32_band, &p);
    free(aligned);
    return p.failed ? -1 : 0;
}
