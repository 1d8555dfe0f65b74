"""torch.signal.windows: the window functions (bartlett, blackman, cosine, exponential, gaussian,
general_cosine, general_hamming, hamming, hann, kaiser, nuttall) of length M, symmetric (`sym`, the
default) or periodic, in f32 or f64 (the default dtype unless given), with PyTorch's formulas: each a
function of evenly spaced points (linspace)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from .. import ops, settings
from ..dtypes import as_dtype, f32, f64
from ..ops.special import i0
from ..tensor import Tensor

__all__ = [
    "bartlett",
    "blackman",
    "cosine",
    "exponential",
    "gaussian",
    "general_cosine",
    "general_hamming",
    "hamming",
    "hann",
    "kaiser",
    "nuttall",
]


def _checked(name: str, M: int, dtype: Any, layout: Any) -> Any:
    """The dtype to make (the default one unless given), after PyTorch's checks."""
    dtype = settings.get_default_dtype() if dtype is None else as_dtype(dtype)
    if M < 0:
        raise ValueError(f"{name} requires non-negative window length, got M={M}")
    if layout is not None and getattr(layout, "name", str(layout)).removeprefix("torch.") != "strided":
        raise ValueError(f"{name} is implemented for strided tensors only, got: {layout}")
    if dtype not in (f32, f64):
        raise ValueError(f"{name} expects float32 or float64 dtypes, got: {dtype.name}")
    return dtype


def _done(x: Tensor, requires_grad: bool) -> Tensor:
    return x.requires_grad_(True) if requires_grad else x


def _points(start: Any, end: Any, M: int, dtype: Any) -> Tensor:
    return ops.linspace(start, end, M, dtype=dtype)


def _span(M: int, sym: bool) -> int:
    """The denominator of the spacing: M - 1 symmetric, M periodic."""
    return M - 1 if sym else M


def _common(kw: dict) -> tuple[Any, Any, bool]:
    return kw.get("dtype"), kw.get("layout"), bool(kw.get("requires_grad", False))


def exponential(
    M: int, *, center: float | None = None, tau: float = 1.0, sym: bool = True, **kw: Any
) -> Tensor:
    """exp(-|n - center| / tau)."""
    dtype, layout, grad = _common(kw)
    dtype = _checked("exponential", M, dtype, layout)
    if tau <= 0:
        raise ValueError(f"Tau must be positive, got: {tau} instead.")
    if sym and center is not None:
        raise ValueError("Center must be None for symmetric windows")
    if M == 0:
        return _done(ops.zeros((0,), dtype=dtype), grad)
    if center is None:
        center = (M if not sym and M > 1 else M - 1) / 2.0
    c = 1 / tau
    k = _points(-center * c, (-center + (M - 1)) * c, M, dtype)
    return _done(ops.exp(-ops.abs(k)), grad)


def cosine(M: int, *, sym: bool = True, **kw: Any) -> Tensor:
    """sin(pi (n + 1/2) / M) (M + 1 periodic)."""
    dtype, layout, grad = _common(kw)
    dtype = _checked("cosine", M, dtype, layout)
    if M == 0:
        return _done(ops.zeros((0,), dtype=dtype), grad)
    c = math.pi / (M + 1 if not sym and M > 1 else M)
    return _done(ops.sin(_points(0.5 * c, (0.5 + (M - 1)) * c, M, dtype)), grad)


def gaussian(M: int, *, std: float = 1.0, sym: bool = True, **kw: Any) -> Tensor:
    """exp(-((n - (M - 1) / 2) / std)^2 / 2)."""
    dtype, layout, grad = _common(kw)
    dtype = _checked("gaussian", M, dtype, layout)
    if std <= 0:
        raise ValueError(f"Standard deviation must be positive, got: {std} instead.")
    if M == 0:
        return _done(ops.zeros((0,), dtype=dtype), grad)
    start = -(M if not sym and M > 1 else M - 1) / 2.0
    c = 1 / (std * math.sqrt(2))
    k = _points(start * c, (start + (M - 1)) * c, M, dtype)
    return _done(ops.exp(-(k * k)), grad)


