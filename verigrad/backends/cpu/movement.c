/* The contiguous op: a strided view of rank <= 4 (vg_copy; rank 5: vg_copy_outer, below) copied into a new
 * C-contiguous array.
 *
 * dims = {shape[0..3], stride[0..3]}: the view's shape padded in front with 1, and its strides in BYTES
 * (any sign, 0 on broadcast dimensions; padded with 0). Each element is copied as `itemsize` bytes
 * (1, 2, 4 or 8) with memcpy, so any dtype of that size, any alignment and any byte stride are fine and
 * the bits are kept exactly. The flattened output [0, n) is walked in row-major order; a chunk [lo, hi)
 * starts mid-row at most once, and a row whose last stride equals the item size is one memcpy.
 *
 * vg_copy(src, out, dims, itemsize, min_chunk, threads); src points at the view's first element.
 */
#include <stdint.h>
#include <string.h>

#include "vg.h"

typedef struct {
    const char *src;
    char *out;
    const int64_t *dims;
} vg_cargs;

#define COPY(N)                                                                               \
    static void copy##N##_chunk(void *ctx, int64_t lo, int64_t hi) {                          \
        const vg_cargs *p = (const vg_cargs *)ctx;                                            \
        const int64_t *d = p->dims;                                                           \
        const int64_t s3 = d[7];                                                              \
        int64_t i = lo;                                                                       \
        for (vg_run run = vg_run_at(d, lo, hi); i < hi; vg_run_next(&run, d, hi)) {           \
            int64_t end = run.end, len = end - i;                                             \
            const char *sp = p->src + vg_run_offset(run, d + 4);                              \
            char *yp = p->out + i * N;                                                        \
            if (s3 == N) {                                                                    \
                memcpy(yp, sp, (size_t)(len * N));                                            \
            } else {                                                                          \
                for (int64_t k = 0; k < len; k++) memcpy(yp + k * N, sp + k * s3, N);         \
            }                                                                                 \
            i = end;                                                                          \
        }                                                                                     \
    }

COPY(1)
COPY(2)
COPY(4)
COPY(8)

static vg_chunk_fn copy_fn(int64_t itemsize) {
    switch (itemsize) {
        case 1: return copy1_chunk;
        case 2: return copy2_chunk;
        case 4: return copy4_chunk;
        case 8: return copy8_chunk;
        default: return 0;
    }
}

void vg_copy(const char *src, char *out, const int64_t *dims, int64_t itemsize, int64_t min_chunk,
             int threads) {
    vg_cargs p = {src, out, dims};
    vg_chunk_fn fn = copy_fn(itemsize);
    if (fn) vg_parallel_for(dims[0] * dims[1] * dims[2] * dims[3], min_chunk, threads, fn, &p);
}

/* A view of rank 5 as `outer` views of rank 4 (dims: the first's, as vg_copy takes them) `outer_stride`
 * bytes apart: the flattened output chunked as one, each chunk cut at the views' bounds and copied as
 * vg_copy copies (the bytes as they are: the chunks change no bit).
 *
 * vg_copy_outer(src, out, dims, outer, outer_stride, itemsize, min_chunk, threads) */
typedef struct {
    const char *src;
    char *out;
    const int64_t *dims;
    int64_t inner, outer_stride, itemsize;
    vg_chunk_fn fn;
} vg_outer_args;

static void copy_outer_chunk(void *ctx, int64_t lo, int64_t hi) {
    const vg_outer_args *p = (const vg_outer_args *)ctx;
    for (int64_t o = lo / p->inner; o * p->inner < hi; o++) {
        int64_t first = o * p->inner, a = lo > first ? lo - first : 0;
        int64_t b = hi < first + p->inner ? hi - first : p->inner;
        vg_cargs view = {p->src + o * p->outer_stride, p->out + first * p->itemsize, p->dims};
        p->fn(&view, a, b);
    }
}

void vg_copy_outer(const char *src, char *out, const int64_t *dims, int64_t outer, int64_t outer_stride,
                   int64_t itemsize, int64_t min_chunk, int threads) {
    vg_outer_args p = {src, out, dims, dims[0] * dims[1] * dims[2] * dims[3], outer_stride, itemsize,
                       copy_fn(itemsize)};
    if (p.fn && p.inner > 0) vg_parallel_for(outer * p.inner, min_chunk, threads, copy_outer_chunk, &p);
}

