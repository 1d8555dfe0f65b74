"""Muon (Keller Jordan), PyTorch's `torch.optim.Muon`: SGD momentum (Nesterov's by default) whose update
is orthogonalised by a quintic Newton-Schulz iteration, for 2-D parameters only.

PyTorch runs the iteration in bf16; verigrad does the same arithmetic (each product and sum in f32, the
result rounded to bf16, as PyTorch's CPU kernels), so the updates are PyTorch's to the bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from ..dtypes import bf16, f32
from ..tensor import Tensor
from .lerp import lerp
from .optimizer import Hyperparameters, Optimizer

EPS = 1e-7
DEFAULT_A, DEFAULT_B, DEFAULT_C = 3.4445, -4.7750, 2.0315
DEFAULT_NS_STEPS = 5
ADJUST_LR_FNS = (None, "original", "match_rms_adamw")


def _bf16(x: Tensor) -> Tensor:
    """x rounded to bf16 (to nearest, ties to even) and held in f32, where verigrad computes."""
    return x.cast(bf16).cast(f32)


def _bf16_number(value: float) -> float:
    """A Python float rounded to f32, then to bf16 (nearest, ties to even), as PyTorch's clamp bound."""
    bits = int(np.array(value, dtype=np.float32).view(np.uint32))
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return float(np.array(bits, dtype=np.uint32).view(np.float32))


def zeropower_via_newtonschulz(
    grad: Tensor, ns_coefficients: tuple[float, float, float], ns_steps: int, eps: float
) -> Tensor:
    """The Newton-Schulz orthogonalisation of a matrix (about U V^T of its SVD U S V^T) as PyTorch's
    `_zeropower_via_newtonschulz`: X = G / max(||G||, eps) in bf16, then `ns_steps` times
    A = X X^T; X = a X + (b A + c A A) X. Returns the bf16 values in f32."""
    if ns_steps >= 100:
        raise ValueError("Number of steps must be less than 100 for computational efficiency")
    if grad.ndim != 2:
        raise ValueError("Input tensor gradient must be a 2D matrix")
    if len(ns_coefficients) != 3:
        raise ValueError("Coefficients must be a tuple of exactly 3 values")
    a, b, c = ns_coefficients
    x = _bf16(grad.cast(f32))
    tall = grad.shape[0] > grad.shape[1]
    if tall:
        x = x.T
    floor = _bf16_number(eps)  # PyTorch clamps the bf16 norm by a bf16 eps
    x = _bf16(x / _bf16((x * x).sum().sqrt()).clamp(min=floor))
    for _ in range(ns_steps):
        gram = _bf16(x @ x.T)
        # PyTorch's bf16 addmm(C, A, B, beta, alpha): alpha (A B) rounded to f32, then fma(beta, C, it)
        update = _bf16(((gram @ gram) * c).add(gram, alpha=b))
        x = _bf16((update @ x).add(x, alpha=a))
    return x.T if tall else x


def adjust_lr(lr: Any, adjust_lr_fn: str | None, shape: tuple[int, ...]) -> Any:
    """The learning rate scaled for a rows x cols parameter: sqrt(max(1, rows / cols)) ("original", the
    default) or 0.2 sqrt(max(rows, cols)) ("match_rms_adamw", Moonshot's: AdamW's update RMS)."""
    rows, cols = shape[:2]
    if adjust_lr_fn is None or adjust_lr_fn == "original":
        return lr * math.sqrt(max(1, rows / cols))
    return lr * (0.2 * math.sqrt(max(rows, cols)))


class Muon(Optimizer):
    """m = lerp(m, g, 1 - momentum); u = NS(lerp(g, m, momentum)) (nesterov, the default) or NS(m);
    p *= 1 - lr wd; p -= adjust_lr(lr) u. `momentum_buffer` is the state, as PyTorch's."""

    hidden_state = ("step",)  # PyTorch's Muon keeps no step count

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 1e-3,
        weight_decay: float = 0.1,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_coefficients: tuple[float, float, float] = (DEFAULT_A, DEFAULT_B, DEFAULT_C),
        eps: float = EPS,
        ns_steps: int = DEFAULT_NS_STEPS,
        adjust_lr_fn: str | None = None,
    ) -> None:
        if isinstance(lr, Tensor):
            raise TypeError("Muon: a Tensor lr is not supported by verigrad; pass a float")
        if not lr >= 0.0:
            raise ValueError(f"Learning rate should be >= 0 but is: {lr}")
        if not momentum >= 0.0:
            raise ValueError(f"momentum should be >= 0 but is: {momentum}")
        if not weight_decay >= 0.0:
            raise ValueError(f"weight decay should be >= 0 but is: {weight_decay}")
        if adjust_lr_fn not in ADJUST_LR_FNS:
            raise ValueError(f"Adjust learning rate function {adjust_lr_fn} is not supported")
        settings = {"lr": lr, "weight_decay": weight_decay, "momentum": momentum, "nesterov": nesterov,
                    "ns_coefficients": tuple(ns_coefficients), "eps": eps, "ns_steps": ns_steps,
                    "adjust_lr_fn": adjust_lr_fn}  # fmt: skip
        super().__init__(params, settings)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        params = param_group.get("params") if isinstance(param_group, dict) else None
        if params is not None and not isinstance(params, set):  # checked before the group is added
            params = [params] if isinstance(params, Tensor) else list(params)
            param_group = {**param_group, "params": params}
            for p in params:
                p = p[1] if isinstance(p, tuple) else p
                if isinstance(p, Tensor) and p.ndim != 2:
                    raise ValueError(
                        f"Muon only supports 2D parameters whereas we found a parameter with size: {p.size()}"
                    )
        super().add_param_group(param_group)

    def state_names(self, group: Mapping[str, Any]) -> tuple[str, ...]:
        return ("momentum_buffer",)

    def update(self, p: Tensor, g: Tensor, group: Hyperparameters, state: dict[str, Tensor]) -> None:
        momentum = group["momentum"]
        buf = state["momentum_buffer"]
        buf.assign(lerp(buf, g, 1 - momentum))
        u = lerp(g, buf, momentum) if group["nesterov"] else buf
        u = zeropower_via_newtonschulz(u, group["ns_coefficients"], group["ns_steps"], group["eps"])
        lr = adjust_lr(group.lr, group["adjust_lr_fn"], tuple(p.shape))
        p.assign(p * self.scalar(1 - group.lr * group["weight_decay"], p))
        p.assign(p + u.cast(p.dtype) * self.scalar(-lr, p))
