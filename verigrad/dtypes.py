"""The dtypes, their promotion order and their NumPy storage.

bf16 has no NumPy type: its values are stored as the upper 16 bits of an f32 (``np.uint16``), which is
exactly what a bf16 weight file holds. bf16 tensors can be loaded, moved and cast; compute ops refuse them.

u8 holds bytes, the blocks of a quantized weight (see `ops.quant`): NumPy's uint8 arrays become u8 tensors
(as in PyTorch). The other 8- and 16-bit integers widen to i32.
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

    @functools.cached_property
    def np(self) -> np.dtype:
        return np.dtype(self.storage)

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name


bool_ = DType("bool", 1, "b", np.bool_, 0)
u8 = DType("u8", 1, "u", np.uint8, 1)
i32 = DType("i32", 4, "i", np.int32, 2)
i64 = DType("i64", 8, "i", np.int64, 3)
f16 = DType("f16", 2, "f", np.float16, 4)
bf16 = DType("bf16", 2, "f", np.uint16, 5)
f32 = DType("f32", 4, "f", np.float32, 6)
f64 = DType("f64", 8, "f", np.float64, 7)

ALL = (bool_, u8, i32, i64, f16, bf16, f32, f64)
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
        "int32": i32,
        "int64": i64,
        "float": f32,
        "double": f64,
        "half": f16,
        "int": i64,
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
        return DEFAULT_FLOAT
    try:
        return _BY_NUMPY[np.dtype(value)]  # type: ignore[call-overload]
    except (TypeError, KeyError):
        names = ", ".join(d.name for d in ALL)
        raise TypeError(f"unknown dtype {value!r}; use one of {names}") from None


def from_numpy_dtype(dtype: np.dtype) -> DType:
    """The verigrad dtype holding a NumPy array's values (int8, int16 and uint16 widen to i32)."""
    if dtype in _BY_NUMPY:
        return _BY_NUMPY[dtype]
    if dtype.kind in "iu" and dtype.itemsize < 4:
        return i32
    if dtype.kind == "u":
        return i64
    raise TypeError(f"NumPy dtype {dtype} has no verigrad counterpart")


def promote(*dtypes: DType) -> DType:
    """The dtype both operands are computed in: the later one in
    bool < u8 < i32 < i64 < f16 < bf16 < f32 < f64."""
    out = max(dtypes, key=lambda d: d.rank)
    if out is bf16 and any(d is f16 for d in dtypes):
        return f32  # neither half format holds the other
    return out


def to_float(dtype: DType) -> DType:
    """The dtype of a float-valued result from this input (ints and bool give the default float)."""
    return dtype if dtype.is_float else DEFAULT_FLOAT
