"""Adafactor (Shazeer and Stern), PyTorch's `torch.optim.Adafactor`: the second moment of a matrix kept
as its row and column means (factored over the last two axes), the update's RMS clipped to `d`, the
step size relative to the parameter's RMS. Written with ops, as the other optimizers."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..dtypes import f64
from ..ops import maximum, minimum, tensor, zeros
from ..tensor import Tensor
from ..typeinfo import finfo
from .optimizer import Hyperparameters, Optimizer


def _rms(x: Tensor) -> Tensor:
    """||x||_2 / sqrt(numel), a 0-d f64 tensor (PyTorch takes `x.norm(2).item()` / numel ** 0.5)."""
    return (x * x).sum().sqrt().cast(f64) / math.sqrt(max(x.numel(), 1))


class Adafactor(Optimizer):
    """t-th step: w = t^beta2_decay; a matrix gradient's row and column means of g^2 are lerped into
    `row_var`, `col_var` by w (a vector's g^2 into `variance`); v = row_var @ col_var / mean(row_var);
    u = g / sqrt(max(v, eps1^2)); p *= 1 - lr wd; p -= max(eps2, rms(p)) min(lr, t^-1/2) u / max(1,
    rms(u) / d). eps = (eps1, eps2), eps1 None: the dtype's machine epsilon."""

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-2,
        beta2_decay: float = -0.8,
        eps: tuple[float | None, float] = (None, 1e-3),
        d: float = 1.0,
        weight_decay: float = 0.0,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
    ) -> None:
        if isinstance(lr, Tensor):
            raise TypeError("Adafactor: a Tensor lr is not supported by verigrad; pass a float")
        if not lr >= 0.0:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not beta2_decay <= 0.0:
            raise ValueError(f"beta2_decay should be <= 0 but is: {beta2_decay}")
        if eps[0] is not None and not eps[0] >= 0.0:
            raise ValueError(f"epsilon1 should be >= 0 but is: {eps[0]}")
        if not eps[1] >= 0.0:
            raise ValueError(f"epsilon2 should be >= 0 but is: {eps[1]}")
        if not d >= 1.0:
            raise ValueError(f"Clipping threshold d should be >= 1 but is: {d}")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight_decay should be >= 0 but is: {weight_decay}")
        settings = {"lr": lr, "beta2_decay": beta2_decay, "eps": tuple(eps), "d": d,
                    "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize}  # fmt: skip
        super().__init__(params, settings)

    def _fresh_state(self, p: Tensor, group: Mapping[str, Any]) -> dict[str, Tensor]:
        # PyTorch's names and shapes: a matrix (or more axes) keeps its row and column factors only
        state: dict[str, Tensor] = {"step": tensor(np.array(0.0, dtype=np.float32))}
        if p.ndim > 1:
            shape = tuple(p.shape)
            state["row_var"] = zeros((*shape[:-1], 1), dtype=p.dtype)
            state["col_var"] = zeros((*shape[:-2], 1, shape[-1]), dtype=p.dtype)
        else:
            state["variance"] = zeros(tuple(p.shape), dtype=p.dtype)
        return state

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        eps1, eps2 = group["eps"]
        if eps1 is None:
            eps1 = finfo(p.dtype).eps
        t = self.count(state)
        w = (t ** group["beta2_decay"]).cast(p.dtype)
        rho = minimum(group.lr, 1 / t.sqrt())
        alpha = maximum(_rms(p), tensor(np.array(eps2, dtype=np.float64))) * rho
        if group["weight_decay"]:
            p.assign(p * self.scalar(1 - group.lr * group["weight_decay"], p))
        if g.ndim > 1:
            row, col = state["row_var"], state["col_var"]
            row.assign(row + ((g * g).mean(-1, keepdim=True) - row) * w)
            col.assign(col + ((g * g).mean(-2, keepdim=True) - col) * w)
            estimate = (row @ col) / row.mean(-2, keepdim=True).clamp(min=eps1)
        else:
            variance = state["variance"]
            estimate = variance.assign(variance + (g * g - variance) * w)
        u = estimate.clamp(min=eps1 * eps1).rsqrt() * g
        denom = maximum(_rms(u) / group["d"], tensor(np.array(1.0)))
        p.assign(p + u * self.scalar(-alpha / denom, p))
