/* The f32 products of 2 to 8 activation rows (a server's batched decode step) with weights of a 256-value
 * format (q4_k, q5_k, q6_k, q2_k, q3_k, iq4_xs) on AVX-512, which quant_f32_tiles.c takes as it takes its
 * FEW_ROWS and HALVES for the 32-value formats, in place of a panel of de-quantized rows and tiles of 4
 * activation rows (a panel past L1, read again by each tile).
 *
 * RN weight rows at a time, a chunk of up to KCHUNK blocks of each is de-quantized into val (in L1) by
 * quant_k_avx512.h's value makers (the decode kernels' operations: the reference's values; the rarer
 * formats by their row de-quantization); then each output's partial sums 0..15 are summed over the chunk,
 * then its sums 16..31: TN RN accumulators (24 at most), TN loads of x and RN of val for TN RN fused
 * multiply-adds. Each output is summed as dot_f32 sums it (sums 0..15 and 16..31 are separate chains of
 * increasing k), so a row's bits do not depend on how many rows there are or what the others hold.
 */
#include "quant.h"
#include "quant_k_avx512.h"

/* whether one of the kernels ran since the last vg_k_rows_taken(1) (the tests' view of the dispatch: a row's
 * bits are the same without them) */
static int taken;

/* returns whether a kernel of this file ran since the last reset, and resets it where `reset` is set */
int vg_k_rows_taken(int reset) {
    const int was = __atomic_load_n(&taken, __ATOMIC_RELAXED);
    if (reset) __atomic_store_n(&taken, 0, __ATOMIC_RELAXED);
    return was;
}

#if VG_X86
enum { KCHUNK = 2 }; /* blocks of 256 a chunk: val 2 KB a weight row, x 2 KB an activation row */

/* the 256 values of block wb into v, in order: q4_k's, q5_k's and q6_k's made here, the other formats' by
 * their AVX-512 row de-quantization (quant_f32_k.c's, which the row buffer took) */
AVX512_Q __attribute__((always_inline)) static inline void k_block_avx512(int qt, const uint8_t *wb, float *v) {
    if (qt != Q4_K && qt != Q5_K && qt != Q6_K) {
        VG_DEQUANTIZE_K_AVX512[qt](wb, 1, v);
        return;
    }
    if (qt == Q6_K) {
        float dsc[16];
        q6_scales16(wb, dsc);
        for (int h = 0; h < 2; h++)
            for (int quarter = 0; quarter < 4; quarter++) {
                __m512 lo, hi;
                q6_quarter_avx512(wb, h, quarter, dsc, &lo, &hi);
                _mm512_storeu_ps(v + 128 * h + 32 * quarter, lo);
                _mm512_storeu_ps(v + 128 * h + 32 * quarter + 16, hi);
            }
        return;
    }
    float ds[8], dm[8];
    k4_scales8(wb, ds, dm);
    for (int c = 0; c < 4; c++) {
        __m512 u[4];
        k4_chunk_avx512(qt == Q5_K, wb, c, ds, dm, u);
        for (int l = 0; l < 4; l++) _mm512_storeu_ps(v + 64 * c + 16 * l, u[l]);
    }
}

/* dot_f32 of TN activation rows (x + u k; vg_qmatmul_f32 aligns them to 64 bytes where it can) with RN
 * weight rows w + j stride (rows past rn - 1 repeat row rn - 1, their sums not used) of format QTYPE:
 * s[u RN + j]; the next RN rows are fetched meanwhile */
