/* The check_index op (ops/checks.py): a copy of i64 positions, each in [0, size) (with `wrap`, in
 * [-size, size), a negative one made positive by adding size), the entries equal to `ignore` (where
 * has_ignore) made 0. Returns 0, or 1 at the first other entry out of range (the caller
 * then raises the op's error; a compiled plan's replay stops at a call that does not return what its
 * recording did, ir/replay.py). One thread: positions are few beside the data they index.
 *
 * vg_check_index_i64(idx, out, n, size, ignore, has_ignore, wrap)
 */
#include <stdint.h>

int vg_check_index_i64(const int64_t *idx, int64_t *out, int64_t n, int64_t size, int64_t ignore,
                       int has_ignore, int wrap) {
    for (int64_t i = 0; i < n; i++) {
        int64_t v = idx[i];
        if (has_ignore && v == ignore) {
            out[i] = 0;
            continue;
        }
        if (wrap && v < 0 && v >= -size) v += size;
        if ((uint64_t)v >= (uint64_t)size) return 1; /* negative too */
        out[i] = v;
    }
    return 0;
}
