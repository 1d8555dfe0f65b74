"""The messages under the collectives: non-blocking MPI calls on the arrays' bytes (any dtype), each
waited for with the group's deadline (`world.wait`). MPI's own reductions are not used: their order is
unspecified, and verigrad's is the rank order (`reduction.reduce_reference`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from .world import wait, world


def _bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


class PendingGather:
    """An all-gather under way: `result()` waits for it and gives every rank's array, in rank order."""

    def __init__(self, a: np.ndarray, what: str) -> None:
        w = world()
        self.shape, self.dtype, self.what = a.shape, a.dtype, what
        self.received = np.empty((w.size, a.nbytes), np.uint8)
        self.request: Any = w.comm.Iallgather(_bytes(a), self.received)

    def result(self) -> list[np.ndarray]:
        wait(self.request, self.what)
        return [row.view(self.dtype).reshape(self.shape) for row in self.received]


def all_gather_arrays(a: np.ndarray, what: str) -> list[np.ndarray]:
    """Every rank's `a` (all the same shape and dtype), in rank order."""
    return PendingGather(a, what).result()


def alltoall_arrays(chunks: np.ndarray, what: str) -> list[np.ndarray]:
    """`chunks` is (world size, ...): rank j receives row j of every rank; gives those rows in rank order."""
    w = world()
    sent = np.ascontiguousarray(chunks)
    received = np.empty((w.size, sent[0].nbytes), np.uint8)
    wait(w.comm.Ialltoall(sent.reshape(w.size, -1).view(np.uint8), received), what)
    return [row.view(sent.dtype).reshape(sent.shape[1:]) for row in received]


def broadcast_array(a: np.ndarray, src: int, what: str) -> np.ndarray:
    """Rank `src`'s `a` on every rank (the others' `a` give the shape and dtype)."""
    w = world()
    buffer = np.array(a, copy=True, order="C")
    wait(w.comm.Ibcast(buffer.reshape(-1).view(np.uint8), root=src), what)
    return buffer
