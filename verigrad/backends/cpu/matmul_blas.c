/* The fast path of matrix products: c cut into tiles that depend on the shape alone, one single-threaded
 * OpenBLAS call per tile on verigrad's pool (or, on AVX-512, for the f32 shapes where they measured
 * faster, the dot-product and outer-product kernels of matmul_avx512.c); and single OpenBLAS calls for
 * the other kernel families (convolution.c), with OpenBLAS on one thread meanwhile. matmul.c's vg_gemm chooses
 * this path or the exact one.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"
#include "vg.h"

/* ---------------------------------------------------------------- fast path: OpenBLAS on tiles */

/* cblas_?gemm with 64-bit or 32-bit integers (OpenBLAS built with or without USE64BITINT). */
typedef void (*sgemm64_fn)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                           const float *, int64_t, float, float *, int64_t);
typedef void (*sgemm32_fn)(int, int, int, int32_t, int32_t, int32_t, float, const float *, int32_t,
                           const float *, int32_t, float, float *, int32_t);
typedef void (*dgemm64_fn)(int, int, int, int64_t, int64_t, int64_t, double, const double *, int64_t,
                           const double *, int64_t, double, double *, int64_t);
typedef void (*dgemm32_fn)(int, int, int, int32_t, int32_t, int32_t, double, const double *, int32_t,
                           const double *, int32_t, double, double *, int32_t);
/* cblas_?gemv likewise */
typedef void (*sgemv64_fn)(int, int, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t, float,
                           float *, int64_t);
typedef void (*sgemv32_fn)(int, int, int32_t, int32_t, float, const float *, int32_t, const float *, int32_t, float,
                           float *, int32_t);
typedef void (*dgemv64_fn)(int, int, int64_t, int64_t, double, const double *, int64_t, const double *, int64_t,
                           double, double *, int64_t);
typedef void (*dgemv32_fn)(int, int, int32_t, int32_t, double, const double *, int32_t, const double *, int32_t,
                           double, double *, int32_t);

#define CBLAS_ROW_MAJOR 101

/* Whether the m x n values at c (row stride ldc) are all finite: an exponent field of all ones plus
 * one carries into the sign bit. */
#define ALL_FINITE(T, UINT, MASK, ONE, TOP, NAME, ATTR)                                                  \
    ATTR static int all_finite_##NAME(const void *c, int64_t m, int64_t n, int64_t ldc) {                \
        UINT acc = 0;                                                                                    \
        for (int64_t i = 0; i < m; i++) {                                                                \
            const T *row = (const T *)c + i * ldc;                                                       \
            for (int64_t j = 0; j < n; j++) {                                                            \
                UINT bits;                                                                               \
                memcpy(&bits, row + j, sizeof bits);                                                     \
                acc |= (bits & MASK) + ONE;                                                              \
            }                                                                                            \
        }                                                                                                \
        return !(acc & TOP);                                                                             \
    }

ALL_FINITE(float, uint32_t, 0x7f800000u, 0x00800000u, 0x80000000u, f32, )
ALL_FINITE(double, uint64_t, 0x7ff0000000000000ull, 0x0010000000000000ull, 0x8000000000000000ull, f64, )
#ifdef VG_X86
ALL_FINITE(float, uint32_t, 0x7f800000u, 0x00800000u, 0x80000000u, f32_avx2, __attribute__((target("avx2"))))
ALL_FINITE(double, uint64_t, 0x7ff0000000000000ull, 0x0010000000000000ull, 0x8000000000000000ull, f64_avx2,
           __attribute__((target("avx2"))))
#endif

/* The largest |x| of an outer x inner block (rows `stride` apart) as its bits: at or above the bits of
 * infinity when the block holds an infinity or a NaN. */
#define MAX_BITS(T, UINT, ABS, NAME, ATTR)                                                               \
    ATTR static UINT max_bits_##NAME(const T *x, int64_t outer, int64_t inner, int64_t stride) {         \
        UINT acc = 0;                                                                                    \
        for (int64_t o = 0; o < outer; o++) {                                                            \
            const T *row = x + o * stride;                                                               \
            for (int64_t i = 0; i < inner; i++) {                                                        \
                UINT bits;                                                                               \
                memcpy(&bits, row + i, sizeof bits);                                                     \
                bits &= ABS;                                                                             \
                acc = bits > acc ? bits : acc;                                                           \
            }                                                                                            \
        }                                                                                                \
        return acc;                                                                                      \
    }

MAX_BITS(float, uint32_t, 0x7fffffffu, f32, )
MAX_BITS(double, uint64_t, 0x7fffffffffffffffull, f64, )
#ifdef VG_X86
MAX_BITS(float, uint32_t, 0x7fffffffu, f32_avx2, __attribute__((target("avx2"))))
MAX_BITS(double, uint64_t, 0x7fffffffffffffffull, f64_avx2, __attribute__((target("avx2"))))
#endif

static finite_fn pick_finite_f32(void) {
#ifdef VG_X86
    if (vg_has_avx2()) return all_finite_f32_avx2;
#endif
    return all_finite_f32;
}

static finite_fn pick_finite_f64(void) {
#ifdef VG_X86
    if (vg_has_avx2()) return all_finite_f64_avx2;
#endif
    return all_finite_f64;
}

/* OpenBLAS's thread count: the tiles run on verigrad's pool with OpenBLAS on one thread. */
void vg_blas_single_begin(void);
void vg_blas_single_end(void);
typedef int (*get_threads_fn)(void);
typedef void (*set_threads_fn)(int);
static get_threads_fn blas_get_threads;
static set_threads_fn blas_set_threads;

void vg_gemm_blas_threads(get_threads_fn get, set_threads_fn set) {
    blas_get_threads = get;
    blas_set_threads = set;
}

/* The CBLAS transpose flag (111 no, 112 yes) and leading dimension of a rows x cols operand with element
 * strides rs, cs in a row-major call; 0 when BLAS cannot take it (no unit stride, or overlapping rows). */
static int blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, int64_t *ld) {
    int64_t min_rs = cols > 1 ? cols : 1, min_cs = rows > 1 ? rows : 1;
    if ((cs == 1 || cols == 1) && (rows == 1 || rs >= min_rs)) {
        *ld = rows > 1 ? rs : min_rs;
        return 111;
    }
    if ((rs == 1 || rows == 1) && (cols == 1 || cs >= min_cs)) {
        *ld = cols > 1 ? cs : min_cs;
        return 112;
    }
    return 0;
}

