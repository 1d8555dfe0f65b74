"""LoRA adapters with PEFT's semantics: y = base(x) + (alpha / r) * B (A x), A [r, in] Kaiming-uniform as
PEFT initialises it (bound 1/sqrt(in)), B [out, r] zeros (the adapted layer starts as the base), the base
frozen and kept as it is (a Linear, or a quantized QLinear that stays quantized)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..dtypes import f32
from ..ops import concat, zeros
from ..ops.quant import dequantize, dequantize_op
from ..shapes import Spec
from ..tensor import Tensor
from ..versions import version
from .containers import ModuleDict
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
    a step's hundreds of rows: the backward already multiplies so); fewer rows (decoding a sample) use
    qmatmul. The weight's blocks are the layer's state; W is made once per version of them and kept (the
    base is frozen): a step's backward kept every layer's W until it ran anyway, so the step's peak is the
    same, and the step neither de-quantizes nor pages in fresh memory for them (SmolLM2's LoRA step
    1.16x)."""

    def forward(self, x: Tensor) -> Tensor:
        rows = 1
        for size in x.shape[:-1]:
            rows = rows * size if isinstance(size, int) else MANY_ROWS
        if rows < MANY_ROWS:
            return super().forward(x)
        return x @ self.dense().T

    def dense(self) -> Tensor:
        """The de-quantized weight [out, in] (the same values as `dequantize_op`'s), made on first use
        and again after the blocks are written or replaced; a weight without data (`verigrad.abstract`)
        gives the op."""
        blocks = self.weight.payload
        if not isinstance(blocks, np.ndarray):
            return dequantize_op(self.weight, qtype=self.qtype)
        key = (id(blocks), version(blocks))
        made = self.__dict__.get("_dense")
        if made is None or made[0] != key:
            shape = (self.out_features, self.in_features)
            # a tensor with data in any mode (from_numpy in a trace makes a constant of the trace)
            dense = Tensor(Spec(shape, f32), dequantize(blocks, self.qtype, shape))
            made = (key, dense, blocks)  # the blocks held: their id stays theirs
            object.__setattr__(self, "_dense", made)
        return made[1]

    @classmethod
    def of(cls, layer: QLinear) -> TrainingQLinear:
        """The same blocks (no copy) as a TrainingQLinear."""
        shape = (layer.out_features, layer.in_features)
        return cls(layer.weight.numpy(), layer.qtype, shape, "f32")


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
