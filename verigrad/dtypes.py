"""The dtypes, their promotion order and their NumPy storage.

bf16 has no NumPy type: its values are stored as the upper 16 bits of an f32 (``np.uint16``), which is
exactly what a bf16 weight file holds. bf16 tensors can be loaded, moved and cast; compute ops refuse them.

u8 holds bytes (the blocks of a quantized weight, see `ops.quant`) and PyTorch's uint8 values; i8 and i16
are PyTorch's int8 and int16. NumPy's uint16 arrays widen to i32, its uint32 and uint64 to i64.

`promote` is PyTorch's promotion of two dtypes (`torch.promote_types`): bool < integers < floats, within
the integers the wider (u8 with i8 gives i16), within the floats the wider (f16 with bf16 gives f32).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class DType:
    name: str
    itemsize: int
    kind: str  # "f" floating, "i" signed integer, "u" unsigned integer, "b" bool
    storage: type  # the NumPy scalar type that holds the bits
    rank: int  # position in the promotion order

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_floating_point(self) -> bool:
        """PyTorch's name for is_float."""
        return self.kind == "f"

    @property
    def is_signed(self) -> bool:
        """Whether the dtype holds negative values (PyTorch's: floats and signed integers)."""
        return self.kind in "fi"

    @property
    def is_complex(self) -> bool:
        return False

    @functools.cached_property
    def np(self) -> np.dtype:
        return np.dtype(self.storage)

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name


bool_ = DType("bool", 1, "b", np.bool_, 0)
u8 = DType("u8", 1, "u", np.uint8, 1)
i8 = DType("i8", 1, "i", np.int8, 1)
i16 = DType("i16", 2, "i", np.int16, 2)
i32 = DType("i32", 4, "i", np.int32, 3)
i64 = DType("i64", 8, "i", np.int64, 4)
f16 = DType("f16", 2, "f", np.float16, 5)
bf16 = DType("bf16", 2, "f", np.uint16, 5)
f32 = DType("f32", 4, "f", np.float32, 6)
f64 = DType("f64", 8, "f", np.float64, 7)

ALL = (bool_, u8, i8, i16, i32, i64, f16, bf16, f32, f64)
INTEGERS = (u8, i8, i16, i32, i64)
FLOATS = (f16, bf16, f32, f64)
COMPUTE_FLOATS = (f16, f32, f64)
DEFAULT_FLOAT = f32
DEFAULT_INT = i64

_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update(
    {
        "bool_": bool_,
        "float32": f32,
        "float64": f64,
        "float16": f16,
        "bfloat16": bf16,
        "uint8": u8,
        "int8": i8,
        "int16": i16,
        "short": i16,
        "int32": i32,
        "int64": i64,
        "float": f32,
        "double": f64,
        "half": f16,
        "int": i32,  # torch.int
        "long": i64,
    }
)
_BY_NUMPY = {np.dtype(d.storage): d for d in ALL if d is not bf16}


def as_dtype(value: object) -> DType:
    """Accept a DType, a name ("f32", "float32"), a NumPy dtype or a Python type."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    if value is bool:
        return bool_
    if value is int:
        return DEFAULT_INT
    if value is float:
        return f64  # PyTorch's: Python's float is float64 whatever the default dtype
    try:
        return _BY_NUMPY[np.dtype(value)]  # type: ignore[call-overload]
    except (TypeError, KeyError):
        names = ", ".join(d.name for d in ALL)
        raise TypeError(f"unknown dtype {value!r}; use one of {names}") from None


def from_numpy_dtype(dtype: np.dtype) -> DType:
    """The verigrad dtype holding a NumPy array's values (uint16 widens to i32, uint32 and uint64 to i64)."""
    if dtype in _BY_NUMPY:
        return _BY_NUMPY[dtype]
    if dtype.kind in "iu" and dtype.itemsize < 4:
        return i32
    if dtype.kind == "u":
        return i64
    raise TypeError(f"NumPy dtype {dtype} has no verigrad counterpart")


def promote(*dtypes: DType) -> DType:
    """PyTorch's promotion of these dtypes (`torch.promote_types`, applied left to right)."""
    out = dtypes[0]
    for d in dtypes[1:]:
        if d is not out:
            out = _promote_two(out, d)
    return out


def _promote_two(a: DType, b: DType) -> DType:
    if a.kind == "b" or b.kind == "b":
        return b if a.kind == "b" else a
    if a.is_float or b.is_float:
        if a.is_float and b.is_float:
            if a.itemsize == b.itemsize:  # f16 with bf16: neither half format holds the other
                return f32
            return a if a.itemsize > b.itemsize else b
        return a if a.is_float else b
    if a.kind != b.kind:  # u8 with a signed integer: one that holds every u8 value
        signed = a if a.kind == "i" else b
        return i16 if signed is i8 else signed
    return a if a.itemsize > b.itemsize else b


def is_floating_point(x: object) -> bool:
    """PyTorch's torch.is_floating_point: whether a tensor (or dtype) is of a float dtype."""
    return as_dtype(getattr(x, "dtype", x)).is_float


def can_cast(from_: object, to: object) -> bool:
    """PyTorch's torch.can_cast: whether the same-kind rule lets `from_` be cast to `to` (not a float
    to an integer, nor a number to bool)."""
    a, b = as_dtype(from_), as_dtype(to)
    order = {"b": 0, "u": 1, "i": 1, "f": 2}
    return order[a.kind] <= order[b.kind]


def to_float(dtype: DType) -> DType:
    """The dtype of a float-valued result from this input (ints and bool give the default float)."""
    return dtype if dtype.is_float else DEFAULT_FLOAT
