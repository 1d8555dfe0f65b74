#ifndef VG_H
#define VG_H
#include <stdint.h>
#include <string.h>

typedef void (*vg_chunk_fn)(void *ctx, int64_t lo, int64_t hi);

void vg_parallel_for(int64_t n, int64_t min_chunk, int threads, vg_chunk_fn fn, void *ctx);
int vg_pool_size(void);
int vg_pool_chunks(int64_t *out, int size, int reset);
int vg_pool_static(int on);
int64_t vg_pool_spin(int64_t ns);

/* For loops of IEEE operations: built three times where the loader can choose (GNU ifunc), for AVX-512,
 * AVX2 and the baseline; the same operations each way, so the same bits. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define VG_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VG_CLONES
#endif

/* The CPU features the kernels' vector paths check before they run: 1 or 0 each, 0 off x86. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#define VG_CPU_CHECKS 1
#else
#define VG_CPU_CHECKS 0
#endif

/* Whether the CPU has AVX-512 F and DQ, all that the kernels' AVX-512 paths use. */
static inline int vg_has_avx512(void) {
#if VG_CPU_CHECKS
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
#else
    return 0;
#endif
}

/* Whether the CPU has AVX-512 BW (byte and word lanes: the 8-bit products' AVX-512 paths). */
static inline int vg_has_avx512bw(void) {
#if VG_CPU_CHECKS
    return __builtin_cpu_supports("avx512bw") != 0;
#else
    return 0;
#endif
}

/* Whether the CPU has AVX-512 VNNI with VL and BW (the 8-bit products' vpdpbusd paths). */
static inline int vg_has_avx512vnni(void) {
#if VG_CPU_CHECKS
    return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw");
#else
    return 0;
#endif
}

/* Whether the CPU has AVX2. */
static inline int vg_has_avx2(void) {
#if VG_CPU_CHECKS
    return __builtin_cpu_supports("avx2") != 0;
#else
    return 0;
#endif
}

/* Whether the CPU has AVX2 and FMA (the paths of fused multiply-adds on 256-bit vectors). */
static inline int vg_has_avx2_fma(void) {
#if VG_CPU_CHECKS
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* Whether the CPU has F16C, from CPUID leaf 1 (ECX bit 29): Clang's __builtin_cpu_supports knows no
 * "f16c"; "avx" checks that the OS saves the YMM registers too. CPUID is slow (a VM may trap it): asked
 * once (per file that includes this header). */
static inline int vg_has_f16c(void) {
#if VG_CPU_CHECKS
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d;
        known = __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) && __builtin_cpu_supports("avx");
    }
    return known;
#else
    return 0;
#endif
}

/* Whether the CPU has AMX-TILE and AMX-INT8, from CPUID leaf 7 (EDX bits 24 and 25); whether Linux lets
 * a process use the tiles is asked separately (quant_amx.c). Asked once per file, as vg_has_f16c. */
static inline int vg_has_amx_int8(void) {
#if VG_CPU_CHECKS
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d;
        known = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d >> 24 & 1) && (d >> 25 & 1);
    }
    return known;
#else
    return 0;
#endif
}

/* The first index from lo (hi at most) at which &p[i] (elements of `size` bytes, p aligned to them) is
 * a multiple of 64 bytes. A loop writing p splits there, so that its vector stores do not straddle two
 * cache lines, which costs a store about 8% of a memory-bound loop's time (NumPy's arrays start 16
 * bytes past a line). */
static inline int64_t vg_aligned_from(const void *p, int64_t lo, int64_t hi, int64_t size) {
    uintptr_t at = (uintptr_t)p + (uintptr_t)(lo * size);
    int64_t from = lo + (int64_t)((64 - at % 64) % 64 / (uintptr_t)size);
    return from < hi ? from : hi;
}

/* Count a fast kernel's result that held an infinity or a NaN (done == 0), which its caller then
 * computes again on a path that cannot overflow; returns done. vg_reruns() is the count so far: where no
 * partial sum of the inputs can overflow, a rerun hides a bug, and the verification fails it. */
int vg_count_rerun(int done);
int64_t vg_reruns(void);

/* A run of a row-major walk over the rank-4 shape d[0..3]: element i's index (i0, i1, i2, j) and the end
 * of its run along the last dimension (at most hi) */
typedef struct {
    int64_t i0, i1, i2, j, end;
} vg_run;

static inline vg_run vg_run_at(const int64_t *d, int64_t i, int64_t hi) {
    vg_run r;
    int64_t row = i / d[3], rest = row / d[2];
    r.j = i - row * d[3];
    r.i2 = row - rest * d[2];
    r.i1 = rest % d[1];
    r.i0 = rest / d[1];
    r.end = hi - i < d[3] - r.j ? hi : i + (d[3] - r.j);
    return r;
}

/* r to the run that follows it: the next row, from its first element (no divisions: a walk over short
 * rows spent most of its time finding each row with vg_run_at) */
static inline void vg_run_next(vg_run *r, const int64_t *d, int64_t hi) {
    int64_t start = r->end;
    r->j = 0;
    if (++r->i2 == d[2]) {
        r->i2 = 0;
        if (++r->i1 == d[1]) r->i1 = 0, r->i0++;
    }
    r->end = hi - start < d[3] ? hi : start + d[3];
}

/* The offset of a run's first element under the strides s[0..3] */
static inline int64_t vg_run_offset(vg_run r, const int64_t *s) {
    return r.i0 * s[0] + r.i1 * s[1] + r.i2 * s[2] + r.j * s[3];
}

/* the f16 of bits h as an f32, exactly (every f16 is an f32; as ops/quant.py's _f16) */
static inline float vg_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        float v = (float)mant * 0x1p-24f; /* zero or subnormal: exact */
        return sign ? -v : v;
    }
    bits = exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* the little-endian f16 at p, exactly: the quantized blocks' scales */
static inline float vg_f16_at(const uint8_t *p) { return vg_f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }
#endif
