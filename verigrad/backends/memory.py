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

The cpu backend calls it when it loads, and a compiled plan when it is built (on any backend), unless
VERIGRAD_RETAIN_MEMORY=0. Outside glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import sys

from ..settings import env_flag

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
MMAP_MAX = 32 << 20  # the largest mmap threshold glibc accepts (64-bit)
TRIM_AT = 1 << 30

_done = [False]


def enabled() -> bool:
    """Whether the environment allows `retain_freed` (VERIGRAD_RETAIN_MEMORY is not 0, false, no or off)."""
    return env_flag("VERIGRAD_RETAIN_MEMORY", True)


def retain_freed() -> bool:
    """Set glibc's malloc to keep freed memory for reuse (once per process); whether it is set."""
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