#define BLAS_TILE 256          /* the largest tile side */
#define BLAS_MIN_SIDE 64       /* tiles are split until there are BLAS_MIN_TILES, down to this side */
#define BLAS_MIN_TILES 4
#define BLAS_TILE_WORK 131072  /* multiply-adds below which a tile is not split (one BLAS call is cheaper) */
#define KSPLIT_MIN_K 4096      /* a product whose c is one tile is split along k from this depth */
#define KSPLIT_BLOCK 2048      /* the least depth of a k-block */
#define KSPLIT_MAX_BLOCKS 32

/* OpenBLAS's small-matrix kernels (its AVX-512 cores have them) compute a product of at most this many
 * multiply-adds straight from a and b, without packing either; 0 where its kernels have none. */
static int64_t small_kernel_work = 0;

void vg_gemm_blas_small_kernels(int64_t work) { small_kernel_work = work; }

/* Whether f32 products with a transposed b and fewer rows than columns are computed transposed,
 * c^T = b^T a^T, into a buffer whose tiles are then transposed into c (an nn.Linear's x @ W^T). On
 * OpenBLAS's AVX-512 cores, measured with the transposition on one thread: 1.03-1.50x faster for 32 to
 * 128 rows (64x784x256: 1.12x, 32x3136x128: 1.20x, 128x768x3072: 1.05x), and 1.5-1.9x for 8 to 31 rows
 * when c has at least 768 columns (8x768x2304: 1.93x), where fewer columns lost up to 2x; at 192 rows
 * and more it lost up to 18% (the transposition costs more than it saves). In f64, and on the AVX2
 * cores, it gained nothing. On AVX-512 most of these products are dot products (dot_applies, tried
 * first); this remains for those (k > 1024, k < 256), but k < 128: there it lost (Intel Xeon with AVX-512,
 * one thread: 128x64x256 0.74x, 64x64x128 0.73x, 128x64x768 0.76x, 128x96x256 0.88x; a GPT's
 * [4, 32, 64] @ W^T of 256 rows). */
static int transposed_wide = 0;

void vg_gemm_blas_transposed_wide(int flag) { transposed_wide = flag; }

static int transposes(int f32, int tb, int64_t m, int64_t n, int64_t k, double beta) {
    if (!transposed_wide || !f32 || tb != 112 || beta != 0.0 || m >= n || k < 128) return 0;
    return (m >= 32 && m <= 128) || (m >= 8 && m < 32 && n >= 768);
}

/* Whether the small-matrix kernels take a row-major product of this layout: OpenBLAS (column-major) sees
 * c^T = b^T a^T, and its kernel for a transposed first operand and a plain second one (a plain a with a
 * transposed b here) is slower than packing, as is its doubly transposed one for k < 4. */
static int small_kernel_layout(int ta, int tb, int64_t k) {
    if (tb == 112) return ta == 112 && k >= 4;
    return 1;
}

/* The tile of c where the small-matrix kernels apply and the product is larger than one of them takes:
 * whole rows, as many (in multiples of 16) as one small-kernel call takes. Measured on the CNN's
 * products, such tiles beat one packed call by 3-60% (f32 and f64): packing a and b costs more than a
 * and b read in place, when k and n are small. 0 when the rule does not apply. */
static int64_t small_tile_rows(int64_t batch, int64_t m, int64_t n, int64_t k, int ta, int tb) {
    if (!small_kernel_work || !small_kernel_layout(ta, tb, k) || m == 1) return 0;
    if (m * n * k <= small_kernel_work) return batch > 1 ? m : 0; /* one call each */
    return (small_kernel_work / (n * k)) / 16 * 16;
}

/* Whether an f32 product of at least ROW_TILES_MIN_M rows whose k or n is at most ROW_TILES_MAX_SIDE is cut
 * into tiles of whole rows (at least ROW_TILES_MIN_ROWS each, at most ROW_TILES_MAX tiles) instead of the
 * rules below: each OpenBLAS call packs the whole width of b once and streams its rows, where tiles of
 * 256 columns (or the small kernels' 16 rows) packed b again for every row of tiles. Measured on one
 * thread of an Intel Xeon with AVX-512 (SkylakeX kernels), the rows' time over the old tiles' (m x k x n,
 * the GPT training step's products): 1024x128x4096 NT (the tied head's x @ W^T) 0.82-0.90x,
 * 1024x128x384 NT 0.80-0.92x, 1024x128x512 NT 0.84-0.87x, 1024x384x128 NN 0.77-0.80x, 1024x128x512 NN
 * 0.83-0.90x, 2048x320x960 NT 0.70-0.94x, 2048x320x8192 NT 0.84-0.89x, 4096x1024x128 TN 0.94-0.96x; no
 * change for 1024x4096x128 NN and 4096x256x256 NN (1.00x); products with both k and n above 512 kept
 * the old tiles (1024x768x3072 NT: rows 1.06x, 256x2048x2048 with 64-row tiles 1.24x), as do products
 * whose small-kernel tiles have ROW_TILES_SMALL_ROWS rows or more (a convolution's 3000x144x32, where
 * reading b in place wins); those of 16 and 48 rows lost (1024x384x128 NN, 1024x128x128 NN). Which elements
 * share a call depends on the shape alone, as before. */
#define ROW_TILES_MIN_M 1024
#define ROW_TILES_MAX_SIDE 512
#define ROW_TILES_MIN_ROWS 256
#define ROW_TILES_MAX 8
#define ROW_TILES_SMALL_ROWS 64
/* Such a product whose c has at least this many times more columns than rows (the tied head's x @ W^T) is
 * cut into tiles of whole columns instead (as many as rows would give of its n): each OpenBLAS call then
 * packs its own part of b, where every tile of whole rows packed all of b (in a profile of the head's
 * product, OpenBLAS's copy of b went from 15% of the time to 4%). One thread of an Intel Xeon with
 * AVX-512 (SkylakeX kernels), through matmul, CPU time, the builds alternating, NT (m x k x n), columns'
 * time over rows': 1024x128x4096 0.98x, 2048x320x8192 0.93-0.96x; the same bits (k is not split). */
