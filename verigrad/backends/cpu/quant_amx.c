/* qmatmul_q8 of q8_0 weights on 5 or more activation rows with AMX (Intel's tile multiply: one TDPBSSD
 * makes the 16 x 8 integer dots of 16 weight rows and 8 activation rows of a block), where the CPU and the
 * OS allow it; quant_vnni.c takes the rows this leaves (fewer than 16) and calls of fewer rows.
 *
 * The arithmetic is quant.c's q8_row, so the reference's bits: a block's dot is an exact int32 (AMX adds the
 * s8 x s8 products in int32, which does not round), the terms (d_w * d_x) * dot are made in double and added
 * in block order from +0.0, rounded once to f32.
 *
 * Layout, per block: tile A holds the 16 weight rows' 32 int8 values (loaded from the weights with the rows'
 * stride), tile B the activation rows' 32 bytes in AMX's groups of 4 (B[g][4t + i] = y_t[4g + i], made once
 * per call), tile C the int32 dots (weight row m, activation row t), stored and read back as 8 lanes a
 * weight row, one per activation row, against which the double terms go.
 *
 * Tried: the 4-bit formats the same way (their values unpacked to bytes for tile A, before the blocks' tile
 * products or just before each), 0.85x to 0.95x the VNNI tiles at 8 rows and half their speed at 2-4 rows:
 * per block the tile loads, product and store cost about as much as the VNNI dots and reductions they
 * replace, and the double terms stay. q8_0's tile A needs no unpacking, which makes the difference. */
#define _GNU_SOURCE
#include "quant.h"

/* AMX's intrinsics: GCC 11, clang 12 */
#if defined(__clang__)
#define AMX_COMPILER (__clang_major__ >= 12)
#else
#define AMX_COMPILER (__GNUC__ >= 11)
#endif

#if VG_X86 && defined(__linux__) && AMX_COMPILER
#include <sys/syscall.h>
#include <unistd.h>
#define VG_AMX 1
#else
#define VG_AMX 0
#endif

#if VG_AMX
#define AMX_Q __attribute__((target("avx2,f16c,avx512f,avx512dq,avx512bw,avx512vl,amx-tile,amx-int8")))
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
/* the tiles' numbers: macros, as the intrinsics spell them into the instruction */
#define TILE_C 0
#define TILE_A 1
#define TILE_B 2
enum { ROWS = 16, TN = 8, MIN_T = 5 };

/* LDTILECFG's 64 bytes (palette 1) */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* whether the CPU has AMX-TILE and AMX-INT8 and Linux lets this process use the tiles (asked once) */
static int amx_ready(void) {
    static int known = -1;
    if (known < 0) {
        known = vg_has_amx_int8() && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    }
    return known;
}
#endif

static int amx_allowed = 1;

int vg_q8_amx(int allow) {
    if (allow >= 0) amx_allowed = allow;
#if VG_AMX
    return amx_allowed && amx_ready();
#else
    return 0;
#endif
}

int vg_q8_amx_takes(int qtype, int64_t t) {
#if VG_AMX
    return qtype == Q8_0 && t >= MIN_T && vg_q8_amx(-1);
#else
    (void)qtype, (void)t;
    return 0;
#endif
}

#if VG_AMX
/* 16 weight rows (w + m stride) x tn <= 8 activation rows: out[t n + m]. `bt`: the activation rows' B tiles
 * (256 bytes a block), `dxt` their d by block (8 lanes, 0 past tn); `next` the rows after, fetched ahead */
