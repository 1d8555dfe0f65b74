"""PyTorch's `torch.distributed` collectives, which write their result into the tensors given, made
of the ops in `ops.py` (the written tensor gets no autograd history, as in PyTorch; call the ops
themselves for differentiable collectives)."""

from __future__ import annotations

from typing import Any

from ..autograd import no_grad
from ..errors import ShapeError
from ..tensor import Tensor
from . import ops
from .reduction import ReduceOp, op_name
from .world import get_world_size, world


class Work:
    """What a collective called with `async_op=True` returns: verigrad's have completed by then."""

    def wait(self, timeout: Any = None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _done(async_op: bool) -> Work | None:
    return Work() if async_op else None


def _tensor(value: Any, where: str, name: str) -> Tensor:
    world()  # as PyTorch's: a collective needs the process group
    if not isinstance(value, Tensor):
        raise TypeError(f"{where}: {name} must be a Tensor, got {type(value).__name__}")
    return value


def _write(target: Tensor, value: Tensor) -> None:
    with no_grad():
        target.copy_(value)


def all_reduce(tensor: Tensor, op: ReduceOp | str = ReduceOp.SUM, group: Any = None, async_op: bool = False):
    """Every rank's `tensor` reduced by `op` in rank order, written into `tensor` on every rank."""
    _tensor(tensor, "all_reduce", "tensor")
    _write(tensor, ops.all_reduce(tensor.detach(), op=op_name(op, "all_reduce")))
    return _done(async_op)


def broadcast(tensor: Tensor, src: int = 0, group: Any = None, async_op: bool = False):
    """Rank `src`'s `tensor` written into `tensor` on every rank."""
    _tensor(tensor, "broadcast", "tensor")
    _write(tensor, ops.broadcast(tensor.detach(), src=src))
    return _done(async_op)


def all_gather_into_tensor(
    output_tensor: Tensor, input_tensor: Tensor, group: Any = None, async_op: bool = False
):
    """Every rank's `input_tensor` joined along the first dimension into `output_tensor`."""
    _tensor(output_tensor, "all_gather_into_tensor", "output_tensor")
    _tensor(input_tensor, "all_gather_into_tensor", "input_tensor")
    x = input_tensor.detach()
    joined = ops.all_gather(x.reshape(-1) if x.ndim == 0 else x)
    if joined.numel() != output_tensor.numel():
        raise ShapeError(
            f"all_gather_into_tensor: output_tensor has {output_tensor.numel()} elements; the "
            f"{get_world_size()} ranks' inputs of shape {tuple(input_tensor.shape)} have {joined.numel()}"
        )
    _write(output_tensor, joined.reshape(tuple(output_tensor.shape)))
    return _done(async_op)


def all_gather(tensor_list: list[Tensor], tensor: Tensor, group: Any = None, async_op: bool = False):
    """Rank r's `tensor` written into `tensor_list[r]` on every rank."""
    _tensor(tensor, "all_gather", "tensor")
    n = get_world_size()
    if not isinstance(tensor_list, list) or len(tensor_list) != n:
        raise ValueError(f"all_gather: tensor_list must be a list of {n} tensors (one per rank)")
    joined = ops.all_gather(tensor.detach().reshape(1, *tensor.shape))
    for r, target in enumerate(tensor_list):
        _write(_tensor(target, "all_gather", f"tensor_list[{r}]"), joined[r])
    return _done(async_op)


def reduce_scatter_tensor(
    output: Tensor,
    input: Tensor,
    op: ReduceOp | str = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
):
    """This rank's chunk (of the first dimension) of every rank's `input` reduced in rank order."""
    _tensor(output, "reduce_scatter_tensor", "output")
    _tensor(input, "reduce_scatter_tensor", "input")
    _write(output, ops.reduce_scatter(input.detach(), op=op_name(op, "reduce_scatter_tensor")))
    return _done(async_op)


def reduce_scatter(
    output: Tensor,
    input_list: list[Tensor],
    op: ReduceOp | str = ReduceOp.SUM,
    group: Any = None,
    async_op: bool = False,
):
    """`input_list[r]` of every rank reduced in rank order, written into `output` on rank r."""
    from ..ops.shaping import stack

    n = get_world_size()
    if not isinstance(input_list, list) or len(input_list) != n:
        raise ValueError(f"reduce_scatter: input_list must be a list of {n} tensors (one per rank)")
    stacked = stack([_tensor(t, "reduce_scatter", "input_list[i]").detach() for t in input_list])
    _write(output, ops.reduce_scatter(stacked, op=op_name(op, "reduce_scatter")).reshape(tuple(output.shape)))
    return _done(async_op)
