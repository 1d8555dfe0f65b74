"""The dtypes: names, properties, PyTorch's promotion rules (by hand-written tables) and casts."""

from __future__ import annotations

import numpy as np
import pytest

import verigrad
from verigrad.dtypes import ALL, as_dtype, bf16, bool_, f16, f32, f64, i8, i16, i32, i64, promote, u8


def test_names_and_properties() -> None:
    assert verigrad.int8 is i8 and verigrad.int16 is i16 and verigrad.short is i16
    assert verigrad.int32 is i32 and verigrad.int is i32  # torch.int is int32
    assert verigrad.int64 is i64 and verigrad.long is i64 and verigrad.uint8 is u8
    assert (
        verigrad.half is f16
        and verigrad.float is f32
        and verigrad.double is f64
        and verigrad.bfloat16 is bf16
    )
    assert verigrad.bool is bool_
    assert [d.itemsize for d in (bool_, u8, i8, i16, i32, i64, f16, bf16, f32, f64)] == [
        1,
        1,
        1,
        2,
        4,
        8,
        2,
        2,
        4,
        8,
    ]
    assert [d.is_signed for d in (bool_, u8, i8, i16, f16)] == [False, False, True, True, True]
    assert [d.is_floating_point for d in (u8, i64, bf16, f32)] == [False, False, True, True]
    assert as_dtype("int8") is i8 and as_dtype("short") is i16 and as_dtype(np.int16) is i16
    assert as_dtype(int) is i64 and as_dtype(float) is f64  # Python's types, as PyTorch reads them
    assert verigrad.is_floating_point(verigrad.zeros(2)) and not verigrad.is_floating_point(
        verigrad.tensor([1])
    )
    assert (
        verigrad.tensor([1.0]).is_floating_point() and verigrad.tensor([1], dtype="i16").element_size() == 2
    )


# promote_types, written out: the row's dtype with the column's
ORDER = [bool_, u8, i8, i16, i32, i64, f16, bf16, f32, f64]
TABLE = """
bool u8  i8  i16 i32 i64 f16 bf16 f32 f64
u8   u8  i16 i16 i32 i64 f16 bf16 f32 f64
i8   i16 i8  i16 i32 i64 f16 bf16 f32 f64
i16  i16 i16 i16 i32 i64 f16 bf16 f32 f64
i32  i32 i32 i32 i32 i64 f16 bf16 f32 f64
i64  i64 i64 i64 i64 i64 f16 bf16 f32 f64
f16  f16 f16 f16 f16 f16 f16 f32  f32 f64
bf16 bf16 bf16 bf16 bf16 bf16 f32 bf16 f32 f64
f32  f32 f32 f32 f32 f32 f32 f32  f32 f64
f64  f64 f64 f64 f64 f64 f64 f64  f64 f64
"""


def test_promotion_table() -> None:
    rows = [line.split() for line in TABLE.strip().splitlines()]
    for a, row in zip(ORDER, rows):
        for b, want in zip(ORDER, row):
            assert promote(a, b).name == want, (a, b)
            assert verigrad.promote_types(b, a).name == want, (b, a)


def test_can_cast_is_the_same_kind_rule() -> None:
    assert verigrad.can_cast(i64, i8) and verigrad.can_cast(f64, f16) and verigrad.can_cast(bool_, u8)
    assert (
        not verigrad.can_cast(f32, i64)
        and not verigrad.can_cast(i32, bool_)
        and not verigrad.can_cast(f16, bool_)
    )


def _t(values, dtype) -> verigrad.Tensor:
    return verigrad.tensor(values, dtype=dtype)


def test_result_type_weak_zero_dim_and_scalars() -> None:
    rt = verigrad.result_type
    assert rt(_t([1], "f32"), _t(1.0, "f64")) is f32  # a 0-d tensor of the same category does not widen
    assert rt(_t([1], "i32"), _t(1.0, "f64")) is f64  # ... of a higher category does
    assert rt(_t([1], "u8"), _t(-1, "i64")) is u8
    assert rt(_t([1], "bool"), _t(1, "i32")) is i32
    assert rt(_t([1], "i32"), 2.5) is f32 and rt(_t([1], "f16"), 2.5) is f16 and rt(_t([1], "bool"), 2) is i64
    assert (
        rt(_t(1, "i32"), 2.5) is f32 and rt(_t(1, "i32"), 2) is i32 and rt(_t(1, "i32"), _t(1, "i64")) is i64
    )
    assert rt(_t([1], "u8"), _t([1], "i8")) is i16
    assert rt(_t([1], "i32"), _t(1, "i64"), 2.5) is f32
    assert rt(2, 2.5) is f32 and rt(True, 2) is i64


