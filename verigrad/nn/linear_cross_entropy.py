"""LinearCrossEntropyLoss, as PyTorch's `torch.nn.LinearCrossEntropyLoss`: a Linear layer to the logits
and the cross entropy of them, in one criterion."""

from __future__ import annotations

import math
from typing import Any

from ..tensor import Tensor
from .functional.linear_cross_entropy import linear_cross_entropy
from .linear import Linear
from .module import Module, factory_dtype


class LinearCrossEntropyLoss(Module):
    """`loss(input [N, in_features], target)`: cross entropy of `self.linear(input)` reshaped to
    [N, num_classes, *out_features]; `self.linear` a Linear(in_features, num_classes * prod(out_features),
    bias=bias), its weight and bias stored flat as PyTorch's."""

    def __init__(
        self,
        in_features: int,
        num_classes: int,
        *,
        out_features: tuple[int, ...] = (),
        bias: bool = False,
        device: Any = None,
        dtype: Any = None,
        reduction: str = "mean",
        weight: Tensor | None = None,
        ignore_index: int | None = None,
        label_smoothing: float = 0.0,
        options: Any = None,
    ) -> None:
        if weight is not None and tuple(weight.shape) != (num_classes,):
            raise RuntimeError(f"expected weight shape to be {(num_classes,)}, got {tuple(weight.shape)}")
        if label_smoothing < 0 or label_smoothing > 1.0:
            raise RuntimeError(f"expected label_smoothing to be in range [0, 1], got {label_smoothing}")
        super().__init__()
        dtype = factory_dtype("LinearCrossEntropyLoss", device, dtype)
        self.register_buffer("weight", weight)
        self.reduction, self.num_classes, self.out_features = reduction, num_classes, tuple(out_features)
        self.ignore_index, self.label_smoothing, self.options = ignore_index, label_smoothing, options
        self.linear = Linear(in_features, math.prod(out_features, start=num_classes), bias=bias, dtype=dtype)
        self.in_features, self.bias = in_features, bias

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, num_classes={self.num_classes}, "
            f"out_features={self.out_features}, bias={self.bias}, reduction={self.reduction}, "
            f"ignore_index={self.ignore_index}, "
            f"label_smoothing={self.label_smoothing}, options={self.options}"
        )

    def forward(self, input: Tensor, target: Tensor) -> Tensor:
        shape = (self.num_classes, *self.out_features)
        return linear_cross_entropy(
            input,
            self.linear.weight.reshape(*shape, self.linear.in_features),
            target,
            linear_bias=None if self.linear.bias is None else self.linear.bias.reshape(shape),
            weight=self.weight,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            label_smoothing=self.label_smoothing,
            options=self.options,
        )