def kaiser(M: int, *, beta: float = 12.0, sym: bool = True, **kw: Any) -> Tensor:
    """I0(beta sqrt(1 - (2n / (M - 1) - 1)^2)) / I0(beta)."""
    dtype, layout, grad = _common(kw)
    dtype = _checked("kaiser", M, dtype, layout)
    if beta < 0:
        raise ValueError(f"beta must be non-negative, got: {beta} instead.")
    if M <= 1:
        return _done(ops.ones((M,), dtype=dtype), grad)
    b = ops.full((), beta, dtype=dtype)
    c = 2.0 * b / (M if not sym else M - 1)
    end = ops.minimum(b, -b + (M - 1) * c)
    k = _points(-beta, float(end.item()), M, dtype)
    return _done(i0(ops.sqrt(b * b - k * k)) / i0(b), grad)


def bartlett(M: int, *, sym: bool = True, **kw: Any) -> Tensor:
    """The triangle 1 - |2n / (M - 1) - 1|."""
    dtype, layout, grad = _common(kw)
    dtype = _checked("bartlett", M, dtype, layout)
    if M <= 1:
        return _done(ops.ones((M,), dtype=dtype), grad)
    c = 2 / _span(M, sym)
    return _done(1 - ops.abs(_points(-1, -1 + (M - 1) * c, M, dtype)), grad)


def general_cosine(M: int, *, a: Iterable, sym: bool = True, **kw: Any) -> Tensor:
    """sum_i (-1)^i a_i cos(2 pi i n / (M - 1))."""
    dtype, layout, grad = _common(kw)
    dtype = _checked("general_cosine", M, dtype, layout)
    if M <= 1:
        return _done(ops.ones((M,), dtype=dtype), grad)
    if not isinstance(a, Iterable):
        raise TypeError(f"Coefficients must be a list/tuple, got: {type(a).__name__}")
    coefficients = list(a)
    if not coefficients:
        raise ValueError("Coefficients cannot be empty")
    c = 2 * math.pi / _span(M, sym)
    k = _points(0, (M - 1) * c, M, dtype)
    a_i = ops.tensor([(-1) ** i * w for i, w in enumerate(coefficients)], dtype=dtype)
    i = ops.arange(0, len(coefficients), dtype=dtype)
    return _done((ops.unsqueeze(a_i, -1) * ops.cos(ops.unsqueeze(i, -1) * k)).sum(0), grad)


def general_hamming(M: int, *, alpha: float = 0.54, sym: bool = True, **kw: Any) -> Tensor:
    """alpha - (1 - alpha) cos(2 pi n / (M - 1))."""
    return general_cosine(M, a=[alpha, 1.0 - alpha], sym=sym, **kw)


def hamming(M: int, *, sym: bool = True, **kw: Any) -> Tensor:
    """general_hamming with alpha 0.54."""
    return general_hamming(M, sym=sym, **kw)


def hann(M: int, *, sym: bool = True, **kw: Any) -> Tensor:
    """general_hamming with alpha 0.5."""
    return general_hamming(M, alpha=0.5, sym=sym, **kw)


def blackman(M: int, *, sym: bool = True, **kw: Any) -> Tensor:
    """general_cosine with a = (0.42, 0.5, 0.08)."""
    _checked("blackman", M, kw.get("dtype"), kw.get("layout"))
    return general_cosine(M, a=[0.42, 0.5, 0.08], sym=sym, **kw)


def nuttall(M: int, *, sym: bool = True, **kw: Any) -> Tensor:
    """general_cosine with Nuttall's four coefficients."""
    return general_cosine(M, a=[0.3635819, 0.4891775, 0.1365995, 0.0106411], sym=sym, **kw)
