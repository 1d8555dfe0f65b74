"""`tensor <op> ndarray` as PyTorch gives it. PyTorch's arithmetic, bitwise and shift operators and `@`
decline a NumPy array, so NumPy's ufunc computes the result and PyTorch's `__array_wrap__` makes it a
tensor: NumPy's promotion (a 0-d array counts as much as any array: an f32 tensor + np.array(0.1) is f64,
an i32 tensor + np.array(2) is i64, an f16 tensor + an f32 array is f32, ints divide in f64), NumPy's
values (its f32 power is not always PyTorch's) and a bool result made uint8. Here too, by NumPy and
`Tensor.__array_wrap__`. PyTorch refuses a tensor that requires grad there; verigrad runs the op on the
operands cast to the dtypes of NumPy's loop, so that the gradient flows, and casts its result as the
wrapper does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import bf16, bool_, from_numpy_dtype, u8
from ..tensor import Tensor
from .data_in import from_numpy
from .movement import cast

UFUNCS: dict[str, np.ufunc] = {
    "__add__": np.add,
    "__sub__": np.subtract,
    "__mul__": np.multiply,
    "__truediv__": np.true_divide,
    "__floordiv__": np.floor_divide,
    "__mod__": np.remainder,
    "__pow__": np.power,
    "__matmul__": np.matmul,
    "__and__": np.bitwise_and,
    "__or__": np.bitwise_or,
    "__xor__": np.bitwise_xor,
    "__lshift__": np.left_shift,
    "__rshift__": np.right_shift,
}


def operator(name: str, op: Callable[..., Tensor]) -> Callable[[Tensor, Any], Any]:
    """Tensor's method `name` (one of UFUNCS): `op(self, other)`, or NumPy's way for an array `other`."""
    ufunc = UFUNCS[name]

    def method(self: Tensor, other: Any) -> Any:
        if isinstance(other, np.ndarray):
            return with_array(ufunc, op, self, other)
        return op(self, other)

    return method


def with_array(ufunc: np.ufunc, op: Callable[..., Tensor], x: Tensor, array: np.ndarray) -> Tensor:
    """`op(x, array)` in the dtypes of NumPy's `ufunc` loop, its result as PyTorch's wrapper gives it."""
    if x.dtype is bf16:
        raise TypeError(
            "Got unsupported ScalarType BFloat16 (NumPy, which PyTorch hands an array operand to)"
        )
    left, right, out = ufunc.resolve_dtypes((x.dtype.np, array.dtype, None))  # TypeError: no such loop
    dtypes = [from_numpy_dtype(d) for d in (left, right, out)]
    if any(d.np != n for d, n in zip(dtypes, (left, right, out))):
        raise TypeError(f"{ufunc.__name__} of a {x.dtype.name} tensor and a {array.dtype} array gives {out}")
    if isinstance(x.payload, np.ndarray) and not x.requires_grad:
        return ufunc(x, array)  # NumPy's values; Tensor.__array_wrap__ makes the result a tensor
    result = op(cast(x, dtypes[0]), from_numpy(np.ascontiguousarray(array, right)))
    want = u8 if dtypes[2] is bool_ else dtypes[2]  # PyTorch's __array_wrap__ makes a bool result uint8
    return result if result.dtype is want else cast(result, want)
