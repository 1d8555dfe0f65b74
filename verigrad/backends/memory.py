"""Keeping freed memory for reuse: glibc's malloc settings for a process that allocates the same large
arrays over and over (a training step's activations and gradients).

By default glibc serves a large allocation with an mmap of its own (above a threshold that adapts) and
gives the top of the heap back to the system once more than twice that threshold is free there. A
training step frees most of its arrays at its end, so the next step takes every page of them from the
system again: one page fault per 4 KiB, each page zeroed by the kernel. Where faults are costly that
measured as a third of a cnn step (and more for a compiled step, which frees later). `retain_freed()`
serves arrays up to MMAP_MAX from the heap and trims the heap only beyond TRIM_AT free at its top, so
the next step reuses the pages the last one freed, as a caching allocator does. The memory in use is
unchanged; the process keeps up to its peak of freed heap.

Once a compiled plan has run a few times (`COLLAPSE_AT`), the heap has grown to what its runs hold, and
`collapse_heap` asks the kernel to gather the heap's pages into transparent huge pages
(`madvise(MADV_COLLAPSE)`, Linux 6.1 or later, whatever the system's THP setting short of "never"; NumPy
advises its arrays of 4 MiB and more itself, not the smaller ones, and glibc's `glibc.malloc.hugetlb`
tunable is read only at start-up). The arrays the next runs take from there are mapped by 2 MiB pages:
fewer TLB misses as a step's kernels stream through their operands (the small GPT's training step, whose
activations are 0.5 to 2 MiB: ~4% less CPU time), for a one-time copy (a few hundred ms for its 110 MiB of
heap). It adds no address space (an address-space limit, `ulimit -v` or RLIMIT_AS, behaves as without;
growing the heap by 512 MiB of advised address space at the first kernel, as an earlier version did,
broke that), and the memory in use grows by the unused pages of the 2 MiB ranges it fills (~1%). Each
call gathers the heap grown since the last. VERIGRAD_HUGE_PAGES=0 turns it off.

The cpu backend calls `retain_freed` when it loads, and a compiled plan when it is built (on any backend),
then `collapse_heap` before its COLLAPSE_AT-th run; neither does anything where VERIGRAD_RETAIN_MEMORY=0 or
outside glibc on Linux.
"""

from __future__ import annotations

import ctypes
import sys
import threading

from ..settings import env_flag

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MMAP_MAX = 32 << 20  # the largest mmap threshold glibc accepts (64-bit)
TRIM_AT = 1 << 30
MADV_COLLAPSE, HUGE_PAGE = 25, 2 << 20
THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"
COLLAPSE_AT = 3  # a plan's run before which `collapse_heap` runs: after its checked run and one of its loop

_done = [False]
_collapsed = [0]  # the address up to which `collapse_heap` has gathered the heap
_lock = threading.Lock()  # one thread sets malloc up, or gathers the heap, at a time


def enabled() -> bool:
    """Whether the environment allows `retain_freed` (VERIGRAD_RETAIN_MEMORY is not 0, false, no or off)."""
    return env_flag("VERIGRAD_RETAIN_MEMORY", True)


def retain_freed() -> bool:
    """Set glibc's malloc to keep freed memory for reuse (once per process); whether it is set."""
    with _lock:
        return _retain_freed()


def _retain_freed() -> bool:
    if _done[0]:
        return True
    if not sys.platform.startswith("linux") or not enabled():
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _done[0] = bool(mallopt(M_MMAP_THRESHOLD, MMAP_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_AT))
    return _done[0]


def huge_pages() -> bool:
    """Whether `collapse_heap` gathers the heap into huge pages: VERIGRAD_HUGE_PAGES is not 0 (false, no,
    off) and the kernel's setting for transparent huge pages is not "never"."""
    if not env_flag("VERIGRAD_HUGE_PAGES", True):
        return False
    try:
        with open(THP_SETTING) as f:
            return "[never]" not in f.read()
    except OSError:
        return False


def collapse_heap() -> int:
    """The heap grown since the last call gathered into huge pages, where `retain_freed` is set and
    `huge_pages()` (see the module docstring); the bytes asked for (0: nothing new, or refused)."""
    with _lock:
        if not _done[0] or not huge_pages():
            return 0
        libc = ctypes.CDLL(None)
        libc.sbrk.argtypes, libc.sbrk.restype = [ctypes.c_ssize_t], ctypes.c_void_p
        libc.madvise.argtypes, libc.madvise.restype = (
            [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int],
            ctypes.c_int,
        )
        start, end = max(heap_start(), _collapsed[0]), libc.sbrk(0) or 0
        lo, hi = -(-start // HUGE_PAGE) * HUGE_PAGE, end // HUGE_PAGE * HUGE_PAGE
        if not start or hi <= lo:
            return 0
        _collapsed[0] = hi  # asked once: a kernel that refuses (before 6.1) refuses again
        return hi - lo if libc.madvise(lo, hi - lo, MADV_COLLAPSE) == 0 else 0


def heap_start() -> int:
    """The lowest address of the process's heap (its `[heap]` mapping in /proc/self/maps); 0 if none."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                if line.rstrip().endswith("[heap]"):
                    return int(line.split("-", 1)[0], 16)
    except OSError:
        pass
    return 0
