"""PyTorch's `ZeroRedundancyOptimizer` (ZeRO stage 1): each rank keeps the optimizer state of its shard
of the parameters only and updates that shard; then each rank's updated parameters are broadcast from
it. An element-wise optimizer (SGD, Adam, ...) updates each parameter from its own gradient and state,
so the parameters get the bits of the unsharded optimizer, with about 1/N of its state on each rank."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..autograd import no_grad
from ..ops import from_numpy
from ..optim import Optimizer
from ..tensor import Tensor
from .comm import broadcast_array
from .world import world


def partition(sizes: list[int], ranks: int) -> list[int]:
    """PyTorch's partition: the parameters by size, largest first (ties in order), each to the rank with
    the fewest elements so far (ties to the lowest rank); the owner of each parameter."""
    owners, loads = [0] * len(sizes), [0] * ranks
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        rank = loads.index(min(loads))
        owners[i] = rank
        loads[rank] += sizes[i]
    return owners


def state_bytes(optimizer: Optimizer) -> int:
    """The bytes of an optimizer's per-parameter state tensors (not its settings)."""
    named = optimizer.state_tensors()
    return sum(t.numpy().nbytes for name, t in named if name.split(".")[1].isdigit())


class ZeroRedundancyOptimizer:
    """ZeroRedundancyOptimizer(params, optimizer_class, **defaults): `optim` is this rank's optimizer of
    its shard (None where the rank owns no parameter). Parameter groups are not supported: give a list of
    parameters."""

    def __init__(
        self,
        params: Iterable[Tensor],
        optimizer_class: type[Optimizer],
        process_group: Any = None,
        parameters_as_bucket_view: bool = False,
        overlap_with_ddp: bool = False,
        **defaults: Any,
    ) -> None:
        if overlap_with_ddp:
            raise ValueError("ZeroRedundancyOptimizer: overlap_with_ddp=True is not supported by verigrad")
        if not (isinstance(optimizer_class, type) and issubclass(optimizer_class, Optimizer)):
            raise TypeError(
                "ZeroRedundancyOptimizer: optimizer_class must be an Optimizer class, "
                f"got {optimizer_class!r}"
            )
        params = list(params)
        if any(isinstance(p, dict) for p in params):
            raise TypeError(
                "ZeroRedundancyOptimizer: give a list of parameters; parameter groups are not supported"
            )
        if not params:
            raise ValueError("ZeroRedundancyOptimizer: got an empty parameter list")
        w = world()
        self.rank, self.world_size = w.rank, w.size
        self.params = params
        self.owners = partition([int(np.prod(p.shape)) for p in params], w.size)
        local = [p for p, owner in zip(params, self.owners) if owner == w.rank]
        self.optim: Optimizer | None = optimizer_class(local, **defaults) if local else None
        self.defaults = dict(self.optim.defaults) if self.optim is not None else dict(defaults)

    @property
    def lr(self) -> float:
        return self.optim.lr if self.optim is not None else float(self.defaults["lr"])

    @lr.setter
    def lr(self, value: float) -> None:
        self.defaults["lr"] = value
        if self.optim is not None:
            self.optim.lr = value

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                with no_grad():
                    p.grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """This rank's shard updated, then every shard broadcast from its rank."""
        if self.optim is not None:
            loss = self.optim.step(closure)
        else:
            loss = closure() if closure is not None else None
        self._sync_parameters()
        return loss

    def _sync_parameters(self) -> None:
        for rank in range(self.world_size):
            mine = [p for p, owner in zip(self.params, self.owners) if owner == rank]
            if not mine:
                continue
            flat = np.concatenate([p.detach().numpy().ravel() for p in mine])
            flat = broadcast_array(flat, rank, f"ZeroRedundancyOptimizer parameters of rank {rank}")
            if rank == self.rank:
                continue
            offset = 0
            with no_grad():
                for p in mine:
                    n = int(np.prod(p.shape))
                    p.copy_(from_numpy(flat[offset : offset + n].reshape(p.shape)))
                    offset += n

    def state_bytes(self) -> int:
        """The bytes of this rank's optimizer state (the parameters' state tensors)."""
        return 0 if self.optim is None else state_bytes(self.optim)

    def state_dict(self) -> dict[str, Any]:
        raise NotImplementedError(
            "ZeroRedundancyOptimizer.state_dict: the state is sharded across ranks; save each rank's "
            "optim.state_dict() (consolidate_state_dict is not implemented in verigrad)"
        )
