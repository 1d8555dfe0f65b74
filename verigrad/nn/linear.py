"""Linear maps as layers, as PyTorch's: Linear, Bilinear, and Identity."""

from __future__ import annotations

import math
from typing import Any

from ..shapes import DimLike
from ..tensor import Tensor
from . import functional as F
from .init import _uniform_param, fan_in_bound
from .module import Module, factory_dtype


class Linear(Module):
    """y = x @ weight.T + bias, weight [out_features, in_features] (Kaiming-uniform, as PyTorch)."""

    def __init__(
        self,
        in_features: DimLike,
        out_features: DimLike,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype("Linear", device, dtype)
        self.in_features, self.out_features = in_features, out_features
        bound = fan_in_bound(in_features)
        self.weight = _uniform_param((out_features, in_features), bound, dtype)
        self.bias = _uniform_param((out_features,), bound, dtype) if bias else None

    def forward(self, x: Tensor) -> Tensor:
        y = x @ self.weight.T
        return y + self.bias if self.bias is not None else y

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
        )


class Bilinear(Module):
    """y = x1^T A x2 + b for each output: weight [out, in1, in2], bias [out], both uniform in
    +-1/sqrt(in1) (PyTorch's)."""

    def __init__(
        self,
        in1_features: int,
        in2_features: int,
        out_features: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ):
        super().__init__()
        dtype = factory_dtype("Bilinear", device, dtype)
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        bound = 1 / math.sqrt(in1_features)
        self.weight = _uniform_param((out_features, in1_features, in2_features), bound, dtype)
        self.bias = _uniform_param((out_features,), bound, dtype) if bias else None

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.bilinear(x1, x2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (
            f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
            f"out_features={self.out_features}, bias={self.bias is not None}"
        )


class Identity(Module):
    """x as it is; any arguments are taken and ignored, as PyTorch's (so a layer can be swapped for it)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__()

    def forward(self, x: Tensor) -> Tensor:
        return x
