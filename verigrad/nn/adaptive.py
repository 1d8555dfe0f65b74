"""AdaptiveLogSoftmaxWithLoss (Grave et al.'s adaptive softmax), as PyTorch's: frequent classes (the
shortlist) in the head, rarer ones in clusters the head scores as one class each, each cluster's
classes given by a smaller projection (in_features / div_value ** (i + 1) features)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .. import ops
from ..errors import ShapeError
from ..functions import index_select
from ..tensor import Tensor, describe
from . import functional as F
from .containers import ModuleList, Sequential
from .linear import Linear
from .module import Module, factory_dtype


class _ASMoutput(NamedTuple):
    output: Tensor
    loss: Tensor


class AdaptiveLogSoftmaxWithLoss(Module):
    """`asm(input [N, in_features], target [N])` gives (output: each target's log-probability, loss: the
    mean of their negatives); `log_prob(input)` every class's log-probability [N, n_classes] and
    `predict(input)` the likeliest class. `cutoffs` split the classes: [0, c0) the shortlist, [c0, c1)
    the first cluster, ..., [c_last, n_classes) the last. head: Linear(in_features, c0 + clusters),
    tail[i]: Linear(in_features, hsz, bias=False) then Linear(hsz, cluster size, bias=False)."""

    def __init__(
        self,
        in_features: int,
        n_classes: int,
        cutoffs: Sequence[int],
        div_value: float = 4.0,
        head_bias: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        dtype = factory_dtype("AdaptiveLogSoftmaxWithLoss", device, dtype)
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs)
            or any(int(c) != c for c in cutoffs)
        ):
            raise ValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an increasing order, "
                "where each value is between 1 and n_classes-1"
            )
        self.in_features, self.n_classes = in_features, n_classes
        self.cutoffs = [*cutoffs, n_classes]
        self.div_value, self.head_bias = div_value, head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(
                Sequential(
                    Linear(in_features, hidden, bias=False, dtype=dtype),
                    Linear(hidden, size, bias=False, dtype=dtype),
                )
            )

    def forward(self, input_: Tensor, target_: Tensor) -> _ASMoutput:
        if target_.ndim == 1:
            if input_.shape[0] != target_.shape[0]:
                raise RuntimeError("Input and target should have the same size in the batch dimension.")
            if input_.ndim != 2:
                raise RuntimeError(
                    f"1D target tensor expects 2D input tensors, but found inputs with size {input_.size()}"
                )
        elif target_.ndim == 0:
            if input_.ndim != 1:
                raise RuntimeError(
                    f"0D target tensor expects 1D input tensors, but found inputs with size {input_.size()}"
                )
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
        batched = target_.ndim > 0
        input = input_ if batched else input_.unsqueeze(0)
        target = np.asarray((target_ if batched else target_.unsqueeze(0)).numpy()).astype(np.int64)
        if target.size and (target.min() < 0 or target.max() >= self.n_classes):
            raise RuntimeError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                f"[{target.min()}, {target.max()}] were found. "
            )
        bounds = [0, *self.cutoffs]
        head_index = np.minimum(target, self.shortlist_size)  # a rarer class: its cluster's head column
        rows, pieces = [np.flatnonzero(target < self.shortlist_size)], []
        pieces.append(ops.zeros((rows[0].size,), dtype=input.dtype))
        for i in range(1, len(bounds) - 1):
            chosen = np.flatnonzero((target >= bounds[i]) & (target < bounds[i + 1]))
            if chosen.size == 0:
                continue
            head_index[chosen] = self.shortlist_size + i - 1
            picked = ops.tensor(chosen)
            logprob = F.log_softmax(self.tail[i - 1](index_select(input, 0, picked)), dim=1)
            relative = ops.tensor(target[chosen] - bounds[i]).unsqueeze(1)
            rows.append(chosen)
            pieces.append(logprob.gather(1, relative).squeeze(1))
        order = np.argsort(np.concatenate(rows), kind="stable")  # back to the batch's order
        output = index_select(ops.concat(pieces), 0, ops.tensor(order))
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, ops.tensor(head_index).unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:
        head_logprob = F.log_softmax(head_output, dim=1)
        parts = [head_logprob[:, : self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster = F.log_softmax(self.tail[i](input), dim=1)
            parts.append(cluster + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return ops.concat(parts, axis=1)

    def log_prob(self, input: Tensor) -> Tensor:
        """Every class's log-probability, [N, n_classes]."""
        if input.ndim != 2:
            raise ShapeError(
                f"AdaptiveLogSoftmaxWithLoss.log_prob takes [N, in_features], got {describe(input)}"
            )
        return self._full_log_prob(input, self.head(input))

    def predict(self, input: Tensor) -> Tensor:
        """The likeliest class of each row (the head's, where that is a shortlist class)."""
        if input.ndim != 2:
            raise ShapeError(
                f"AdaptiveLogSoftmaxWithLoss.predict takes [N, in_features], got {describe(input)}"
            )
        head_output = self.head(input)
        best = head_output.argmax(1)
        full = self._full_log_prob(input, head_output).argmax(1)
        return ops.where(best < self.shortlist_size, best, full)


def _check_batch(method: str, input: Tensor) -> None:
    if input.ndim != 2:
        raise ShapeError(f"AdaptiveLogSoftmaxWithLoss.{method} takes [N, in_features], got {describe(input)}")
