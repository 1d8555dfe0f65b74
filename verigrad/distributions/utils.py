"""Helpers shared by the distributions, as torch.distributions.utils: parameters broadcast together,
constraint checks with PyTorch's messages, probabilities and logits converted, draws shaped."""

from __future__ import annotations

from collections.abc import Callable
from numbers import Number
from typing import Any

from ..autograd import no_grad
from ..functions.rearrange import broadcast_tensors
from ..ops import where
from ..ops.creation import as_tensor
from ..settings import get_default_dtype
from ..tensor import Tensor
from ..typeinfo import finfo


def broadcast_all(owner: str, **params: Any) -> tuple[list[Tensor], bool]:
    """The parameters as tensors broadcast together (numbers take a tensor parameter's dtype, else the
    default dtype), and whether all of them were numbers (then the batch shape is ())."""
    like = next((v for v in params.values() if isinstance(v, Tensor)), None)
    dtype = like.dtype if like is not None else get_default_dtype()
    tensors = []
    for name, value in params.items():
        if isinstance(value, Tensor):
            tensors.append(value)
        elif isinstance(value, Number) and not isinstance(value, bool):
            tensors.append(as_tensor(float(value), dtype=dtype))
        else:
            raise TypeError(f"{owner}: {name} must be a Tensor or a number, got {type(value).__name__}")
    return list(broadcast_tensors(*tensors)), like is None


def as_value(owner: str, value: Any, like: Tensor) -> Tensor:
    """A value given to log_prob/cdf/icdf as a tensor of the parameters' dtype when it is a number."""
    if isinstance(value, Tensor):
        return value
    if isinstance(value, Number):
        return as_tensor(float(value), dtype=like.dtype)
    raise TypeError(f"{owner}: value must be a Tensor or a number, got {type(value).__name__}")


def check_param(
    owner: str, name: str, tensor: Tensor, ok: Callable[[Tensor], Tensor], constraint: str
) -> None:
    """PyTorch's ValueError when a parameter breaks its constraint."""
    with no_grad():
        good = bool(ok(tensor).all())
    if not good:
        raise ValueError(
            f"{owner}: expected parameter {name} (Tensor of shape {tuple(tensor.shape)}) to satisfy the "
            f"constraint {constraint}, but found invalid values:\n{tensor}"
        )


def check_value(owner: str, value: Tensor, ok: Callable[[Tensor], Tensor], support: str) -> None:
    """PyTorch's ValueError when a value given to log_prob/cdf lies outside the support."""
    with no_grad():
        good = bool(ok(value).all())
    if not good:
        raise ValueError(
            f"{owner}: expected value argument (Tensor of shape {tuple(value.shape)}) to be within the "
            f"support ({support}) of the distribution, but found invalid values:\n{value}"
        )


def clamp_probs(probs: Tensor) -> Tensor:
    """probs kept within [eps, 1 - eps] of their dtype (PyTorch's clamp_probs)."""
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def binary_logits(probs: Tensor) -> Tensor:
    """log(p / (1 - p)) of clamped probabilities (PyTorch's probs_to_logits(is_binary=True))."""
    p = clamp_probs(probs)
    return p.log() - (-p).log1p()


def log_sigmoid(x: Tensor) -> Tensor:
    """log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), finite for every x."""
    return x.clamp(max=0) - (-x.abs()).exp().log1p()


def bce_with_logits(logits: Tensor, target: Tensor) -> Tensor:
    """-(t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))), elementwise, as (1 - t) x - log sigmoid(x)."""
    return (1 - target) * logits - log_sigmoid(logits)


def softplus(x: Tensor) -> Tensor:
    """log(1 + exp(x)), and x itself above 20 (PyTorch's threshold, which its KL formulas see)."""
    linear = x > 20
    return where(linear, x, where(linear, 0.0, x).exp().log1p())


def sum_rightmost(value: Any, dims: int) -> Any:
    """value summed over its last `dims` axes (PyTorch's _sum_rightmost)."""
    if dims == 0 or not isinstance(value, Tensor):
        return value
    return value.reshape((*value.shape[: value.dim() - dims], -1)).sum(-1)
