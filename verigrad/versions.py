"""Version counters of eager memory, as PyTorch's: every in-place write of a NumPy buffer ticks `clock`
and is noted against the buffer's owner (the root array) with the region written; autograd nodes keep the
clock's reading when they are made, and backward asks `written_after` whether a tensor a node holds was
changed since (PyTorch's "modified by an inplace operation" error). Nothing here runs on an op call.

Also the tensors that in-place writes gave a new history (`redirect`): nodes made before the write still
mean the tensor as it was, its snapshot (`resolve`); and the snapshots that share memory written since
(`pin`), whose history stays that of their time.
"""

from __future__ import annotations

import bisect
import weakref
from typing import Any

import numpy as np

clock = 0  # in-place writes so far; a node made now keeps this reading
last_recorded = 0  # the reading of the last write autograd recorded
_KEPT = 16  # regions kept per buffer; older writes merge into one of the whole buffer (an upper bound)


class _Memory:
    """The writes of one buffer: its version (writes so far) and the recent ones, as (clock, writes,
    region, recorded): `region` (byte offset, shape, strides, itemsize) or None for all of it; `recorded`,
    whether autograd recorded it (gave the tensors written a new history)."""

    __slots__ = ("last", "ref", "version", "writes")

    def __init__(self, ref: weakref.ref) -> None:
        self.ref, self.version, self.last = ref, 0, 0
        self.writes: list[tuple[int, int, tuple | None, bool]] = []


_MEMORY: dict[int, _Memory] = {}  # id(root array) -> its writes
REDIRECTS: dict[int, tuple[weakref.ref, list[tuple[int, Any]]]] = {}  # id(tensor) -> (clock, snapshot)s


def root(a: np.ndarray) -> np.ndarray:
    """The array that owns `a`'s memory (a itself, or the base of its views)."""
    base = a.base
    while isinstance(base, np.ndarray):
        a, base = base, base.base
    return a


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def note_write(a: np.ndarray, recorded: bool = False) -> int:
    """Tick the clock for a write of `a` (all of it), `recorded` by autograd or not, and note it against
    its memory; the new reading."""
    global clock, last_recorded
    clock += 1
    if recorded:
        last_recorded = clock
    owner = root(a)
    key = id(owner)
    memory = _MEMORY.get(key)
    if memory is None or memory.ref() is not owner:
        memory = _MEMORY[key] = _Memory(weakref.ref(owner, lambda _, key=key: _MEMORY.pop(key, None)))
    region = None
    if a is not owner and a.size != owner.size:
        region = (_address(a) - _address(owner), a.shape, a.strides, a.itemsize)
    memory.version += 1
    memory.last = clock
    memory.writes.append((clock, 1, region, recorded))
    if len(memory.writes) > _KEPT:
        merged = sum(w[1] for w in memory.writes), any(w[3] for w in memory.writes)
        memory.writes = [(clock, merged[0], None, merged[1])]
    return clock


def version(a: np.ndarray) -> int:
    """How many in-place writes `a`'s memory has had (PyTorch's `_version`, shared by views)."""
    owner = root(a)
    memory = _MEMORY.get(id(owner))
    return 0 if memory is None or memory.ref() is not owner else memory.version


def written_after(
    a: Any, stamp: int, upto: int | None = None, recorded: bool = False
) -> tuple[int, int] | None:
    """(version now, version at clock `stamp`) where part of `a`'s memory was written after the clock read
    `stamp` (and by the time it read `upto`, when given; by a write autograd recorded, with `recorded`);
    None where it was not, or `a` is no array."""
    if not _MEMORY or type(a) is not np.ndarray:
        return None
    owner = root(a)
    memory = _MEMORY.get(id(owner))
    if memory is None or memory.last <= stamp or memory.ref() is not owner:
        return None
    last = memory.last if upto is None else upto
    later = [w[2] for w in memory.writes if stamp < w[0] <= last and (w[3] or not recorded)]
    if not any(region is None or _overlaps(owner, region, a) for region in later):
        return None
    return memory.version, memory.version - sum(w[1] for w in memory.writes if w[0] > stamp)