def test_results_take_the_promoted_dtype_and_values() -> None:
    x = _t([200, 3], "u8")
    assert (x / -1).numpy().tolist() == [-200.0, -3.0]  # -1 converted to f32, not through u8
    assert (x + 300).numpy().tolist() == [244, 47]  # 300 wraps to 44 in u8, as in PyTorch
    assert (x > _t(-1, "i64")).numpy().tolist() == [False, False]  # -1 is 255 in u8
    y = _t([1.0, 2.0], "f32") * _t(0.1, "f64")
    assert y.dtype is f32 and y.numpy().tolist() == [np.float32(0.1), np.float32(0.2)]
    assert (_t([2, 1, -1], "i32") ** verigrad.tensor(-1)).numpy().tolist() == [0, 1, -1]
    assert (_t([2, 1, -1], "i32") ** verigrad.tensor(-1)).dtype is i32
    w = verigrad.where(_t([True, False], "bool"), _t([1, 2], "i8"), _t(5, "i64"))
    assert w.dtype is i8 and w.numpy().tolist() == [1, 5]


def test_gradient_of_a_weak_zero_dim_tensor_keeps_its_dtype() -> None:
    s = verigrad.tensor(2.0, dtype="f64", requires_grad=True)
    x = verigrad.tensor([1.0, 3.0], requires_grad=True)
    (x * s).sum().backward()
    assert s.grad.dtype is f64 and float(s.grad.numpy()) == 4.0
    assert x.grad.dtype is f32 and x.grad.numpy().tolist() == [2.0, 2.0]


@pytest.mark.parametrize("dtype", [d for d in ALL if d is not bf16])
def test_every_dtype_makes_tensors_and_casts(dtype) -> None:
    values = [True, False] if dtype is bool_ else [1, 2]
    t = _t(values, dtype)
    assert t.dtype is dtype and t.numpy().dtype == dtype.np
    assert t.to(f64).numpy().tolist() == [1.0, 0.0] if dtype is bool_ else [1.0, 2.0]
    assert verigrad.from_numpy(np.zeros(2, dtype.np)).dtype is dtype


def test_casts_wrap_as_pytorch() -> None:
    assert int(verigrad.tensor(300).to(verigrad.int8).numpy()) == 44
    assert int(verigrad.tensor(-1).to(verigrad.uint8).numpy()) == 255
    assert int(verigrad.tensor(40000).short().numpy()) == 40000 - 65536
    assert _t([1.7, -1.7], "f32").char().numpy().tolist() == [1, -1]  # float to integer truncates
    x = _t([-2, 0, 3], "i8")
    assert [x.int().dtype, x.long().dtype, x.short().dtype, x.byte().dtype, x.char().dtype] == [
        i32,
        i64,
        i16,
        u8,
        i8,
    ]
    assert [x.bool().dtype, x.float().dtype, x.double().dtype, x.half().dtype, x.bfloat16().dtype] == [
        bool_,
        f32,
        f64,
        f16,
        bf16,
    ]
    assert x.byte().numpy().tolist() == [254, 0, 3]


def test_in_place_refuses_a_result_it_cannot_hold() -> None:
    x = _t([5, 6], "i64")
    with pytest.raises(verigrad.DTypeError, match="can't be cast"):
        x += 2.5
    with pytest.raises(verigrad.DTypeError, match="can't be cast"):
        x.div_(2)
    with pytest.raises(verigrad.DTypeError, match="can't be cast"):
        _t([True], "bool").add_(1)
    assert x.numpy().tolist() == [5, 6]  # nothing written
    x += _t([1, 1], "i8")
    assert x.numpy().tolist() == [6, 7] and x.dtype is i64
    f = _t([1.0], "f32")
    f += _t([1.0], "f64")  # a float into a float tensor: PyTorch casts
    assert f.dtype is f32 and f.numpy().tolist() == [2.0]
