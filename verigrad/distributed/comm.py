"""The messages under the collectives: non-blocking MPI calls on the arrays' bytes (any dtype), each
waited for with the group's deadline (`world.wait`). MPI's own reductions are not used: their order is
unspecified, and verigrad's is the rank order (`reduction.reduce_reference`).

An all-reduce of more than `SPLIT_BYTES` is a reduce-scatter (rank r receives chunk r of every rank and
reduces it in rank order) then an all-gather of the reduced chunks: each rank sends and receives
2(N-1)/N of the bytes, as a ring all-reduce does. A smaller one gathers every rank's array to every rank
(one message's latency instead of two). Both reduce each element in rank order: the same bits."""

from __future__ import annotations

from typing import Any

import numpy as np

from .reduction import reduce_reference
from .world import wait, world

SPLIT_BYTES = 64 << 10


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


class PendingReduce:
    """An all-reduce under way (see the module docstring); `progress()` starts its second half once the
    first is done, without waiting; `result()` waits and gives the reduced array."""

    def __init__(self, a: np.ndarray, op: str, what: str) -> None:
        w = world()
        self.n, self.op, self.what, self.shape = w.size, op, what, a.shape
        self.gather: PendingGather | None = None
        self.split = a.nbytes > SPLIT_BYTES
        if not self.split:
            self.gather = PendingGather(a, what)
            return
        flat = np.ravel(a)
        self.size, chunk = flat.size, -(-flat.size // w.size)
        chunks = np.zeros((w.size, chunk), a.dtype)  # padded: the pad's results are dropped
        chunks.reshape(-1)[: flat.size] = flat
        self.received = np.empty((w.size, chunks[0].nbytes), np.uint8)
        self.dtype, self.chunk = a.dtype, chunk
        self.request: Any = w.comm.Ialltoall(chunks.view(np.uint8), self.received)

    def progress(self) -> None:
        if self.split and self.gather is None and self.request.Test():
            self._start_gather()

    def _start_gather(self) -> None:
        mine = [row.view(self.dtype) for row in self.received]
        self.gather = PendingGather(reduce_reference(mine, self.op), self.what)

    def result(self) -> np.ndarray:
        if not self.split:
            return reduce_reference(self.gather.result(), self.op)
        if self.gather is None:
            wait(self.request, self.what)
            self._start_gather()
        return np.concatenate(self.gather.result())[: self.size].reshape(self.shape)


def all_reduce_array(a: np.ndarray, op: str, what: str) -> np.ndarray:
    """Every rank's `a` reduced by `op` in rank order, on every rank."""
    return PendingReduce(a, op, what).result()