def shares_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether `a` and `b` have an element in common (True where that is hard to tell)."""
    if not np.may_share_memory(a, b):
        return False
    try:
        return bool(np.shares_memory(a, b, max_work=100_000))
    except np.exceptions.TooHardError:
        return True


def _overlaps(owner: np.ndarray, region: tuple, a: np.ndarray) -> bool:
    """Whether the region written of `owner` shares memory with `a` (True where that is hard to tell)."""
    offset, shape, strides, itemsize = region
    if not (owner.flags.c_contiguous or owner.flags.f_contiguous):
        return True
    flat = owner.reshape(-1, order="A").view(np.uint8)
    return shares_memory(np.lib.stride_tricks.as_strided(flat[offset:], (*shape, itemsize), (*strides, 1)), a)


def redirect(t: Any, tick: int, snapshot: Any) -> None:
    """`t` was written in place at clock `tick`: nodes made before then mean `snapshot` (t as it was)."""
    key = id(t)
    entry = REDIRECTS.get(key)
    if entry is None or entry[0]() is not t:
        entry = REDIRECTS[key] = (weakref.ref(t, lambda _, key=key: REDIRECTS.pop(key, None)), [])
    bisect.insort(entry[1], (tick, snapshot), key=lambda w: w[0])


def resolve(t: Any, stamp: int) -> Any:
    """The tensor a node made at clock `stamp` means by `t`: t, or its snapshot from the first in-place
    write of t after the node."""
    entry = REDIRECTS.get(id(t))
    if entry is None or entry[0]() is not t:
        return t
    writes = entry[1]
    at = bisect.bisect_right(writes, stamp, key=lambda w: w[0])
    return writes[at][1] if at < len(writes) else t


def recorded_ticks(a: np.ndarray, after: int) -> list[int] | None:
    """The clock readings of the writes autograd recorded of `a`'s memory after clock `after`; None where
    older writes were merged and they cannot be told."""
    owner = root(a)
    memory = _MEMORY.get(id(owner))
    if memory is None or memory.last <= after or memory.ref() is not owner:
        return []
    ticks = []
    for tick, n, region, recorded in memory.writes:
        if tick > after and recorded and (region is None or _overlaps(owner, region, a)):
            if n > 1:
                return None
            ticks.append(tick)
    return ticks


_PINNED: dict[int, weakref.ref] = {}  # id(tensor) -> the tensor: a view as it was in a span between writes


def pin(t: Any) -> None:
    """`t` is a view as it was between two writes of its memory (it shares the memory, written since):
    its history stays that span's."""
    key = id(t)
    _PINNED[key] = weakref.ref(t, lambda _, key=key: _PINNED.pop(key, None))


def pinned(t: Any) -> bool:
    ref = _PINNED.get(id(t))
    return ref is not None and ref() is t


def any_writes() -> bool:
    return bool(_MEMORY)


MULTI_OUTPUT = "multi-output"  # a view's grad mode in its recipe (`Tensor._view`): a piece of split/unbind
# (a piece with history holds (None, None, None, (PyTorch's name of the call, its index)) there)
_VIEWS_KEPT = 16  # weak references a tensor's list of views holds before it is pruned of dead ones


def keep_view(base: Any, view: Any) -> None:
    """Note `view`, made without history of `base`'s memory, on base's list of such views: `[limit, refs...]`,
    pruned of dead references when it holds more than `limit` (then twice the live ones, at least
    _VIEWS_KEPT: amortized O(1)). vg_eager's note_view keeps it the same way."""
    refs = getattr(base, "_views", None)
    if refs is None:
        base._views = [_VIEWS_KEPT, weakref.ref(view)]
        return
    refs.append(weakref.ref(view))
    n = len(refs)
    if n > refs[0] + 1:  # (the entries up to n only: another thread may append meanwhile)
        live = [r for r in refs[1:n] if r() is not None]
        refs[1:n] = live
        refs[0] = max(_VIEWS_KEPT, 2 * len(live))


def multi_output(pieces: tuple, name: str) -> tuple:
    """`pieces`, the views one call made (split, chunk, unbind; PyTorch's `name` of it), marked as PyTorch
    marks its multi-output views (a recorded write of their memory makes them unusable): in the recipe of
    those made without history, and as (name, index) on those with one."""
    for index, piece in enumerate(pieces):
        recipe = getattr(piece, "_view", None)
        if recipe is not None:
            piece._view = (*recipe[:3], MULTI_OUTPUT)
        elif piece._node is not None:
            piece._view = (None, None, None, (name, index))
    return pieces
