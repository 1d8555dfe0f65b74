/* Fast paths of pooling.c's pooling kernels (max_pool2d, avg_pool2d, max_pool2d_grad) for windows that tile
 * the image: stride == kernel, no padding, no dilation, and the innermost axis (w in NCHW, c in NHWC)
 * contiguous in the image and the output gradient. One pass over the data, on SSE2 vectors (elsewhere
 * scalar), 2x2 windows specialised; packed f32 NCHW images 4 or 8 wide as one run of windows on AVX2
 * (flat_run), f32 NCHW rows of 8 windows or more 16 at a time on AVX-512 (max_rows512: the 28x28 CNN's
 * first pool 0.157 -> 0.115 ms, its gradient 0.295 -> 0.26 ms on one thread of a Zen 4; rows of 7 stay
 * on SSE2, where a masked step of 16 was slower).
 *
 * `geo` is window.h's geometry array (the G_ layout below is its own). Each function returns 1 when it
 * ran, 0 when the case is not one of its own (the caller then runs pooling.c's kernel, which takes any).
 * The results are pooling.c's bit for bit, so the references' (see pooling.c for why these orders):
 * - max folds each window in kernel order: best = v0, then best = (best > v || best is NaN) ? best : v;
 * - avg adds the window in kernel order in double from 0.0, divides by KH*KW and rounds once;
 * - max_pool2d_grad gives each window's first maximal element (a NaN counts as maximal) the window's
 *   gradient + 0 (pooling.c's sum from 0.0 with one term), and every other element 0: windows that tile do
 *   not share elements.
 * Threads split rows of windows ((n, c, oh) in NCHW, (n, oh) in NHWC); each row writes its own outputs
 * (for the gradient: its KH image rows, and the last row also the rows no window covers), so the bits
 * do not depend on the thread count.
 *
 * vg_tile_max_pool_<dtype>(x, out, geo, min_chunk, threads), vg_tile_avg_pool_<dtype>(...) and
 * vg_tile_max_pool_grad_<dtype>(x, gy, out, geo, min_chunk, threads); `out` is C-contiguous.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vg.h"

enum {
    G_N, G_C, G_H, G_W, G_KH, G_KW, G_SH, G_SW, G_PH, G_PW, G_DH, G_DW, G_HO, G_WO, G_LAYOUT,
    G_XS,            /* 4 image strides: n, c, h, w */
    G_YS = G_XS + 4, /* the output gradient's: n, c, oh, ow */
};

typedef struct {
    const void *x;
    const void *gy;
    void *out;
    const int64_t *g;
} tile_args;

/* NumPy's maximum: a NaN in `b` stays, a NaN in `v` wins, and on equal operands (0, -0) `v`. */
#define MAXF(b, v) ((((b) > (v)) | ((b) != (b))) ? (b) : (v))
/* Whether `v` replaces `b` as the first maximum so far (np.argmax: the first NaN, else the first max). */
#define TAKES(b, v) (((b) == (b)) & (((v) > (b)) | ((v) != (v))))

/* A 2x2 window's maximum and the offset (0..3) of its first maximum. */
#define SCALAR_OPS(T, NAME)                                                                             \
    static inline T max4_##NAME(T v0, T v1, T v2, T v3) {                                               \
        T m = MAXF(v0, v1);                                                                             \
        m = MAXF(m, v2);                                                                                \
        return MAXF(m, v3);                                                                             \
    }                                                                                                   \
    static inline int arg4_##NAME(T v0, T v1, T v2, T v3) {                                             \
        int t1 = TAKES(v0, v1);                                                                         \
        T b = t1 ? v1 : v0;                                                                             \
        int t2 = TAKES(b, v2);                                                                          \
        b = t2 ? v2 : b;                                                                                \
        return TAKES(b, v3) ? 3 : (t2 ? 2 : t1);                                                        \
    }
SCALAR_OPS(float, f32)
SCALAR_OPS(double, f64)

/* 2x2 windows on vectors. Each function does its n windows and returns n, or does none and returns 0
 * where n is under a step; the caller does the rest with the scalar ops. A step is a vector of windows,
 * or half a vector where n is under one (image rows of fewer windows, as in NCHW 8x8); the last step may
 * overlap the one before it, writing the same values again. NCHW reads two image rows (window w at
 * columns 2w and 2w+1) and writes two; NHWC reads the four pixels of a window (p0 p1 / p2 p3), n
 * channels each. Compilers do not vectorise the scalar forms: their selects chain. */
#define EACH_STEP(w, n, step, ...)                                                                      \
    for (int64_t w = 0;; w = w + 2 * (step) > (n) ? (n) - (step) : w + (step)) {                        \
        __VA_ARGS__                                                                                     \
        if (w + (step) == (n)) break;                                                                   \
    }
#if defined(__SSE2__)
#include <emmintrin.h>
/* SUF: the intrinsics' suffix; EVEN/ODD: elements 0, 2, .. and 1, 3, .. of the pair of vectors a b;
 * LOAD_HALF/STORE_HALF: the low half of a vector from and to memory; GATHER: p[0], p[se], .. */
