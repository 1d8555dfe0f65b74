"""PyTorch's `finfo` and `iinfo`: the limits of a floating and an integer dtype, as Python numbers."""

from __future__ import annotations

from typing import Any

import numpy as np

from .dtypes import DEFAULT_FLOAT, DType, as_dtype, bf16


class _Info:
    """Fields set once, shown and compared as a record."""

    _fields: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={getattr(self, k)!r}' for k in self._fields)})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and repr(other) == repr(self)

    def __hash__(self) -> int:
        return hash(repr(self))


class finfo(_Info):
    """The limits of a floating dtype (`finfo()` is the default dtype's): `finfo(verigrad.f32).eps`."""

    _fields = ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype")

    def __init__(self, dtype: DType | str | None = None) -> None:
        d = DEFAULT_FLOAT if dtype is None else as_dtype(dtype)
        if not d.is_float:
            raise TypeError(f"finfo() takes a floating dtype, not {d.name}; use iinfo for integer dtypes")
        if d is bf16:  # f32's exponent with 7 mantissa bits; NumPy has no bfloat16
            self.bits, self.eps, self.max, precision = 16, 2.0**-7, 3.3895313892515355e38, 2
            self.tiny = float(np.finfo(np.float32).tiny)
        else:
            f = np.finfo(d.np)
            self.bits, self.eps, self.max, precision = f.bits, float(f.eps), float(f.max), f.precision
            self.tiny = float(f.tiny)
        self.min, self.smallest_normal = -self.max, self.tiny
        self.resolution = 10.0**-precision  # as PyTorch's and NumPy's: 1e-06 for f32
        self.dtype = "bfloat16" if d is bf16 else d.np.name  # PyTorch's name, "float32"


class iinfo(_Info):
    """The limits of an integer dtype: `iinfo(verigrad.i64).max`."""

    _fields = ("bits", "max", "min", "dtype")

    def __init__(self, dtype: DType | str) -> None:
        d = as_dtype(dtype)
        if d.kind not in "iu":
            raise TypeError(f"iinfo() takes an integer dtype, not {d.name}; use finfo for floating dtypes")
        i = np.iinfo(d.np)
        self.bits, self.max, self.min, self.dtype = i.bits, int(i.max), int(i.min), d.np.name


class layout:
    """PyTorch's torch.layout: how a tensor's elements are laid out; verigrad's tensors are all strided."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"torch.{self.name}"


strided = layout("strided")
# PyTorch's other layouts: a factory given one refuses it (check_layout)
sparse_coo, sparse_csr, sparse_csc = layout("sparse_coo"), layout("sparse_csr"), layout("sparse_csc")
sparse_bsr, sparse_bsc, jagged = layout("sparse_bsr"), layout("sparse_bsc"), layout("jagged")


def check_layout(given: Any, where: str) -> None:
    """Refuse a `layout=` other than torch.strided (None is strided)."""
    if given is not None and given is not strided:
        raise NotImplementedError(
            f"{where}: layout={given!r} is not supported: verigrad's tensors are dense (torch.strided); "
            "build the dense tensor"
        )
