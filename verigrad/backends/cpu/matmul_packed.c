/* The fast path's packed f32 GEMM for AVX-512 (BLIS-style); matmul_blas.c decides which products it takes.
 *
 * c = alpha * a @ b (beta 0: c written directly, never cleared first) or c + a @ b, for every layout of a
 * and b that BLAS takes: b is packed once into panels of PANEL_N columns, k-major (a transposed b, an
 * nn.Linear's W^T, by 16 x 16 transposes), so that the micro-kernel reads it with aligned loads whatever
 * its layout; a is read in place (its rows along k, or a transposed a's columns, a weight gradient's g^T,
 * copied first where its rows are long), an element broadcast per row and step of k. The micro-kernel keeps a tile of up to TILE_M rows x
 * PANEL_N columns of c in 24 vectors and adds to it the outer product of a column of a's rows and a row
 * of the panel at each step of k; k goes in blocks of at most BLOCK_K (a panel's block, 32 KiB, stays in
 * L1 for all the rows of a work unit), the sums kept in c between blocks (exactly: they are f32).
 * Work units are a batch item's blocks of about UNIT_M rows x UNIT_PANELS panels. Each element of c is
 * one chain of FMAs in increasing k, from 0 (or c), times alpha at the end: its bits depend on neither
 * the blocks, the units nor the thread count. With `check` (beta 0), the last block's tiles are tested
 * for infinities and NaNs while in registers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"
#include "vg.h"

#define TILE_M 6        /* rows of a micro-tile */
#define PANEL_N VG_PACKED_PANEL /* columns of a panel of b, and of a micro-tile (64) */
#define BLOCK_K 128     /* the deepest block of k */
#define UNIT_M 96       /* rows of c a work unit at most (a multiple of TILE_M) */
#define UNIT_PANELS 4   /* panels a work unit */
#define GROUP_BYTES (16 << 20) /* packed b at most this at a time (a wider b goes in groups of columns) */
#define STREAM_ELEMENTS (1 << 20) /* a c of this many elements or more is written with streaming stores */

#ifdef VG_X86 /* matmul.h: x86 with GCC or clang */
#define PACKED_FN __attribute__((target("avx2,fma,avx512f,avx512dq")))
#define KEEP_IN_REGISTER(v) __asm__("" : "+v"(v)) /* see matmul_avx512.c */
#define FPCLASS_NAN_INF 0x99                      /* QNaN, SNaN, +infinity, -infinity */

/* Element (q, p) of a's rows: along k (a plain a), or along m (a transposed a). */
#define A_ROWS(q, p) a[(q) * lda + (p)]
#define A_COLS(q, p) a[(q) + (p) * lda]

/* c[R rows x V vectors, the last one's lanes `last`] = (from_c ? c : 0) + a's R rows @ the panel's kc
 * rows (bp, PANEL_N floats a row, 64-byte aligned), times scale; returns whether `check` found an
 * infinity or a NaN in what it stored. */