#define SIMD_OPS(V, T, NAME, SUF, EVEN, ODD, LOAD_HALF, STORE_HALF, GATHER)                             \
    enum { LANES_##NAME = (int)(sizeof(V) / sizeof(T)) };                                               \
    static inline V vsel_##NAME(V m, V a, V b) {                                                        \
        return _mm_or_##SUF(_mm_and_##SUF(m, a), _mm_andnot_##SUF(m, b));                              \
    }                                                                                                   \
    static inline V vmax_##NAME(V b, V v) {                                                             \
        return vsel_##NAME(_mm_or_##SUF(_mm_cmpgt_##SUF(b, v), _mm_cmpunord_##SUF(b, b)), b, v);       \
    }                                                                                                   \
    static inline V vmax4_##NAME(V v0, V v1, V v2, V v3) {                                              \
        return vmax_##NAME(vmax_##NAME(vmax_##NAME(v0, v1), v2), v3);                                   \
    }                                                                                                   \
    static inline V vtakes_##NAME(V b, V v) {                                                           \
        V later = _mm_or_##SUF(_mm_cmpgt_##SUF(v, b), _mm_cmpunord_##SUF(v, v));                        \
        return _mm_and_##SUF(_mm_cmpord_##SUF(b, b), later);                                            \
    }                                                                                                   \
    static inline V veven_##NAME(V a, V b) { return EVEN; }                                             \
    static inline V vodd_##NAME(V a, V b) { return ODD; }                                               \
    static inline V vload_half_##NAME(const T *p) { return LOAD_HALF; }                                 \
    static inline void vstore_half_##NAME(T *p, V v) { STORE_HALF; }                                    \
    /* the gradient g + 0 at the first maximum of v0..v3, 0 elsewhere: out[k] for offset k */           \
    static inline void vgrad4_##NAME(V v0, V v1, V v2, V v3, V g, V *out) {                            \
        V t1 = vtakes_##NAME(v0, v1), b = vsel_##NAME(t1, v1, v0);                                      \
        V t2 = vtakes_##NAME(b, v2);                                                                    \
        b = vsel_##NAME(t2, v2, b);                                                                     \
        V t3 = vtakes_##NAME(b, v3), later = _mm_or_##SUF(t2, t3);                                      \
        g = _mm_add_##SUF(g, _mm_setzero_##SUF());                                                      \
        out[0] = _mm_andnot_##SUF(_mm_or_##SUF(later, t1), g);                                          \
        out[1] = _mm_and_##SUF(_mm_andnot_##SUF(later, t1), g);                                         \
        out[2] = _mm_and_##SUF(_mm_andnot_##SUF(t3, t2), g);                                            \
        out[3] = _mm_and_##SUF(t3, g);                                                                  \
    }                                                                                                   \
    static inline int64_t max_rows_##NAME(const T *r0, const T *r1, T *o, int64_t n) {                  \
        const int64_t L = LANES_##NAME;                                                                 \
        if (n >= L) {                                                                                   \
            EACH_STEP(w, n, L, {                                                                        \
                V a0 = _mm_loadu_##SUF(r0 + 2 * w), a1 = _mm_loadu_##SUF(r0 + 2 * w + L);               \
                V b0 = _mm_loadu_##SUF(r1 + 2 * w), b1 = _mm_loadu_##SUF(r1 + 2 * w + L);               \
                _mm_storeu_##SUF(o + w, vmax4_##NAME(veven_##NAME(a0, a1), vodd_##NAME(a0, a1),         \
                                                     veven_##NAME(b0, b1), vodd_##NAME(b0, b1)));       \
            })                                                                                          \
        } else if (2 * n >= L) {                                                                        \
            EACH_STEP(w, n, L / 2, {                                                                    \
                V a = _mm_loadu_##SUF(r0 + 2 * w), b = _mm_loadu_##SUF(r1 + 2 * w);                     \
                vstore_half_##NAME(o + w, vmax4_##NAME(veven_##NAME(a, a), vodd_##NAME(a, a),           \
                                                       veven_##NAME(b, b), vodd_##NAME(b, b)));         \
            })                                                                                          \
        } else {                                                                                        \
            return 0;                                                                                   \
        }                                                                                               \
        return n;                                                                                       \
    }                                                                                                   \
    static inline int64_t max_pixels_##NAME(const T *p0, const T *p1, const T *p2, const T *p3, T *o,  \
                                            int64_t n) {                                                \
        if (n < LANES_##NAME) return 0;                                                                 \
        EACH_STEP(e, n, LANES_##NAME, {                                                                 \
            _mm_storeu_##SUF(o + e, vmax4_##NAME(_mm_loadu_##SUF(p0 + e), _mm_loadu_##SUF(p1 + e),      \
                                                 _mm_loadu_##SUF(p2 + e), _mm_loadu_##SUF(p3 + e)));    \
        })                                                                                              \
        return n;                                                                                       \
    }                                                                                                   \
    static inline int64_t grad_rows_##NAME(const T *r0, const T *r1, const T *gy, T *o0, T *o1,        \
                                           int64_t n) {                                                 \
        const int64_t L = LANES_##NAME;                                                                 \
        V d[4];                                                                                         \
        if (n >= L) {                                                                                   \
            EACH_STEP(w, n, L, {                                                                        \
                V a0 = _mm_loadu_##SUF(r0 + 2 * w), a1 = _mm_loadu_##SUF(r0 + 2 * w + L);               \
                V b0 = _mm_loadu_##SUF(r1 + 2 * w), b1 = _mm_loadu_##SUF(r1 + 2 * w + L);               \
                vgrad4_##NAME(veven_##NAME(a0, a1), vodd_##NAME(a0, a1), veven_##NAME(b0, b1),          \
                              vodd_##NAME(b0, b1), _mm_loadu_##SUF(gy + w), d);                         \
                _mm_storeu_##SUF(o0 + 2 * w, _mm_unpacklo_##SUF(d[0], d[1]));                           \
                _mm_storeu_##SUF(o0 + 2 * w + L, _mm_unpackhi_##SUF(d[0], d[1]));                       \
                _mm_storeu_##SUF(o1 + 2 * w, _mm_unpacklo_##SUF(d[2], d[3]));                           \
                _mm_storeu_##SUF(o1 + 2 * w + L, _mm_unpackhi_##SUF(d[2], d[3]));                       \
            })                                                                                          \
        } else if (2 * n >= L) {                                                                        \
            EACH_STEP(w, n, L / 2, {                                                                    \
                V a = _mm_loadu_##SUF(r0 + 2 * w), b = _mm_loadu_##SUF(r1 + 2 * w);                     \
                vgrad4_##NAME(veven_##NAME(a, a), vodd_##NAME(a, a), veven_##NAME(b, b),                \
                              vodd_##NAME(b, b), vload_half_##NAME(gy + w), d);                         \
                _mm_storeu_##SUF(o0 + 2 * w, _mm_unpacklo_##SUF(d[0], d[1]));                           \
                _mm_storeu_##SUF(o1 + 2 * w, _mm_unpacklo_##SUF(d[2], d[3]));                           \
            })                                                                                          \
        } else {                                                                                        \
            return 0;                                                                                   \
        }                                                                                               \
        return n;                                                                                       \
    }                                                                                                   \
    static inline int64_t grad_pixels_##NAME(const T *p0, const T *p1, const T *p2, const T *p3,       \
                                             const T *gy, T *o0, T *o1, T *o2, T *o3, int64_t n) {      \
        V d[4];                                                                                         \
        if (n < LANES_##NAME) return 0;                                                                 \
        EACH_STEP(e, n, LANES_##NAME, {                                                                 \
            vgrad4_##NAME(_mm_loadu_##SUF(p0 + e), _mm_loadu_##SUF(p1 + e), _mm_loadu_##SUF(p2 + e),    \
                          _mm_loadu_##SUF(p3 + e), _mm_loadu_##SUF(gy + e), d);                         \
            _mm_storeu_##SUF(o0 + e, d[0]);                                                             \
            _mm_storeu_##SUF(o1 + e, d[1]);                                                             \
            _mm_storeu_##SUF(o2 + e, d[2]);                                                             \
            _mm_storeu_##SUF(o3 + e, d[3]);                                                             \
        })                                                                                              \
        return n;                                                                                       \
    }                                                                                                   \
    /* Windows of any size: the values of offset k of window e at s0 + (k / KW) * si + (k % KW) * sj +  \
     * e * se (se 1: a vector load; else gathered). Maxima into o, first maxima's offsets (as T) into   \
     * arg; vput writes d[e] = g[e] + 0 where arg[e] is k, else 0. */                                   \
    static inline V vgather_##NAME(const T *p, int64_t se) {                                            \
        return se == 1 ? _mm_loadu_##SUF(p) : GATHER;                                                   \
    }                                                                                                   \
    static inline int64_t vfold_max_##NAME(const T *s0, int64_t si, int64_t sj, int64_t se, int64_t n,  \
                                           int64_t KH, int64_t KW, T *o) {                              \
        if (n < LANES_##NAME) return 0;                                                                 \
        EACH_STEP(e, n, LANES_##NAME, {                                                                 \
            const T *s = s0 + e * se;                                                                   \
            V m = vgather_##NAME(s, se);                                                                \
            for (int64_t k = 1; k < KH * KW; k++)                                                       \
                m = vmax_##NAME(m, vgather_##NAME(s + (k / KW) * si + (k % KW) * sj, se));              \
            _mm_storeu_##SUF(o + e, m);                                                                 \
        })                                                                                              \
        return n;                                                                                       \
    }                                                                                                   \
    static inline int64_t vfold_arg_##NAME(const T *s0, int64_t si, int64_t sj, int64_t se, int64_t n,  \
                                           int64_t KH, int64_t KW, T *arg) {                            \
        if (n < LANES_##NAME) return 0;                                                                 \
        EACH_STEP(e, n, LANES_##NAME, {                                                                 \
            const T *s = s0 + e * se;                                                                   \
            V b = vgather_##NAME(s, se), at = _mm_setzero_##SUF();                                      \
            for (int64_t k = 1; k < KH * KW; k++) {                                                     \
                V v = vgather_##NAME(s + (k / KW) * si + (k % KW) * sj, se), t = vtakes_##NAME(b, v);   \
                b = vsel_##NAME(t, v, b);                                                               \
                at = vsel_##NAME(t, _mm_set1_##SUF((T)k), at);                                          \
            }                                                                                           \
            _mm_storeu_##SUF(arg + e, at);                                                              \
        })                                                                                              \
        return n;                                                                                       \
    }                                                                                                   \
    static inline int64_t vput_##NAME(const T *arg, T k, const T *g, T *d, int64_t n) {                 \
        if (n < LANES_##NAME) return 0;                                                                 \
        EACH_STEP(e, n, LANES_##NAME, {                                                                 \
            V hit = _mm_cmpeq_##SUF(_mm_loadu_##SUF(arg + e), _mm_set1_##SUF(k));                       \
            V v = _mm_add_##SUF(_mm_loadu_##SUF(g + e), _mm_setzero_##SUF());                           \
            _mm_storeu_##SUF(d + e, _mm_and_##SUF(hit, v));                                             \
        })                                                                                              \
        return n;                                                                                       \
    }