AMX_Q static void rows16(const uint8_t *w, int64_t stride, int64_t nb, const uint8_t *bt, const double *dxt,
                         const uint8_t *next, float *out, int64_t n, int tn) {
    const int64_t bytes = BLOCK_BYTES[Q8_0];
    __attribute__((aligned(64))) int32_t c[ROWS * TN];
    __attribute__((aligned(64))) uint16_t h[ROWS];
    __attribute__((aligned(64))) double dw[ROWS];
    __m512d acc[ROWS];
    for (int m = 0; m < ROWS; m++) acc[m] = _mm512_setzero_pd();
    memset(c, 0, sizeof c); /* the lanes past tn, which the tile stores leave */
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *wb = w + b * bytes, *pf = next + ROWS * b * bytes;
        for (int64_t off = 0; off < ROWS * bytes; off += 64) _mm_prefetch((const char *)(pf + off), _MM_HINT_T0);
        _tile_loadd(TILE_A, wb + 2, stride);
        _tile_loadd(TILE_B, bt + 256 * b, 32);
        _tile_zero(TILE_C);
        _tile_dpbssd(TILE_C, TILE_A, TILE_B);
        _tile_stored(TILE_C, c, 4 * TN);
        for (int m = 0; m < ROWS; m++) memcpy(h + m, wb + m * stride, 2);
        const __m512 d16 = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)h));
        _mm512_store_pd(dw, _mm512_cvtps_pd(_mm512_castps512_ps256(d16)));
        _mm512_store_pd(dw + 8, _mm512_cvtps_pd(_mm512_extractf32x8_ps(d16, 1)));
        const __m512d dx = _mm512_load_pd(dxt + 8 * b);
        for (int m = 0; m < ROWS; m++) {
            const __m512d dots = _mm512_cvtepi32_pd(_mm256_load_si256((const __m256i *)(c + TN * m)));
            acc[m] = _mm512_add_pd(acc[m], _mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(dw[m]), dx), dots));
        }
    }
    __attribute__((aligned(64))) float o[TN];
    for (int m = 0; m < ROWS; m++) {
        _mm256_store_ps(o, _mm512_cvtpd_ps(acc[m]));
        for (int t = 0; t < tn; t++) out[t * n + m] = o[t];
    }
}

/* activation rows t0..t0 + tn of a call, by block: B tiles (B[g][4t + i] = y_t[4g + i], rows 32 bytes
 * apart) and d (8 lanes, 0 past tn) */
static void side_of(int64_t nb, int64_t k, int tn, const int8_t *qx, const double *dx, uint8_t *bt, double *dxt) {
    memset(bt, 0, (size_t)(256 * nb));
    memset(dxt, 0, sizeof(double) * (size_t)(8 * nb));
    for (int64_t b = 0; b < nb; b++)
        for (int t = 0; t < tn; t++) {
            for (int g = 0; g < 8; g++) memcpy(bt + 256 * b + 32 * g + 4 * t, qx + t * k + 32 * b + 4 * g, 4);
            dxt[8 * b + t] = dx[t * nb + b];
        }
}

/* the tiles of tn activation rows */
AMX_Q static void configure(int tn) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    cfg.rows[TILE_C] = ROWS, cfg.colsb[TILE_C] = (uint16_t)(4 * tn);
    cfg.rows[TILE_A] = ROWS, cfg.colsb[TILE_A] = 32;
    cfg.rows[TILE_B] = 8, cfg.colsb[TILE_B] = (uint16_t)(4 * tn);
    /* as an asm of the whole object: GCC 12 dropped the stores of rows and colsb before _tile_loadconfig */
    __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

AMX_Q static void release(void) { _tile_release(); }
#endif

int64_t vg_q8_rows16_amx(int qtype, const uint8_t *w, int64_t r, int64_t hi, int64_t n, int64_t k, int64_t t,
                         const int8_t *qx, const double *dx, float *out) {
#if VG_AMX
    const int64_t nb = k / 32, stride = nb * BLOCK_BYTES[qtype];
    if (r + ROWS > hi || !vg_q8_amx_takes(qtype, t)) return r;
    uint8_t *bt = aligned_alloc(64, (size_t)(nb * (256 + 64))); /* the B tiles, then d by block */
    if (!bt) return r;
    double *dxt = (double *)(bt + 256 * nb);
    int64_t end = r;
    for (int64_t t0 = 0; t0 < t; t0 += TN) {
        const int tn = t - t0 >= TN ? TN : (int)(t - t0);
        side_of(nb, k, tn, qx + t0 * k, dx + t0 * nb, bt, dxt);
        configure(tn);
        for (end = r; end + ROWS <= hi; end += ROWS)
            rows16(w + end * stride, stride, nb, bt, dxt, w + (end + ROWS) * stride, out + t0 * n + end, n, tn);
        release();
    }
    free(bt);
    return end;
#else
    (void)qtype, (void)w, (void)hi, (void)n, (void)k, (void)t, (void)qx, (void)dx, (void)out;
    return r;
#endif
}
