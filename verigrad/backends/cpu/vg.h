#ifndef VG_H
#define VG_H
#include <stdint.h>

typedef void (*vg_chunk_fn)(void *ctx, int64_t lo, int64_t hi);

void vg_parallel_for(int64_t n, int64_t min_chunk, int threads, vg_chunk_fn fn, void *ctx);
int vg_pool_size(void);

#endif
