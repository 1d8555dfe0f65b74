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

With VERIGRAD_HUGE_PAGES=1 (off by default) it then grows the heap by HUGE_HEAP bytes of address space
(allocated in pieces below MMAP_MAX, then freed: nothing is written there but the pieces' headers) and
asks the kernel for transparent huge pages there (`madvise(MADV_HUGEPAGE)`, where the system's setting is
"madvise"; glibc's own `glibc.malloc.hugetlb` tunable is read only at start-up; NumPy advises its arrays
of 4 MiB and more itself, not the smaller ones). The arrays then allocated there are mapped by 2 MiB
pages: fewer TLB misses as a step's kernels stream through their operands (the small GPT's training step,
whose activations are 0.5 to 2 MiB, ~3% less CPU time, eager or compiled), one page fault per 2 MiB; the
peak resident memory is within a huge page or two of the same. It is off by default because those 512 MiB
count against an address-space limit (`ulimit -v`, RLIMIT_AS) from the first kernel on, and the freed
heap kept there then serves a large allocation that the limit was meant to refuse.

The cpu backend calls it when it loads, and a compiled plan when it is built (on any backend), unless
VERIGRAD_RETAIN_MEMORY=0. Outside glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import sys
import threading

from ..settings import env_flag

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MMAP_MAX = 32 << 20  # the largest mmap threshold glibc accepts (64-bit)
TRIM_AT = 1 << 30
HUGE_HEAP, HUGE_PIECE = 512 << 20, 16 << 20  # below TRIM_AT: the freed top of the heap stays
MADV_HUGEPAGE, HUGE_PAGE, PAGE = 14, 2 << 20, 4096
THP_SETTING = "/sys/kernel/mm/transparent_hugepage/enabled"
OVERCOMMIT = "/proc/sys/vm/overcommit_memory"  # 2: strict, where the heap's address space would count

_done = [False]
_lock = threading.Lock()  # one thread sets malloc up (and grows the heap) once


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
    if _done[0] and huge_pages():
        huge_heap(ctypes.CDLL(None))
    return _done[0]


def huge_pages() -> bool:
    """Whether `retain_freed` advises the heap for huge pages: VERIGRAD_HUGE_PAGES is 1 (true, yes, on),
    the kernel gives transparent huge pages where a program asks for them ("madvise") and does not
    count address space as memory (overcommit_memory 2: HUGE_HEAP would be charged though unused)."""
    if not env_flag("VERIGRAD_HUGE_PAGES", False):
        return False
    try:
        with open(THP_SETTING) as f:
            advised = "[madvise]" in f.read()
        with open(OVERCOMMIT) as f:
            strict = f.read().strip() == "2"
    except OSError:
        return False
    return advised and not strict


def huge_heap(libc: ctypes.CDLL) -> int:
    """The heap grown by HUGE_HEAP bytes that the kernel maps with huge pages (see the module docstring);
    the bytes so advised (0 where the heap did not grow in one piece)."""
    libc.malloc.argtypes, libc.malloc.restype = [ctypes.c_size_t], ctypes.c_void_p
    libc.free.argtypes, libc.free.restype = [ctypes.c_void_p], None
    libc.sbrk.argtypes, libc.sbrk.restype = [ctypes.c_ssize_t], ctypes.c_void_p
    libc.madvise.argtypes, libc.madvise.restype = (
        [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int],
        ctypes.c_int,
    )
    start = libc.sbrk(0)
    pieces = [libc.malloc(HUGE_PIECE) for _ in range(HUGE_HEAP // HUGE_PIECE)]
    end = libc.sbrk(0)
    lo = -(-start // HUGE_PAGE) * HUGE_PAGE
    size = (end - lo) // PAGE * PAGE if end and start and end > lo else 0
    if size and libc.madvise(lo, size, MADV_HUGEPAGE) != 0:
        size = 0
    for piece in pieces:
        libc.free(piece)
    return size