SIMD_OPS(__m128, float, f32, ps, _mm_shuffle_ps(a, b, 0x88), _mm_shuffle_ps(a, b, 0xdd),
         _mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)p), _mm_storel_pi((__m64 *)p, v),
         _mm_setr_ps(p[0], p[se], p[2 * se], p[3 * se]))
SIMD_OPS(__m128d, double, f64, pd, _mm_unpacklo_pd(a, b), _mm_unpackhi_pd(a, b), _mm_load_sd(p),
         _mm_store_sd(p, v), _mm_setr_pd(p[0], p[se]))
#else /* no vectors: the scalar ops do every window */
#define max_rows_f32(...) ((int64_t)0)
#define max_rows_f64(...) ((int64_t)0)
#define max_pixels_f32(...) ((int64_t)0)
#define max_pixels_f64(...) ((int64_t)0)
#define grad_rows_f32(...) ((int64_t)0)
#define grad_rows_f64(...) ((int64_t)0)
#define grad_pixels_f32(...) ((int64_t)0)
#define grad_pixels_f64(...) ((int64_t)0)
#define vfold_max_f32(...) ((int64_t)0)
#define vfold_max_f64(...) ((int64_t)0)
#define vfold_arg_f32(...) ((int64_t)0)
#define vfold_arg_f64(...) ((int64_t)0)
#define vput_f32(...) ((int64_t)0)
#define vput_f64(...) ((int64_t)0)
#endif

/* A row of windows: its index r and coordinates (n, c, oh); NHWC rows are (n, oh), c = 0. Stepped, not
 * divided out of r for each row: the divisions cost as much as a short row. */
typedef struct {
    int64_t r, n, c, oh;
} tile_row;

static inline tile_row row_at(const int64_t *g, int64_t r) {
    int64_t C = g[G_LAYOUT] ? 1 : g[G_C], HO = g[G_HO];
    tile_row p = {r, r / (HO * C), (r / HO) % C, r % HO};
    return p;
}

static inline void next_row(const int64_t *g, tile_row *p) {
    p->r++;
    if (++p->oh < g[G_HO]) return;
    p->oh = 0;
    if (!g[G_LAYOUT] && ++p->c < g[G_C]) return;
    p->c = 0;
    p->n++;
}

/* Whether the windows tile the image and the innermost axis of x (and of the gradient) is contiguous
 * (a size-1 axis has stride 0 in `geo`). */
