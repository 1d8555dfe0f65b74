"""LoRA adapters with PEFT's semantics: y = base(x) + (alpha / r) * B (A x), A [r, in] Kaiming-uniform as
PEFT initialises it (bound 1/sqrt(in)), B [out, r] zeros (the adapted layer starts as the base), the base
frozen and kept as it is (a Linear, or a quantized QLinear that stays quantized)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..ops import concat, zeros
from ..tensor import Tensor
from .containers import ModuleDict
from .dequantized_product import dequantized_product
from .init import _uniform_param, fan_in_bound
from .module import Module
from .quant import QLinear

MANY_ROWS = 16  # from this many rows of x, TrainingQLinear multiplies by the de-quantized weight


def check_rank(r: Any, alpha: Any) -> None:
    """A rank is a positive integer and alpha a positive finite number (PEFT's `r`, `lora_alpha`)."""
    if isinstance(r, bool) or not isinstance(r, int) or r < 1:
        raise ValueError(f"LoRA: the rank r must be a positive integer, got {r!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0 < alpha < float("inf"):
        raise ValueError(f"LoRA: alpha must be a positive finite number, got {alpha!r}")


class TrainingQLinear(QLinear):
    """A QLinear (f32 activations) for a training step: from MANY_ROWS rows of x its product is
    x @ W.T with W the de-quantized weight, through the f32 matmul kernel (2-3x faster than qmatmul's on
    a step's hundreds of rows), and its VJP g @ W de-quantizes W again (`dequantized_product`; on the cpu
    backend as the packed GEMM packs it): the base stays quantized, with no f32 copy kept between the
    forward and the backward, nor between steps. Fewer rows (decoding a sample) use qmatmul."""

    def forward(self, x: Tensor) -> Tensor:
        return self.product(x) if many_rows(x) else super().forward(x)

    def product(self, x: Tensor) -> Tensor:
        """x @ W.T through the f32 matmul kernel, W de-quantized for the forward and again for the
        backward."""
        return dequantized_product(x, self.weight, self.qtype)

    @classmethod
    def of(cls, layer: QLinear) -> TrainingQLinear:
        """The same blocks (no copy) as a TrainingQLinear."""
        shape = (layer.out_features, layer.in_features)
        return cls(layer.weight.numpy(), layer.qtype, shape, "f32")


def many_rows(x: Tensor) -> bool:
    """Whether x [..., in] has MANY_ROWS rows or more (a symbolic size counts as many)."""
    rows = 1
    for size in x.shape[:-1]:
        rows = rows * size if isinstance(size, int) else MANY_ROWS
    return rows >= MANY_ROWS


class LoRA(Module):
    """One adapter pair: x -> (alpha / r) * x @ lora_A.T @ lora_B.T."""

    def __init__(self, in_features: int, out_features: int, r: int, alpha: float):
        super().__init__()
        check_rank(r, alpha)
        self.in_features, self.out_features, self.r, self.alpha = in_features, out_features, r, alpha
        self.scaling = alpha / r
        self.lora_A = _uniform_param((r, in_features), fan_in_bound(in_features))
        self.lora_B = zeros(out_features, r, requires_grad=True)

    def forward(self, x: Tensor) -> Tensor:
        return (x @ self.lora_A.T @ self.lora_B.T) * self.scaling

    def delta(self) -> np.ndarray:
        """The weight it adds, (alpha / r) * B @ A [out, in], in f64 (rounded by the caller)."""
        b, a = self.lora_B.detach().numpy(), self.lora_A.detach().numpy()
        return b.astype(np.float64) @ a.astype(np.float64) * self.scaling

    def extra_repr(self) -> str:
        sizes = f"in_features={self.in_features}, out_features={self.out_features}"
        return f"{sizes}, r={self.r}, alpha={self.alpha}"


class LoRALinear(Module):
    """A frozen linear layer `base` whose output rows are `parts` ((name, rows) in order: one part for a
    plain projection, q/k/v or gate/up for a fused one), with an adapter (`adapters[name]`) on each part
    named in `targets`."""

    def __init__(
        self, base: Module, parts: Sequence[tuple[str, int]], targets: Iterable[str], r: int, alpha: float
    ):
        super().__init__()
        check_rank(r, alpha)
        out_features, in_features = int(base.out_features), int(base.in_features)
        if sum(rows for _, rows in parts) != out_features:
            raise ValueError(f"LoRALinear: the parts {list(parts)} do not add up to {out_features} rows")
        targets = set(targets)
        if not targets & {name for name, _ in parts}:
            raise ValueError(f"LoRALinear: none of the parts {[n for n, _ in parts]} is a target")
        self.base = base.requires_grad_(False)
        self.parts = tuple((name, int(rows)) for name, rows in parts)
        self.in_features, self.out_features = in_features, out_features
        self.adapters = ModuleDict(
            {name: LoRA(in_features, rows, r, alpha) for name, rows in self.parts if name in targets}
        )

    def forward(self, x: Tensor) -> Tensor:
        y = self.base(x)
        if len(self.parts) == 1:
            return y + self.adapters[self.parts[0][0]](x)
        pieces = [
            self.adapters[name](x) if name in self.adapters else zeros(*x.shape[:-1], rows, dtype=x.dtype)
            for name, rows in self.parts
        ]
        return y + concat(*pieces, axis=-1)

    def delta(self) -> np.ndarray:
        """The weight the adapters add to the base's [out, in] (zero rows for the parts without one), f64."""
        return np.concatenate(
            [
                self.adapters[name].delta() if name in self.adapters else np.zeros((rows, self.in_features))
                for name, rows in self.parts
            ]
        )

    def extra_repr(self) -> str:
        return f"parts={[n for n, _ in self.parts]}, adapted={list(self.adapters.keys())}"