#define K_ROWS(NAME, QTYPE, TN, RN)                                                                        \
    AVX512_Q static void NAME(const uint8_t *w, int64_t stride, int64_t nb, int rn, const float *x,        \
                              int64_t k, float *s) {                                                       \
        const int qt = QTYPE;                                                                              \
        const int64_t bytes = BLOCK_BYTES[qt];                                                             \
        if (!__atomic_load_n(&taken, __ATOMIC_RELAXED)) __atomic_store_n(&taken, 1, __ATOMIC_RELAXED);     \
        const uint8_t *row[RN];                                                                            \
        for (int j = 0; j < RN; j++) row[j] = w + (j < rn ? j : rn - 1) * stride;                          \
        const int64_t ahead = rn * stride;                                                                 \
        __m512 sums[2][TN * RN];                                                                           \
        float val[RN][KCHUNK * 256] __attribute__((aligned(64)));                                          \
        for (int64_t i0 = 0; i0 < nb; i0 += KCHUNK) {                                                      \
            const int64_t cn = nb - i0 < KCHUNK ? nb - i0 : KCHUNK;                                        \
            for (int j = 0; j < RN; j++)                                                                   \
                for (int64_t c = 0; c < cn; c++) {                                                         \
                    const uint8_t *wb = row[j] + (i0 + c) * bytes;                                         \
                    for (int64_t off = 0; off < bytes; off += 64)                                          \
                        _mm_prefetch((const char *)(wb + ahead + off), _MM_HINT_T0);                       \
                    k_block_avx512(qt, wb, val[j] + 256 * c);                                              \
                }                                                                                          \
            for (int h = 0; h < 2; h++) {                                                                  \
                __m512 a[TN][RN];                                                                          \
                for (int u = 0; u < TN; u++)                                                               \
                    for (int j = 0; j < RN; j++) a[u][j] = i0 ? sums[h][u * RN + j] : _mm512_setzero_ps(); \
                for (int64_t m = 0; m < 8 * cn; m++) { /* values 32 m + 16 h .. + 15 of the chunk */       \
                    __m512 v[RN];                                                                          \
                    for (int j = 0; j < RN; j++) v[j] = _mm512_load_ps(val[j] + 32 * m + 16 * h);          \
                    VG_TILE_FMAS(a, v, TN, RN, x + u * k + 256 * i0 + 32 * m + 16 * h)                     \
                }                                                                                          \
                VG_TILE_KEEP(a, sums[h], TN, RN)                                                           \
            }                                                                                              \
        }                                                                                                  \
        for (int o = 0; o < TN * RN; o++) s[o] = fold_avx512(sums[0][o], sums[1][o]);                      \
    }

/* each format's kernels for 2..8 activation rows: TN RN <= 24 accumulators, RN weight vectors and x's */
#define K_ROWS_ALL(F, QTYPE)                                                                               \
    K_ROWS(k2_##F, QTYPE, 2, 6)                                                                            \
    K_ROWS(k3_##F, QTYPE, 3, 6)                                                                            \
    K_ROWS(k4_##F, QTYPE, 4, 6)                                                                            \
    K_ROWS(k5_##F, QTYPE, 5, 4)                                                                            \
    K_ROWS(k6_##F, QTYPE, 6, 4)                                                                            \
    K_ROWS(k7_##F, QTYPE, 7, 3)                                                                            \
    K_ROWS(k8_##F, QTYPE, 8, 3)
K_ROWS_ALL(q4_k, Q4_K)
K_ROWS_ALL(q5_k, Q5_K)
K_ROWS_ALL(q6_k, Q6_K)
K_ROWS_ALL(q2_k, Q2_K)
K_ROWS_ALL(q3_k, Q3_K)
K_ROWS_ALL(iq4_xs, IQ4_XS)

enum { K_MAX = 8 };
static const int K_RN[K_MAX + 1] = {0, 0, 6, 6, 6, 4, 4, 3, 3}; /* the kernels' weight rows, by TN */
#define K_ROW(F) {0, 0, k2_##F, k3_##F, k4_##F, k5_##F, k6_##F, k7_##F, k8_##F}
static const vg_few_fn K_FEW[NQTYPES][K_MAX + 1] = {
    [Q4_K] = K_ROW(q4_k), [Q5_K] = K_ROW(q5_k), [Q6_K] = K_ROW(q6_k),
    [Q2_K] = K_ROW(q2_k), [Q3_K] = K_ROW(q3_k), [IQ4_XS] = K_ROW(iq4_xs)};
#endif

vg_few_fn vg_few_rows_k_avx512(int qtype, int64_t t, int *most) {
#if VG_X86
    if (t >= 2 && t <= K_MAX && K_FEW[qtype][t]) {
        *most = K_RN[t];
        return K_FEW[qtype][t];
    }
#else
    (void)qtype, (void)t, (void)most;
#endif
    return 0;
}