/* concat's copy (vg_eager's, of C-contiguous arrays that agree off the axis): out's `outer` rows, each
 * the n pieces' blocks in order (blocks[k] bytes of piece k, whose row i starts i blocks[k] bytes in),
 * the threads splitting the rows (the bytes as they are: the chunks change no bit).
 *
 * vg_join(srcs, blocks, n, out, outer, min_rows, threads) */
typedef struct {
    const char *const *srcs;
    const int64_t *blocks;
    int64_t n, row;
    char *out;
} vg_join_args;

static void join_chunk(void *ctx, int64_t lo, int64_t hi) {
    const vg_join_args *p = (const vg_join_args *)ctx;
    char *to = p->out + lo * p->row;
    for (int64_t i = lo; i < hi; i++)
        for (int64_t k = 0; k < p->n; k++) {
            const int64_t b = p->blocks[k];
            if (b > 0) memcpy(to, p->srcs[k] + i * b, (size_t)b);
            to += b;
        }
}

void vg_join(const char *const *srcs, const int64_t *blocks, int64_t n, char *out, int64_t outer, int64_t min_rows,
             int threads) {
    vg_join_args p = {srcs, blocks, n, 0, out};
    for (int64_t k = 0; k < n; k++) p.row += blocks[k];
    if (outer > 0 && p.row > 0) vg_parallel_for(outer, min_rows, threads, join_chunk, &p);
}

/* take_grad along an axis: out[o, idx[i], q] += g[o, i, q] into zeros, g [outer, n, inner] and out
 * [outer, size, inner] C-contiguous, each element's additions made in the order of i, as np.add.at (the
 * reference) makes them: the same bits. A negative index counts from the end; returns 1, with out
 * untouched, where one is out of range (the reference raises), else 0. The threads split the columns q
 * (blocks of TAKE_GRAD_BLOCK, a cache line of f32): the rows an index names may be any, and each column's
 * additions stay in the order of i. */
#define TAKE_GRAD_BLOCK 16

typedef struct {
    const void *g;
    const int64_t *idx;
    void *out;
    int64_t outer, n, size, inner;
} vg_take_grad_args;