static int tiles(const int64_t *g, int grad) {
    if (g[G_SH] != g[G_KH] || g[G_SW] != g[G_KW] || g[G_PH] || g[G_PW] || g[G_HO] < 1 || g[G_WO] < 1)
        return 0;
    if ((g[G_KH] > 1 && g[G_DH] != 1) || (g[G_KW] > 1 && g[G_DW] != 1)) return 0;
    int nhwc = g[G_LAYOUT] != 0;
    int64_t size = nhwc ? g[G_C] : g[G_W], ysize = nhwc ? g[G_C] : g[G_WO];
    int64_t xs = g[G_XS + (nhwc ? 1 : 3)], ys = g[G_YS + (nhwc ? 1 : 3)];
    return (size == 1 || xs == 1) && (!grad || ysize == 1 || ys == 1);
}

static int64_t rows_per_chunk(int64_t min_chunk, int64_t row) {
    int64_t r = row > 0 ? min_chunk / row : min_chunk;
    return r > 0 ? r : 1;
}

/* Rows of windows over the threads, each at least min_chunk image elements. */
static void run_rows(const int64_t *g, vg_chunk_fn fn, void *ctx, int64_t min_chunk, int threads) {
    int nhwc = g[G_LAYOUT] != 0;
    int64_t rows = g[G_N] * g[G_HO] * (nhwc ? 1 : g[G_C]);
    int64_t row = g[G_KH] * g[G_W] * (nhwc ? g[G_C] : 1);
    vg_parallel_for(rows, rows_per_chunk(min_chunk, row), threads, fn, ctx);
}

/* A thread's work buffer (a row of windows); out of memory there aborts, as in pooling.c. */
static void *scratch(int64_t n, size_t size) {
    void *p = malloc((size_t)(n > 0 ? n : 1) * size);
    if (!p) abort();
    return p;
}

/* 2x2 windows over a whole C-contiguous NCHW tensor whose image rows are 4 or 8 wide (the small CNN's
 * pools), f32 on AVX2: the rows of windows are too short for the row loop above (its set-up per row cost
 * more than the row), so the tensor is taken as one run of windows, 8 a step (32 image elements: 2 rows
 * of windows of 4, or 4 of 2), and the rest one at a time. Each window folds its four values in kernel
 * order with the same selects as above, so the bits are the same. Threads split steps; the chunk with
 * the last step also does the rest. */
typedef struct {
    const float *x, *gy;
    float *out;
    int64_t WO, windows; /* windows in all */
} flat_args;

#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <immintrin.h>
#define FLAT_AVX2 __attribute__((target("avx2"), always_inline)) static inline

/* Whether the tensor is packed: each axis of size > 1 has the stride of a C-contiguous array. */
static int packed(const int64_t *shape, const int64_t *strides) {
    int64_t step = 1;
    for (int i = 3; i >= 0; i--) {
        if (shape[i] > 1 && strides[i] != step) return 0;
        step *= shape[i];
    }
    return 1;
}

static int flat(const int64_t *g, int grad) {
    const int64_t x[4] = {g[G_N], g[G_C], g[G_H], g[G_W]}, y[4] = {g[G_N], g[G_C], g[G_HO], g[G_WO]};
    return !g[G_LAYOUT] && g[G_KH] == 2 && g[G_KW] == 2 && tiles(g, grad) && (g[G_WO] == 2 || g[G_WO] == 4) &&
           g[G_H] == 2 * g[G_HO] && g[G_W] == 2 * g[G_WO] && packed(x, g + G_XS) &&
           (!grad || packed(y, g + G_YS)) && vg_has_avx2();
}

FLAT_AVX2 __m256 flat_sel(__m256 m, __m256 a, __m256 b) { return _mm256_blendv_ps(b, a, m); }
FLAT_AVX2 __m256 flat_max(__m256 b, __m256 v) {
    return flat_sel(_mm256_or_ps(_mm256_cmp_ps(b, v, _CMP_GT_OQ), _mm256_cmp_ps(b, b, _CMP_UNORD_Q)), b, v);
}
FLAT_AVX2 __m256 flat_takes(__m256 b, __m256 v) {
    __m256 later = _mm256_or_ps(_mm256_cmp_ps(v, b, _CMP_GT_OQ), _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_and_ps(_mm256_cmp_ps(b, b, _CMP_ORD_Q), later);
}
FLAT_AVX2 __m256 flat_swap_middle(__m256 v) { /* 64-bit pieces 0 2 1 3: its own inverse */
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v), 0xd8));
}

/* A step's four values of each window, v[k] for kernel offset k. Windows of 4: rows a and b are
 * p[0..7] p[8..15] (row 0 and 1 of a) and p[16..31], and the windows' order in the vectors is a0 a1 b0
 * b1 | a2 a3 b2 b3 (flat_swap_middle puts it right); windows of 2: four rows of windows of 8 elements
 * each, in order. */
FLAT_AVX2 void flat_load(const float *p, int64_t WO, __m256 v[4]) {
    __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8), c = _mm256_loadu_ps(p + 16),
           d = _mm256_loadu_ps(p + 24), r0, r0b, r1, r1b;
    if (WO == 4) {
        r0 = a, r1 = b, r0b = c, r1b = d;
    } else { /* a = [row 0 of a | row 1 of a], and so on: rows 0 of a c, b d; rows 1 of a c, b d */
        r0 = _mm256_permute2f128_ps(a, c, 0x20), r1 = _mm256_permute2f128_ps(a, c, 0x31);
        r0b = _mm256_permute2f128_ps(b, d, 0x20), r1b = _mm256_permute2f128_ps(b, d, 0x31);
    }
    v[0] = _mm256_shuffle_ps(r0, r0b, 0x88), v[1] = _mm256_shuffle_ps(r0, r0b, 0xdd);
    v[2] = _mm256_shuffle_ps(r1, r1b, 0x88), v[3] = _mm256_shuffle_ps(r1, r1b, 0xdd);
}

