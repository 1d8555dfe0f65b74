"""`DistributedDataParallel`: PyTorch's data-parallel wrapper on verigrad's collectives.

At construction the parameters and buffers take rank 0's values. Each parameter's gradient hook puts
the gradient in its bucket (parameters in reverse order, as the backward pass produces them, up to
`bucket_cap_mb` a bucket); a full bucket starts a non-blocking all-reduce at once, so communication
overlaps the rest of the backward pass; buckets start in their order on every rank. When the last
gradient arrives every bucket is waited for (with the group's deadline); each is averaged as PyTorch's
DDP does, the sum over ranks divided by their count, the sum in rank order (`comm.PendingReduce`, what
the all_reduce op runs): so a step on N ranks gives the bits of one process that sums the N shards'
gradients in rank order (`ordered_reduce`) and divides by N. In a traced (compiled) step each gradient
is the all_reduce op's instruction instead."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import modes
from ..autograd import _topological, no_grad
from ..nn.module import Module
from ..ops import from_numpy
from ..tensor import Tensor
from . import ops
from .comm import PendingReduce
from .world import world


class _Bucket:
    def __init__(self, params: list[Tensor]) -> None:
        self.params = params
        self.grads: list[np.ndarray | None] = [None] * len(params)
        self.missing = len(params)
        self.pending: PendingReduce | None = None

    def reset(self) -> None:
        self.grads = [None] * len(self.params)
        self.missing = len(self.params)
        self.pending = None


class DistributedDataParallel(Module):
    """DistributedDataParallel(module, ..., bucket_cap_mb=25, find_unused_parameters=False): see the
    module docstring. device_ids, output_device, dim, gradient_as_bucket_view and static_graph are
    accepted and have no effect on the CPU."""

    def __init__(
        self,
        module: Module,
        device_ids: Any = None,
        output_device: Any = None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        process_group: Any = None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
        **_: Any,
    ) -> None:
        super().__init__()
        if not isinstance(module, Module):
            got = type(module).__name__
            raise TypeError(f"DistributedDataParallel: module must be an nn.Module, got {got}")
        cap = 25.0 if bucket_cap_mb is None else bucket_cap_mb
        if not (isinstance(cap, int | float) and cap > 0):
            raise ValueError(
                f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb!r}"
            )
        w = world()
        self.module = module
        self.device_ids: list[int] = []
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.bucket_cap_mb = cap
        self.world_size = w.size
        self._sync = True
        self._sync_outside = True  # no_sync() entered outside any traced step: compiled steps guard on it
        self._unused: list[Tensor] = []
        with no_grad():
            for t in [*module.parameters(), *module.buffers()]:
                t.copy_(ops.broadcast(t.detach(), src=0))
        params = [p for p in module.parameters() if p.requires_grad]
        self._buckets = _buckets(list(reversed(params)), int(cap * 2**20))
        self._where = {
            id(p): (b, i) for b, bucket in enumerate(self._buckets) for i, p in enumerate(bucket.params)
        }
        self._next = 0  # the next bucket to start
        self._handles = [p.register_hook(self._hook(p)) for p in params]

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if any(b.missing != len(b.params) for b in self._buckets):
            raise RuntimeError(
                "DistributedDataParallel: the previous iteration's gradients were not all reduced: a "
                "parameter got no gradient; pass find_unused_parameters=True if some parameters are not "
                "used in the forward pass"
            )
        out = self.module(*inputs, **kwargs)
        if self.find_unused_parameters and self._sync and modes.current().name == "eager":
            roots = [t for t in _outputs(out) if t.requires_grad]
            reached = {id(t) for t in _topological(roots)}
            self._unused = [p for p in self._where_params() if id(p) not in reached]
        return out

    def _where_params(self) -> Iterator[Tensor]:
        for bucket in self._buckets:
            yield from bucket.params

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Gradients accumulate locally in this block; the next backward outside it reduces the sum."""
        outside = modes.current().name == "eager"  # not inside a traced step (which holds the block)
        before, self._sync = self._sync, False
        before_outside = self._sync_outside
        if outside:
            self._sync_outside = False
        try:
            yield
        finally:
            self._sync, self._sync_outside = before, before_outside

    def _hook(self, p: Tensor):
        def reduce_gradient(g: Tensor) -> Tensor | None:
            mode = modes.current()
            traced = mode.name != "eager"
            if traced and hasattr(mode, "read_flag"):  # a compiled step traces again inside no_sync()
                mode.read_flag(self, "_sync_outside")
            if not self._sync:
                return None
            full = g if p.grad is None else p.grad + g  # what .grad would become: its sum is reduced
            if traced:
                p.grad = None
                return ops.all_reduce(full, op="avg")
            if self._unused:  # their zeros are ready before any gradient (all ranks start the same buckets)
                unused, self._unused = self._unused, []
                for q in unused:
                    self._ready(q, np.zeros(q.shape, q.dtype.np))
            self._ready(p, full.numpy())
            p.grad = None
            if self._next < len(self._buckets):
                return full  # held in .grad until the reduced gradient replaces it
            return self._finish(p)

        return reduce_gradient

    def _ready(self, p: Tensor, g: np.ndarray) -> None:
        b, i = self._where[id(p)]
        bucket = self._buckets[b]
        if bucket.grads[i] is None:
            bucket.missing -= 1
        bucket.grads[i] = g
        while self._next < len(self._buckets) and self._buckets[self._next].missing == 0:
            ready = self._buckets[self._next]
            flat = np.concatenate([np.ravel(a) for a in ready.grads]) if ready.grads else np.zeros(0)
            ready.pending = PendingReduce(flat, "avg", f"DistributedDataParallel bucket {self._next}")
            self._next += 1
        for bucket in self._buckets[: self._next]:
            bucket.pending.progress()  # a bucket's second half starts as soon as its first is done

    def _finish(self, last: Tensor) -> Tensor:
        """Wait for every bucket, write the averaged gradients; the last parameter's is returned (its
        hook's result becomes its .grad)."""
        result = None
        for bucket in self._buckets:
            reduced = bucket.pending.result()
            offset = 0
            for p in bucket.params:
                n = int(np.prod(p.shape))
                g = from_numpy(reduced[offset : offset + n].reshape(p.shape))
                offset += n
                if p is last:
                    result = g
                else:
                    p.grad = g
            bucket.reset()
        self._next = 0
        return result


def _buckets(params: list[Tensor], cap: int) -> list[_Bucket]:
    """Consecutive parameters (of one dtype) up to `cap` bytes a bucket."""
    buckets: list[list[Tensor]] = []
    size = 0
    for p in params:
        nbytes = int(np.prod(p.shape)) * p.dtype.np.itemsize
        if not buckets or size + nbytes > cap or buckets[-1][-1].dtype is not p.dtype:
            buckets.append([])
            size = 0
        buckets[-1].append(p)
        size += nbytes
    return [_Bucket(b) for b in buckets]


def _outputs(out: Any) -> list[Tensor]:
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, list | tuple):
        return [t for o in out for t in _outputs(o)]
    return []
