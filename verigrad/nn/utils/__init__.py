"""As PyTorch's `torch.nn.utils`: gradient clipping (`clip_grad_norm_`, `clip_grad_value_`, `get_total_norm`,
`clip_grads_with_norm_`), parameters as
one vector, and weight normalisation (`weight_norm`, `remove_weight_norm`).

Each sets `.grad` of the given parameters to a new, clipped tensor written with ops, so a clip between
`backward()` and `optimizer.step()` is part of a compiled training step too.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from ...autograd import no_grad
from ...ops import concat, stack, zeros
from ...tensor import Tensor
from . import fusion, parametrizations, parametrize, prune, rnn, stateless
from .fusion import fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval, fuse_linear_bn_weights
from .spectral_norm import remove_spectral_norm, spectral_norm


def _with_grads(parameters: Tensor | Iterable[Tensor]) -> list[Tensor]:
    params = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    return [p for p in params if p.grad is not None]


def get_total_norm(
    tensors: Tensor | Iterable[Tensor],
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """The `norm_type`-norm of all the tensors' elements as one vector (the norm of their norms), a 0-d
    tensor; `norm_type` may be `math.inf` (the largest magnitude). PyTorch's."""
    tensors = [tensors] if isinstance(tensors, Tensor) else [t for t in tensors if t is not None]
    if not tensors:
        return zeros()
    norm_type = float(norm_type)
    if norm_type <= 0:
        raise ValueError(f"norm_type must be positive (or math.inf), got {norm_type}")
    dtype = tensors[0].dtype
    if norm_type == math.inf:
        total = stack([t.abs().max().cast(dtype) for t in tensors]).max()
    else:
        powers = [(t * t if norm_type == 2 else t.abs() ** norm_type).sum() for t in tensors]
        total = stack([s.cast(dtype) for s in powers]).sum()
        total = total.sqrt() if norm_type == 2 else total ** (1.0 / norm_type)
    if error_if_nonfinite and isinstance(total.payload, np.ndarray) and not np.isfinite(total.payload):
        raise RuntimeError(
            f"the total {norm_type}-norm of the gradients is {total.item()}; clip_grad_norm_ with "
            "error_if_nonfinite=False would scale them by it anyway"
        )
    return total


def clip_grads_with_norm_(
    parameters: Tensor | Iterable[Tensor], max_norm: float, total_norm: Tensor, foreach: bool | None = None
) -> None:
    """Scale the gradients by min(1, max_norm / (total_norm + 1e-6)) (PyTorch's: the norm computed by
    get_total_norm, perhaps of more gradients than these)."""
    scale = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    for p in _with_grads(parameters):
        p.grad = p.grad * scale.cast(p.grad.dtype)


def clip_grad_norm_(
    parameters: Tensor | Iterable[Tensor],
    max_norm: float,
    norm_type: float = 2.0,
    error_if_nonfinite: bool = False,
    foreach: bool | None = None,
) -> Tensor:
    """Scale the gradients together so that their joint `norm_type`-norm (of all their elements, as one
    vector) is at most `max_norm`: each times min(1, max_norm / (norm + 1e-6)). Returns the norm before
    clipping, a 0-d tensor. `norm_type` may be `math.inf` (the largest magnitude)."""
    params = _with_grads(parameters)
    if not params:
        return zeros()
    total = get_total_norm([p.grad for p in params], norm_type, error_if_nonfinite)
    clip_grads_with_norm_(params, max_norm, total)
    return total


def clip_grad_value_(
    parameters: Tensor | Iterable[Tensor], clip_value: float, foreach: bool | None = None
) -> None:
    """Clamp every gradient element to [-clip_value, clip_value]."""
    for p in _with_grads(parameters):
        p.grad = p.grad.clamp(-clip_value, clip_value)


def skip_init(module_cls: type, *args: Any, **kwargs: Any) -> Any:
    """The module made without its initialization, as PyTorch's (whose parameters are then whatever
    memory held): verigrad initializes them anyway, which a program must overwrite either way."""
    if "device" not in inspect.signature(module_cls).parameters:
        raise RuntimeError("Module must support a 'device' arg to skip initialization")
    return module_cls(*args, **kwargs)


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


def _norm_except(v: Tensor, dim: int | None) -> Tensor:
    """The 2-norm of v over every axis but `dim` (kept, the others of size 1); over all of it for None."""
    if dim is None or dim == -1:
        return (v * v).sum().sqrt()
    keep = dim % v.ndim
    axes = tuple(a for a in range(v.ndim) if a != keep)
    return (v * v).sum(axes, keepdim=True).sqrt() if axes else (v * v).sqrt()


def weight_norm(module: Any, name: str = "weight", dim: int | None = 0) -> Any:
    """PyTorch's weight normalisation: the parameter `name` becomes name_g (its norm over every axis but
    `dim`) and name_v (its direction), and is computed as g * v / ||v|| before each forward (a forward
    pre-hook). Returns the module."""
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"weight_norm: {type(module).__name__} has no parameter {name!r}")
    hooks = module.__dict__.setdefault("_weight_norm", {})
    if name in hooks:
        raise RuntimeError(f"weight_norm is already applied to {name!r}")
    setattr(module, f"{name}_g", _norm_except(weight.detach(), dim).requires_grad_(True))
    setattr(module, f"{name}_v", weight.detach().clone().requires_grad_(True))
    module._parameters.pop(name)

    def compute(m: Any, args: tuple) -> None:
        g, v = getattr(m, f"{name}_g"), getattr(m, f"{name}_v")
        object.__setattr__(m, name, g * v / _norm_except(v, dim))  # computed: not a parameter

    hooks[name] = (module.register_forward_pre_hook(compute), dim)
    compute(module, ())
    return module


def remove_weight_norm(module: Any, name: str = "weight") -> Any:
    """Undo weight_norm: `name` is a parameter again, with the value g * v / ||v|| has now."""
    found = module.__dict__.get("_weight_norm", {}).pop(name, None)
    if found is None:
        raise ValueError(f"weight_norm of {name!r} not found in {type(module).__name__}")
    handle, dim = found
    handle.remove()
    with no_grad():
        g, v = getattr(module, f"{name}_g"), getattr(module, f"{name}_v")
        value = (g * v / _norm_except(v, dim)).detach()
    for suffix in ("_g", "_v"):
        module._parameters.pop(name + suffix, None)
        object.__delattr__(module, name + suffix)
    setattr(module, name, value.requires_grad_(True))
    return module
