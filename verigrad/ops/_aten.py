"""The functions behind `verigrad.ops.aten`'s operators (aten.py), with aten's signatures, written with
the ops."""

from __future__ import annotations

from typing import Any

from ..dtypes import as_dtype
from ..errors import DTypeError, ShapeError
from ..shapes import normalize_axis, shape_text
from ..tensor import Tensor, describe
from .binary import eq, where
from .composite._common import out_size, pair
from .composite.pooling import max_pool_grad_at
from .composite.softmax import softmax
from .movement import slice_
from .unary import gelu, gelu_tanh


def _window(value: Any, what: str, minimum: int, default: Any = None) -> tuple[int, int]:
    """aten's int[2]: an int, one int for both axes, or two; empty means `default`."""
    if isinstance(value, list | tuple):
        if not value and default is not None:
            return default
        if len(value) == 1:
            value = value[0]
    return pair(value, f"max_pool2d_with_indices_backward: {what}", minimum)


def max_pool2d_with_indices_backward(
    grad_output: Tensor, self: Tensor, kernel_size: Any, stride: Any, padding: Any, dilation: Any,
    ceil_mode: bool, indices: Tensor,
) -> Tensor:  # fmt: skip
    """The gradient of max_pool2d's input from its output's and the indices it returned: each added at its
    position in zeros shaped as `self` (aten's max_pool2d_with_indices_backward)."""
    name = "max_pool2d_with_indices_backward"
    if self.ndim not in (3, 4):
        raise ShapeError(f"{name}: self must be [C, H, W] or [N, C, H, W], got {shape_text(self.shape)}")
    k = _window(kernel_size, "kernel_size", 1)
    s = _window(stride, "stride", 1, default=k)
    p = _window(padding, "padding", 0)
    d = _window(dilation, "dilation", 1)
    if any(2 * p[i] > k[i] for i in range(2)):
        raise ShapeError(f"{name}: padding {p} must be at most half the kernel {k}")
    sizes, ceil = self.shape[-2:], bool(ceil_mode)
    pooled = (*self.shape[:-2], *(out_size(sizes[i], k[i], s[i], p[i], d[i], ceil) for i in (0, 1)))
    for what, t in (("grad_output", grad_output), ("indices", indices)):
        if tuple(t.shape) != pooled:
            raise ShapeError(
                f"{name}: {what} must be the pooled shape {shape_text(pooled)} of self "
                f"{shape_text(self.shape)}, got {shape_text(t.shape)}"
            )
    return max_pool_grad_at(grad_output, self, indices, nd=2)


def safe_softmax(self: Tensor, dim: int, dtype: Any = None) -> Tensor:
    """softmax along `dim` (of self cast to `dtype` first, where given), 0 where every entry along `dim` is
    -inf (softmax's NaN there), with gradient 0 there too (aten's _safe_softmax, attention's masked rows)."""
    x = self if dtype is None else self.cast(as_dtype(dtype))
    if not x.dtype.is_float:
        raise DTypeError(f"_safe_softmax: input must be a float tensor (or give dtype=), got {describe(x)}")
    axis = normalize_axis(dim, x.ndim)
    if x.ndim and x.shape[axis] == 0:
        return softmax(x, axis=axis)
    masked = eq(x.amax(axis=axis, keepdim=True), float("-inf"))  # -inf the largest: -inf throughout
    # the masked rows' softmax is taken of zeros, so that no NaN reaches the gradient through `where`
    return where(masked, 0.0, softmax(where(masked, 0.0, x), axis=axis))


def slice_tensor(self: Tensor, dim: int = 0, start: Any = None, end: Any = None, step: int = 1) -> Tensor:
    """self[start:end:step] along `dim` (aten's slice.Tensor: start and end clamped into the axis)."""
    if self.ndim == 0:
        raise ShapeError("slice: a 0-d tensor has no dimension to slice")
    if not isinstance(step, int) or isinstance(step, bool) or step <= 0:
        raise ValueError(f"slice: step must be a positive integer, got {step!r}")
    axis = normalize_axis(dim, self.ndim)
    return slice_(self, index=(*((None, None, 1),) * axis, (start, end, step)))


def gelu_backward(grad_output: Tensor, self: Tensor, *, approximate: str = "none") -> Tensor:
    """The gradient of gelu's input given its output's (aten's gelu_backward): gelu's own VJP, so the same
    bits as backward() through F.gelu(self, approximate=approximate)."""
    forward = {"none": gelu, "tanh": gelu_tanh}.get(approximate)
    if forward is None:
        raise ValueError(f"gelu_backward: approximate must be 'none' or 'tanh', got {approximate!r}")
    if tuple(grad_output.shape) != tuple(self.shape):
        raise ShapeError(
            f"gelu_backward: grad_output {shape_text(grad_output.shape)} must have self's shape "
            f"{shape_text(self.shape)}"
        )
    return forward.vjp(grad_output, None, self)[0]