/* flat_load turned around: each window's four values d[k] back to their places. */
FLAT_AVX2 void flat_store(float *p, int64_t WO, const __m256 d[4]) {
    __m256 r0 = _mm256_unpacklo_ps(d[0], d[1]), r0b = _mm256_unpackhi_ps(d[0], d[1]);
    __m256 r1 = _mm256_unpacklo_ps(d[2], d[3]), r1b = _mm256_unpackhi_ps(d[2], d[3]), a, b, c, e;
    if (WO == 4) {
        a = r0, b = r1, c = r0b, e = r1b;
    } else {
        a = _mm256_permute2f128_ps(r0, r1, 0x20), c = _mm256_permute2f128_ps(r0, r1, 0x31);
        b = _mm256_permute2f128_ps(r0b, r1b, 0x20), e = _mm256_permute2f128_ps(r0b, r1b, 0x31);
    }
    _mm256_storeu_ps(p, a), _mm256_storeu_ps(p + 8, b), _mm256_storeu_ps(p + 16, c), _mm256_storeu_ps(p + 24, e);
}

/* Window j's first value: rows of windows are 4*WO elements apart, windows in a row 2 apart. */
static inline int64_t flat_at(int64_t j, int64_t WO) { return 4 * WO * (j / WO) + 2 * (j % WO); }

__attribute__((target("avx2"))) static void flat_max_chunk(void *ctx, int64_t lo, int64_t hi) {
    const flat_args *a = (const flat_args *)ctx;
    const int64_t WO = a->WO, W = 2 * WO, steps = a->windows / 8;
    for (int64_t s = lo; s < hi; s++) {
        __m256 v[4];
        flat_load(a->x + 32 * s, WO, v);
        __m256 m = flat_max(flat_max(flat_max(v[0], v[1]), v[2]), v[3]);
        _mm256_storeu_ps(a->out + 8 * s, WO == 4 ? flat_swap_middle(m) : m);
    }
    if (hi == steps)
        for (int64_t j = 8 * steps; j < a->windows; j++) {
            const float *p = a->x + flat_at(j, WO);
            a->out[j] = max4_f32(p[0], p[1], p[W], p[W + 1]);
        }
}

__attribute__((target("avx2"))) static void flat_grad_chunk(void *ctx, int64_t lo, int64_t hi) {
    const flat_args *a = (const flat_args *)ctx;
    const int64_t WO = a->WO, W = 2 * WO, steps = a->windows / 8;
    const __m256 zero = _mm256_setzero_ps();
    for (int64_t s = lo; s < hi; s++) {
        __m256 v[4], d[4], g = _mm256_loadu_ps(a->gy + 8 * s);
        flat_load(a->x + 32 * s, WO, v);
        if (WO == 4) g = flat_swap_middle(g);
        __m256 t1 = flat_takes(v[0], v[1]), b = flat_sel(t1, v[1], v[0]);
        __m256 t2 = flat_takes(b, v[2]);
        b = flat_sel(t2, v[2], b);
        __m256 t3 = flat_takes(b, v[3]), later = _mm256_or_ps(t2, t3);
        g = _mm256_add_ps(g, zero);
        d[0] = _mm256_andnot_ps(_mm256_or_ps(later, t1), g);
        d[1] = _mm256_and_ps(_mm256_andnot_ps(later, t1), g);
        d[2] = _mm256_and_ps(_mm256_andnot_ps(t3, t2), g);
        d[3] = _mm256_and_ps(t3, g);
        flat_store(a->out + 32 * s, WO, d);
    }
    if (hi == steps)
        for (int64_t j = 8 * steps; j < a->windows; j++) {
            const float *p = a->x + flat_at(j, WO);
            float *o = a->out + flat_at(j, WO), v = a->gy[j] + 0.0f;
            int k = arg4_f32(p[0], p[1], p[W], p[W + 1]);
            o[0] = k == 0 ? v : 0.0f, o[1] = k == 1 ? v : 0.0f, o[W] = k == 2 ? v : 0.0f, o[W + 1] = k == 3 ? v : 0.0f;
        }
}

/* Runs the flat kernel when the case is its own (1), else 0. */
static int flat_run(const float *x, const float *gy, float *out, const int64_t *g, int64_t min_chunk, int threads) {
    if (!flat(g, gy != 0)) return 0;
    flat_args a = {.x = x, .gy = gy, .out = out, .WO = g[G_WO], .windows = g[G_N] * g[G_C] * g[G_HO] * g[G_WO]};
    int64_t steps = a.windows / 8, per = min_chunk / 32 > 0 ? min_chunk / 32 : 1;
    vg_chunk_fn fn = gy ? flat_grad_chunk : flat_max_chunk;
    if (steps == 0)
        fn(&a, 0, 0);
    else
        vg_parallel_for(steps, per, threads, fn, &a);
    return 1;
}
#define flat_max_f32(x, out, g, min_chunk, threads) flat_run(x, 0, out, g, min_chunk, threads)
#define flat_grad_f32(x, gy, out, g, min_chunk, threads) flat_run(x, gy, out, g, min_chunk, threads)

/* f32 2x2 windows of two image rows (NCHW), 16 at a time on AVX-512, the last step's lanes past n masked
 * (so a row of 14 or 7 windows is one step, where SSE2 takes four or two): the same selects in the same
 * order as the SSE2 and scalar forms, so the bits are the same. */
#define ROWS512 __attribute__((target("avx512f"))) static
#define ROWS512_INLINE __attribute__((target("avx512f"), always_inline)) static inline

/* the four values of each of a step's windows (v[k] for kernel offset k), and the lane masks of the
 * step's first and second 16 elements of each row and of its windows */
ROWS512_INLINE void rows512_load(const float *r0, const float *r1, int64_t m, __m512 v[4], __mmask16 *lo,
                                 __mmask16 *hi, __mmask16 *out) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    *lo = (__mmask16)(m >= 8 ? 0xFFFF : (1u << (2 * m)) - 1);
    *hi = (__mmask16)(m > 8 ? (1u << (2 * m - 16)) - 1 : 0);
    *out = (__mmask16)((1u << m) - 1);
    __m512 a0 = _mm512_maskz_loadu_ps(*lo, r0), a1 = _mm512_maskz_loadu_ps(*hi, r0 + 16);
    __m512 b0 = _mm512_maskz_loadu_ps(*lo, r1), b1 = _mm512_maskz_loadu_ps(*hi, r1 + 16);
    v[0] = _mm512_permutex2var_ps(a0, even, a1), v[1] = _mm512_permutex2var_ps(a0, odd, a1);
    v[2] = _mm512_permutex2var_ps(b0, even, b1), v[3] = _mm512_permutex2var_ps(b0, odd, b1);
}