#define COLUMN_TILES_MIN_RATIO 2
static int fewer_tiles = 1; /* these rules and the next; 0 (for the tests): neither */

void vg_gemm_fewer_tiles(int flag) { fewer_tiles = flag; }

static int row_tiles_apply(int f32, int64_t m, int64_t n, int64_t k) {
    return fewer_tiles && f32 && m >= ROW_TILES_MIN_M && (k <= ROW_TILES_MAX_SIDE || n <= ROW_TILES_MAX_SIDE);
}

/* The tiles an f32 product with a transposed a (a layer's weight gradient g^T x), a long k and a small c
 * is cut into at least: two, not BLAS_MIN_TILES. Measured on one thread of an Intel Xeon with AVX-512
 * (SkylakeX kernels), two tiles' time over four's (m x k x n, the GPT step's weight gradients; OpenBLAS
 * called on the tiles from Python, then matmul): 384x1024x128 0.81-0.96x, 128x1024x512 0.92-0.98x,
 * 512x1024x128 0.91x, 128x1024x128 0.89-1.00x (one call: 0.68-0.87x, but a second thread would then
 * have nothing to do). */
#define FEW_TILES_MIN_K 1024
#define FEW_TILES_MAX_C 65536
static int64_t min_tiles_of(int f32, int ta, int64_t m, int64_t n, int64_t k) {
    if (fewer_tiles && f32 && ta == 112 && k >= FEW_TILES_MIN_K && m * n <= FEW_TILES_MAX_C) return 2;
    return BLAS_MIN_TILES;
}

/* The tile of c: whole rows (a wide c: whole columns) where row_tiles_apply; small_tile_rows where that applies; else BLAS_TILE
 * columns at most (a c of one row: all), and rows up to BLAS_TILE^2 elements, halved (the longer side
 * first) until the product has min_tiles tiles, both sides are BLAS_MIN_SIDE, or a tile would hold less
 * than BLAS_TILE_WORK multiply-adds. Then the sides are evened out (rows in multiples of 16), an odd
 * count of three or more tiles made even with one more row of tiles (two threads then take the same
 * work: 13 tiles of a 3136-row c left one thread a tile more). It depends on the shape, the layout and
 * OpenBLAS's kernels alone, never on the thread count. */
static void blas_tile(int f32, int64_t batch, int64_t m, int64_t n, int64_t k, int ta, int tb, int64_t min_tiles,
                      int64_t *mb, int64_t *nb) {
    int64_t small_rows = small_tile_rows(batch, m, n, k, ta, tb);
    if (row_tiles_apply(f32, m, n, k) && small_rows < ROW_TILES_SMALL_ROWS) {
        if (n >= COLUMN_TILES_MIN_RATIO * m) { /* a wide c: tiles of whole columns */
            int64_t cols = imin(n / ROW_TILES_MIN_ROWS, ROW_TILES_MAX);
            *mb = m;
            *nb = imin(n, cdiv(cdiv(n, cols), 16) * 16);
            return;
        }
        int64_t rows = imin(m / ROW_TILES_MIN_ROWS, ROW_TILES_MAX);
        *nb = n;
        *mb = imin(m, cdiv(cdiv(m, rows), 16) * 16);
        return;
    }
    /* GEMV tiles (c of one row) pack nothing: they are split for threads only */
    *nb = m == 1 || small_rows ? n : imin(n, BLAS_TILE);
    *mb = small_rows ? small_rows : imin(m, BLAS_TILE * BLAS_TILE / *nb);
    while (!small_rows && batch * cdiv(m, *mb) * cdiv(n, *nb) < min_tiles &&
           (*mb > BLAS_MIN_SIDE || *nb > BLAS_MIN_SIDE) && *mb * *nb * k >= 2 * BLAS_TILE_WORK) {
        if (*mb >= *nb)
            *mb = cdiv(*mb, 2);
        else
            *nb = cdiv(*nb, 2);
    }
    int64_t rows = cdiv(m, *mb);
    if (rows > 2 && rows % 2 && batch * cdiv(n, *nb) % 2) rows++;
    *mb = imin(m, cdiv(cdiv(m, rows), 16) * 16);
    *nb = imin(n, cdiv(n, cdiv(n, *nb)));
}

/* The tile blas_tile gives a product (for the tests): out[0] rows, out[1] columns. */
void vg_gemm_blas_tile(int f32, int64_t batch, int64_t m, int64_t n, int64_t k, int ta, int tb, int64_t *out) {
    blas_tile(f32, batch, m, n, k, ta, tb, min_tiles_of(f32, ta, m, n, k), &out[0], &out[1]);
}

/* The largest |x| bits of an outer x inner block as max_bits gives them, its rows split among the threads
 * (chunks of at least MAX_SCAN_WORK elements), each chunk's largest folded in by an atomic maximum: the
 * same bits whatever the split. */