#define PACKED_BLOCK(LAYOUT, AHEAD, R, V)                                                                   \
    PACKED_FN static int packed_##LAYOUT##_##R##x##V(const float *a, int64_t lda, const float *bp, int64_t kc, \
                                                     float *c, int64_t ldc, int from_c, float scale,        \
                                                     __mmask16 last, int check, int stream) {               \
        __m512 acc[R][V];                                                                                   \
        _Pragma("GCC unroll 8") for (int q = 0; q < R; q++)                                                 \
        _Pragma("GCC unroll 8") for (int v = 0; v < V; v++)                                                 \
            acc[q][v] = from_c ? _mm512_maskz_loadu_ps(v == V - 1 ? last : 0xFFFF, c + q * ldc + 16 * v)    \
                               : _mm512_setzero_ps();                                                       \
        if (!from_c && !stream)                                                                             \
            _Pragma("GCC unroll 8") for (int q = 0; q < R; q++)                                             \
            _Pragma("GCC unroll 8") for (int v = 0; v < V; v++)                                             \
                _mm_prefetch((const char *)(c + q * ldc + 16 * v), _MM_HINT_ET0);                           \
        for (int64_t p0 = 0; p0 < kc; p0 += 16) { /* the prefetches outside the steps' loop */              \
            _Pragma("GCC unroll 8") for (int q = 0; q < TILE_M; q++) /* the next tile's rows of a */        \
                _mm_prefetch((const char *)&LAYOUT(q + TILE_M, p0 + 16), _MM_HINT_T0);                      \
            for (int64_t p = p0, p1 = imin(p0 + 16, kc); p < p1; p++) {                                     \
                __m512 bv[V];                                                                               \
                if (AHEAD) _mm_prefetch((const char *)&LAYOUT(0, p + AHEAD), _MM_HINT_T0);                  \
                _Pragma("GCC unroll 8") for (int v = 0; v < V; v++) {                                       \
                    bv[v] = _mm512_load_ps(bp + p * PANEL_N + 16 * v);                                      \
                    KEEP_IN_REGISTER(bv[v]);                                                                \
                }                                                                                           \
                _Pragma("GCC unroll 8") for (int q = 0; q < R; q++) {                                       \
                    __m512 av = _mm512_set1_ps(LAYOUT(q, p));                                               \
                    _Pragma("GCC unroll 8") for (int v = 0; v < V; v++)                                     \
                        acc[q][v] = _mm512_fmadd_ps(av, bv[v], acc[q][v]);                                  \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
        __mmask16 bad = 0;                                                                                  \
        __asm__ volatile("" : "+x"(scale)); /* not broadcast before the loop, where it took a register */   \
        _Pragma("GCC unroll 8") for (int q = 0; q < R; q++)                                                 \
        _Pragma("GCC unroll 8") for (int v = 0; v < V; v++) {                                               \
            __m512 out = scale == 1.0f ? acc[q][v] : _mm512_mul_ps(acc[q][v], _mm512_set1_ps(scale));       \
            __mmask16 lanes = v == V - 1 ? last : 0xFFFF;                                                   \
            if (check) bad |= _mm512_mask_fpclass_ps_mask(lanes, out, FPCLASS_NAN_INF);                     \
            if (stream && lanes == 0xFFFF)                                                                  \
                _mm512_stream_ps(c + q * ldc + 16 * v, out);                                                \
            else                                                                                            \
                _mm512_mask_storeu_ps(c + q * ldc + 16 * v, lanes, out);                                    \
        }                                                                                                   \
        return bad != 0;                                                                                    \
    }
#define PACKED_BLOCKS(LAYOUT, AHEAD, R)                                                                     \
    PACKED_BLOCK(LAYOUT, AHEAD, R, 1)                                                                       \
    PACKED_BLOCK(LAYOUT, AHEAD, R, 2) PACKED_BLOCK(LAYOUT, AHEAD, R, 3) PACKED_BLOCK(LAYOUT, AHEAD, R, 4)
#define PACKED_LAYOUT(LAYOUT, AHEAD)                                                                        \
    PACKED_BLOCKS(LAYOUT, AHEAD, 1)                                                                         \
    PACKED_BLOCKS(LAYOUT, AHEAD, 2)                                                                         \
    PACKED_BLOCKS(LAYOUT, AHEAD, 3)                                                                         \
    PACKED_BLOCKS(LAYOUT, AHEAD, 4) PACKED_BLOCKS(LAYOUT, AHEAD, 5) PACKED_BLOCKS(LAYOUT, AHEAD, 6)
PACKED_LAYOUT(A_ROWS, 0)
PACKED_LAYOUT(A_COLS, 16) /* a transposed a: each step of k on another line, the next ones prefetched */

typedef int (*packed_fn)(const float *, int64_t, const float *, int64_t, float *, int64_t, int, float, __mmask16,
                         int, int);
#define PACKED_ROW(LAYOUT, R)                                                                               \
    {packed_##LAYOUT##_##R##x1, packed_##LAYOUT##_##R##x2, packed_##LAYOUT##_##R##x3, packed_##LAYOUT##_##R##x4}
#define PACKED_TABLE(LAYOUT)                                                                                \
    {PACKED_ROW(LAYOUT, 1), PACKED_ROW(LAYOUT, 2), PACKED_ROW(LAYOUT, 3),                                   \
     PACKED_ROW(LAYOUT, 4), PACKED_ROW(LAYOUT, 5), PACKED_ROW(LAYOUT, 6)}
static const packed_fn packed_blocks[2][TILE_M][PANEL_N / 16] = {PACKED_TABLE(A_ROWS), PACKED_TABLE(A_COLS)};

/* One batch item's product. */
typedef struct {
    blas_job *g;
    const float *a, *b;
    float *c;
    float *packed;  /* where b is packed first: panel q at packed + q * k * PANEL_N; else NULL */
    float *scratch; /* each chunk's blocks of b and a (scratch_size floats) */
    const vg_panel_source *src; /* where b's panels come from when b is not f32 in memory (else NULL) */
    int64_t kb, mb, panels, row_units, strips, scratch_size, chunks;
    int stream;
} packed_job;

/* A panel of a transposed b: dst[p, j] = bt[j, p] for j < width, p < kc, 0 for width <= j < PANEL_N (bt:
 * rows of b^T along k, row stride ldb; dst: PANEL_N floats a row), by 16 x 16 transposes of whole cache
 * lines (vg_transpose_f32's 8 x 8 AVX2 blocks read half lines: 12% of LoRA's 256 x 576 x 3072 x W^T). */
PACKED_FN static void pack_transposed(const float *bt, int64_t ldb, int64_t width, int64_t kc, float *dst) {
    for (int64_t j0 = 0; j0 < PANEL_N; j0 += 16) {
        int64_t rows = imax(0, imin(16, width - j0));
        for (int64_t p0 = 0; p0 < kc; p0 += 16) {
            int64_t steps = imin(16, kc - p0);
            __mmask16 along = (__mmask16)((1u << steps) - 1);
            __m512 r[16], t[16];
            for (int i = 0; i < 16; i++) /* b^T's rows past width as zeros */
                r[i] = i < rows ? _mm512_maskz_loadu_ps(along, bt + (j0 + i) * ldb + p0) : _mm512_setzero_ps();
            for (int i = 0; i < 16; i += 2) { /* t[2h], t[2h + 1]: rows 2h, 2h + 1 interleaved */
                t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 16; i += 4) { /* r[i + c], lane l: column 4 l + c of rows i..i + 3 */
                r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
                r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
                r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
                r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
            }
            for (int c = 0; c < 4; c++) { /* column 4 l + c: lane l of r[c], r[4 + c], r[8 + c], r[12 + c] */
                __m512 v0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88), v1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xDD);
                __m512 x0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
                __m512 x1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xDD);
                t[c] = _mm512_shuffle_f32x4(v0, x0, 0x88), t[8 + c] = _mm512_shuffle_f32x4(v0, x0, 0xDD);
                t[4 + c] = _mm512_shuffle_f32x4(v1, x1, 0x88), t[12 + c] = _mm512_shuffle_f32x4(v1, x1, 0xDD);
            }
            for (int64_t p = 0; p < steps; p++) _mm512_store_ps(dst + (p0 + p) * PANEL_N + j0, t[p]);
        }
    }
}

/* Panels [q0, q1) of b, depth [p0, p0 + kc): kc rows of PANEL_N floats each (the columns past n zero),
 * panel q at dst + (q - q0) * stride. */
static void pack_panels(const packed_job *s, int64_t q0, int64_t q1, int64_t p0, int64_t kc, float *dst,
                        int64_t stride) {
    const blas_job *g = s->g;
    if (s->src) {
        s->src->pack(s->src, q0, q1, p0, kc, dst, stride);
        return;
    }
    for (int64_t q = q0; q < q1; q++, dst += stride) {
        int64_t j = q * PANEL_N, width = imin(PANEL_N, g->n - j);
        if (g->tb != 111) { /* b^T's rows j.. along k */
            pack_transposed(s->b + j * g->ldb + p0, g->ldb, width, kc, dst);
            continue;
        }
        for (int64_t p = 0; p < kc; p++)
            memcpy(dst + p * PANEL_N, s->b + (p0 + p) * g->ldb + j, sizeof(float) * (size_t)width);
        if (width < PANEL_N)
            for (int64_t p = 0; p < kc; p++)
                memset(dst + p * PANEL_N + width, 0, sizeof(float) * (size_t)(PANEL_N - width));
    }
}

static void pack_chunk(void *ctx, int64_t lo, int64_t hi) {
    packed_job *s = ctx;
    pack_panels(s, lo, hi, 0, s->g->k, s->packed + lo * s->g->k * PANEL_N, s->g->k * PANEL_N);
}

/* A transposed a's rows [r0, r1) x depth [p0, p0 + kc) (column p of a's block at a + p * lda) copied
 * together: step p of k at dst + p * a_stride(rows), read by the kernel as a transposed a of that row
 * stride. Read in place, each step of k of a long row (a head's weight gradient g^T x: 16 KiB) was on
 * another page, and the hardware prefetcher followed none; nor where a is larger than the L2 cache
 * (the 10.1M GPT's qkv g^T x, 960 x 2048: 0.79-0.88x the time copied; where a fits, 384-768 x 1024, the
 * copy cost 3-11%). (Packed as BLIS packs a, TILE_M rows after TILE_M rows, the copy took 16 masked
 * copies per 96 floats: the head's g^T x 5-8% slower.) */
#define PACK_A_MIN_LDA 1024
#define PACK_A_MIN_ELEMENTS (1 << 20) /* 4 MiB: twice the L2 cache of a Sapphire Rapids core */
#define PACK_A_AHEAD 8 /* steps of k */

static int64_t a_stride(int64_t rows) { return cdiv(rows, 16) * 16; }

PACKED_FN static void pack_a_columns(const float *a, int64_t lda, int64_t rows, int64_t kc, float *dst) {
    for (int64_t p = 0; p < kc; p++) {
        if (p + PACK_A_AHEAD < kc) /* the rows are pages apart: no hardware prefetcher follows them */
            for (int64_t t = 0; t < rows; t += 16)
                _mm_prefetch((const char *)(a + (p + PACK_A_AHEAD) * lda + t), _MM_HINT_T0);
        for (int64_t t = 0; t < rows; t += 16) {
            __mmask16 width = (__mmask16)((1u << imin(16, rows - t)) - 1);
            _mm512_mask_storeu_ps(dst + p * a_stride(rows) + t, width, _mm512_maskz_loadu_ps(width, a + p * lda + t));
        }
    }
}

/* Work unit u: rows [i0, i1) x panels [q0, q1) of c, k in blocks of s->kb. */
PACKED_FN static int packed_unit(const packed_job *s, int64_t i0, int64_t i1, int64_t q0, int64_t q1, float *bbuf,
                                 float *abuf) {
    const blas_job *g = s->g;
    int cols_layout = g->ta != 111;
    int pack_a = cols_layout && (g->lda >= PACK_A_MIN_LDA || g->m * g->k >= PACK_A_MIN_ELEMENTS);
    int from_c = g->beta != 0.0, bad = 0;
    for (int64_t p0 = 0; p0 < g->k; p0 += s->kb) {
        int64_t kc = imin(s->kb, g->k - p0), stride = s->packed ? g->k * PANEL_N : kc * PANEL_N;
        int final = p0 + kc == g->k;
        float scale = final ? (float)g->alpha : 1.0f;
        const float *panels = s->packed ? s->packed + q0 * stride + p0 * PANEL_N : bbuf;
        if (!s->packed) pack_panels(s, q0, q1, p0, kc, bbuf, stride);
        for (int64_t r0 = i0; r0 < i1; r0 += s->mb) {
            int64_t r1 = imin(r0 + s->mb, i1), lda = g->lda, step = cols_layout ? 1 : lda;
            const float *a = cols_layout ? s->a + r0 + p0 * lda : s->a + r0 * lda + p0;
            if (pack_a) {
                pack_a_columns(a, lda, r1 - r0, kc, abuf);
                a = abuf, lda = a_stride(r1 - r0);
            }
            for (int64_t q = q0; q < q1; q++) {
                int64_t j = q * PANEL_N, width = imin(PANEL_N, g->n - j);
                __mmask16 last = (__mmask16)(width % 16 ? (1u << (width % 16)) - 1 : 0xFFFF);
                const packed_fn *row = packed_blocks[cols_layout][0] + (cdiv(width, 16) - 1);
                const float *bp = panels + (q - q0) * stride;
                for (int64_t i = r0; i < r1; i += TILE_M) {
                    packed_fn kernel = row[(imin(TILE_M, r1 - i) - 1) * (PANEL_N / 16)];
                    const float *ai = a + (i - r0) * step;
                    bad |= kernel(ai, lda, bp, kc, s->c + i * g->ldc + j, g->ldc, p0 > 0 || from_c, scale, last,
                                  g->check && final, s->stream && final);
                }
            }
        }
    }
    return bad;
}

/* Units: a row block x a strip of panels where b was packed first, else a strip (all rows); strip t is panels
 * [t * panels / strips, (t + 1) * panels / strips), at most UNIT_PANELS, as even as whole panels make them
 * (6 panels in strips of 4 and 2 gave one of two threads twice the other's work: a GPT's q/k/v product,
 * 1024 x 128 x 384, ran 1.52x faster on two threads, not 2x). Each
 * chunk takes its own part of `scratch` (there are at most `threads` chunks). */
static void compute_chunk(void *ctx, int64_t lo, int64_t hi) {
    packed_job *s = ctx;
    blas_job *g = s->g;
    float *bbuf = s->scratch + __atomic_fetch_add(&s->chunks, 1, __ATOMIC_RELAXED) * s->scratch_size;
    float *abuf = bbuf + s->kb * PANEL_N * UNIT_PANELS;
    int bad = 0;
    for (int64_t u = lo; u < hi; u++) {
        int64_t r = s->packed ? u % s->row_units : 0, t = s->packed ? u / s->row_units : u;
        int64_t tiles = cdiv(g->m, TILE_M), i0 = s->packed ? r * tiles / s->row_units * TILE_M : 0;
        int64_t i1 = s->packed ? imin((r + 1) * tiles / s->row_units * TILE_M, g->m) : g->m;
        int64_t q0 = t * s->panels / s->strips, q1 = (t + 1) * s->panels / s->strips;
        bad |= packed_unit(s, i0, i1, q0, q1, bbuf, abuf);
    }
    if (s->stream) _mm_sfence();
    if (bad) __atomic_store_n(&g->bad, 1, __ATOMIC_RELAXED);
}

/* The packing memory of one call at a time is kept for the next (a training step's products pack as much
 * every call; memory given back and taken again faulted its pages in on every call). */
#define KEPT_BYTES ((size_t)64 << 20) /* the most kept */
static float *kept;
static size_t kept_bytes;
static int kept_taken;

/* `bytes` of 64-byte aligned memory, *kept_one set where it is the kept memory (NULL: none free). */
static float *take_memory(size_t bytes, int *kept_one) {
    *kept_one = bytes <= KEPT_BYTES && !__atomic_exchange_n(&kept_taken, 1, __ATOMIC_ACQUIRE);
    if (*kept_one) {
        if (kept_bytes >= bytes) return kept;
        free(kept);
        kept = aligned_alloc(64, bytes);
        kept_bytes = kept ? bytes : 0;
        if (kept) return kept;
        *kept_one = 0;
        __atomic_store_n(&kept_taken, 0, __ATOMIC_RELEASE);
    }
    return aligned_alloc(64, bytes);
}

static void give_memory(float *memory, int kept_one) {
    if (kept_one)
        __atomic_store_n(&kept_taken, 0, __ATOMIC_RELEASE);
    else
        free(memory);
}

/* The row units of a c of m rows: as few as UNIT_M rows a unit allows, made an even count (two threads
 * then take the same number: 11 units of 96 rows for 1024 left one thread 576 rows and the other 448);
 * unit r is tiles [r T / units, (r + 1) T / units) of the T tiles of TILE_M rows (units of one size
 * had left the last short: 1024 rows in 11 units of 90 and one of 34 gave the threads 540 and 484). */
static int64_t row_unit_count(int64_t m) {
    int64_t units = cdiv(m, UNIT_M);
    return units > 1 && units % 2 ? units + 1 : units;
}

/* The blocks of k are a multiple of src->depth deep (whole blocks of a quantized b^T's rows), which leaves
 * every element's FMA chain as it is. */
static int packed_gemm(blas_job *g, int64_t batch, int threads, const vg_panel_source *src) {
    int64_t blocks = cdiv(g->k, BLOCK_K), depth = src ? src->depth : 1;
    packed_job s = {.g = g, .kb = cdiv(cdiv(g->k, blocks), depth) * depth, .row_units = row_unit_count(g->m),
                    .panels = cdiv(g->n, PANEL_N), .src = src};
    s.mb = cdiv(cdiv(g->m, TILE_M), s.row_units) * TILE_M; /* the most rows of a unit */
    s.strips = cdiv(s.panels, UNIT_PANELS);
    /* b packed first, once, where it is no larger than a; else each unit packs its strip, block by block */
    int64_t packed_size = g->m >= g->n ? g->k * s.panels * PANEL_N : 0;
    /* a chunk's b block, a block */
    s.scratch_size = cdiv(s.kb * (PANEL_N * UNIT_PANELS + a_stride(s.mb)), 16) * 16;
    int64_t slots = imax(1, threads);
    int kept_one;
    float *memory = take_memory(sizeof(float) * (size_t)(packed_size + slots * s.scratch_size), &kept_one);
    if (!memory) return BLAS_NOT_USED; /* nothing done */
    s.packed = packed_size ? memory : NULL;
    s.scratch = memory + packed_size;
    for (int64_t item = 0; item < batch; item++) {
        s.a = (const float *)g->a + g->offs[3 * item];
        s.b = (const float *)g->b + g->offs[3 * item + 1];
        s.c = (float *)g->c + g->offs[3 * item + 2];
        /* a c larger than the caches written without reading it first (its vectors aligned) */
        s.stream = g->m * g->n >= STREAM_ELEMENTS && (uintptr_t)s.c % 64 == 0 && g->ldc % 16 == 0;
        int64_t units = s.packed ? s.row_units * s.strips : s.strips;
        int64_t unit_work = (s.packed ? s.mb : g->m) * UNIT_PANELS * PANEL_N * g->k;
        if (s.packed && (item == 0 || g->offs[3 * item + 1] != g->offs[3 * item - 2]))
            vg_parallel_for(s.panels, cdiv(BLAS_THREAD_WORK / 16, g->k * PANEL_N), threads, pack_chunk, &s);
        s.chunks = 0;
        vg_parallel_for(units, cdiv(BLAS_THREAD_WORK, unit_work), threads, compute_chunk, &s);
    }
    give_memory(memory, kept_one);
    return !g->bad;
}

int vg_gemm_packed(blas_job *g, int64_t batch, int threads) { return packed_gemm(g, batch, threads, NULL); }

int vg_gemm_packed_from(blas_job *g, const vg_panel_source *src, int threads) {
    return packed_gemm(g, 1, threads, src);
}
#else /* matmul_blas.c never calls them here (vg_has_avx512 is 0) */
int vg_gemm_packed(blas_job *g, int64_t batch, int threads) {
    (void)g, (void)batch, (void)threads;
    return BLAS_NOT_USED;
}

int vg_gemm_packed_from(blas_job *g, const vg_panel_source *src, int threads) {
    (void)g, (void)src, (void)threads;
    return BLAS_NOT_USED;
}
#endif