#define TAKE_GRAD(NAME, T)                                                                     \
    static void NAME##_chunk(void *ctx, int64_t lo, int64_t hi) {                              \
        const vg_take_grad_args *p = (const vg_take_grad_args *)ctx;                           \
        const int64_t n = p->n, size = p->size, inner = p->inner, *idx = p->idx;               \
        const int64_t q0 = lo * TAKE_GRAD_BLOCK, end = hi * TAKE_GRAD_BLOCK;                   \
        const int64_t q1 = end < inner ? end : inner;                                          \
        const T *g = (const T *)p->g;                                                          \
        T *out = (T *)p->out;                                                                  \
        for (int64_t row = 0; row < p->outer * size; row++)                                    \
            memset(out + row * inner + q0, 0, (size_t)(q1 - q0) * sizeof(T));                  \
        for (int64_t o = 0; o < p->outer; o++)                                                 \
            for (int64_t i = 0; i < n; i++) {                                                  \
                const int64_t r = idx[i] < 0 ? idx[i] + size : idx[i];                         \
                T *to = out + (o * size + r) * inner;                                          \
                const T *from = g + (o * n + i) * inner;                                       \
                for (int64_t q = q0; q < q1; q++) to[q] += from[q];                            \
            }                                                                                  \
    }                                                                                          \
    int NAME(const T *g, const int64_t *idx, T *out, int64_t outer, int64_t n, int64_t size,   \
             int64_t inner, int64_t min_chunk, int threads) {                                  \
        for (int64_t i = 0; i < n; i++)                                                        \
            if (idx[i] < -size || idx[i] >= size) return 1;                                    \
        vg_take_grad_args p = {g, idx, out, outer, n, size, inner};                            \
        int64_t block_work = outer * (size + n) * TAKE_GRAD_BLOCK;                             \
        int64_t blocks = (inner + TAKE_GRAD_BLOCK - 1) / TAKE_GRAD_BLOCK;                      \
        if (block_work > 0)                                                                    \
            vg_parallel_for(blocks, (min_chunk + block_work - 1) / block_work, threads,        \
                            NAME##_chunk, &p);                                                 \
        return 0;                                                                              \
    }
TAKE_GRAD(vg_take_grad_f32, float)
TAKE_GRAD(vg_take_grad_f64, double)

/* A batched step's new keys and values written into their cache rows, every layer in one call:
 * stores[p][b, h, at[b], :] = news[p][b, h, :] for each pair p < pairs, b < geo[0], h < geo[1], as
 * `row_bytes` = geo[2] bytes copied (the bits kept); geo[3..5] the stores' byte strides of b, h and the
 * position (all stores share them), steps[2 p], steps[2 p + 1] news[p]'s of b and h. The caller checks the
 * positions. */
void vg_write_rows(int64_t pairs, char *const *stores, const char *const *news, const int64_t *steps,
                   const int64_t *geo, const int64_t *at) {
    const int64_t rows = geo[0], heads = geo[1], row_bytes = geo[2];
    for (int64_t p = 0; p < pairs; p++)
        for (int64_t b = 0; b < rows; b++)
            for (int64_t h = 0; h < heads; h++)
                memcpy(stores[p] + b * geo[3] + h * geo[4] + at[b] * geo[5],
                       news[p] + b * steps[2 * p] + h * steps[2 * p + 1], (size_t)row_bytes);
}

/* unslice (slice's VJP): zeros of out's shape with g written at the positions a slice selects, out
 * C-contiguous, g any strided view, any item size (bytes copied as they are: the bits of the reference's
 * np.zeros and assignment). Per axis a < rank: out's size shape[a], the slice's start[a] and step[a]
 * (positive), g's size count[a] and byte stride gstride[a]. The threads split out's rows (its last axis);
 * each row is written once: zeros, and where the row lies in the slice, g's row at its positions.
 *
 * vg_unslice(g, out, rank, shape, start, step, count, gstride, itemsize, min_chunk, threads); rank 1 to 8 */
#define UNSLICE_RANK 8

typedef struct {
    const char *g;
    char *out;
    int64_t rank, itemsize;
    const int64_t *shape, *start, *step, *count, *gstride;
} vg_unslice_args;

static void unslice_chunk(void *ctx, int64_t lo, int64_t hi) {
    const vg_unslice_args *p = (const vg_unslice_args *)ctx;
    const int64_t last = p->rank - 1, item = p->itemsize, n = p->shape[last];
    const int64_t s0 = p->start[last], st = p->step[last], c = p->count[last], gs = p->gstride[last];
    const size_t row_bytes = (size_t)(n * item);
    int64_t at[UNSLICE_RANK], rest = lo;
    for (int64_t a = last - 1; a >= 0; a--) at[a] = rest % p->shape[a], rest /= p->shape[a];
    for (int64_t row = lo; row < hi; row++) {
        char *o = p->out + row * (int64_t)row_bytes;
        const char *src = p->g; /* g's row, if every index is one the slice selects */
        int inside = c > 0;
        for (int64_t a = 0; a < last && inside; a++) {
            const int64_t k = at[a] - p->start[a], b = p->step[a], q = b == 1 ? k : k / b; /* no division */
            inside = k >= 0 && (b == 1 || k % b == 0) && q < p->count[a];
            src += q * p->gstride[a];
        }
        if (inside && st == 1 && gs == 4 && item == 4) { /* f32's rows as loops the compiler vectorizes */
            uint32_t *o4 = (uint32_t *)o;
            const uint32_t *src4 = (const uint32_t *)src;
            for (int64_t j = 0; j < s0; j++) o4[j] = 0;
            for (int64_t j = 0; j < c; j++) o4[s0 + j] = src4[j];
            for (int64_t j = s0 + c; j < n; j++) o4[j] = 0;
        } else if (inside && st == 1 && gs == item) {
            memset(o, 0, (size_t)(s0 * item));
            memcpy(o + s0 * item, src, (size_t)(c * item));
            memset(o + (s0 + c) * item, 0, (size_t)((n - s0 - c) * item));
        } else {
            memset(o, 0, row_bytes);
            for (int64_t k = 0; inside && k < c; k++) memcpy(o + (s0 + k * st) * item, src + k * gs, (size_t)item);
        }
        for (int64_t a = last - 1; a >= 0; a--) {
            if (++at[a] < p->shape[a]) break;
            at[a] = 0;
        }
    }
}

void vg_unslice(const char *g, char *out, int64_t rank, const int64_t *shape, const int64_t *start,
                const int64_t *step, const int64_t *count, const int64_t *gstride, int64_t itemsize,
                int64_t min_chunk, int threads) {
    if (rank < 1 || rank > UNSLICE_RANK) return;
    vg_unslice_args p = {g, out, rank, itemsize, shape, start, step, count, gstride};
    int64_t rows = 1, n = shape[rank - 1];
    for (int64_t a = 0; a < rank - 1; a++) rows *= shape[a];
    if (rows > 0 && n > 0) vg_parallel_for(rows, (min_chunk + n - 1) / n, threads, unslice_chunk, &p);
}