#define MAX_SCAN_WORK 32768
#define PARALLEL_MAX_BITS(T, UINT, NAME)                                                                 \
    typedef struct {                                                                                     \
        UINT (*max_bits)(const T *, int64_t, int64_t, int64_t);                                          \
        const T *x;                                                                                      \
        int64_t inner, stride;                                                                           \
        UINT acc;                                                                                        \
    } max_scan_##NAME;                                                                                   \
    static void max_scan_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                               \
        max_scan_##NAME *s = ctx;                                                                        \
        UINT found = s->max_bits(s->x + lo * s->stride, hi - lo, s->inner, s->stride);                   \
        UINT seen = __atomic_load_n(&s->acc, __ATOMIC_RELAXED);                                          \
        while (found > seen &&                                                                           \
               !__atomic_compare_exchange_n(&s->acc, &seen, found, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) \
            ;                                                                                            \
    }                                                                                                    \
    static UINT parallel_max_bits_##NAME(UINT (*max_bits)(const T *, int64_t, int64_t, int64_t), const T *x, \
                                         int64_t outer, int64_t inner, int64_t stride, int threads) {    \
        max_scan_##NAME s = {max_bits, x, inner, stride, 0};                                             \
        if (inner > 0) vg_parallel_for(outer, cdiv(MAX_SCAN_WORK, inner), threads, max_scan_chunk_##NAME, &s); \
        return s.acc;                                                                                    \
    }

PARALLEL_MAX_BITS(float, uint32_t, f32)
PARALLEL_MAX_BITS(double, uint64_t, f64)

/* Whether no partial sum of the product can overflow: every input finite and k max|a| max|b| |alpha|
 * below half the largest value (with beta == 0). Then c needs no scan for infinities and NaNs; this
 * reads a and b once (on the threads), cheaper than scanning c when m k + k n < m n. */
#define NO_OVERFLOW(T, UINT, INF, LIMIT, NAME)                                                           \
    static int no_overflow_##NAME(const blas_job *g, int64_t batch, int threads) {                       \
        UINT (*max_bits)(const T *, int64_t, int64_t, int64_t) = max_bits_##NAME;                        \
        X86_ONLY(if (vg_has_avx2()) max_bits = max_bits_##NAME##_avx2;)                                  \
        for (int64_t item = 0; item < batch; item++) {                                                   \
            const T *a = (const T *)g->a + g->offs[3 * item + g->oa];                                    \
            const T *b = (const T *)g->b + g->offs[3 * item + g->ob];                                    \
            UINT ma = g->ta == 111 ? parallel_max_bits_##NAME(max_bits, a, g->m, g->k, g->lda, threads)  \
                                   : parallel_max_bits_##NAME(max_bits, a, g->k, g->m, g->lda, threads); \
            UINT mb = g->tb == 111 ? parallel_max_bits_##NAME(max_bits, b, g->k, g->n, g->ldb, threads)  \
                                   : parallel_max_bits_##NAME(max_bits, b, g->n, g->k, g->ldb, threads); \
            if (ma >= INF || mb >= INF) return 0;                                                        \
            T fa, fb;                                                                                    \
            memcpy(&fa, &ma, sizeof fa);                                                                 \
            memcpy(&fb, &mb, sizeof fb);                                                                 \
            double alpha = g->alpha < 0 ? -g->alpha : g->alpha;                                          \
            if (!((double)fa * (double)fb * (double)g->k * (alpha > 1 ? alpha : 1) < LIMIT)) return 0;   \
        }                                                                                                \
        return 1;                                                                                        \
    }

NO_OVERFLOW(float, uint32_t, 0x7f800000u, 1.7e38, f32)
NO_OVERFLOW(double, uint64_t, 0x7ff0000000000000ull, 8.9e307, f64)

/* ---------------------------------------------------------------- fast path: f32 dot products */

/* Where the dot products of matmul_avx512.c (f32 c = alpha a b^T + beta c, a and b^T both read along k)
 * take a product instead of OpenBLAS.
 * Measured on one thread of an AVX-512 Zen 4 against OpenBLAS's tiles (the transposed ones included):
 * 64x784x256 (m x k x n) 1.30x, 32x512x256 1.33x, 128x768x768 1.18x, 512x512x512 1.12x, 4096x256x256
 * 1.10x, 8x768x2304 2.27x, 16x768x1024 1.35x; with k > 1024, where OpenBLAS packs b for a narrow c:
 * 64x1568x10 (a classifier's last layer) 2.0x, 16x3136x32 2.7x, 64x3136x256 1.24x. Left to OpenBLAS where
 * it lost: k < 128 or, below 32 rows, k < 256 (the sums across lanes cost more than they save; 64x64x64
 * 0.84x), fewer than 32 columns for k <= 1024 (64x256x10 0.61x, where OpenBLAS's small-matrix kernels
 * read b in place), fewer than 8 rows, 8 to 31 rows with fewer than 768 columns for k <= 1024 (8x256x256
 * 0.81x); for k > 1024, more than 256 rows or columns (the rows no longer fit L1; 128x2048x512 0.90x,
 * 256x2048x2048 0.89x), fewer than 16 rows or 10 columns (8x3136x10 0.65x), products that OpenBLAS's
 * small-matrix kernels take (16x1568x32 0.85x), and k from KSPLIT_MIN_K (split along k for the
 * threads). */

static int dot_products = 1; /* 0: never (for the tests); else where the machine has AVX-512 */

void vg_gemm_dot_products(int flag) { dot_products = flag; }

/* On Intel's AVX-512 cores OpenBLAS's own kernels win the larger products: measured on one thread of an
 * Intel Xeon (dot products' time over OpenBLAS's): 1024x128x512 (an nn.Linear's x @ W^T in a GPT's
 * training step) 1.51x, 128x768x768 1.54x, 512x512x512 1.73x, 4096x256x256 1.71x, 1024x320x960 1.76x,
 * 1024x256x256 1.39x; while they still gained below 128 rows or 2^22 multiply-adds: 8x768x2304 0.61x,
 * 16x768x1024 0.87x, 32x512x256 0.84x, 64x784x256 0.99x, 128x128x128 0.90x. */
static int dots_lose(int64_t m, int64_t n, int64_t k) {
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    static int intel = -1;
    if (intel < 0) intel = __builtin_cpu_is("intel");
    return intel && m >= 128 && m * n * k > ((int64_t)1 << 22);
#else
    (void)m, (void)n, (void)k;
    return 0;
#endif
}

static int dot_applies(int f32, int ta, int tb, int64_t m, int64_t n, int64_t k) {
    if (!dot_products || !f32 || ta != 111 || tb != 112 || k < 128 || m < 8 || dots_lose(m, n, k)) return 0;
    if (k <= 1024 && (n < 32 || (m < 32 && (k < 256 || n < 768)))) return 0;
    if (k > 1024 && (k >= KSPLIT_MIN_K || m < 16 || m > 256 || n < 10 || n > 256 || m * n * k <= small_kernel_work))
        return 0;
    return vg_has_avx512();
}

/* ---------------------------------------------------------------- fast path: f32 packed GEMM */

/* Where matmul_packed.c's packed GEMM takes an f32 product (beta 0, or alpha 1 and beta 1) instead of
 * the kernels below and OpenBLAS. Measured on one thread of an Intel Xeon with AVX-512 (Sapphire Rapids,
 * OpenBLAS's SkylakeX kernels), CPU time, the two alternating in one process, the packed GEMM's time over
 * the path before (m x k x n, plain / b transposed / a transposed): 1024x128x128 (a GPT's layer) about
 * 0.8x, 256x256x256 0.74x / 0.70x / 0.79x, 512x512x512 0.87x / 0.83x / 0.94x, 1024x4096x128 0.77x / 0.77x
 * / 0.94x, 4096x256x256 0.81x / 0.78x / 0.86x, 64x784x256 0.82x / 0.66x / 0.73x, 2048x320x960 0.87x /
 * 0.85x / 1.00x, 32x768x768 0.74x / 1.01x / 0.72x. Left as they were: fewer than 32 rows (16x1024x1024
 * 0.94x-1.04x, b packed for too few rows) and fewer than 2^21 multiply-adds (100x100x100 1.02x-1.05x). */
static int packed_products = 1; /* 0: never (for the tests); else where the machine has AVX-512 */

void vg_gemm_packed_products(int flag) { packed_products = flag; }

int vg_gemm_packed_available(void) { return vg_has_avx512(); }

static int packed_applies(int f32, int64_t m, int64_t n, int64_t k, double alpha, double beta) {
    if (!packed_products || !f32 || !(beta == 0.0 || (alpha == 1.0 && beta == 1.0))) return 0;
    if (m < 32 || n < 16 || k < 16 || m * n * k < ((int64_t)1 << 21)) return 0;
    return vg_has_avx512();
}

int vg_gemm_packed_takes(int64_t m, int64_t n, int64_t k) { return packed_applies(1, m, n, k, 1.0, 0.0); }

/* ---------------------------------------------------------------- fast path: f32 outer products */

/* Where the outer products of matmul_avx512.c (f32 c = alpha a b or c + a b, b read along n) take a
 * product instead of OpenBLAS.
 * Measured on one thread of an AVX-512 Zen 4 against OpenBLAS's tiles (two threads in brackets):
 * 32x3136x128 (m x k x n) 1.23x (1.48x), 16x1024x512 1.65x, 64x1024x128 1.22x, 256x2048x64 1.22x,
 * 200x1500x300 1.16x. Left to OpenBLAS where it did not gain: more than 256 rows (OpenBLAS's packed
 * kernels: 1024x3136x512 0.93x, 1024x256x32 0.93x), k < 1024 (0.74x-1.26x, no rule), k < 2048 with fewer
 * than 128 columns (64x1024x32 0.94x), fewer than 16 columns, a single row (1x3072x768: 178 us, against
 * 117 us as OpenBLAS's GEMV in blocks of k), and k from KSPLIT_MIN_K (split along k for the threads). */

static int outer_products = 1; /* 0: never (for the tests); else where the machine has AVX-512 */

void vg_gemm_outer_products(int flag) { outer_products = flag; }

static int outer_applies(int f32, int tb, int64_t m, int64_t n, int64_t k, double alpha, double beta) {
    if (!outer_products || !f32 || tb != 111 || !(beta == 0.0 || (alpha == 1.0 && beta == 1.0))) return 0;
    if (m == 1 || m > 256 || n < 16 || k < 1024 || k >= KSPLIT_MIN_K || (k < 2048 && n < 128)) return 0;
    return vg_has_avx512();
}

/* Whether a plain a and a transposed b (rows along k: a backward's g @ W^T) go as a plain a and a copy of
 * b made plain: where OpenBLAS's small-matrix kernels take a product (at most small_kernel_work, one batch
 * item) they refuse that layout and OpenBLAS packs both operands, which costs more than the copy. Tried
 * after the dot products and the transposed wide products (their shapes stay theirs). Measured on one
 * thread of an Intel Xeon with AVX-512, f32, against NT as it was (m x k x n): 64x64x64 6.3 us against 8.9
 * (NN 5.7), 100x100x100 23 us against 35, 128x64x64 9.7 against 16; f64 100x100x100 35 against 51. Left
 * as it was where it lost: fewer than 32 rows (16x200x64: 11.8 us against 5.8 with the copy not
 * vectorized; 8x64x8 2.4 against 1.7), a transposed a too (TT made TN: 10 us against 8 at 64^3). The bits
 * are those of the product with b given plain (the shape alone decides), on every thread count. */
static int plain_b_applies(int64_t batch, int64_t m, int64_t n, int64_t k, int ta, int tb) {
    return ta == 111 && tb == 112 && batch == 1 && m >= 32 && n > 1 && m * n * k <= small_kernel_work;
}

/* plain[p, j] = bt[j, p] for j < n, p < k (bt: n rows of k, row stride ldb; plain: k rows of n, row
 * stride ldp): a transposed b as a plain one. On AVX2, f32 in blocks of 8 x 8 (a copy: the same values
 * either way). */
#ifdef VG_X86
__attribute__((target("avx2"))) static void plain_b_f32_avx2(const float *bt, int64_t n, int64_t k, int64_t ldb,
                                                             float *plain, int64_t ldp) {
    int64_t n8 = n / 8 * 8, k8 = k / 8 * 8;
    for (int64_t j = 0; j < n8; j += 8)
        for (int64_t p = 0; p < k8; p += 8) {
            const float *s = bt + j * ldb + p;
            __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ldb), r2 = _mm256_loadu_ps(s + 2 * ldb);
            __m256 r3 = _mm256_loadu_ps(s + 3 * ldb), r4 = _mm256_loadu_ps(s + 4 * ldb);
            __m256 r5 = _mm256_loadu_ps(s + 5 * ldb), r6 = _mm256_loadu_ps(s + 6 * ldb);
            __m256 r7 = _mm256_loadu_ps(s + 7 * ldb);
            __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
            __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
            __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
            __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xee);
            __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xee);
            __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xee);
            __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xee);
            float *d = plain + p * ldp + j;
            _mm256_storeu_ps(d, _mm256_permute2f128_ps(u0, u4, 0x20));
            _mm256_storeu_ps(d + ldp, _mm256_permute2f128_ps(u1, u5, 0x20));
            _mm256_storeu_ps(d + 2 * ldp, _mm256_permute2f128_ps(u2, u6, 0x20));
            _mm256_storeu_ps(d + 3 * ldp, _mm256_permute2f128_ps(u3, u7, 0x20));
            _mm256_storeu_ps(d + 4 * ldp, _mm256_permute2f128_ps(u0, u4, 0x31));
            _mm256_storeu_ps(d + 5 * ldp, _mm256_permute2f128_ps(u1, u5, 0x31));
            _mm256_storeu_ps(d + 6 * ldp, _mm256_permute2f128_ps(u2, u6, 0x31));
            _mm256_storeu_ps(d + 7 * ldp, _mm256_permute2f128_ps(u3, u7, 0x31));
        }
    for (int64_t j = 0; j < n; j++) /* the edges: the last k % 8 columns of every row, the last n % 8 rows */
        for (int64_t p = j < n8 ? k8 : 0; p < k; p++) plain[p * ldp + j] = bt[j * ldb + p];
}
#endif

