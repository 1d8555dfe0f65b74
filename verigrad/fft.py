"""`verigrad.fft`, as torch.fft: the real-valued functions (fftshift, ifftshift, fftfreq, rfftfreq). The
transforms make or read complex tensors, and verigrad has no complex dtype: each raises NotImplementedError
naming itself."""

from __future__ import annotations

import math
from typing import Any, NoReturn

from .dtypes import as_dtype
from .functions.rearrange import roll
from .ops.binary import where
from .ops.creation import arange
from .shapes import normalize_axis
from .tensor import Tensor

TRANSFORMS = ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft", "fft2", "ifft2", "rfft2", "irfft2", "hfft2",
              "ihfft2", "fftn", "ifftn", "rfftn", "irfftn", "hfftn", "ihfftn")  # fmt: skip

__all__ = ["fftshift", "ifftshift", "fftfreq", "rfftfreq", *TRANSFORMS]


def _shift(x: Tensor, dim: Any, sign: int) -> Tensor:
    axes = range(x.ndim) if dim is None else ((dim,) if isinstance(dim, int) else tuple(dim))
    axes = [normalize_axis(a, max(x.ndim, 1)) for a in axes]
    if not axes or x.ndim == 0:
        return x.clone()
    return roll(x, [sign * (x.shape[a] // 2) for a in axes], axes)


def fftshift(input: Tensor, dim: Any = None) -> Tensor:
    """input rolled by half of each axis in `dim` (all by default): the zero frequency to the centre."""
    return _shift(input, dim, 1)


def ifftshift(input: Tensor, dim: Any = None) -> Tensor:
    """The inverse of fftshift: rolled back by half of each axis in `dim` (all by default)."""
    return _shift(input, dim, -1)


def _frequencies(k: Tensor, n: int, d: float, dtype: Any, requires_grad: bool, what: str) -> Tensor:
    """The integers k / (n d), as PyTorch's: k in the dtype times 1 / (n d) rounded to it."""
    if not isinstance(d, int | float) or isinstance(d, bool) or d == 0:
        raise ValueError(f"fft.{what}: d must be a non-zero number, got {d!r}")
    k = k.cast(as_dtype(dtype)) if dtype is not None else k.float()
    if not k.dtype.is_float:
        raise TypeError(f"fft.{what}: dtype must be a floating dtype, got {k.dtype.name}")
    # n = 0: C's 1 / 0.0, infinite (rfftfreq's one entry 0 * inf is NaN, as PyTorch's)
    scale = 1.0 / (n * d) if n else math.copysign(math.inf, n * d)
    return (k * scale).requires_grad_(requires_grad)


def _length(n: Any, what: str) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"fft.{what}: n must be a non-negative int, got {n!r}")
    return n


def fftfreq(
    n: int, d: float = 1.0, *, out: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The sample frequencies of an FFT of length n with spacing d: [0, 1, ..., (n - 1) // 2, -(n // 2), ...,
    -1] / (n d), as torch.fft.fftfreq."""
    if out is not None:
        raise NotImplementedError("fft.fftfreq: out= is not supported; use the returned tensor")
    k = arange(_length(n, "fftfreq"))
    k = where(k < (n + 1) // 2, k, k - n)
    return _frequencies(k, n, d, dtype, requires_grad, "fftfreq")


def rfftfreq(
    n: int, d: float = 1.0, *, out: Any = None, dtype: Any = None, layout: Any = None, device: Any = None,
    requires_grad: bool = False,
) -> Tensor:  # fmt: skip
    """The sample frequencies of rfft's n // 2 + 1 outputs: [0, 1, ..., n // 2] / (n d), as
    torch.fft.rfftfreq."""
    if out is not None:
        raise NotImplementedError("fft.rfftfreq: out= is not supported; use the returned tensor")
    return _frequencies(arange(_length(n, "rfftfreq") // 2 + 1), n, d, dtype, requires_grad, "rfftfreq")


def _refusal(name: str) -> Any:
    def transform(input: Any, *args: Any, **kwargs: Any) -> NoReturn:
        raise NotImplementedError(
            f"fft.{name}: verigrad has no complex numbers (complex dtypes are not supported), so no Fourier "
            "transform: compute it outside verigrad (numpy.fft) and bring back real tensors"
        )

    transform.__name__ = transform.__qualname__ = name
    transform.__doc__ = f"torch.fft.{name}: refused (no complex dtypes)."
    return transform


for _name in TRANSFORMS:
    globals()[_name] = _refusal(_name)
