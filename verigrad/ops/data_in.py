"""Tensors from data: Python numbers and lists, NumPy arrays, buffers, DLPack capsules."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import modes
from ..dtypes import DType, as_dtype, bf16, f64, from_numpy_dtype
from ..tensor import Tensor, refuse_negative_strides
from .factory_args import _grad, _placed
from .movement import cast


def tensor(
    data: Any,
    dtype: DType | str | None = None,
    device: Any = None,
    requires_grad: bool = False,
    pin_memory: bool = False,
) -> Tensor:
    """A tensor holding a copy of `data` (nested lists, scalars, NumPy arrays or tensors).

    Python floats give f32, ints i64, bools bool; NumPy arrays keep their dtype.
    """
    _placed("tensor", device)
    if isinstance(data, Tensor):  # a copy of the stored values, in their dtype (bf16 bits too)
        out = modes.current().constant(np.array(data._array("tensor()"), order="C"), data.dtype)
    else:
        if isinstance(data, np.ndarray):
            refuse_negative_strides(data)
        array = np.array(data)
        if array.dtype.kind not in "biuf":
            raise TypeError(f"cannot make a tensor from {type(data).__name__} of {array.dtype}")
        python = not isinstance(data, np.ndarray | np.generic)
        if python and _past_i64(data, array):
            raise ValueError(
                "tensor(): an int does not fit in int64 (PyTorch: 'Overflow when unpacking long long')"
            )
        if python and array.dtype == np.float64 and dtype is None and not _holds_double(data):
            array = array.astype(np.float32)  # Python floats: f32 (with a dtype: one rounding, to it)
        if python and dtype is not None:
            _fits(array, as_dtype(dtype))
        out = from_numpy(array if array.flags.c_contiguous else array.copy())  # np.array copied it
    if dtype is not None and as_dtype(dtype) is not out.dtype:
        out = cast(out, dtype=as_dtype(dtype))
    return _grad(out, requires_grad)


def _holds_double(data: Any) -> bool:
    """Whether nested lists hold a NumPy float64 (a scalar or an array) or an f64 tensor, which make
    PyTorch's tensor() of them f64 (Python floats alone make f32)."""
    if isinstance(data, np.ndarray | np.generic):
        return data.dtype == np.float64
    if isinstance(data, Tensor):
        return data.dtype is f64
    return isinstance(data, list | tuple) and any(_holds_double(item) for item in data)


def as_tensor(data: Any, dtype: DType | str | None = None, device: Any = None) -> Tensor:
    """PyTorch's as_tensor: a tensor or NumPy array itself (sharing its memory) where its dtype is the one
    asked for, else a tensor made as `tensor(data, dtype)`."""
    _placed("as_tensor", device)
    if isinstance(data, np.ndarray) and data.dtype.kind in "biuf":
        data = from_numpy(data)
    if not isinstance(data, Tensor):
        return tensor(data, dtype)
    return data if dtype is None or as_dtype(dtype) is data.dtype else cast(data, dtype=as_dtype(dtype))


def asarray(
    obj: Any,
    *,
    dtype: DType | str | None = None,
    device: Any = None,
    copy: bool | None = None,
    requires_grad: bool | None = None,
) -> Tensor:
    """PyTorch's asarray: obj itself (a tensor, or a NumPy array whose memory it shares) where its dtype is
    the one asked for and copy is not True, else a new tensor; copy=False refuses a conversion that needs
    a copy. requires_grad defaults to obj's (PyTorch 2.13)."""
    _placed("asarray", device)
    out = as_tensor(obj, dtype)
    shares = out is obj or (isinstance(obj, np.ndarray) and np.shares_memory(out.payload, obj))
    if copy is False and not shares:
        raise ValueError(f"asarray: copy=False, but {type(obj).__name__} needs a copy to become this tensor")
    if copy and shares:
        out = out.clone() if isinstance(obj, Tensor) else tensor(np.array(obj), dtype)
    if requires_grad is None:
        requires_grad = bool(getattr(obj, "requires_grad", False))
    if requires_grad and not out.requires_grad:
        out = out.requires_grad_()
    return out.detach() if not requires_grad and out.requires_grad else out