void vg_transpose_f32(const float *bt, int64_t n, int64_t k, int64_t ldb, float *plain, int64_t ldp) {
    X86_ONLY(if (vg_has_avx2()) {
        plain_b_f32_avx2(bt, n, k, ldb, plain, ldp);
        return;
    })
    for (int64_t j = 0; j < n; j++)
        for (int64_t p = 0; p < k; p++) plain[p * ldp + j] = bt[j * ldb + p];
}

static void plain_b_f32(const float *bt, int64_t n, int64_t k, int64_t ldb, float *plain) {
    vg_transpose_f32(bt, n, k, ldb, plain, n);
}

static void plain_b_f64(const double *bt, int64_t n, int64_t k, int64_t ldb, double *plain) {
    for (int64_t j = 0; j < n; j++)
        for (int64_t p = 0; p < k; p++) plain[p * n + j] = bt[j * ldb + p];
}

/* Whether a GEMV (c of one row or column) is split along k rather than into tiles of c: where its matrix
 * (b for a row, a for a column) has its rows along k, a tile of c would read a strip of every row, and
 * OpenBLAS streams a block of whole rows faster. Measured on one thread (Zen 4), c = a b for a of one row
 * and b of 768 x 2304 rows along n: 88 us one call, 98 and 114 us in two and four tiles of columns, 94 us
 * in four blocks of rows (their partial sums then added in double). */
