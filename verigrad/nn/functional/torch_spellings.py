"""PyTorch's `torch.*` spellings of functional's functions (`torch.conv2d`, `torch.dropout`,
`torch.layer_norm`, ...): the same computation, with the argument order and defaults of the `torch.*`
name where they differ from `torch.nn.functional`'s."""

from __future__ import annotations

from typing import Any

from ...tensor import Tensor
from .activations import rrelu as _rrelu
from .activations import threshold as _threshold
from .dropout import alpha_dropout as _alpha_dropout
from .dropout import dropout as _dropout
from .dropout import feature_alpha_dropout as _feature_alpha_dropout
from .embedding import embedding as _embedding
from .normalization import batch_norm as _batch_norm
from .normalization import group_norm as _group_norm
from .normalization import instance_norm as _instance_norm
from .normalization import layer_norm as _layer_norm
from .normalization import rms_norm as _rms_norm
from .pooling import adaptive_max_pool1d as _adaptive_max_pool1d
from .pooling import max_pool1d as _max_pool1d
from .pooling import max_pool2d as _max_pool2d
from .pooling import max_pool3d as _max_pool3d


def dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.dropout(input, p, train): F.dropout(input, p, training=train)."""
    return _dropout(input, p, train)


def alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.alpha_dropout(input, p, train): F.alpha_dropout(input, p, training=train)."""
    return _alpha_dropout(input, p, train)


def feature_alpha_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """torch.feature_alpha_dropout(input, p, train): F.feature_alpha_dropout(input, p, training=train)."""
    return _feature_alpha_dropout(input, p, train)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:
    """torch.threshold(input, threshold, value): F.threshold."""
    return _threshold(input, threshold, value)


def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    generator: Any = None,
) -> Tensor:
    """torch.rrelu(input, lower, upper, training): F.rrelu."""
    if generator is not None:
        raise NotImplementedError("torch.rrelu: generator= is not supported; seed the default generator")
    return _rrelu(input, lower, upper, training)


def layer_norm(
    input: Tensor,
    normalized_shape: Any,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enable: bool = True,
) -> Tensor:
    """torch.layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable): F.layer_norm."""
    return _layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(
    input: Tensor,
    num_groups: int,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    eps: float = 1e-5,
    cudnn_enabled: bool = True,
) -> Tensor:
    """torch.group_norm(input, num_groups, weight, bias, eps, cudnn_enabled): F.group_norm."""
    return _group_norm(input, num_groups, weight, bias, eps)


def batch_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    training: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool = True,
) -> Tensor:
    """torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
    cudnn_enabled): F.batch_norm, whose arguments come in another order."""
    return _batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def instance_norm(
    input: Tensor,
    weight: Tensor | None,
    bias: Tensor | None,
    running_mean: Tensor | None,
    running_var: Tensor | None,
    use_input_stats: bool,
    momentum: float,
    eps: float,
    cudnn_enabled: bool = True,
) -> Tensor:
    """torch.instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
    cudnn_enabled): F.instance_norm, whose arguments come in another order."""
    return _instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)


def rms_norm(
    input: Tensor, normalized_shape: Any, weight: Tensor | None = None, eps: float | None = None
) -> Tensor:
    """torch.rms_norm: F.rms_norm."""
    return _rms_norm(input, normalized_shape, weight, eps)


def embedding(
    weight: Tensor,
    indices: Tensor,
    padding_idx: int = -1,
    scale_grad_by_freq: bool = False,
    sparse: bool = False,
) -> Tensor:
    """torch.embedding(weight, indices, padding_idx=-1, ...): F.embedding with the table first; aten's
    padding_idx -1 means none (F.embedding turns a negative one into a row before calling it)."""
    if padding_idx < -1:
        raise ValueError(
            f"torch.embedding: padding_idx must be -1 (none) or a row of weight, got {padding_idx}"
        )
    pad = None if padding_idx == -1 else padding_idx
    return _embedding(indices, weight, pad, scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def _stride(kernel_size: Any, stride: Any) -> Any:
    """torch.max_pool*'s stride=[] (its default) means the kernel's size, as F's None."""
    return None if stride is None or (isinstance(stride, list | tuple) and not stride) else stride


def _torch_max_pool(pool: Any, name: str, return_indices: bool = False) -> Any:
    """torch.<name>: F's max pool `pool` with torch's arguments (stride=[] is the kernel's size)."""

    def max_pool(
        input: Tensor,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        dilation: Any = 1,
        ceil_mode: bool = False,
    ) -> Tensor:
        stride = _stride(kernel_size, stride)
        return pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices=return_indices)

    max_pool.__name__ = max_pool.__qualname__ = name
    max_pool.__doc__ = f"torch.{name}: F.{pool.__name__}" + (
        " with return_indices=True." if return_indices else " (stride=[] is the kernel's size)."
    )
    if return_indices:
        max_pool.__annotations__["return"] = "tuple[Tensor, Tensor]"
    return max_pool


max_pool1d = _torch_max_pool(_max_pool1d, "max_pool1d")
max_pool2d = _torch_max_pool(_max_pool2d, "max_pool2d")
max_pool3d = _torch_max_pool(_max_pool3d, "max_pool3d")
max_pool1d_with_indices = _torch_max_pool(_max_pool1d, "max_pool1d_with_indices", return_indices=True)


def adaptive_max_pool1d(input: Tensor, output_size: Any) -> tuple[Tensor, Tensor]:
    """torch.adaptive_max_pool1d: the values and their indices (F's return_indices=True)."""
    return _adaptive_max_pool1d(input, output_size, return_indices=True)
