"""Gradient clipping, as PyTorch's `torch.nn.utils`: `clip_grad_norm_` and `clip_grad_value_`.

Each sets `.grad` of the given parameters to a new, clipped tensor written with ops, so a clip between
`backward()` and `optimizer.step()` is part of a compiled training step too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from ..autograd import no_grad
from ..ops import concat, stack, zeros
from ..tensor import Tensor


def _with_grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p for p in params if p.grad is not None]


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
) -> Tensor:
    """Scale the gradients together so that their joint `norm_type`-norm (of all their elements, as one
    vector) is at most `max_norm`: each times min(1, max_norm / (norm + 1e-6)). Returns the norm before
    clipping, a 0-d tensor. `norm_type` may be `math.inf` (the largest magnitude)."""
    params = _with_grads(parameters)
    if not params:
        return zeros()
    norm_type = float(norm_type)
    if norm_type <= 0:
        raise ValueError(f"norm_type must be positive (or math.inf), got {norm_type}")
    dtype = params[0].grad.dtype
    if norm_type == math.inf:
        norms = [p.grad.abs().max().cast(dtype) for p in params]
        total = stack(norms).max()
    else:
        powers = [(p.grad * p.grad if norm_type == 2 else p.grad.abs() ** norm_type).sum() for p in params]
        total = stack([s.cast(dtype) for s in powers]).sum()
        total = total.sqrt() if norm_type == 2 else total ** (1.0 / norm_type)
    if error_if_nonfinite and isinstance(total.data, np.ndarray) and not np.isfinite(total.data):
        raise RuntimeError(
            f"the total {norm_type}-norm of the gradients is {total.item()}; clip_grad_norm_ with "
            "error_if_nonfinite=False would scale them by it anyway"
        )
    scale = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for p in params:
        p.grad = p.grad * scale.cast(p.grad.dtype)
    return total


def clip_grad_value_(parameters: Tensor | Iterable[Tensor], clip_value: float) -> None:
    """Clamp every gradient element to [-clip_value, clip_value]."""
    for p in _with_grads(parameters):
        p.grad = p.grad.clamp(-clip_value, clip_value)


def parameters_to_vector(parameters: Iterable[Tensor]) -> Tensor:
    """The parameters flattened and joined into one vector (PyTorch's; in the graph, so it differentiates)."""
    return concat([p.reshape(-1) for p in parameters])


def vector_to_parameters(vector: Tensor, parameters: Iterable[Tensor]) -> None:
    """Write consecutive slices of `vector` into the parameters, in place (outside the graph)."""
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if vector.ndim != 1 or vector.shape[0] != total:
        raise ValueError(
            f"vector_to_parameters needs a vector of {total} values, got shape {tuple(vector.shape)}"
        )
    at = 0
    with no_grad():
        for p in params:
            n = p.numel()
            p.assign(vector[at : at + n].reshape(p.shape))
            at += n