/* b where b > v or b is NaN, else v */
ROWS512_INLINE __m512 rows512_max(__m512 b, __m512 v) {
    __mmask16 keep = _mm512_cmp_ps_mask(b, v, _CMP_GT_OQ) | _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
    return _mm512_mask_blend_ps(keep, v, b);
}

/* whether v takes the place of b as the first maximum: b is not NaN, and v > b or v is NaN */
ROWS512_INLINE __mmask16 rows512_takes(__m512 b, __m512 v) {
    __mmask16 later = _mm512_cmp_ps_mask(v, b, _CMP_GT_OQ) | _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_cmp_ps_mask(b, b, _CMP_ORD_Q) & later;
}

ROWS512 int64_t max_rows512(const float *r0, const float *r1, float *o, int64_t n) {
    for (int64_t w = 0; w < n; w += 16) {
        __m512 v[4];
        __mmask16 lo, hi, out;
        rows512_load(r0 + 2 * w, r1 + 2 * w, n - w < 16 ? n - w : 16, v, &lo, &hi, &out);
        _mm512_mask_storeu_ps(o + w, out, rows512_max(rows512_max(rows512_max(v[0], v[1]), v[2]), v[3]));
    }
    return n;
}

ROWS512 int64_t grad_rows512(const float *r0, const float *r1, const float *gy, float *o0, float *o1,
                             int64_t n) {
    const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i second = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    for (int64_t w = 0; w < n; w += 16) {
        __m512 v[4];
        __mmask16 lo, hi, out;
        rows512_load(r0 + 2 * w, r1 + 2 * w, n - w < 16 ? n - w : 16, v, &lo, &hi, &out);
        __mmask16 t1 = rows512_takes(v[0], v[1]);
        __m512 b = _mm512_mask_blend_ps(t1, v[0], v[1]);
        __mmask16 t2 = rows512_takes(b, v[2]);
        b = _mm512_mask_blend_ps(t2, b, v[2]);
        __mmask16 t3 = rows512_takes(b, v[3]), later = t2 | t3;
        __m512 g = _mm512_add_ps(_mm512_maskz_loadu_ps(out, gy + w), _mm512_setzero_ps());
        __m512 d0 = _mm512_maskz_mov_ps((__mmask16)~(later | t1), g), d1 = _mm512_maskz_mov_ps(t1 & ~later, g);
        __m512 d2 = _mm512_maskz_mov_ps(t2 & ~t3, g), d3 = _mm512_maskz_mov_ps(t3, g);
        _mm512_mask_storeu_ps(o0 + 2 * w, lo, _mm512_permutex2var_ps(d0, first, d1));
        _mm512_mask_storeu_ps(o0 + 2 * w + 16, hi, _mm512_permutex2var_ps(d0, second, d1));
        _mm512_mask_storeu_ps(o1 + 2 * w, lo, _mm512_permutex2var_ps(d2, first, d3));
        _mm512_mask_storeu_ps(o1 + 2 * w + 16, hi, _mm512_permutex2var_ps(d2, second, d3));
    }
    return n;
}
#define rows_max_f32(r0, r1, o, n) \
    ((n) >= 8 && vg_has_avx512() ? max_rows512(r0, r1, o, n) : max_rows_f32(r0, r1, o, n))
#define rows_grad_f32(r0, r1, gy, o0, o1, n)                                                            \
    ((n) >= 8 && vg_has_avx512() ? grad_rows512(r0, r1, gy, o0, o1, n) : grad_rows_f32(r0, r1, gy, o0, o1, n))
#else
#define flat_max_f32(...) 0
#define flat_grad_f32(...) 0
#define rows_max_f32 max_rows_f32
#define rows_grad_f32 grad_rows_f32
#endif
#define rows_max_f64 max_rows_f64
#define rows_grad_f64 grad_rows_f64
#define flat_max_f64(...) 0
#define flat_grad_f64(...) 0

