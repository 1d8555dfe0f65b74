#ifndef VG_H
#define VG_H
#include <stdint.h>

typedef void (*vg_chunk_fn)(void *ctx, int64_t lo, int64_t hi);

void vg_parallel_for(int64_t n, int64_t min_chunk, int threads, vg_chunk_fn fn, void *ctx);
int vg_pool_size(void);

/* For loops of IEEE operations: built twice where the loader can choose (GNU ifunc), for AVX2 and for the
 * baseline; the same operations either way, so the same bits. */
#if defined(__x86_64__) && defined(__linux__) && defined(__GNUC__)
#define VG_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define VG_CLONES
#endif

#endif
