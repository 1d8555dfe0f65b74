"""NumPy values as operands, as PyTorch takes them: `tensor <op> ndarray` is NumPy's computation made a
tensor (NumPy's promotion, a 0-d array as strong as any; a bool result uint8), `x op= ndarray` binds x to
a new tensor, a NumPy bool scalar counts as a float number, a NumPy ufunc on a tensor gives a tensor.
Each case compares the result's type, dtype and values with PyTorch's, or that both raise."""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import verigrad

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
ARRAYS = {
    "0-d f64": np.array(0.1),
    "0-d i64": np.array(2),
    "0-d bool": np.array(True),
    "f32": np.array([0.5, 2.0], np.float32),
    "i8": np.array([3, -1], np.int8),
    "u8": np.array([3, 1], np.uint8),
    "0-d f16": np.array(2.5, np.float16),
}
OPERATORS = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "and_", "or_", "xor", "lshift"]
SCALARS = [np.True_, np.False_, np.float64(0.1), np.float32(1.5), np.int64(2), np.int32(-3), np.uint8(7)]


def _outcome(call: Callable[[Any], Any], lib: Any) -> Any:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _leaves(call(lib))
    except Exception:
        return "raised"


def _leaves(result: Any) -> Any:
    """A result as comparable values: a tensor's type, dtype and values; a tuple's leaves."""
    if isinstance(result, tuple):
        return [_leaves(r) for r in result]
    if isinstance(result, torch.Tensor | verigrad.Tensor):
        dtype = str(result.dtype).removeprefix("torch.")
        values = result.detach().float().numpy() if dtype == "bfloat16" else result.detach().numpy()
        return type(result).__name__, np.dtype(values.dtype).name, values.tolist()
    return type(result).__name__, result


def _same(call: Callable[[Any], Any]) -> None:
    theirs, ours = _outcome(call, torch), _outcome(call, verigrad)
    if theirs != "raised":  # where PyTorch raises, verigrad may answer (NumPy's answer)
        assert ours == theirs


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("array", ARRAYS)
@pytest.mark.parametrize("name", OPERATORS)
def test_tensor_op_array_is_numpys_result_as_a_tensor(dtype: str, array: str, name: str) -> None:
    values = ARRAYS[array]
    _same(lambda t: getattr(operator, name)(t.tensor([3, 1], dtype=getattr(t, dtype)), values))


@pytest.mark.parametrize("dtype", ["int32", "float32", "bool"])
def test_matmul_with_an_array(dtype: str) -> None:
    _same(lambda t: t.tensor([3, 1], dtype=getattr(t, dtype)) @ np.array([1, 2], np.int64))


def test_in_place_operator_with_an_array_makes_a_new_tensor() -> None:
    for t in (torch, verigrad):
        x = t.zeros(3)
        y = x
        y += np.array([1.5, 1.0, 1.0])  # PyTorch's __iadd__ declines: y = y + array, float64
        assert y is not x and float(x.sum()) == 0.0 and str(y.dtype) in ("torch.float64", "f64")


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "float16", "float32"])
@pytest.mark.parametrize("scalar", SCALARS, ids=repr)
def test_numpy_scalars_on_both_sides(dtype: str, scalar: Any) -> None:
    for name in ("add", "mul", "sub", "truediv", "eq", "lt"):
        op = getattr(operator, name)
        _same(lambda t: op(t.tensor([3, 1], dtype=getattr(t, dtype)), scalar))
        _same(lambda t: op(scalar, t.tensor([3, 1], dtype=getattr(t, dtype))))


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.where(t.tensor([True, False]), t.tensor([1, 2], dtype=t.int32), np.True_),
        lambda t: t.full((2,), np.True_),
        lambda t: t.tensor([1, 2], dtype=t.int32).clamp(np.True_),
        lambda t: t.tensor([1, 2], dtype=t.int32).mul(np.True_),
        lambda t: t.tensor([True, False]) + np.True_,
        lambda t: t.tensor(np.True_),
    ],
)
def test_a_numpy_bool_is_a_float_number(call: Callable[[Any], Any]) -> None:
    _same(call)


def test_result_type_of_a_numpy_bool() -> None:
    assert verigrad.result_type(verigrad.tensor([True]), np.True_) is verigrad.float32
    assert torch.result_type(torch.tensor([True]), np.True_) is torch.float32


@pytest.mark.parametrize(
    "call",
    [
        lambda t: np.exp(t.tensor([1.0, 2.0])),
        lambda t: np.add(t.tensor([1.0, 2.0]), 1),
        lambda t: np.greater(t.tensor([1.0, 2.0]), 1),
        lambda t: np.maximum(t.tensor([1.0, 2.0]), np.array([0.0, 5.0])),
        lambda t: np.sqrt(t.tensor([4], dtype=t.int32)),
        lambda t: np.exp(t.tensor(1.0)),
    ],
)
def test_numpy_ufunc_of_a_tensor_is_a_tensor(call: Callable[[Any], Any]) -> None:
    _same(call)


def test_a_tensor_requiring_grad_with_an_array_keeps_numpys_dtype_and_its_gradient() -> None:
    """PyTorch refuses (numpy() of a tensor requiring grad); verigrad gives NumPy's dtype and the gradient."""
    with pytest.raises(RuntimeError):
        torch.ones(2, requires_grad=True) + np.array(0.1)
    x = verigrad.ones(2, requires_grad=True)
    y = x * np.array(3)  # f32 * a 0-d int64 array: NumPy's f64
    assert y.dtype is verigrad.float64
    y.sum().backward()
    assert x.grad.dtype is verigrad.float32 and x.grad.tolist() == [3.0, 3.0]


I64, I32 = np.int64, np.int32


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.ones(2, 3).sum(I64(1)),
        lambda t: t.ones(2, 3).sum(dim=(I64(0), I32(1))),
        lambda t: t.ones(2, 3).mean(I64(-1), keepdim=True),
        lambda t: t.arange(6.0).reshape(2, 3).amax(I32(1)),
        lambda t: t.arange(6.0).reshape(2, 3).argmax(I64(1)),
        lambda t: t.arange(6.0).reshape(2, 3).std(I64(1)),
        lambda t: t.linspace(0, 1, I64(3)),
        lambda t: t.logspace(0, 1, I32(3)),
        lambda t: t.tensor([3.0, 1.0, 2.0]).topk(I64(2)),
        lambda t: t.tensor([3.0, 1.0, 2.0]).kthvalue(I64(2)),
        lambda t: t.arange(4).chunk(I64(2)),
        lambda t: t.ones(2, 1).squeeze(I64(1)),
        lambda t: t.arange(6).reshape(2, 3).movedim(I64(1), 0),
        lambda t: t.arange(5).tensor_split(I64(2)),
        lambda t: t.arange(3).repeat_interleave(I64(2)),
        lambda t: t.arange(6).view(I64(3), -1),
        lambda t: t.arange(6).reshape(2, 3)[I64(1), I32(2)],
        lambda t: t.ones(2, 3).size(I64(1)),
        lambda t: t.tensor([1.25, 2.35]).round(decimals=I64(1)),
    ],
)
def test_numpy_integers_as_dims_and_counts(call: Callable[[Any], Any]) -> None:
    theirs, ours = _outcome(call, torch), _outcome(call, verigrad)
    assert theirs != "raised" and ours == theirs