def frombuffer(
    buffer: Any,
    *,
    dtype: DType | str,
    count: int = -1,
    offset: int = 0,
    requires_grad: bool = False,
) -> Tensor:
    """PyTorch's frombuffer: a 1-D tensor viewing `count` elements (all by default) of an object with the
    buffer protocol from byte `offset`, sharing its memory (a read-only buffer is viewed read-only)."""
    dtype = as_dtype(dtype)
    size = memoryview(buffer).nbytes
    if size == 0 or count == 0:
        raise ValueError(f"frombuffer: both buffer length ({size}) and count ({count}) must not be 0")
    if not 0 <= offset < size:
        raise ValueError(f"frombuffer: offset ({offset} bytes) must be in [0, buffer length ({size} bytes))")
    if count < 0 and (size - offset) % dtype.itemsize:
        raise ValueError(
            f"frombuffer: buffer length ({size - offset} bytes) after offset ({offset} bytes) must be a "
            f"multiple of element size ({dtype.itemsize})"
        )
    if count > 0 and offset + count * dtype.itemsize > size:
        raise ValueError(
            f"frombuffer: requested buffer length ({count} * {dtype.itemsize} bytes) after offset ({offset} "
            f"bytes) must not be greater than actual buffer length ({size} bytes)"
        )
    array = np.frombuffer(buffer, dtype=np.uint16 if dtype is bf16 else dtype.np, count=count, offset=offset)
    return modes.current().constant(array, dtype).requires_grad_(requires_grad)


def _past_i64(data: Any, array: np.ndarray) -> bool:
    """Whether Python data holds an int outside int64 (NumPy makes it u64, or f64 among other ints)."""
    if array.dtype == np.uint64:
        return True
    if array.dtype != np.float64 or not array.size or not np.nanmax(np.abs(array), initial=0) >= 2.0**63:
        return False
    if isinstance(data, list | tuple):
        return any(_past_i64(d, array) for d in data)
    return type(data) is int and not -(2**63) <= data < 2**63


def _fits(array: np.ndarray, dtype: DType, where: str = "tensor()", *, float_range: bool = False) -> None:
    """PyTorch's check of Python numbers going into a dtype: an integer dtype must hold integers (a signed
    one their values, an unsigned one their magnitudes: -1 wraps to 255 in u8, 300 is refused in i8) and
    floats (not NaN nor infinite; 2.7 is then truncated). With `float_range`, as PyTorch's fills and
    scalar operands (not `tensor()`), f16 and f32 must hold finite floats too (1e300 is refused)."""
    if not array.size or array.dtype.kind not in "iuf" or dtype.kind not in "iuf":
        return
    if dtype.kind in "iu":
        info = np.iinfo(dtype.np)
        if array.dtype.kind == "f":
            values = array.astype(np.float64)
            bad = np.isnan(values).any() or values.min() < float(info.min) or values.max() > float(info.max)
        else:
            low = info.min if dtype.kind == "i" else -info.max
            bad = int(array.min()) < low or int(array.max()) > info.max
    elif float_range and dtype is not bf16:
        values = array.astype(np.float64)
        finite = np.abs(values[np.isfinite(values)])
        bad = finite.size > 0 and finite.max() > float(np.finfo(dtype.np).max)
    else:
        bad = False
    if bad:
        raise ValueError(f"{where}: a value cannot be converted to {dtype.name} without overflow")


def check_number(value: Any, dtype: DType, where: str) -> None:
    """Refuse a Python number (bools and tensors pass) that `dtype` cannot hold, as PyTorch refuses it
    for a fill or a scalar operand: `_fits` with `float_range`."""
    if isinstance(value, int | float | np.integer | np.floating) and not isinstance(value, bool | np.bool_):
        if isinstance(value, int) and not -(2**64) < value < 2**64:
            raise ValueError(f"{where}: a value cannot be converted to {dtype.name} without overflow")
        _fits(np.asarray(value), dtype, where, float_range=True)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing `array`'s memory (uint16 widens to i32, uint32 and uint64 to i64, with a copy)."""
    if isinstance(array, np.generic):  # a NumPy scalar: a 0-d array holding its value
        array = np.asarray(array)
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy takes a NumPy array, got {type(array).__name__}; use verigrad.tensor")
    refuse_negative_strides(array)
    dtype = from_numpy_dtype(array.dtype)
    if array.dtype != dtype.np:
        array = array.astype(dtype.np)
    return modes.current().constant(array, dtype)


def from_dlpack(obj: Any) -> Tensor:
    """A tensor sharing the memory of any object that implements the DLPack protocol."""
    return from_numpy(np.from_dlpack(obj))


def _torch_dtype(t: Any, dtype: DType) -> Any:
    """The PyTorch dtype of `dtype` (for the torch lambdas the parity suite calls)."""
    return t.bfloat16 if dtype is bf16 else getattr(t, dtype.np.name)