static int gemv_along_k(const blas_job *g) {
    if (!g->gemv) return 0;
    return (g->m == 1 && g->tb == 111) || (g->n == 1 && g->m > 1 && g->ta == 112);
}

/* Tiles of c, one single-threaded cblas call each (row-major; ta, tb: 111 no transpose, 112
 * transpose). OpenBLAS's bits for an element depend on where its tile boundaries fall, and the tiles
 * depend on the shape alone, so the bits do not depend on the thread count. With `check`, a tile is
 * scanned for infinities and NaNs while it is in cache.
 * A product whose c is one tile and whose k is long (KSPLIT_MIN_K) is split along k instead: blocks of
 * a depth that depends on the shape alone, one cblas call each into a buffer, then summed in block order
 * in double (alpha * sum + beta * c, rounded once), so again the thread count does not matter. */
#define BLAS_TILES(T, NAME, F64, F32, GEMV64, GEMV32, IS_F32)                                          \
    /* dst[j, i] = src[i, j] for i < rows, j < cols (row strides lds, ldd), 16 rows of src at a time. */ \
    static void transpose_##NAME(const T *src, int64_t rows, int64_t cols, int64_t lds, T *dst, int64_t ldd) { \
        for (int64_t i0 = 0; i0 < rows; i0 += 16) {                                                      \
            int64_t i1 = imin(i0 + 16, rows);                                                            \
            for (int64_t j = 0; j < cols; j++)                                                           \
                for (int64_t i = i0; i < i1; i++) dst[j * ldd + i] = src[i * lds + j];                   \
        }                                                                                                \
    }                                                                                                    \
    /* c[:m, :n] = alpha * a @ b + beta * c: a GEMV when c is one row or column (it reads the matrix     \
     * once; GEMM would pack it first), else a GEMM. */                                                  \
    static void blas_call_##NAME(const blas_job *g, int64_t m, int64_t n, int64_t k, double alpha,       \
                                 const T *a, const T *b, double beta, T *c, int64_t ldc) {               \
        if (g->gemv && (m == 1 || n == 1)) {                                                             \
            int trans = 111;                                                                             \
            int64_t rows, cols, incx, incy, len = m == 1 ? n : m;                                        \
            const T *mat, *x;                                                                            \
            if (m == 1) { /* the row c = b^T a: b stored k x n (transposed) or n x k */                  \
                mat = b, x = a, incx = g->ta == 111 ? 1 : g->lda, incy = 1;                              \
                if (g->tb == 111)                                                                        \
                    trans = 112, rows = k, cols = n;                                                     \
                else                                                                                     \
                    rows = n, cols = k;                                                                  \
            } else { /* the column c = a b: a stored m x k or k x m (transposed) */                      \
                mat = a, x = b, incx = g->tb == 111 ? g->ldb : 1, incy = ldc;                            \
                if (g->ta == 111)                                                                        \
                    rows = m, cols = k;                                                                  \
                else                                                                                     \
                    trans = 112, rows = k, cols = m;                                                     \
            }                                                                                            \
            int64_t lda = m == 1 ? g->ldb : g->lda;                                                      \
            if (beta == 0.0) /* c is not read */                                                         \
                for (int64_t i = 0; i < len; i++) c[i * incy] = (T)0;                                    \
            if (g->int64)                                                                                \
                ((GEMV64)g->gemv)(CBLAS_ROW_MAJOR, trans, rows, cols, (T)alpha, mat, lda, x, incx, (T)beta, c, \
                                  incy);                                                                 \
            else                                                                                         \
                ((GEMV32)g->gemv)(CBLAS_ROW_MAJOR, trans, (int32_t)rows, (int32_t)cols, (T)alpha, mat,     \
                                  (int32_t)lda, x, (int32_t)incx, (T)beta, c, (int32_t)incy);            \
            return;                                                                                      \
        }                                                                                                \
        if (g->int64)                                                                                    \
            ((F64)g->fn)(CBLAS_ROW_MAJOR, g->ta, g->tb, m, n, k, (T)alpha, a, g->lda, b, g->ldb, (T)beta, c, \
                         ldc);                                                                           \
        else                                                                                             \
            ((F32)g->fn)(CBLAS_ROW_MAJOR, g->ta, g->tb, (int32_t)m, (int32_t)n, (int32_t)k, (T)alpha, a,   \
                         (int32_t)g->lda, b, (int32_t)g->ldb, (T)beta, c, (int32_t)ldc);                 \
    }                                                                                                    \
    static void blas_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                                   \
        blas_job *g = ctx;                                                                               \
        int64_t per_item = g->row_tiles * g->col_tiles;                                                  \
        for (int64_t u = lo; u < hi; u++) {                                                              \
            if (g->kb) { /* block u of k (one batch item) */                                             \
                int64_t p0 = u * g->kb, kc = imin(g->kb, g->k - p0);                                     \
                const T *a = (const T *)g->a + g->offs[0] + (g->ta == 111 ? p0 : p0 * g->lda);           \
                const T *b = (const T *)g->b + g->offs[1] + (g->tb == 111 ? p0 * g->ldb : p0);           \
                blas_call_##NAME(g, g->m, g->n, kc, 1.0, a, b, 0.0, (T *)g->parts + u * g->m * g->n, g->n); \
                continue;                                                                                \
            }                                                                                            \
            int64_t item = u / per_item, rest = u % per_item;                                            \
            int64_t i0 = (rest / g->col_tiles) * g->mb, j0 = (rest % g->col_tiles) * g->nb;              \
            int64_t m = imin(g->mb, g->m - i0), n = imin(g->nb, g->n - j0);                              \
            const T *a = (const T *)g->a + g->offs[3 * item + g->oa] + (g->ta == 111 ? i0 * g->lda : i0); \
            const T *b = (const T *)g->b + g->offs[3 * item + g->ob] + (g->tb == 111 ? j0 : j0 * g->ldb); \
            int64_t c_item = g->out ? item * g->m * g->n : g->offs[3 * item + 2];                        \
            T *c = (T *)g->c + c_item + i0 * g->ldc + j0;                                                \
            blas_call_##NAME(g, m, n, g->k, g->alpha, a, b, g->beta, c, g->ldc);                         \
            int64_t rows = m, cols = n, ld = g->ldc;                                                     \
            if (g->out) { /* the tile of c^T, while in cache, into its place in the caller's c */        \
                T *o = (T *)g->out + g->offs[3 * item + 2] + j0 * g->ldo + i0;                           \
                transpose_##NAME(c, m, n, g->ldc, o, g->ldo);                                            \
                c = o, rows = n, cols = m, ld = g->ldo;                                                  \
            }                                                                                            \
            if (g->check && !g->finite(c, rows, cols, ld)) __atomic_store_n(&g->bad, 1, __ATOMIC_RELAXED); \
        }                                                                                                \
    }                                                                                                    \
    /* c = alpha * (the blocks' products summed in block order, in double) + beta * c, rounded once. */  \
    static void ksplit_sum_##NAME(blas_job *g, int64_t blocks) {                                         \
        const T *parts = g->parts;                                                                       \
        T *c = (T *)g->c + g->offs[2];                                                                   \
        int64_t mn = g->m * g->n;                                                                        \
        for (int64_t i = 0; i < g->m; i++)                                                               \
            for (int64_t j = 0; j < g->n; j++) {                                                         \
                const T *p = parts + i * g->n + j;                                                       \
                double s = (double)p[0];                                                                 \
                for (int64_t q = 1; q < blocks; q++) s = s + (double)p[q * mn];                          \
                double v = g->alpha * s;                                                                 \
                if (g->beta != 0.0) v = v + g->beta * (double)c[i * g->ldc + j];                         \
                c[i * g->ldc + j] = (T)v;                                                                \
            }                                                                                            \
        if (g->check && !g->finite(c, g->m, g->n, g->ldc)) g->bad = 1;                                   \
    }                                                                                                    \
    /* 1: done; 0: done, and `check` found an infinity or a NaN in c; BLAS_NOT_USED: alpha == 0 or   \
     * k == 0; BLAS_A, BLAS_B, BLAS_C: that operand has a layout BLAS cannot take (nothing done). */     \
    int vg_gemm_blas_##NAME(void *fn, void *gemv, int int64, int check, int64_t batch, const int64_t *offs, \
                            int64_t m, int64_t n, int64_t k, double alpha, const T *a, int64_t rsa,      \
                            int64_t csa, const T *b, int64_t rsb, int64_t csb, double beta, T *c,        \
                            int64_t rsc, int64_t csc, int threads) {                                     \
        int64_t lda, ldb, ldc, mb, nb;                                                                   \
        if (alpha == 0.0 || k <= 0) return BLAS_NOT_USED;                                                \
        int ta = blas_layout(m, k, rsa, csa, &lda), tb = blas_layout(k, n, rsb, csb, &ldb);              \
        if (!ta) return BLAS_A;                                                                          \
        if (!tb) return BLAS_B;                                                                          \
        if (blas_layout(m, n, rsc, csc, &ldc) != 111) return BLAS_C;                                     \
        if (batch <= 0 || m <= 0 || n <= 0) return 1;                                                    \
        blas_tile(IS_F32, batch, m, n, k, ta, tb, min_tiles_of(IS_F32, ta, m, n, k), &mb, &nb);                                \
        blas_job g = {fn, gemv, int64, ta, tb, check, 0, 0, 1, m, n, k, lda, ldb, ldc, mb, nb, cdiv(m, mb), \
                      cdiv(n, nb), 0, 0, offs, alpha, beta, a, b, c, NULL, 0, pick_finite_##NAME()};     \
        if (packed_applies(IS_F32, m, n, k, alpha, beta)) { /* matmul_packed.c */                      \
            int done = vg_gemm_packed(&g, batch, threads);                                               \
            if (done != BLAS_NOT_USED) return done;                                                      \
        }                                                                                                \
        int own = dot_applies(IS_F32, ta, tb, m, n, k) ? 1 : 0;                                        \
        if (!own && outer_applies(IS_F32, tb, m, n, k, alpha, beta)) own = 2;                          \
        if (own) { /* matmul_avx512.c's kernels */                                                       \
            if (check && m * k + k * n < m * n && no_overflow_##NAME(&g, batch, threads)) g.check = 0;          \
            return own == 1 ? vg_gemm_dot_product(&g, batch, threads)                                  \
                            : vg_gemm_outer_product(&g, batch, threads);                               \
        }                                                                                              \
        int64_t plain_offs[3];                                                                           \
        T *plain_b = plain_b_applies(batch, m, n, k, ta, tb) && !transposes(IS_F32, tb, m, n, k, beta)       \
                         ? malloc(sizeof(T) * (size_t)(k * n))                                           \
                         : NULL;                                                                         \
        if (plain_b) { /* b^T (n rows of k) copied into a plain k x n b, which the small kernels read */  \
            plain_b_##NAME(b + offs[1], n, k, ldb, plain_b);                                               \
            plain_offs[0] = offs[0], plain_offs[1] = 0, plain_offs[2] = offs[2];                         \
            g.b = plain_b, g.tb = tb = 111, g.ldb = ldb = n, g.offs = plain_offs;                        \
        }                                                                                                \
        if (transposes(IS_F32, tb, m, n, k, beta)) {                                                      \
            /* c^T = b^T a^T, b^T (n x k) given plain; tiles of c^T keep its height: in two (not the    \
             * usual four) tiles of 128x64 for a 64x784x256 product, 2 threads take one each and 1 thread \
             * 0.309 ms, where four tiles of 128x32 took 0.331 ms and four of 64x64 0.359 ms. */        \
            int64_t smb, snb;                                                                            \
            blas_tile(0, batch, n, m, k, 111, ta == 111 ? 112 : 111, 2, &smb, &snb);                 \
            T *buffer = batch * cdiv(n, smb) * cdiv(m, snb) == 1 && k >= KSPLIT_MIN_K                    \
                            ? NULL                                                                       \
                            : malloc(sizeof(T) * (size_t)(batch * m * n));                               \
            if (buffer) { /* the same job with the operands' roles swapped, into the buffer */          \
                g.ta = 111, g.tb = ta == 111 ? 112 : 111, g.oa = 1, g.ob = 0;                            \
                g.m = n, g.n = m, g.lda = ldb, g.ldb = lda, g.ldc = m, g.a = b, g.b = a;                 \
                g.mb = mb = smb, g.nb = nb = snb, g.row_tiles = cdiv(n, smb), g.col_tiles = cdiv(m, snb); \
                g.c = buffer, g.out = c, g.ldo = ldc;                                                    \
            }                                                                                            \
        }                                                                                                \
        int64_t units = batch * g.row_tiles * g.col_tiles, unit_work = mb * nb * k;                      \
        int64_t kb = 0; /* split along k: the depth of a block */                                   \
        if (units > 1 && batch == 1 && gemv_along_k(&g))                                                 \
            kb = cdiv(cdiv(k, units), 16) * 16; /* as many blocks of k as there were tiles */            \
        else if (units == 1 && k >= KSPLIT_MIN_K)                                                        \
            kb = cdiv(k, imin(KSPLIT_MAX_BLOCKS, k / KSPLIT_BLOCK));                                     \
        if (kb && (g.parts = malloc(sizeof(T) * (size_t)(cdiv(k, kb) * m * n)))) {                      \
            g.kb = kb;                                                                                   \
            units = cdiv(k, kb);                                                                         \
            unit_work = m * n * kb;                                                                      \
        }                                                                                                \
        if (!g.kb && check && m * k + k * n < m * n && no_overflow_##NAME(&g, batch, threads)) g.check = 0;       \
        vg_blas_single_begin();                                                                          \
        vg_parallel_for(units, cdiv(BLAS_THREAD_WORK, unit_work), threads, blas_chunk_##NAME, &g);       \
        vg_blas_single_end();                                                                            \
        if (g.kb) {                                                                                      \
            ksplit_sum_##NAME(&g, units);                                                                \
            free(g.parts);                                                                               \
        }                                                                                                \
        if (g.out) free(g.c);                                                                            \
        free(plain_b);                                                                                   \
        return !g.bad;                                                                                   \
    }

BLAS_TILES(float, f32, sgemm64_fn, sgemm32_fn, sgemv64_fn, sgemv32_fn, 1)
BLAS_TILES(double, f64, dgemm64_fn, dgemm32_fn, dgemv64_fn, dgemv32_fn, 0)

/* ---------------------------------------------------------------- for other kernel families */

/* c = a @ b + beta * c, one row-major cblas_?gemm call on the calling thread (ta, tb: 111 no transpose,
 * 112 transpose), through the pointer and integer width matmul.py hands over: convolution.c runs one
 * per image (or block of images), between vg_blas_single_begin (OpenBLAS to one thread) and
 * vg_blas_single_end (its count back). */
#define BLAS_CALL(T, NAME, F64, F32)                                                                     \
    void vg_blas_call_##NAME(void *fn, int int64, int ta, int tb, int64_t m, int64_t n, int64_t k,       \
                             const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c, int64_t ldc) { \
        if (int64)                                                                                       \
            ((F64)fn)(CBLAS_ROW_MAJOR, ta, tb, m, n, k, (T)1, a, lda, b, ldb, beta, c, ldc);             \
        else                                                                                             \
            ((F32)fn)(CBLAS_ROW_MAJOR, ta, tb, (int32_t)m, (int32_t)n, (int32_t)k, (T)1, a,              \
                      (int32_t)lda, b, (int32_t)ldb, beta, c, (int32_t)ldc);                             \
    }                                                                                                    \
    /* Whether the m x n values at c (row stride ldc) are all finite. */                                \
    int vg_all_finite_##NAME(const T *c, int64_t m, int64_t n, int64_t ldc) {                            \
        return pick_finite_##NAME()(c, m, n, ldc);                                                       \
    }

BLAS_CALL(float, f32, sgemm64_fn, sgemm32_fn)
BLAS_CALL(double, f64, dgemm64_fn, dgemm32_fn)

/* Sections with OpenBLAS on one thread may overlap (two Python threads calling at once): the first to
 * begin saves OpenBLAS's thread count and sets 1, the last to end puts it back, under a lock, so that
 * none sees it restored while its tiles still run (OpenBLAS would split them, and change their bits). */
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static int blas_sections = 0, blas_saved = 1;

void vg_blas_single_begin(void) {
    if (!blas_get_threads) return;
    pthread_mutex_lock(&blas_lock);
    if (blas_sections++ == 0) {
        blas_saved = blas_get_threads();
        if (blas_saved != 1) blas_set_threads(1);
    }
    pthread_mutex_unlock(&blas_lock);
}

void vg_blas_single_end(void) {
    if (!blas_get_threads) return;
    pthread_mutex_lock(&blas_lock);
    if (--blas_sections == 0 && blas_saved != 1) blas_set_threads(blas_saved);
    pthread_mutex_unlock(&blas_lock);
}