#define TILE_KERNELS(T, NAME)                                                                           \
    /* Windows of any size (see vfold_max): maxima into o, and first maxima's offsets (as T) into arg. */ \
    static inline void fold_max_##NAME(const T *s0, int64_t si, int64_t sj, int64_t se, int64_t n,     \
                                       int64_t KH, int64_t KW, T *o) {                                  \
        for (int64_t e = vfold_max_##NAME(s0, si, sj, se, n, KH, KW, o); e < n; e++) {                  \
            T m = s0[e * se];                                                                           \
            for (int64_t k = 1; k < KH * KW; k++) m = MAXF(m, s0[(k / KW) * si + (k % KW) * sj + e * se]); \
            o[e] = m;                                                                                   \
        }                                                                                               \
    }                                                                                                   \
    static inline void fold_arg_##NAME(const T *s0, int64_t si, int64_t sj, int64_t se, int64_t n,     \
                                       int64_t KH, int64_t KW, T *arg) {                                \
        for (int64_t e = vfold_arg_##NAME(s0, si, sj, se, n, KH, KW, arg); e < n; e++) {                \
            T b = s0[e * se];                                                                           \
            int64_t at = 0;                                                                             \
            for (int64_t k = 1; k < KH * KW; k++) {                                                     \
                T v = s0[(k / KW) * si + (k % KW) * sj + e * se];                                       \
                if (TAKES(b, v)) b = v, at = k;                                                         \
            }                                                                                           \
            arg[e] = (T)at;                                                                             \
        }                                                                                               \
    }                                                                                                   \
                                                                                                        \
    /* Window sums in double from 0.0, kernel offset by offset, over n windows; then o = sum / KH*KW. */ \
    static inline void fold_avg_##NAME(const T *s0, int64_t si, int64_t sj, int64_t se, int64_t n,     \
                                       int64_t KH, int64_t KW, double *sum, T *o) {                     \
        for (int64_t e = 0; e < n; e++) sum[e] = 0.0;                                                   \
        for (int64_t k = 0; k < KH * KW; k++) {                                                         \
            const T *s = s0 + (k / KW) * si + (k % KW) * sj;                                            \
            if (se == 1)                                                                                \
                for (int64_t e = 0; e < n; e++) sum[e] += (double)s[e];                                 \
            else                                                                                        \
                for (int64_t e = 0; e < n; e++) sum[e] += (double)s[e * se];                            \
        }                                                                                               \
        const double count = (double)(KH * KW);                                                         \
        for (int64_t e = 0; e < n; e++) o[e] = (T)(sum[e] / count);                                     \
    }                                                                                                   \
                                                                                                        \
    /* mode 0: max, 1: avg. NCHW row (n, c, oh): WO windows over KH image rows. */                      \
    static inline void pool_nchw_##NAME(const tile_args *a, const tile_row *p, double *sum, int mode) { \
        const int64_t *g = a->g, KH = g[G_KH], KW = g[G_KW], WO = g[G_WO], sh = g[G_XS + 2];            \
        const T *x = (const T *)a->x + p->n * g[G_XS] + p->c * g[G_XS + 1] + p->oh * KH * sh;           \
        T *o = (T *)a->out + p->r * WO;                                                                 \
        if (mode == 1) {                                                                                \
            fold_avg_##NAME(x, sh, 1, KW, WO, KH, KW, sum, o);                                          \
        } else if (KH == 2 && KW == 2) {                                                                \
            const T *r0 = x, *r1 = x + sh;                                                              \
            for (int64_t w = rows_max_##NAME(r0, r1, o, WO); w < WO; w++)                               \
                o[w] = max4_##NAME(r0[2 * w], r0[2 * w + 1], r1[2 * w], r1[2 * w + 1]);                 \
        } else {                                                                                        \
            fold_max_##NAME(x, sh, 1, KW, WO, KH, KW, o);                                               \
        }                                                                                               \
    }                                                                                                   \
                                                                                                        \
    /* NHWC row (n, oh): WO windows of C channels each. */                                              \
    static inline void pool_nhwc_##NAME(const tile_args *a, const tile_row *p, double *sum, int mode) { \
        const int64_t *g = a->g, C = g[G_C], KH = g[G_KH], KW = g[G_KW], WO = g[G_WO];                  \
        const int64_t sh = g[G_XS + 2], sw = g[G_XS + 3];                                               \
        const T *x = (const T *)a->x + p->n * g[G_XS] + p->oh * KH * sh;                                \
        for (int64_t w = 0; w < WO; w++) {                                                              \
            T *o = (T *)a->out + (p->r * WO + w) * C;                                                   \
            const T *xw = x + w * KW * sw;                                                              \
            if (mode == 1) {                                                                            \
                fold_avg_##NAME(xw, sh, sw, 1, C, KH, KW, sum, o);                                      \
            } else if (KH == 2 && KW == 2) {                                                            \
                const T *p0 = xw, *p1 = xw + sw, *p2 = xw + sh, *p3 = xw + sh + sw;                     \
                for (int64_t e = max_pixels_##NAME(p0, p1, p2, p3, o, C); e < C; e++)                   \
                    o[e] = max4_##NAME(p0[e], p1[e], p2[e], p3[e]);                                     \
            } else {                                                                                    \
                fold_max_##NAME(xw, sh, sw, 1, C, KH, KW, o);                                           \
            }                                                                                           \
        }                                                                                               \
    }                                                                                                   \
                                                                                                        \
    static inline void pool_chunk_##NAME(const tile_args *a, int64_t lo, int64_t hi, int mode) {       \
        int nhwc = a->g[G_LAYOUT] != 0;                                                                 \
        double *sum = mode == 1 ? (double *)scratch(nhwc ? a->g[G_C] : a->g[G_WO], sizeof(double)) : 0; \
        for (tile_row p = row_at(a->g, lo); p.r < hi; next_row(a->g, &p)) {                             \
            if (nhwc)                                                                                   \
                pool_nhwc_##NAME(a, &p, sum, mode);                                                     \
            else                                                                                        \
                pool_nchw_##NAME(a, &p, sum, mode);                                                     \
        }                                                                                               \
        free(sum);                                                                                      \
    }                                                                                                   \
    VG_CLONES static void max_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                         \
        pool_chunk_##NAME((const tile_args *)ctx, lo, hi, 0);                                           \
    }                                                                                                   \
    VG_CLONES static void avg_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                         \
        pool_chunk_##NAME((const tile_args *)ctx, lo, hi, 1);                                           \
    }                                                                                                   \
                                                                                                        \
    int vg_tile_max_pool_##NAME(const T *x, T *out, const int64_t *g, int64_t min_chunk, int threads) { \
        if (!tiles(g, 0)) return 0;                                                                     \
        if (flat_max_##NAME(x, out, g, min_chunk, threads)) return 1;                                   \
        tile_args a = {.x = x, .out = out, .g = g};                                                     \
        run_rows(g, max_chunk_##NAME, &a, min_chunk, threads);                                          \
        return 1;                                                                                       \
    }                                                                                                   \
                                                                                                        \
    int vg_tile_avg_pool_##NAME(const T *x, T *out, const int64_t *g, int64_t min_chunk, int threads) { \
        if (!tiles(g, 0)) return 0;                                                                     \
        tile_args a = {.x = x, .out = out, .g = g};                                                     \
        run_rows(g, avg_chunk_##NAME, &a, min_chunk, threads);                                          \
        return 1;                                                                                       \
    }                                                                                                   \
                                                                                                        \
    /* max_pool2d_grad, NCHW row (n, c, oh): image rows oh*KH .. oh*KH + KH - 1 of plane (n, c); `pos`   \
     * holds each kernel offset's place in them, (k / KW) * W + k % KW. */                              \
    static inline void grad_nchw_##NAME(const tile_args *a, const tile_row *p, T *arg,                 \
                                        const int64_t *pos) {                                           \
        const int64_t *g = a->g, C = g[G_C], H = g[G_H], W = g[G_W], KH = g[G_KH], KW = g[G_KW];        \
        const int64_t HO = g[G_HO], WO = g[G_WO], sh = g[G_XS + 2], oh = p->oh, tail = W - WO * KW;     \
        const T *x = (const T *)a->x + p->n * g[G_XS] + p->c * g[G_XS + 1] + oh * KH * sh;             \
        const T *gy = (const T *)a->gy + p->n * g[G_YS] + p->c * g[G_YS + 1] + oh * g[G_YS + 2];       \
        T *plane = (T *)a->out + (p->n * C + p->c) * H * W, *o = plane + oh * KH * W;                   \
        if (KH == 2 && KW == 2) {                                                                       \
            const T *r0 = x, *r1 = x + sh;                                                              \
            T *o0 = o, *o1 = o + W;                                                                     \
            for (int64_t w = rows_grad_##NAME(r0, r1, gy, o0, o1, WO); w < WO; w++) {                  \
                int k = arg4_##NAME(r0[2 * w], r0[2 * w + 1], r1[2 * w], r1[2 * w + 1]);                \
                T v = gy[w] + (T)0;                                                                     \
                o0[2 * w] = k == 0 ? v : (T)0;                                                          \
                o0[2 * w + 1] = k == 1 ? v : (T)0;                                                      \
                o1[2 * w] = k == 2 ? v : (T)0;                                                          \
                o1[2 * w + 1] = k == 3 ? v : (T)0;                                                      \
            }                                                                                           \
            if (tail)                                                                                   \
                for (int64_t i = 0; i < KH; i++) memset(o + i * W + WO * KW, 0, (size_t)tail * sizeof(T)); \
        } else {                                                                                        \
            fold_arg_##NAME(x, sh, 1, KW, WO, KH, KW, arg);                                             \
            memset(o, 0, (size_t)(KH * W) * sizeof(T));                                                 \
            for (int64_t w = 0; w < WO; w++) o[pos[(int64_t)arg[w]] + w * KW] = gy[w] + (T)0;          \
        }                                                                                               \
        if (oh == HO - 1 && HO * KH < H) /* the rows no window covers */                                \
            memset(plane + HO * KH * W, 0, (size_t)((H - HO * KH) * W) * sizeof(T));                    \
    }                                                                                                   \
                                                                                                        \
    /* NHWC row (n, oh): image rows oh*KH .. oh*KH + KH - 1 of image n (W*C elements each). */          \
    static inline void grad_nhwc_##NAME(const tile_args *a, const tile_row *p, T *arg) {               \
        const int64_t *g = a->g, C = g[G_C], H = g[G_H], W = g[G_W], KH = g[G_KH], KW = g[G_KW];        \
        const int64_t HO = g[G_HO], WO = g[G_WO], sh = g[G_XS + 2], sw = g[G_XS + 3], oh = p->oh;       \
        const int64_t tail = (W - WO * KW) * C, WC = W * C;                                             \
        const T *x = (const T *)a->x + p->n * g[G_XS] + oh * KH * sh;                                   \
        T *image = (T *)a->out + p->n * H * WC, *o = image + oh * KH * WC;                              \
        for (int64_t w = 0; w < WO; w++) {                                                              \
            const T *gy = (const T *)a->gy + p->n * g[G_YS] + oh * g[G_YS + 2] + w * g[G_YS + 3];      \
            const T *xw = x + w * KW * sw;                                                              \
            T *ow = o + w * KW * C;                                                                     \
            if (KH == 2 && KW == 2) {                                                                   \
                const T *p0 = xw, *p1 = xw + sw, *p2 = xw + sh, *p3 = xw + sh + sw;                     \
                T *o0 = ow, *o1 = ow + C, *o2 = ow + WC, *o3 = ow + WC + C;                             \
                for (int64_t e = grad_pixels_##NAME(p0, p1, p2, p3, gy, o0, o1, o2, o3, C); e < C; e++) { \
                    int k = arg4_##NAME(p0[e], p1[e], p2[e], p3[e]);                                    \
                    T v = gy[e] + (T)0;                                                                 \
                    o0[e] = k == 0 ? v : (T)0;                                                          \
                    o1[e] = k == 1 ? v : (T)0;                                                          \
                    o2[e] = k == 2 ? v : (T)0;                                                          \
                    o3[e] = k == 3 ? v : (T)0;                                                          \
                }                                                                                       \
                continue;                                                                               \
            }                                                                                           \
            fold_arg_##NAME(xw, sh, sw, 1, C, KH, KW, arg);                                             \
            for (int64_t k = 0; k < KH * KW; k++) {                                                     \
                T *d = ow + (k / KW) * WC + (k % KW) * C;                                               \
                for (int64_t e = vput_##NAME(arg, (T)k, gy, d, C); e < C; e++)                          \
                    d[e] = arg[e] == (T)k ? gy[e] + (T)0 : (T)0;                                        \
            }                                                                                           \
        }                                                                                               \
        if (tail)                                                                                       \
            for (int64_t i = 0; i < KH; i++) memset(o + i * WC + WO * KW * C, 0, (size_t)tail * sizeof(T)); \
        if (oh == HO - 1 && HO * KH < H) /* the rows no window covers */                                \
            memset(image + HO * KH * WC, 0, (size_t)((H - HO * KH) * WC) * sizeof(T));                  \
    }                                                                                                   \
                                                                                                        \
    VG_CLONES static void grad_chunk_##NAME(void *ctx, int64_t lo, int64_t hi) {                        \
        const tile_args *a = (const tile_args *)ctx;                                                    \
        const int64_t *g = a->g, KH = g[G_KH], KW = g[G_KW];                                            \
        int nhwc = g[G_LAYOUT] != 0;                                                                    \
        T *arg = (T *)scratch(nhwc ? g[G_C] : g[G_WO], sizeof(T));                                      \
        int64_t *pos = (int64_t *)scratch(KH * KW, sizeof(int64_t));                                    \
        for (int64_t k = 0; k < KH * KW; k++) pos[k] = (k / KW) * g[G_W] + k % KW;                      \
        for (tile_row p = row_at(g, lo); p.r < hi; next_row(g, &p)) {                                   \
            if (nhwc)                                                                                   \
                grad_nhwc_##NAME(a, &p, arg);                                                           \
            else                                                                                        \
                grad_nchw_##NAME(a, &p, arg, pos);                                                      \
        }                                                                                               \
        free(arg);                                                                                      \
        free(pos);                                                                                      \
    }                                                                                                   \
                                                                                                        \
    int vg_tile_max_pool_grad_##NAME(const T *x, const T *gy, T *out, const int64_t *g,                 \
                                     int64_t min_chunk, int threads) {                                  \
        if (!tiles(g, 1)) return 0;                                                                     \
        if (flat_grad_##NAME(x, gy, out, g, min_chunk, threads)) return 1;                              \
        tile_args a = {.x = x, .gy = gy, .out = out, .g = g};                                           \
        run_rows(g, grad_chunk_##NAME, &a, min_chunk, threads);                                         \
        return 1;                                                                                       \
    }

TILE_KERNELS(float, f32)
TILE_KERNELS(double, f64)
