"""PyTorch's torch._softmax_backward_data, torch._unsafe_masked_index and
torch._unsafe_masked_index_put_accumulate (aten ops its decompositions emit, public under torch.*),
written with the ops: their shapes, dtypes and gradients are the ops'."""

from __future__ import annotations

from typing import Any

from ..dtypes import as_dtype, bool_, i32, i64
from ..errors import DTypeError
from ..ops.binary import where
from ..ops.composite.softmax import _softmax_vjp
from ..shapes import normalize_axis
from ..tensor import Tensor, describe
from .indexing import index_put
from .pointwise import clamp


def _softmax_backward_data(grad_output: Tensor, output: Tensor, dim: int, input_dtype: Any) -> Tensor:
    """softmax's input gradient from its output: output (g - sum(g output, dim)), in `input_dtype`; as
    softmax's own VJP computes it (the `softmax_grad` op, rounded once from f64; f64 in ops)."""
    (grad,) = _softmax_vjp(grad_output, output, None, normalize_axis(dim, output.ndim))
    dtype = as_dtype(input_dtype)
    return grad if grad.dtype is dtype else grad.cast(dtype)


def _clamped(name: str, x: Tensor, mask: Tensor, indices: Any) -> tuple[Any, ...]:
    """The index tensors clamped into [-size, size) of their axes (masked-off positions may be out of
    range), as PyTorch's decomposition; None stands for a whole axis."""
    if not isinstance(mask, Tensor) or mask.dtype is not bool_:
        raise DTypeError(f"{name}: mask must be a bool tensor, got {describe(mask)}")
    out = []
    for axis, index in enumerate(indices):
        if index is None:
            out.append(slice(None))
            continue
        if index.dtype not in (i64, i32):
            raise DTypeError(f"{name}: indices must be int64 or int32 tensors, got {describe(index)}")
        size = x.shape[axis]
        out.append(clamp(index, -size, size - 1))
    return tuple(out)


def _unsafe_masked_index(x: Tensor, mask: Tensor, indices: Any, fill: Any) -> Tensor:
    """where(mask, x[indices], fill), the positions under a False mask clamped into range first."""
    return where(mask, x[_clamped("_unsafe_masked_index", x, mask, indices)], fill)


def _unsafe_masked_index_put_accumulate(x: Tensor, mask: Tensor, indices: Any, values: Tensor) -> Tensor:
    """x with values added at x[indices] where mask holds (0 elsewhere), positions clamped into range."""
    keys = _clamped("_unsafe_masked_index_put_accumulate", x, mask, indices)
    zero = False if values.dtype is bool_ else 0
    return index_put(x, keys, where(mask, values, zero), accumulate=True)
