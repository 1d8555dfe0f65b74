"""PyTorch's functions that make or read complex tensors, each refusing with one clear error: verigrad has
no complex dtypes, so none of them has a real answer to give."""

from __future__ import annotations

from typing import Any, NoReturn


def _refuse(name: str) -> NoReturn:
    raise NotImplementedError(f"{name}: verigrad has no complex numbers (complex dtypes are not supported)")


def complex(real: Any, imag: Any, *, out: Any = None) -> NoReturn:
    """torch.complex: refused (no complex dtypes)."""
    _refuse("complex")


def polar(abs: Any, angle: Any, *, out: Any = None) -> NoReturn:
    """torch.polar: refused (no complex dtypes)."""
    _refuse("polar")


def view_as_complex(input: Any) -> NoReturn:
    """torch.view_as_complex: refused (no complex dtypes)."""
    _refuse("view_as_complex")


def view_as_real(input: Any) -> NoReturn:
    """torch.view_as_real: refused (no complex dtypes; a real tensor has no such view in PyTorch either)."""
    _refuse("view_as_real")


def cfloat(self: Any, memory_format: Any = None) -> NoReturn:
    """Tensor.cfloat: refused (no complex dtypes)."""
    _refuse("Tensor.cfloat")


def cdouble(self: Any, memory_format: Any = None) -> NoReturn:
    """Tensor.cdouble: refused (no complex dtypes)."""
    _refuse("Tensor.cdouble")


def eig(A: Any, *, out: Any = None) -> NoReturn:
    """torch.linalg.eig: refused (its eigenvalues and eigenvectors are complex; eigh for symmetric A)."""
    raise NotImplementedError(
        "linalg.eig: verigrad has no complex numbers (complex dtypes are not supported); "
        "for a symmetric matrix use linalg.eigh"
    )


def eigvals(A: Any, *, out: Any = None) -> NoReturn:
    """torch.linalg.eigvals: refused (its eigenvalues are complex; eigvalsh for symmetric A)."""
    raise NotImplementedError(
        "linalg.eigvals: verigrad has no complex numbers (complex dtypes are not supported); "
        "for a symmetric matrix use linalg.eigvalsh"
    )


def stft(input: Any, *args: Any, **kwargs: Any) -> NoReturn:
    """torch.stft / Tensor.stft: refused (its result is complex)."""
    raise NotImplementedError(
        "stft: verigrad has no complex numbers (complex dtypes are not supported), so no short-time Fourier "
        "transform; compute it outside verigrad (scipy.signal.stft) and bring back real tensors"
    )


def istft(input: Any, *args: Any, **kwargs: Any) -> NoReturn:
    """torch.istft / Tensor.istft: refused (its input is complex)."""
    raise NotImplementedError(
        "istft: verigrad has no complex numbers (complex dtypes are not supported), so no inverse short-time "
        "Fourier transform; compute it outside verigrad (scipy.signal.istft)"
    )
