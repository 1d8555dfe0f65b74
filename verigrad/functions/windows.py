"""PyTorch's window functions torch.hann_window, hamming_window, blackman_window, bartlett_window and
kaiser_window, computed as PyTorch's CPU code does (the same operations in the same order, in the window's
dtype): a periodic window of N is the symmetric one of N + 1 without its last point."""

from __future__ import annotations

import math
from typing import Any

from .. import settings
from ..dtypes import as_dtype
from ..errors import DTypeError
from ..ops import arange, empty, full, ones
from ..ops.special import i0
from ..ops.unary import abs, cos, sqrt
from ..tensor import Tensor
from ..typeinfo import check_layout


def _points(
    name: str, window_length: int, periodic: bool, dtype: Any, requires_grad: bool, layout: Any
) -> Any:
    """(0, 1, ..., M - 1 in the dtype, M), M = N + 1 when periodic; or the whole window for N <= 1."""
    check_layout(layout, name)
    if not isinstance(window_length, int) or isinstance(window_length, bool) or window_length < 0:
        raise ValueError(f"{name}: window_length must be a non-negative int, got {window_length!r}")
    dtype = as_dtype(dtype) if dtype is not None else settings.get_default_dtype()
    if not dtype.is_float or dtype.name == "bf16":
        raise DTypeError(f"{name} expects a floating point dtype (f16, f32 or f64), got {dtype.name}")
    if window_length <= 1:  # PyTorch's: empty, or one 1
        window = empty(0, dtype=dtype) if window_length == 0 else ones(1, dtype=dtype)
        return window.requires_grad_(requires_grad), None
    m = window_length + 1 if periodic else window_length
    return arange(m, dtype=dtype), m


def _done(window: Tensor, n: int, periodic: bool, requires_grad: bool) -> Tensor:
    return (window[:n] if periodic else window).requires_grad_(requires_grad)


def hamming_window(
    window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *, dtype: Any = None,
    layout: Any = None, device: Any = None, requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """alpha - beta cos(2 pi n / (M - 1)), as torch.hamming_window."""
    k, m = _points("hamming_window", window_length, periodic, dtype, requires_grad, layout)
    if m is None:
        return k
    window = cos(k * (2.0 * math.pi / (m - 1))) * (-beta) + alpha
    return _done(window, window_length, periodic, requires_grad)


def hann_window(
    window_length: int, periodic: bool = True, *, dtype: Any = None, layout: Any = None, device: Any = None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """0.5 - 0.5 cos(2 pi n / (M - 1)), as torch.hann_window (hamming_window with alpha = beta = 0.5)."""
    if not isinstance(window_length, int) or isinstance(window_length, bool) or window_length < 0:
        raise ValueError(f"hann_window: window_length must be a non-negative int, got {window_length!r}")
    return hamming_window(
        window_length, periodic, 0.5, 0.5, dtype=dtype, layout=layout, requires_grad=requires_grad
    )


def blackman_window(
    window_length: int, periodic: bool = True, *, dtype: Any = None, layout: Any = None, device: Any = None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """0.42 - 0.5 cos(2 pi n / (M - 1)) + 0.08 cos(4 pi n / (M - 1)), as torch.blackman_window."""
    k, m = _points("blackman_window", window_length, periodic, dtype, requires_grad, layout)
    if m is None:
        return k
    angle = k * (math.pi / (m - 1))
    window = cos(angle * 4) * 0.08 - cos(angle * 2) * 0.5 + 0.42
    return _done(window, window_length, periodic, requires_grad)


def bartlett_window(
    window_length: int, periodic: bool = True, *, dtype: Any = None, layout: Any = None, device: Any = None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The triangle 2 n / (M - 1) up to the middle, 2 - 2 n / (M - 1) after, as torch.bartlett_window."""
    k, m = _points("bartlett_window", window_length, periodic, dtype, requires_grad, layout)
    if m is None:
        return k
    ramp = k * (2.0 / (m - 1))
    first = ((m - 1) >> 1) + 1
    window = ramp.clone()
    window[first:] = ramp[first:] * -1 + 2
    return _done(window, window_length, periodic, requires_grad)


def kaiser_window(
    window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype: Any = None, layout: Any = None,
    device: Any = None, requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """I0(beta sqrt(1 - ((n - a) / a)^2)) / I0(beta), a = (M - 1) / 2, as torch.kaiser_window."""
    k, m = _points("kaiser_window", window_length, periodic, dtype, requires_grad, layout)
    if m is None:
        return k
    alpha = (m - 1) / 2.0
    ratio = (k - alpha) / alpha
    window = i0(sqrt(abs(1 - ratio * ratio)) * beta) / i0(full((), beta, dtype=k.dtype))
    return _done(window, window_length, periodic, requires_grad)
